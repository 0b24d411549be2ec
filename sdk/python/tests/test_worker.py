"""The worker carries out operators' decisions and looks timed-out attempts
up before a person has to: retries with the original key, compensations
(and their failures), lookups that confirm or retry."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List

import pytest

import arbiter
from arbiter import cancel
from conftest import eventually, types_of, wait_status


class PSP:
    """A payment provider that honours idempotency keys and can be searched
    by them, as Stripe can."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_key: Dict[str, str] = {}
        self.refunds_undone: List[str] = []

    def refund(self, key: str) -> str:
        with self._lock:
            if key not in self.by_key:
                self.by_key[key] = f"re_{len(self.by_key) + 1}"
            return self.by_key[key]

    def find(self, key: str) -> "str | None":
        with self._lock:
            return self.by_key.get(key)

    @property
    def created(self) -> int:
        with self._lock:
            return len(self.by_key)


def worker(client: arbiter.Client) -> arbiter.Worker:
    return arbiter.Worker(client, poll=0.05, max_poll=0.2, agent="worker-1", lookup_retry=0.2,
                          logger=logging.getLogger("test.worker"))


def crashed(client: arbiter.Client, spec: arbiter.Spec, effect) -> arbiter.Action:
    """Runs spec as an attempt whose answer is lost after effect (or before
    it, if effect does nothing), then waits for the sweeper."""
    spec.timeout = 1

    def lost(a: arbiter.Attempt) -> None:
        effect(a.key)
        raise arbiter.Unknown("the provider's answer was lost")

    with pytest.raises(arbiter.OutcomeUnknownError):
        client.run(spec, lost)
    return wait_status(client, spec.key, "timed_out")


