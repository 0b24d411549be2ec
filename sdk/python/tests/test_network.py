"""When the process or the network fails: held after a crash between the
effect and the report, reports retried until they land, and fail closed
when Arbiter cannot be reached."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import arbiter
from conftest import _client, eventually, types_of, wait_status


def test_held_after_a_crash_mid_call(url: str, agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("refund", uniq)
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("crashing_agent.py")), url, os.environ["ARBITER_AGENT_KEY"], k],
        stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("effect "), f"the agent did not reach its effect: {line!r}"
        _, action_id, attempt = line.split()
        proc.send_signal(signal.SIGKILL)  # between the effect and the report
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert agent.action(action_id).status == "in_progress"
    a = wait_status(agent, k, "timed_out")
    assert (a.id, a.attempt) == (action_id, int(attempt))

    # A restarted agent asks again: held, and nothing runs until a person decides.
    with pytest.raises(arbiter.HeldError) as e:
        agent.run(arbiter.Spec(key=k, tool="payments.refund", effect="unkeyed", timeout=1),
                  lambda _: pytest.fail("ran again after a crash"))
    assert (e.value.action_id, e.value.attempt, e.value.compensation) == (a.id, 1, False)
    assert types_of(agent, a.id) == ["intent", "timed_out"]


def test_report_that_fails_on_the_network_lands_later(agent_via: arbiter.Client, agent: arbiter.Client,
                                                      proxy, uniq: str) -> None:
    k = arbiter.key("refund", uniq)

    def refund(_: arbiter.Attempt) -> arbiter.Done:
        proxy.drop_next(3)  # the network fails just after the effect
        return arbiter.Done({"refund_id": "re_9"}, external_ref="re_9")

    out = agent_via.run(arbiter.Spec(key=k, tool="payments.refund", effect="keyed"), refund)
    assert out.ran and out.action is not None and out.action.status == "succeeded"
    assert proxy.dropped == 3
    a = agent.action_by_key(k)
    assert (a.status, a.result, a.external_ref) == ("succeeded", {"refund_id": "re_9"}, "re_9")
    assert types_of(agent, a.id) == ["intent", "succeeded"]  # landed once


def test_report_gives_up_past_its_budget(url: str, proxy, agent: arbiter.Client, uniq: str) -> None:
    c = arbiter.Client(proxy.url, os.environ["ARBITER_AGENT_KEY"], report_budget=0.5,
                       backoff=arbiter.Backoff(0.05, 0.2))
    k = arbiter.key("refund", uniq)

    def refund(_: arbiter.Attempt) -> str:
        proxy.unavailable(True)
        return "done"

    with pytest.raises(arbiter.ReportError) as e:
        c.run(arbiter.Spec(key=k, tool="payments.refund", timeout=1), refund)
    assert (e.value.type, e.value.attempt) == ("succeeded", 1)
    assert arbiter.is_unavailable(e.value.cause)
    # The ledger does not know: the action times out for a person.
    wait_status(agent, k, "timed_out")


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_fail_closed_when_arbiter_is_down(uniq: str) -> None:
    down = _client(f"http://127.0.0.1:{_closed_port()}", "ak_whatever")
    ran = []

    @arbiter.guard(tool="payments.refund", key=lambda order_id: arbiter.key("refund", uniq, order_id), client=down)
    def refund(order_id: str) -> None:
        ran.append(order_id)

    with pytest.raises(arbiter.UnreachableError) as e:
        refund("order-1")
    assert ran == []
    assert isinstance(e.value.cause, arbiter.NetworkError)
    with pytest.raises(arbiter.UnreachableError):
        with down.guard(key=arbiter.key("x", uniq), tool="t"):
            pytest.fail("the body ran without an intent")


def test_fail_closed_on_503(agent_via: arbiter.Client, proxy, uniq: str) -> None:
    proxy.unavailable(True)
    with pytest.raises(arbiter.UnreachableError) as e:
        agent_via.run(arbiter.Spec(key=arbiter.key("x", uniq), tool="t"), lambda _: pytest.fail("ran"))
    assert isinstance(e.value.cause, arbiter.APIError)
    assert (e.value.cause.status, e.value.cause.code) == (503, "unavailable")
