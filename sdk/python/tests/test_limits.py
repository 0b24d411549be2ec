"""Limits across actions against the real server: an admin key manages a
limit (create, read, list, change, versions, usage, delete), and the guard
meets what a limit does to a first intent over its max: deny
(LimitExceededError, a DeniedError, naming the limit and its use; the
function is not called), hold (the approval lists the limit) and shadow (it
runs, and its charge says it exceeded)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from datetime import datetime
from typing import Any, Callable, List, Tuple

import pytest

import arbiter
from arbiter.adapters import model_answer

NS = "sdk"


def refund(agent: arbiter.Client, run: str, customer: str, amount: int) -> Tuple[str, Callable[[], Any], List[int]]:
    """A guarded refund of its own key in run: the key, a call that returns
    the Outcome or the exception raised, and the attempts the function ran."""
    k = arbiter.key("refund", f"order-{uuid.uuid4().hex[:8]}")
    runs: List[int] = []
    spec = arbiter.Spec(key=k, tool="payments.refund", run_id=run, params={"customer": customer, "amount": amount})

    def fn(a: arbiter.Attempt) -> Any:
        runs.append(a.number)
        return {"refunded": amount}

    def call() -> Any:
        try:
            return agent.run(spec, fn)
        except arbiter.ArbiterError as e:
            return e

    return k, call, runs


def test_a_deny_limit_round_trips_and_over_it_the_guard_raises_and_runs_nothing(
        agent: arbiter.Client, operator: arbiter.Client, reader: arbiter.Client, admin: arbiter.Client) -> None:
    # The tests share the namespace, and others refund with payments.refund:
    # this limit applies only to this test's run.
    run = str(uuid.uuid4())
    name = f"py refunds per customer {run[:8]}"
    created = admin.create_limit(name, NS, ["payments.refund"], 3600, 100, condition=f'run_id == "{run}"',
                                 amount="params.amount", group_by="params.customer", over="deny")
    assert isinstance(created, arbiter.Limit)
    assert (created.version, created.namespace, created.tools, created.condition) == (
        1, NS, ["payments.refund"], f'run_id == "{run}"')
    assert (created.amount, created.group_by, created.window, created.max, created.over) == (
        "params.amount", "params.customer", 3600, 100, "deny")
    assert (created.mode, created.approvals_required, created.enabled) == ("enforce", 1, True)  # the defaults
    assert isinstance(created.created_at, datetime) and created.created_at.tzinfo is not None

    assert reader.limit(created.id) == created
    assert created.id in [x.id for x in admin.limits(NS)]
    assert created.id in [x.id for x in operator.limits()]  # an operator sees its namespace's limits
    with pytest.raises(arbiter.APIError) as forbidden:
        agent.limits()
    assert forbidden.value.status == 403

    changed = admin.update_limit(created.id, max=150)
    assert (changed.version, changed.max, changed.over, changed.amount) == (2, 150, "deny", "params.amount")
    assert [(v.version, v.max) for v in admin.limit_versions(created.id)] == [(1, 100), (2, 150)]

    # Within the cap: it runs, and its action carries the charge.
    _, first, first_runs = refund(agent, run, "cus_a", 100)
    ok = first()
    assert isinstance(ok, arbiter.Outcome) and ok.ran, ok
    assert first_runs == [1]
    assert ok.action is not None
    assert ok.action.limits == [arbiter.LimitCharge(id=created.id, name=name, version=2, group="cus_a", amount=100,
                                                    exceeded=False)]

    # Over it: denied, nothing runs, and the error names the limit.
    over_key, over, over_runs = refund(agent, run, "cus_a", 60)
    err = over()
    assert isinstance(err, arbiter.LimitExceededError), err
    assert isinstance(err, arbiter.DeniedError)  # a limit's denial is a denial
    assert over_runs == []  # the function is not called
    assert err.limits == [arbiter.ApprovalLimit(id=created.id, name=name, version=2, group="cus_a", used=100,
                                                amount=60, max=150)]
    [lim] = err.limits
    assert (lim.used, lim.amount, lim.max) == (100, 60, 150)
    assert (err.expired, err.by, err.reason, err.key) == (False, "", "", over_key)
    assert err.url == agent.action_url(err.action_id)
    assert str(err) == f"arbiter: action {over_key!r} was denied by a limit: {err.detail}; nothing was run ({err.url})"
    assert re.search(f'{re.escape(json.dumps(name))} \\(version 2\\) allows 150 in group "cus_a"; '
                     "100 is used and this intent adds 60", err.detail), err.detail
    told = model_answer(err, agent)
    assert told is not None
    assert told.startswith("Refused: this call would go over a limit set on such actions") and "allows 150" in told
    assert "a person rejected" not in told
    denied = agent.action(err.action_id)
    assert (denied.status, denied.approval) == ("denied", None)

    # The same key again is denied again, by the same limit, at once.
    again = over()
    assert isinstance(again, arbiter.LimitExceededError), again
    assert again.limits == err.limits  # with the same use
    assert over_runs == []

    # Another customer has a budget of its own.
    other = refund(agent, run, "cus_b", 60)[1]()
    assert isinstance(other, arbiter.Outcome) and other.ran, other

    # Usage: the denied action does not count.
    usage = reader.limit_usage(created.id)
    assert isinstance(usage, arbiter.LimitUsage)
    assert (usage.window, usage.max) == (3600, 150)
    assert [(g.group, g.used, g.actions) for g in usage.groups] == [("cus_a", 100, 1), ("cus_b", 60, 1)]
    assert isinstance(usage.groups[0].oldest_at, datetime)
    one = reader.limit_usage(created.id, group="cus_b")
    assert [(g.group, g.used, g.actions) for g in one.groups] == [("cus_b", 60, 1)]

    # Deleted: it no longer applies, and its versions stay readable.
    assert admin.delete_limit(created.id) is None
    with pytest.raises(arbiter.APIError) as gone:
        admin.limit(created.id)
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    assert [v.version for v in reader.limit_versions(created.id)] == [1, 2]
    after = refund(agent, run, "cus_a", 60)[1]()
    assert isinstance(after, arbiter.Outcome) and after.ran, after
    assert after.action is not None and after.action.limits is None  # no limit matched


def test_the_answer_to_a_denied_intent_names_the_limits(agent: arbiter.Client, admin: arbiter.Client,
                                                        uniq: str) -> None:
    tool = f"t.limit.deny.{uniq}"
    deny = admin.create_limit(f"py deny {uniq}", NS, [tool], 60, 0, over="deny")
    try:
        res = agent.submit(arbiter.Entry(key=arbiter.key("lim", uniq), type="intent", tool=tool))
        assert res.outcome == "denied"
        assert res.error is not None and res.error.code == "limit_exceeded"
        assert res.error.limits == [arbiter.ApprovalLimit(id=deny.id, name=deny.name, version=1, group="", used=0,
                                                          amount=1, max=0)]
    finally:
        admin.delete_limit(deny.id)


def test_a_hold_limit_holds_the_intent_and_its_approval_lists_the_limit(
        agent: arbiter.Client, admin: arbiter.Client, uniq: str) -> None:
    tool = f"t.limit.hold.{uniq}"
    lim = admin.create_limit(f"py freeze {uniq}", NS, [tool], 60, 0)
    try:
        assert (lim.over, lim.amount, lim.group_by) == ("hold", "", "")  # the defaults
        k = arbiter.key("lim", uniq)
        with pytest.raises(arbiter.PendingApprovalError):
            agent.run(arbiter.Spec(key=k, tool=tool), lambda _: pytest.fail("ran without approval"))
        a = agent.action_by_key(k)
        assert a.status == "awaiting_approval" and a.approval is not None
        assert a.approval.limits == [arbiter.ApprovalLimit(id=lim.id, name=lim.name, version=1, group="", used=0,
                                                           amount=1, max=0)]
        assert a.approval.policies == []
    finally:
        admin.delete_limit(lim.id)


def test_a_shadow_limit_lets_the_call_run_and_its_charge_says_it_exceeded(
        agent: arbiter.Client, admin: arbiter.Client, reader: arbiter.Client, uniq: str) -> None:
    tool = f"t.limit.shadow.{uniq}"
    lim = admin.create_limit(f"py shadow {uniq}", NS, [tool], 60, 0, over="deny", mode="shadow")
    try:
        assert lim.mode == "shadow"
        out = agent.run(arbiter.Spec(key=arbiter.key("lim", uniq), tool=tool), lambda _: 1)
        assert out.ran and out.action is not None and out.action.limits is not None
        assert out.action.limits[0].exceeded is True
        assert out.action.limits == [arbiter.LimitCharge(id=lim.id, name=lim.name, version=1, group="", amount=1,
                                                         exceeded=True)]
        usage = reader.limit_usage(lim.id)
        assert [(g.group, g.used, g.actions) for g in usage.groups] == [("", 1, 1)]  # shadow charges count
    finally:
        admin.delete_limit(lim.id)


def test_cel_that_does_not_compile_is_invalid_limit_and_only_admins_write_limits(
        admin: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    tool = f"t.limit.bad.{uniq}"
    with pytest.raises(arbiter.APIError) as bad:
        admin.create_limit("bad", NS, [tool], 60, 1, amount="params.amount +")
    assert (bad.value.status, bad.value.code) == (400, "invalid_limit")
    with pytest.raises(arbiter.APIError) as not_string:
        admin.create_limit("bad", NS, [tool], 60, 1, group_by="1 + 1")
    assert not_string.value.code == "invalid_limit"  # group_by must be a string
    with pytest.raises(arbiter.APIError) as by_operator:
        operator.create_limit("op", NS, [tool], 60, 1)
    assert by_operator.value.status == 403


def test_the_async_client_manages_limits(url: str, uniq: str) -> None:
    async def main() -> None:
        async with arbiter.AsyncClient(url, os.environ["ARBITER_ADMIN_KEY"], timeout=10) as admin:
            lim = await admin.create_limit(f"py async {uniq}", NS, [f"t.limit.async.{uniq}"], 60, 5)
            assert (await admin.limit(lim.id)) == lim
            assert lim.id in [x.id for x in await admin.limits(NS)]
            changed = await admin.update_limit(lim.id, over="deny", enabled=False)
            assert (changed.version, changed.over, changed.enabled, changed.max) == (2, "deny", False, 5)
            assert [v.version for v in await admin.limit_versions(lim.id)] == [1, 2]
            usage = await admin.limit_usage(lim.id, group="nobody")
            assert (usage.window, usage.max, usage.groups) == (60, 5, [])
            await admin.delete_limit(lim.id)

    asyncio.run(main())
