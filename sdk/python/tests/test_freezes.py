"""Freezes and breakers against the real server: the person on call
freezes a tool with an operator key; a guarded call on a new key waits for
approval with the freeze named (PendingApprovalError.frozen_by), a retry an
operator asked for is answered frozen (FrozenError, Retry-After 5) and
nothing runs; a guard asked to wait out the freeze (frozen_wait) runs once
a person lifts it, as does the key the freeze held. An admin's breakers
round-trip (invalid_breaker for a ratio over 1) and trip a freeze of their
tools. The same with the AsyncClient."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import threading
import time
from datetime import datetime
from typing import Any, Callable, Iterator, List, Optional, Tuple

import pytest

import arbiter
from arbiter.adapters import model_answer
from conftest import eventually, types_of, wait_status

NS = "sdk"
FROZEN = "Not done: a person has frozen such actions for now (a freeze: "


def counted(runs: List[int]) -> Callable[[arbiter.Attempt], Any]:
    def fn(a: arbiter.Attempt) -> Any:
        runs.append(a.number)
        return {"refunded": True}

    return fn


def retry_requested(agent: arbiter.Client, operator: arbiter.Client, tool: str, k: str) -> arbiter.Action:
    """An action of key k whose outcome was lost (its guarded call raised
    Unknown), that an operator then asked to retry."""

    def lost(a: arbiter.Attempt) -> Any:
        raise arbiter.Unknown("the provider timed out")

    with pytest.raises(arbiter.OutcomeUnknownError):
        agent.run(arbiter.Spec(key=k, tool=tool, effect="keyed", params={"order": k}), lost)
    a = wait_status(agent, k, "timed_out")
    operator.decide(a.id, "retry", "the provider lost it")
    return wait_status(agent, k, "retry_requested")


def spec(tool: str, k: str, **options: Any) -> arbiter.Spec:
    return arbiter.Spec(key=k, tool=tool, effect="keyed", params={"order": k}, **options)


def lift_later(client: arbiter.Client, freeze_id: str, reason: str, after: float = 0.3) -> threading.Timer:
    t = threading.Timer(after, client.lift_freeze, (freeze_id, reason))
    t.start()
    return t


def lift_all(operator: arbiter.Client, tool: str) -> None:
    """Lifts whatever freezes of this test's tool are still active, so that
    a failed test leaves nothing frozen."""
    for f in operator.freezes(NS, active=True):
        if any(tool.startswith(p.rstrip("*")) for p in f.tools):
            try:
                operator.lift_freeze(f.id, "the test is over")
            except arbiter.APIError:
                pass


def test_a_freeze_holds_new_keys_answers_a_retry_frozen_and_the_lift_lets_both_run(
        agent: arbiter.Client, operator: arbiter.Client, reader: arbiter.Client, uniq: str) -> None:
    tool = f"t.freeze.{uniq}.refund"
    lost = arbiter.key("refund", "lost", uniq)
    retried = retry_requested(agent, operator, tool, lost)

    with pytest.raises(arbiter.APIError) as forbidden:
        reader.start_freeze(NS, "incident", tools=[tool])
    assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")
    with pytest.raises(arbiter.APIError) as no_reason:
        operator.start_freeze(NS, "", tools=[tool])
    assert (no_reason.value.status, no_reason.value.code) == (400, "invalid")

    f = operator.start_freeze(NS, "provider incident", tools=[f"t.freeze.{uniq}.*"])
    try:
        assert isinstance(f, arbiter.Freeze)
        assert (f.namespace, f.tools, f.reason, f.breaker_id) == (NS, [f"t.freeze.{uniq}.*"], "provider incident", None)
        assert f.by.kind == "operator" and f.by.name
        assert isinstance(f.started_at, datetime) and f.started_at.tzinfo is not None
        assert (f.lifted_at, f.lifted_by, f.lift_reason) == (None, None, None)
        assert reader.freeze(f.id) == f, "read back, it is the same freeze, with how it was started (by.via)"
        assert f.id in [x.id for x in reader.freezes(NS, active=True)]
        assert f.id in [x.id for x in reader.freezes()]

        # A new key waits for approval, the freeze named; nothing runs.
        runs: List[int] = []
        fresh = arbiter.key("refund", "fresh", uniq)
        with pytest.raises(arbiter.PendingApprovalError) as pending:
            agent.run(spec(tool, fresh), counted(runs))
        assert pending.value.frozen_by == [arbiter.FreezeRef(id=f.id, reason="provider incident")]
        assert f.id in str(pending.value) and "provider incident" in str(pending.value)
        held = agent.action(pending.value.action_id)
        assert held.status == "awaiting_approval" and held.approval is not None
        assert held.approval.frozen_by == [arbiter.FreezeRef(id=f.id, reason="provider incident")]
        assert held.approval.required == 0  # only the freeze holds it
        told = model_answer(pending.value, agent)
        assert told is not None and told.startswith(FROZEN) and "provider incident" in told, told
        assert agent.action_url(held.id) in told

        # The retry an operator asked for: frozen, nothing runs or changes.
        with pytest.raises(arbiter.FrozenError) as frozen:
            agent.run(spec(tool, lost), counted(runs))
        err = frozen.value
        assert (err.retry_after, err.key, err.action_id) == (5, lost, retried.id)
        assert err.url == agent.action_url(retried.id)
        assert f.id in err.detail and "provider incident" in err.detail, err.detail
        assert str(err) == f"arbiter: action {lost!r} is frozen: {err.detail} ({err.url})"
        told = model_answer(err, agent)
        assert told is not None and told.startswith(FROZEN) and f.id in told and err.url in told, told
        assert runs == []
        still = agent.action(retried.id)
        assert (still.status, still.version) == ("retry_requested", retried.version)

        # The answer itself: 409 frozen, with how long to wait.
        res = agent.submit(spec(tool, lost).intent())
        assert res.outcome == "frozen" and res.error is not None
        assert (res.error.code, res.error.retry_after) == ("frozen", 5)
        assert res.action is not None and res.action.id == retried.id

        # Waiting out the freeze: a person lifts it, and the retry runs.
        lift_later(operator, f.id, "provider is back")
        start = time.monotonic()
        out = agent.run(spec(tool, lost, frozen_wait=30), counted(runs))
        assert out.ran and out.attempt == 2
        assert 0.3 <= time.monotonic() - start < 15  # asked again after the Retry-After
        assert runs == [2]

        # The key the freeze held is approved by the lift, and runs.
        out = agent.run(spec(tool, fresh), counted(runs))
        assert out.ran and runs == [2, 1]
        assert "unfrozen" in types_of(agent, held.id)

        lifted = reader.freeze(f.id)
        assert lifted.lifted_at is not None and lifted.lift_reason == "provider is back"
        assert lifted.lifted_by is not None and lifted.lifted_by.kind == "operator"
        assert f.id not in [x.id for x in reader.freezes(NS, active=True)]
        with pytest.raises(arbiter.APIError) as again:
            operator.lift_freeze(f.id, "twice")
        assert (again.value.status, again.value.code) == (409, "conflict")
    finally:
        lift_all(operator, tool)


def test_frozen_wait_that_runs_out_raises_frozen_error(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    tool = f"t.freeze.{uniq}.mail"
    k = arbiter.key("mail", uniq)
    retry_requested(agent, operator, tool, k)
    f = operator.start_freeze(NS, "mail storm", tools=[tool])
    try:
        runs: List[int] = []
        start = time.monotonic()
        with pytest.raises(arbiter.FrozenError) as frozen:
            agent.run(spec(tool, k, frozen_wait=1), counted(runs))
        waited = time.monotonic() - start
        assert 1 <= waited < 5, waited  # asked again once the wait was spent, not after a whole Retry-After
        assert frozen.value.waited >= 1
        assert runs == []
    finally:
        operator.lift_freeze(f.id, "over")


def test_approval_wait_waits_for_the_lift_of_a_freeze_that_holds_a_new_key(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    tool = f"t.freeze.{uniq}.ship"
    f = operator.start_freeze(NS, "warehouse closed", tools=[tool])
    try:
        runs: List[int] = []
        lift_later(operator, f.id, "open again", after=0.5)
        out = agent.run(spec(tool, arbiter.key("ship", uniq), approval_wait=30), counted(runs))
        assert out.ran and runs == [1]
    finally:
        lift_all(operator, tool)


def test_a_worker_leaves_a_frozen_retry_until_the_lift(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    tool = f"t.freeze.{uniq}.worker"
    k = arbiter.key("refund", uniq)
    retry_requested(agent, operator, tool, k)
    f = operator.start_freeze(NS, "hold retries", tools=[tool])
    try:
        runs: List[int] = []
        w = arbiter.Worker(agent, agent="freeze-worker")
        w.handle(tool, counted(runs))
        assert w.run_once() == 1 and runs == []  # tried: frozen, nothing ran
        assert agent.action_by_key(k).status == "retry_requested"
        operator.lift_freeze(f.id, "go")
        w = arbiter.Worker(agent, agent="freeze-worker")  # without the first one's backoff
        w.handle(tool, counted(runs))
        assert w.run_once() == 1 and runs == [2]
        assert agent.action_by_key(k).status == "succeeded"
    finally:
        lift_all(operator, tool)


def test_breakers_round_trip_and_only_admins_write_them(
        admin: arbiter.Client, operator: arbiter.Client, reader: arbiter.Client, uniq: str) -> None:
    tool = f"t.breaker.{uniq}.*"
    with pytest.raises(arbiter.APIError) as bad:
        admin.create_breaker(f"py mailer {uniq}", NS, [tool], max_unknown_ratio=1.5)
    assert (bad.value.status, bad.value.code) == (400, "invalid_breaker")
    with pytest.raises(arbiter.APIError) as no_ratio:
        admin.create_breaker(f"py mailer {uniq}", NS, [tool])
    assert no_ratio.value.code == "invalid_breaker"
    with pytest.raises(arbiter.APIError) as by_operator:
        operator.create_breaker(f"py mailer {uniq}", NS, [tool], max_unknown_ratio=0.3)
    assert by_operator.value.status == 403

    b = admin.create_breaker(f"py mailer {uniq}", NS, [tool], max_unknown_ratio=0.3, min_actions=5)
    try:
        assert isinstance(b, arbiter.Breaker)
        assert (b.name, b.namespace, b.tools, b.version, b.enabled) == (f"py mailer {uniq}", NS, [tool], 1, True)
        assert (b.window, b.min_actions, b.max_unknown_ratio, b.max_failure_ratio) == (300, 5, 0.3, None)
        assert isinstance(b.created_at, datetime) and b.created_at.tzinfo is not None

        changed = admin.update_breaker(b.id, window=600, max_failure_ratio=0.5)
        assert (changed.version, changed.window, changed.max_failure_ratio, changed.max_unknown_ratio) == (
            2, 600, 0.5, 0.3)
        with pytest.raises(arbiter.APIError) as bad_window:
            admin.update_breaker(b.id, window=0)
        assert bad_window.value.code == "invalid_breaker"

        got = reader.breaker(b.id)
        assert got.state is not None and isinstance(got.state, arbiter.BreakerState)
        assert (got.state.actions, got.state.timed_out, got.state.failed, got.state.freeze) == (0, 0, 0, None)
        assert isinstance(got.state.since, datetime)
        assert (got.version, got.window) == (2, 600)
        listed = [x for x in admin.breakers(NS) if x.id == b.id]
        assert len(listed) == 1 and listed[0].state is not None
        assert b.id in [x.id for x in operator.breakers()]
        assert [(v.version, v.window) for v in admin.breaker_versions(b.id)] == [(1, 300), (2, 600)]
    finally:
        assert admin.delete_breaker(b.id) is None
    with pytest.raises(arbiter.APIError) as gone:
        admin.breaker(b.id)
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    assert b.id not in [x.id for x in admin.breakers(NS)]


def test_a_breaker_trips_a_freeze_of_its_tools(
        agent: arbiter.Client, admin: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    tool = f"t.breaker.{uniq}.charge"
    b = admin.create_breaker(f"py flaky {uniq}", NS, [tool], window=60, min_actions=2, max_failure_ratio=0.4)
    try:
        for n in range(2):
            with pytest.raises(arbiter.NotDone):
                agent.run(spec(tool, arbiter.key("charge", uniq, str(n))),
                          lambda a: (_ for _ in ()).throw(arbiter.NotDone("card declined")))

        def tripped() -> Optional[arbiter.Freeze]:
            st = admin.breaker(b.id).state
            return st.freeze if st is not None else None

        f = eventually(tripped, timeout=15, what="the breaker trips")
        assert f.breaker_id == b.id and f.tools == [tool]
        assert (f.by.kind, f.by.name) == ("system", f"breaker:py flaky {uniq}")
        assert "2 of 2" in f.reason, f.reason
        st = admin.breaker(b.id).state
        assert st is not None and (st.actions, st.failed) == (2, 2)
        assert f.id in [x.id for x in operator.freezes(NS, active=True)]
        with pytest.raises(arbiter.PendingApprovalError) as pending:
            agent.run(spec(tool, arbiter.key("charge", uniq, "next")), lambda a: pytest.fail("ran while frozen"))
        assert [r.id for r in pending.value.frozen_by] == [f.id]
        operator.lift_freeze(f.id, "the provider is fixed")
    finally:
        admin.delete_breaker(b.id)
        lift_all(operator, tool)


class _FrozenWithoutBody(http.server.BaseHTTPRequestHandler):
    """Answers every entry as frozen, saying how long to wait only in the
    Retry-After header."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"key": "k", "type": "intent", "outcome": "frozen", "attempt": None, "lease_until": None,
                           "action": None, "error": {"code": "frozen", "message": "a freeze holds this tool"}})
        self.send_response(409)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "7")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def frozen_server() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FrozenWithoutBody)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_retry_after_comes_from_the_header_when_the_body_does_not_say(frozen_server: str) -> None:
    c = arbiter.Client(frozen_server, "ak_x", timeout=5)
    res = c.submit(arbiter.Entry(key="k", type="intent", tool="t"))
    assert res.outcome == "frozen" and res.error is not None
    assert res.error.retry_after == 7


