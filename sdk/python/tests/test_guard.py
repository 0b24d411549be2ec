"""The guard against a real server: nothing runs twice, the same key with
other params is refused, failures say whether a retry may run."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
import urllib.error
from typing import Any, Dict, List

import pytest

import arbiter
from conftest import eventually, types_of


def test_replay_nothing_runs_twice(agent: arbiter.Client, uniq: str) -> None:
    runs = []

    @arbiter.guard(tool="payments.refund", effect="keyed", client=agent,
                   key=lambda order_id, **_: arbiter.key("refund", uniq, order_id))
    def refund(order_id: str, amount: int, attempt: arbiter.Attempt) -> arbiter.Done:
        runs.append((attempt.key, attempt.number))
        return arbiter.Done({"refund_id": "re_1", "amount": amount}, external_ref="re_1")

    first = refund("order-8812", 4200)
    again = refund("order-8812", amount=4200)  # positional or keyword: the same params
    assert first == again == {"refund_id": "re_1", "amount": 4200}
    k = arbiter.key("refund", uniq, "order-8812")
    assert runs == [(k, 1)]

    a = agent.action_by_key(k)
    assert (a.status, a.attempt, a.effect, a.tool) == ("succeeded", 1, "keyed", "payments.refund")
    assert a.params == {"order_id": "order-8812", "amount": 4200}
    assert a.result == {"refund_id": "re_1", "amount": 4200}
    assert a.external_ref == "re_1"
    assert types_of(agent, a.id) == ["intent", "succeeded"]  # a replay writes nothing

    out = agent.run(arbiter.Spec(key=k, tool="payments.refund", effect="keyed", params=a.params),
                    lambda _: pytest.fail("a replay ran the function"))
    assert (out.ran, out.attempt, out.result, out.external_ref) == (False, 1, a.result, "re_1")


def test_key_reused_is_refused(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("refund", uniq)
    agent.run(arbiter.Spec(key=k, tool="payments.refund", params={"amount": 1999}), lambda _: "ok")
    with pytest.raises(arbiter.KeyReusedError) as e:
        agent.run(arbiter.Spec(key=k, tool="payments.refund", params={"amount": 5000}),
                  lambda _: pytest.fail("ran under a reused key"))
    assert (e.value.code, e.value.status) == ("key_reused", 422)
    a = agent.action_by_key(k)
    assert (a.status, a.params) == ("succeeded", {"amount": 1999})
    assert "key_reused" in types_of(agent, a.id)


def test_context_manager_runs_only_on_proceed(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("ticket", uniq)
    with agent.guard(key=k, tool="tickets.open", params={"title": "printer"}) as attempt:
        assert attempt.number == 1
        attempt.record({"ticket": 7}, external_ref="T-7")
    with pytest.raises(arbiter.Replayed) as r:
        with agent.guard(key=k, tool="tickets.open", params={"title": "printer"}):
            pytest.fail("the body ran on a replay")
    assert r.value.result == {"ticket": 7}
    assert agent.action_by_key(k).external_ref == "T-7"


def test_failures_say_whether_to_retry(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("charge", uniq)
    spec = arbiter.Spec(key=k, tool="payments.charge", retriable=(ConnectionRefusedError,))

    def refused(_: arbiter.Attempt) -> None:
        raise ConnectionRefusedError("psp refused the connection")

    with pytest.raises(ConnectionRefusedError):
        agent.run(spec, refused)
    a = agent.action_by_key(k)
    assert (a.status, a.attempt) == ("failed", 1)

    # Retriable: the next call gets attempt 2; a NotDone is final.
    def declined(_: arbiter.Attempt) -> None:
        raise arbiter.NotDone("card declined")

    with pytest.raises(arbiter.NotDone):
        agent.run(spec, declined)
    with pytest.raises(arbiter.FinishedError) as e:
        agent.run(spec, lambda _: pytest.fail("ran after a final failure"))
    assert (e.value.action.status, e.value.action.attempt) == ("failed", 2)
    entries = agent.entries(a.id)
    failed = [x.payload for x in entries if x.type == "failed"]
    assert failed[0]["retriable"] is True and "ConnectionRefusedError" in failed[0]["error"]
    assert failed[1].get("retriable", False) is False and "card declined" in failed[1]["error"]


class PSPError(Exception):
    """What a payment provider's SDK raises for an answer with a status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status} from the provider")
        self.status_code = status