def test_worker_runs_a_retry_with_the_same_key(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, tool = PSP(), f"payments.refund.{uniq}"
    k = arbiter.key("refund", uniq)
    spec = arbiter.Spec(key=k, tool=tool, effect="keyed", params={"order": uniq, "amount": 4200})
    a = crashed(agent, spec, lambda key: None)
    operator.decide(a.id, "retry", "the provider has no such refund")
    seen: List[arbiter.Attempt] = []

    def run(attempt: arbiter.Attempt) -> arbiter.Done:
        seen.append(attempt)
        ref = psp.refund(attempt.key)
        return arbiter.Done({"refund_id": ref}, external_ref=ref)

    w = worker(agent)
    w.handle(tool, run)
    assert w.run_once() == 1
    assert [(s.key, s.number, s.params) for s in seen] == [(k, 2, {"order": uniq, "amount": 4200})]
    done = agent.action_by_key(k)
    assert (done.status, done.attempt, done.external_ref) == ("succeeded", 2, "re_1")
    intents = [e for e in agent.entries(a.id) if e.type == "intent"]
    assert intents[-1].payload.get("timeout") == 1  # the retry runs under the agent's lease
    assert w.run_once() == 0  # nothing left to do


def test_worker_compensates(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, tool = PSP(), f"payments.refund.{uniq}"
    k = arbiter.key("refund", uniq)
    out = agent.run(arbiter.Spec(key=k, tool=tool, effect="keyed"),
                    lambda a: arbiter.Done(None, external_ref=psp.refund(a.key)))
    assert out.action is not None
    operator.decide(out.action.id, "compensate", "refunded the wrong order")

    def undo(attempt: arbiter.Attempt) -> str:
        psp.refunds_undone.append(attempt.key)
        return "ch_back_1"

    w = worker(agent)
    w.handle(tool, lambda a: pytest.fail("ran instead of compensating"), undo)
    assert w.run_once() == 1
    assert psp.refunds_undone == [k]
    a = agent.action_by_key(k)
    assert (a.status, a.external_ref) == ("compensated", "ch_back_1")
    assert types_of(agent, a.id)[-1] == "compensated"


def test_worker_reports_a_failed_compensation(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    tool = f"payments.refund.{uniq}"
    k = arbiter.key("refund", uniq)
    out = agent.run(arbiter.Spec(key=k, tool=tool, effect="keyed"), lambda a: "refunded")
    assert out.action is not None
    operator.decide(out.action.id, "compensate", "refunded the wrong order")

    def undo(_: arbiter.Attempt) -> str:
        raise arbiter.NotDone("the provider refuses to reverse a settled refund")

    w = worker(agent)
    w.handle(tool, lambda a: pytest.fail("ran instead of compensating"), undo)
    assert w.run_once() == 1
    a = agent.action_by_key(k)
    assert a.status == "compensation_requested"  # for the next try or a person
    assert a.lease_until is None  # the lease was released
    rc = a.reconciliation
    assert rc is not None and rc.compensation_failures == 1 and not rc.compensation_timed_out
    assert rc.compensation_error is not None and "refuses to reverse" in rc.compensation_error
    failed = [e for e in agent.entries(a.id) if e.type == "compensation_failed"]
    assert len(failed) == 1 and "NotDone" in failed[0].payload["error"]


def test_guard_without_compensate_releases_the_lease(agent: arbiter.Client, operator: arbiter.Client,
                                                     uniq: str) -> None:
    k = arbiter.key("refund", uniq)
    spec = arbiter.Spec(key=k, tool="payments.refund", effect="keyed")
    out = agent.run(spec, lambda a: "refunded")
    assert out.action is not None
    operator.decide(out.action.id, "compensate", "wrong order")
    with pytest.raises(arbiter.CompensationRequestedError):
        agent.run(spec, lambda a: pytest.fail("ran instead of compensating"))
    spec.compensate = lambda a: "undone"
    with pytest.raises(arbiter.Compensated):  # the next caller that can, does
        with agent.guard(key=k, tool="payments.refund", effect="keyed", compensate=lambda a: "undone"):
            pytest.fail("the body ran on a compensation")
    assert agent.action_by_key(k).status == "compensated"


def test_lookup_confirms_what_the_provider_has(agent: arbiter.Client, uniq: str) -> None:
    psp, tool = PSP(), f"payments.refund.{uniq}"
    k = arbiter.key("refund", uniq)
    a = crashed(agent, arbiter.Spec(key=k, tool=tool, effect="keyed"), psp.refund)  # the refund went out
    asked: List[arbiter.LookupRequest] = []

    def lookup(q: arbiter.LookupRequest) -> arbiter.LookupResult:
        asked.append(q)
        ref = psp.find(q.key)
        if ref is None:
            return arbiter.LookupResult("not_happened", evidence={"search": q.key, "refunds": []})
        return arbiter.LookupResult("happened", evidence={"search": q.key, "refunds": [ref]},
                                    external_ref=ref, result={"refund_id": ref})

    w = worker(agent)
    w.handle(tool, lambda att: pytest.fail("ran again: the refund had happened"))
    w.handle_lookup(tool, lookup)
    assert w.run_once() == 1
    assert [(q.action_id, q.key, q.attempt, q.effect) for q in asked] == [(a.id, k, 1, "keyed")]
    done = agent.action_by_key(k)
    assert (done.status, done.external_ref, done.result) == ("confirmed", "re_1", {"refund_id": "re_1"})
    assert psp.created == 1
    kinds = types_of(agent, a.id)
    # The lost answer was reported outcome_unknown: timed out at once, no
    # sweeper needed.
    assert kinds[kinds.index("outcome_unknown"):] == ["outcome_unknown", "lookup", "lookup_result", "reconciled"]
    rc = done.reconciliation
    assert rc is not None and rc.last_lookup is not None and rc.last_lookup.answer == "happened"


def test_lookup_retries_what_the_provider_lacks_exactly_once(agent: arbiter.Client, uniq: str) -> None:
    psp, tool = PSP(), f"payments.refund.{uniq}"
    k = arbiter.key("refund", uniq)
    a = crashed(agent, arbiter.Spec(key=k, tool=tool, effect="keyed", params={"amount": 4200}),
                lambda key: None)  # the request never reached the provider
    runs: List[arbiter.Attempt] = []

    def run(attempt: arbiter.Attempt) -> arbiter.Done:
        runs.append(attempt)
        ref = psp.refund(attempt.key)
        return arbiter.Done({"refund_id": ref}, external_ref=ref)

    w = worker(agent)
    w.handle(tool, run)
    w.handle_lookup(tool, lambda q: arbiter.LookupResult(
        "happened" if psp.find(q.key) else "not_happened", evidence={"search": q.key}))
    assert w.run_once() == 1
    assert [(r.key, r.number, r.params) for r in runs] == [(k, 2, {"amount": 4200})]  # the original key
    assert psp.created == 1  # exactly one refund
    done = agent.action_by_key(k)
    assert (done.status, done.attempt, done.external_ref) == ("succeeded", 2, "re_1")
    assert w.run_once() == 0
    kinds = types_of(agent, a.id)
    assert kinds.count("lookup_result") == 1 and kinds.count("succeeded") == 1


def test_a_failed_lookup_is_reported_unknown_and_asked_again(agent: arbiter.Client, uniq: str) -> None:
    psp, tool = PSP(), f"payments.refund.{uniq}"
    k = arbiter.key("refund", uniq)
    crashed(agent, arbiter.Spec(key=k, tool=tool, effect="keyed"), psp.refund)
    calls = []

    def flaky(q: arbiter.LookupRequest) -> arbiter.LookupResult:
        calls.append(q.attempt)
        if len(calls) == 1:
            raise ConnectionError("the provider's search is down")
        ref = psp.find(q.key)
        return arbiter.LookupResult("happened", external_ref=ref, evidence={"found": ref})

    w = worker(agent)
    w.handle_lookup(tool, flaky)
    assert w.run_once() == 1
    a = agent.action_by_key(k)
    assert a.status == "timed_out"
    assert a.reconciliation is not None and a.reconciliation.last_lookup is not None
    assert a.reconciliation.last_lookup.answer == "unknown"
    assert "the provider's search is down" in a.reconciliation.last_lookup.said
    # Asked again after lookup_retry, and this time the provider answers.
    eventually(lambda: w.run_once() and agent.action_by_key(k).status == "confirmed", what="confirmed")
    assert calls == [1, 1]
    assert agent.action_by_key(k).external_ref == "re_1"


def test_worker_runs_in_the_background(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    tool = f"email.send.{uniq}"
    k = arbiter.key("email", uniq)
    a = crashed(agent, arbiter.Spec(key=k, tool=tool, effect="unkeyed"), lambda key: None)
    operator.decide(a.id, "retry", "no email arrived", acknowledge_duplicate_risk=True)
    w = worker(agent)
    w.handle(tool, lambda att: f"sent in attempt {att.number}")
    running = w.start()
    try:
        done = wait_status(agent, k, "succeeded")
    finally:
        running.stop(10)
    assert not running.thread.is_alive()
    assert done.result == "sent in attempt 2"


class PSPError(Exception):
    """What a payment provider's SDK raises for an answer with a status."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status} from the provider")
        self.status_code = status


def _refuse(_: BaseException) -> str:
    raise RuntimeError("the classifier has a bug")


@pytest.mark.parametrize("settings,status,last,retriable", [
    ({}, 422, "outcome_unknown", None),  # the default rule: a status proves nothing
    ({"not_done_statuses": (400, 422)}, 422, "failed", False),
    ({"not_done_statuses": (400, 422)}, 500, "outcome_unknown", None),
    ({"classify": lambda e: "failed_retriable"}, 500, "failed", True),
    ({"not_done_statuses": (422,), "classify": _refuse}, 422, "outcome_unknown", None),
], ids=["default", "mapped", "unmapped", "classify", "classify-raises"])
def test_worker_classifies_a_handlers_error_as_its_tool_says(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str,
        settings: dict, status: int, last: str, retriable: "bool | None") -> None:
    tool = f"payments.refund.{uniq}"
    k = arbiter.key("refund", uniq)
    a = crashed(agent, arbiter.Spec(key=k, tool=tool, effect="keyed"), lambda key: None)
    operator.decide(a.id, "retry", "the provider has no such refund")
    runs: List[int] = []

    def run(attempt: arbiter.Attempt) -> None:
        runs.append(attempt.number)
        raise PSPError(status)

    w = worker(agent)
    w.handle(tool, run, **settings)
    assert w.run_once() == 1
    assert runs == [2]
    entries = agent.entries(a.id)
    assert entries[-1].type == last and entries[-1].attempt == 2
    assert f"HTTP {status} from the provider" in entries[-1].payload["error"]
    got = agent.action_by_key(k)
    if last == "failed":
        assert entries[-1].payload.get("retriable", False) is retriable
        assert got.status == "failed"
    else:
        assert got.status == "timed_out"  # for a lookup, then a person


@pytest.mark.parametrize("settings,recorded", [
    ({}, "note"),  # the default rule: the undo may have happened, a person decides
    ({"not_done_statuses": (422,)}, "compensation_failed"),
], ids=["default", "mapped"])
def test_worker_classifies_a_compensations_error_as_its_tool_says(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str, settings: dict, recorded: str) -> None:
    tool = f"payments.refund.{uniq}"
    k = arbiter.key("refund", uniq)
    out = agent.run(arbiter.Spec(key=k, tool=tool, effect="keyed"), lambda a: "refunded")
    assert out.action is not None
    operator.decide(out.action.id, "compensate", "refunded the wrong order")

    def undo(_: arbiter.Attempt) -> str:
        raise PSPError(422)

    w = worker(agent)
    w.handle(tool, lambda a: pytest.fail("ran instead of compensating"), undo, **settings)
    assert w.run_once() == 1
    entries = agent.entries(out.action.id)
    assert entries[-1].type == recorded
    a = agent.action_by_key(k)
    assert a.status == "compensation_requested"
    if recorded == "note":
        assert "compensation outcome unknown" in (entries[-1].payload.get("message") or "")
        assert a.lease_until is not None  # held until its lease passes
    else:
        assert "HTTP 422 from the provider" in entries[-1].payload["error"]
        assert a.lease_until is None  # released for the next try


def test_run_async_keeps_off_the_default_executor_and_cancelling_stops_its_pauses() -> None:
    """run_async polls in the worker's own thread, never one of the loop's
    default executor; cancelling it reaches that thread: a pause between
    retries (a report's, a wait's) ends at once, and polling stops."""
    started, woke, threads = threading.Event(), [], []

    class Waiting(arbiter.Worker):
        def run_once(self) -> int:
            threads.append(threading.current_thread().name)
            started.set()
            woke.append(cancel.sleep(30))  # as a report's pause before it retries
            return 0

    w = Waiting(arbiter.Client("http://127.0.0.1:9", "ak_whatever"), poll=0.01, max_poll=0.01)

    async def main() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(thread_name_prefix="host-default"))
        task = asyncio.ensure_future(w.run_async())
        assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    eventually(lambda: woke, timeout=5, what="the pause to end once run_async was cancelled")
    assert woke == [True]
    assert [t.startswith("arbiter-worker") for t in threads] == [True]
    time.sleep(0.2)
    assert len(woke) == 1, "the worker polled again after run_async was cancelled"