def test_the_async_client_freezes_lifts_and_manages_breakers(url: str, uniq: str) -> None:
    tool = f"t.freeze.{uniq}.async"
    lost = arbiter.key("refund", "lost", uniq)
    sync_agent = arbiter.Client(url, os.environ["ARBITER_AGENT_KEY"], timeout=10)
    sync_operator = arbiter.Client(url, os.environ["ARBITER_OPERATOR_KEY"], timeout=10)
    retry_requested(sync_agent, sync_operator, tool, lost)
    runs: List[int] = []

    async def fn(a: arbiter.Attempt) -> Any:
        runs.append(a.number)
        return {"ok": True}

    async def main() -> Tuple[arbiter.Freeze, arbiter.Freeze]:
        async with arbiter.AsyncClient(url, os.environ["ARBITER_OPERATOR_KEY"], timeout=10) as operator, \
                arbiter.AsyncClient(url, os.environ["ARBITER_AGENT_KEY"], timeout=10) as agent, \
                arbiter.AsyncClient(url, os.environ["ARBITER_ADMIN_KEY"], timeout=10) as admin:
            f = await operator.start_freeze(NS, "async incident", tools=[tool])
            assert await operator.freeze(f.id) == f
            assert f.id in [x.id for x in await operator.freezes(namespace=NS, active=True)]

            fresh = arbiter.key("refund", "fresh", uniq)
            with pytest.raises(arbiter.PendingApprovalError) as pending:
                await agent.run(spec(tool, fresh), fn)
            assert pending.value.frozen_by == [arbiter.FreezeRef(id=f.id, reason="async incident")]
            with pytest.raises(arbiter.FrozenError) as frozen:
                await agent.run(spec(tool, lost), fn)
            assert frozen.value.retry_after == 5 and runs == []

            async def lift() -> arbiter.Freeze:
                await asyncio.sleep(0.3)
                return await operator.lift_freeze(f.id, "async lift")

            lifting = asyncio.ensure_future(lift())
            out = await agent.run(spec(tool, lost, frozen_wait=30), fn)
            assert out.ran and out.attempt == 2
            lifted = await lifting

            @agent.guard(tool=tool, effect="keyed", key=fresh, params={"order": fresh})
            async def again() -> Any:
                runs.append(1)
                return {"ok": True}

            assert await again() == {"ok": True}

            b = await admin.create_breaker(f"py async {uniq}", NS, [tool], max_unknown_ratio=0.5)
            assert (await admin.breaker(b.id)).state is not None
            assert b.id in [x.id for x in await admin.breakers(namespace=NS)]
            changed = await admin.update_breaker(b.id, enabled=False, min_actions=3)
            assert (changed.version, changed.enabled, changed.min_actions) == (2, False, 3)
            assert [v.version for v in await admin.breaker_versions(b.id)] == [1, 2]
            await admin.delete_breaker(b.id)
            return f, lifted

    try:
        f, lifted = asyncio.run(main())
    finally:
        lift_all(sync_operator, tool)
    assert runs == [2, 1]
    assert f.lifted_at is None and lifted.lifted_at is not None and lifted.lift_reason == "async lift"