@pytest.mark.parametrize("raised", [
    TimeoutError("read timed out after 30 s"),
    socket.timeout("timed out"),
    ConnectionResetError(104, "Connection reset by peer"),
    BrokenPipeError(32, "Broken pipe"),
    http.client.RemoteDisconnected("Remote end closed connection without response"),
    urllib.error.URLError(ConnectionResetError(104, "Connection reset by peer")),
    KeyError("a bug in the tool"),
    PSPError(500),
], ids=lambda e: type(e).__name__)
def test_an_exception_that_proves_nothing_leaves_the_outcome_unknown(
        agent: arbiter.Client, uniq: str, raised: BaseException) -> None:
    k = arbiter.key("refund", uniq)
    # The default lease (300 s): timed_out comes from the report, not the sweeper.
    spec = arbiter.Spec(key=k, tool="payments.refund", effect="keyed", not_done_statuses=(400, 402, 422))
    runs = []

    def call(_: arbiter.Attempt) -> None:
        runs.append(1)
        raise raised

    with pytest.raises(arbiter.OutcomeUnknownError) as e:
        agent.run(spec, call)
    assert e.value.__cause__ is raised and e.value.reported
    assert e.value.action is not None and e.value.action.status == "timed_out"
    a = agent.action_by_key(k)
    assert (a.status, a.attempt) == ("timed_out", 1)
    entries = agent.entries(a.id)
    assert [x.type for x in entries] == ["intent", "outcome_unknown"]
    assert entries[1].attempt == 1 and entries[1].payload["error"]
    if isinstance(raised, (TimeoutError, socket.timeout)):
        assert entries[1].payload["error"].startswith("timeout")
    if isinstance(raised, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected,
                           urllib.error.URLError)):
        assert entries[1].payload["error"].startswith("connection lost")
    # The next call is held for a person: never FinishedError, never a rerun.
    with pytest.raises(arbiter.HeldError) as held:
        agent.run(spec, call)
    assert held.value.url.endswith("/actions/" + a.id) and runs == [1]


