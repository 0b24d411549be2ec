"""Checked by mypy --strict in run-tests, never run: the README's own
decorated functions, called as the README calls them, have the types the
calls really return (typing.assert_type fails on Any too)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, List, Optional, assert_type

import arbiter
from arbiter import types


class PSP:
    def refund(self, order_id: str, amount_cents: int, idempotency_key: str) -> Dict[str, str]:
        return {"id": "re_1"}


psp = PSP()


@arbiter.guard(tool="payments.refund", effect="keyed", timeout=60,
               key=lambda order_id, **_: arbiter.key("refund", order_id))
def refund(attempt: arbiter.Attempt, order_id: str, amount_cents: int) -> arbiter.Done[Dict[str, str]]:
    r = psp.refund(order_id, amount_cents, idempotency_key=attempt.key)
    return arbiter.Done({"refund_id": r["id"]}, external_ref=r["id"])


assert_type(refund("order-8812", 4200), Dict[str, str])
assert_type(refund(order_id="order-8812", amount_cents=4200), Dict[str, str])


@arbiter.guard(tool="crm.set_tier", effect="idempotent", key=lambda customer, tier: arbiter.key("tier", customer, tier))
async def set_tier(customer: str, tier: str) -> Dict[str, str]:
    return {"customer": customer, "tier": tier}


async def tiers() -> None:
    assert_type(await set_tier("c1", "gold"), Dict[str, str])


@arbiter.guard(tool="email.send", key=lambda to, **_: arbiter.key("welcome", to))
async def send(attempt: arbiter.Attempt, to: str) -> arbiter.Done[str]:
    return arbiter.Done("m_1", external_ref="m_1")


async def sends() -> None:
    assert_type(await send("ann@example.com"), str)


async def pooled() -> None:
    async with arbiter.AsyncClient("http://127.0.0.1:8080", "ak_1", max_workers=4, timeout=10) as client:
        assert_type(await client.action_by_key("k"), arbiter.Action)
        async with client.guard(key="k", tool="email.send") as attempt:
            assert_type(attempt, arbiter.Attempt)
    await client.aclose()


class Desk:
    """A method: self is passed through, and is not part of the params."""

    @arbiter.guard(tool="tickets.open", key=lambda title: arbiter.key("ticket", title))
    def open(self, attempt: arbiter.Attempt, title: str) -> int:
        return 7

    @arbiter.guard(tool="tickets.close", key=lambda ticket: arbiter.key("close", str(ticket)))
    def close(self, ticket: int) -> bool:
        return True


assert_type(Desk().open("printer"), int)
assert_type(Desk().close(7), bool)


@arbiter.guard(tool="psp.charge", key="charge:1", serialize=lambda r: {"id": r.id}, not_done_statuses=(402, 422),
               classify=lambda exc: "outcome_unknown")
def charge(amount: int) -> Any:
    return amount


client = arbiter.Client("http://127.0.0.1:8080", "ak_x")
with client.guard(key=arbiter.key("ticket", "c1"), tool="tickets.open", params={"title": "t"}) as attempt:
    assert_type(attempt, arbiter.Attempt)
    attempt.record({"ticket": 7}, external_ref="T-7")


def do_refund(attempt: arbiter.Attempt) -> arbiter.Done[Dict[str, str]]:
    return arbiter.Done({"refund_id": "re_1"}, external_ref="re_1")


def undo_refund(attempt: arbiter.Attempt) -> str:
    return "ch_back_1"


worker = arbiter.Worker(client, agent="refund-worker")
worker.handle("payments.refund", run=do_refund, compensate=undo_refund, not_done_statuses=(400, 402, 404, 409, 422))
worker.handle("payments.refund", do_refund,
              classify=lambda exc: "failed" if isinstance(exc, KeyError) else "outcome_unknown")


# The vocabulary: the answers' fields are the contract's Literal types, and
# the constants are values of them.
def vocabulary(a: arbiter.Action, r: arbiter.EntryResult, e: arbiter.LedgerEntry) -> None:
    assert_type(a.status, types.Status)
    assert_type(a.effect, types.Effect)
    assert_type(r.outcome, types.EntryOutcome)
    assert_type(e.type, types.LedgerEntryType)
    assert_type(a.created_at, datetime)
    assert_type(a.lease_until, Optional[datetime])
    status: types.Status = types.DENIED
    outcome: types.EntryOutcome = types.OUTCOME_DENIED
    decision: types.Decision = types.DECISION_COMPENSATE
    arbiter.Entry(key="k", type="lookup_result", answer=types.NOT_HAPPENED)
    print(status, outcome, decision)


# Limits: the README's calls, and what a denial by a limit carries.
def limits(admin: arbiter.Client) -> None:
    cap = admin.create_limit("refunds per customer", "payments", ["payments.refund"], window=86400, max=500_00,
                             amount="params.amount_cents", group_by="params.customer", over="deny")
    assert_type(cap, arbiter.Limit)
    assert_type(cap.over, types.LimitOver)
    assert_type(cap.mode, types.Mode)
    assert_type(admin.update_limit(cap.id, max=1000_00, mode="shadow"), arbiter.Limit)
    usage = admin.limit_usage(cap.id, group="cus_42")
    assert_type(usage, arbiter.LimitUsage)
    assert_type(usage.groups[0].used, float)
    assert_type(usage.groups[0].oldest_at, datetime)
    assert_type(admin.limits("payments"), List[arbiter.Limit])
    assert_type(admin.limit(cap.id), arbiter.Limit)
    assert_type(admin.limit_versions(cap.id), List[arbiter.Limit])
    assert_type(admin.delete_limit(cap.id), None)
    try:
        refund("order-8812", 4200)
    except arbiter.LimitExceededError as e:
        assert_type(e.limits, List[arbiter.ApprovalLimit])
        assert_type(e.detail, str)
        print(e.limits[0].used, e.limits[0].amount, e.limits[0].max, e.detail)


# Freezes and breakers: the README's calls, and what a frozen call raises.
def freezes(oncall: arbiter.Client, admin: arbiter.Client) -> None:
    f = oncall.start_freeze("payments", "provider incident", tools=["payments.*"])
    assert_type(f, arbiter.Freeze)
    assert_type(f.by, arbiter.Actor)
    assert_type(f.breaker_id, Optional[str])
    assert_type(f.lifted_at, Optional[datetime])
    assert_type(oncall.freezes("payments", active=True), List[arbiter.Freeze])
    assert_type(oncall.freeze(f.id), arbiter.Freeze)
    assert_type(oncall.lift_freeze(f.id, "provider is back"), arbiter.Freeze)
    b = admin.create_breaker("flaky psp", "payments", ["payments.*"], window=300, min_actions=10,
                             max_unknown_ratio=0.3)
    assert_type(b, arbiter.Breaker)
    assert_type(b.max_failure_ratio, Optional[float])
    assert_type(b.state, Optional[arbiter.BreakerState])
    assert_type(admin.update_breaker(b.id, max_failure_ratio=0.5), arbiter.Breaker)
    assert_type(admin.breaker(b.id), arbiter.Breaker)
    assert_type(admin.breakers("payments"), List[arbiter.Breaker])
    assert_type(admin.breaker_versions(b.id), List[arbiter.Breaker])
    assert_type(admin.delete_breaker(b.id), None)
    try:
        refund("order-8812", 4200)
    except arbiter.PendingApprovalError as e:
        assert_type(e.frozen_by, List[arbiter.FreezeRef])
    except arbiter.FrozenError as e:
        assert_type(e.retry_after, float)
        assert_type(e.detail, str)


@arbiter.guard(tool="payments.refund", effect="keyed", frozen_wait=120,
               key=lambda order_id, **_: arbiter.key("refund", order_id))
def refund_when_unfrozen(attempt: arbiter.Attempt, order_id: str, amount_cents: int) -> str:
    return "re_1"


assert_type(refund_when_unfrozen("order-8812", 4200), str)


def limit_answers(a: arbiter.Action, r: arbiter.EntryResult, p: arbiter.Policy) -> None:
    assert_type(a.limits, Optional[List[arbiter.LimitCharge]])
    assert_type(p.mode, types.Mode)
    if r.error is not None:
        assert_type(r.error.code, types.ErrorCode)
        assert_type(r.error.limits, Optional[List[arbiter.ApprovalLimit]])
    if a.approval is not None:
        assert_type(a.approval.limits, List[arbiter.ApprovalLimit])
        assert_type(a.approval.frozen_by, List[arbiter.FreezeRef])
    if r.error is not None:
        assert_type(r.error.retry_after, Optional[int])


async def async_limits(admin: arbiter.AsyncClient) -> None:
    cap = await admin.create_limit("actions per agent", "payments", ["*"], 60, 100, group_by="agent")
    assert_type(cap, arbiter.Limit)
    assert_type(await admin.limit_usage(cap.id), arbiter.LimitUsage)
    assert_type(await admin.limits(), List[arbiter.Limit])


# The evidence log: the README's calls.
def evidence(auditor: arbiter.Client, entry: arbiter.LedgerEntry) -> None:
    assert_type(auditor.audit_key(), str)
    assert_type(auditor.audit_checkpoint(), str)
    p = auditor.audit_proof(entry.id)
    assert_type(p, arbiter.AuditProof)
    assert_type(p.inclusion, List[str])
    assert_type(p.tree_size, int)
    assert_type(auditor.audit_proof(entry.id, size=p.tree_size), arbiter.AuditProof)
    assert_type(auditor.audit_consistency(1, p.tree_size), List[str])
    assert_type(auditor.audit_export("payments", since=datetime(2026, 11, 1)), str)
    assert_type(entry.log_index, Optional[int])
    hook = auditor.create_webhook("https://siem.example/arbiter", ["audit.checkpoint", "audit.mismatch"])
    assert_type(hook.event_types, List[types.EventType])


async def async_evidence(auditor: arbiter.AsyncClient, entry_id: str) -> None:
    assert_type(await auditor.audit_proof(entry_id), arbiter.AuditProof)
    assert_type(await auditor.audit_export("payments"), str)