def test_a_status_the_tool_maps_as_not_done_is_failed(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("refund", uniq)

    @arbiter.guard(tool="payments.refund", key=k, not_done_statuses=(402, 422), client=agent)
    def refund(amount: int) -> None:
        raise PSPError(422)

    with pytest.raises(PSPError):
        refund(100)
    a = agent.action_by_key(k)
    assert a.status == "failed"
    with pytest.raises(arbiter.FinishedError):
        refund(100)


def test_a_tools_classifier_replaces_the_rule(agent: arbiter.Client, uniq: str) -> None:
    seen = []

    def classify(exc: BaseException) -> str:
        seen.append(exc)
        return "failed_retriable" if isinstance(exc, TimeoutError) else "outcome_unknown"

    k = arbiter.key("refund", uniq)
    g = agent.guard(tool="payments.refund", key=k, classify=classify)

    @g
    def refund(amount: int) -> str:
        if not seen:
            raise TimeoutError("the provider said it timed out before it started")
        return "refunded"

    with pytest.raises(TimeoutError):
        refund(100)
    assert agent.action_by_key(k).status == "failed"  # retriable: the next call runs attempt 2
    assert refund(100) == "refunded"
    assert agent.action_by_key(k).attempt == 2
    with pytest.raises(TypeError):
        arbiter.guard(tool="t", key="k", classify="failed")  # type: ignore[arg-type]


def test_guard_waits_for_another_attempt(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("wait", uniq)
    started, release = threading.Event(), threading.Event()

    def slow(_: arbiter.Attempt) -> str:
        started.set()
        release.wait(10)
        return "first"

    t = threading.Thread(target=agent.run, args=(arbiter.Spec(key=k, tool="t.slow"), slow))
    t.start()
    started.wait(10)
    with pytest.raises(arbiter.InProgressError) as e:
        agent.run(arbiter.Spec(key=k, tool="t.slow"), lambda _: pytest.fail("ran beside a live attempt"))
    assert e.value.attempt == 1
    # Waiting: the second caller gets the first one's result once it lands.
    threading.Timer(0.3, release.set).start()
    out = agent.run(arbiter.Spec(key=k, tool="t.slow", wait=10), lambda _: pytest.fail("ran twice"))
    t.join()
    assert (out.ran, out.result) == (False, "first")


def test_unknown_outcome_is_left_to_a_person(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("email", uniq)
    spec = arbiter.Spec(key=k, tool="email.send", timeout=60)

    def lost_answer(_: arbiter.Attempt) -> None:
        raise arbiter.Unknown("the provider timed out after the request was sent")

    with pytest.raises(arbiter.OutcomeUnknownError) as e:
        agent.run(spec, lost_answer)
    assert isinstance(e.value.__cause__, arbiter.Unknown) and e.value.reported
    a = agent.action_by_key(k)  # at once: the lease (60 s) has not passed
    assert a.status == "timed_out"
    assert types_of(agent, a.id) == ["intent", "outcome_unknown"]
    with pytest.raises(arbiter.HeldError) as held:
        agent.run(spec, lambda _: pytest.fail("ran while held"))
    assert held.value.url.endswith("/actions/" + a.id)


def test_heartbeats_keep_a_long_call_alive(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("export", uniq)

    def long_call(attempt: arbiter.Attempt) -> str:
        end = time.monotonic() + 4  # four leases of 1 s
        while time.monotonic() < end:
            attempt.check()
            time.sleep(0.1)
        return "exported"

    out = agent.run(arbiter.Spec(key=k, tool="reports.export", timeout=1), long_call)
    assert (out.ran, out.result) == (True, "exported")
    a = agent.action_by_key(k)
    kinds = types_of(agent, a.id)
    assert a.status == "succeeded"
    assert "timed_out" not in kinds and "late_result" not in kinds
    assert kinds.count("heartbeat") >= 6  # one every third of the lease
    beat = next(e for e in agent.entries(a.id) if e.type == "heartbeat")
    assert beat.attempt == 1


def test_async_decorator_and_context_manager(agent: arbiter.Client, uniq: str) -> None:
    runs = []

    @arbiter.guard(tool="crm.set_tier", effect="idempotent", client=agent,
                   key=lambda customer, tier: arbiter.key("tier", uniq, customer, tier))
    async def set_tier(customer: str, tier: str) -> dict:
        runs.append(customer)
        await asyncio.sleep(0)
        return {"customer": customer, "tier": tier}

    async def main() -> None:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        t = asyncio.create_task(ticker())
        assert await set_tier("c1", "gold") == {"customer": "c1", "tier": "gold"}
        assert await set_tier("c1", "gold") == {"customer": "c1", "tier": "gold"}
        async with agent.guard(key=arbiter.key("note", uniq), tool="crm.note") as attempt:
            attempt.record("noted")
        t.cancel()
        assert ticks > 0  # the loop kept running while requests were in flight

    asyncio.run(main())
    assert runs == ["c1"]
    assert agent.action_by_key(arbiter.key("note", uniq)).result == "noted"


def test_async_client(url: str, uniq: str) -> None:
    import os

    async def main() -> None:
        ac = arbiter.AsyncClient(url, os.environ["ARBITER_AGENT_KEY"])
        k = arbiter.key("async", uniq)

        async def send(attempt: arbiter.Attempt) -> arbiter.Done:
            await asyncio.sleep(0)
            return arbiter.Done({"sent": attempt.number}, external_ref="m_1")

        out = await ac.run(arbiter.Spec(key=k, tool="email.send"), send)
        again = await ac.run(arbiter.Spec(key=k, tool="email.send"), send)
        assert (out.ran, again.ran, again.result) == (True, False, {"sent": 1})
        a = await ac.action_by_key(k)
        page, timeline = await asyncio.gather(ac.list_actions(q=k), ac.entries(a.id))
        assert [x.id for x in page.actions] == [a.id]
        assert [e.type for e in timeline] == ["intent", "succeeded"]

    asyncio.run(main())


def test_a_method_passes_self_through_and_keeps_it_out_of_the_params(agent: arbiter.Client, uniq: str) -> None:
    class Desk:
        def __init__(self) -> None:
            self.opened: List[str] = []

        @agent.guard(tool="tickets.open", key=lambda title, **_: arbiter.key("ticket", uniq, title))
        def open(self, attempt: arbiter.Attempt, title: str, priority: int = 3) -> Dict[str, Any]:
            self.opened.append(attempt.key)
            return {"ticket": 7, "priority": priority}

        @classmethod
        @agent.guard(tool="tickets.close", key=lambda ticket: arbiter.key("close", uniq, str(ticket)))
        def close(cls, ticket: int) -> str:
            return f"closed {ticket} by {cls.__name__}"

    desk = Desk()
    assert desk.open("printer") == {"ticket": 7, "priority": 3}
    assert desk.open(title="printer") == {"ticket": 7, "priority": 3}  # a replay
    k = arbiter.key("ticket", uniq, "printer")
    assert desk.opened == [k]
    assert agent.action_by_key(k).params == {"title": "printer", "priority": 3}
    assert Desk.close(9) == "closed 9 by Desk"
    assert agent.action_by_key(arbiter.key("close", uniq, "9")).params == {"ticket": 9}


class Response:
    """An SDK's response object: not JSON."""

    def __init__(self, id: str) -> None:
        self.id = id


def test_a_result_that_is_not_json_is_refused_at_the_first_call(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("charge", uniq)

    @agent.guard(tool="psp.charge", key=k)
    def charge(amount: int) -> Response:
        return Response("ch_1")

    with pytest.raises(TypeError, match="not JSON.*serialize=") as e:
        charge(100)
    assert isinstance(e.value, arbiter.ResultNotSavedError) and e.value.outcome.ran
    a = agent.action_by_key(k)
    assert (a.status, a.result) == ("succeeded", None)  # the effect happened: recorded all the same


def test_serialize_saves_a_result_and_every_call_returns_what_was_saved(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("charge", uniq)
    runs = []

    @agent.guard(tool="psp.charge", key=k, serialize=lambda r: {"id": r.id})
    def charge(amount: int) -> Any:
        runs.append(amount)
        return arbiter.Done(Response("ch_1"), external_ref="ch_1")

    assert charge(100) == {"id": "ch_1"}
    assert charge(100) == {"id": "ch_1"}  # the replay: the same, never None
    assert runs == [100]
    a = agent.action_by_key(k)
    assert (a.result, a.external_ref) == ({"id": "ch_1"}, "ch_1")
