"""Approval before execution: the guard waits on the server (Prefer: wait)
while a person decides from elsewhere."""

from __future__ import annotations

import threading

import pytest

import arbiter
from conftest import wait_status


def _decide_when_waiting(operator: arbiter.Client, key: str, decision: str, reason: str) -> threading.Thread:
    def decide() -> None:
        a = wait_status(operator, key, "awaiting_approval")
        operator.decide(a.id, decision, reason)

    t = threading.Thread(target=decide)
    t.start()
    return t


def test_approval_granted_while_waiting(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("refund", uniq)
    runs = []

    @arbiter.guard(tool="payments.refund", key=k, effect="keyed", require_approval=True, approval_wait=30,
                   client=agent)
    def refund(amount: int, attempt: arbiter.Attempt) -> str:
        runs.append(attempt.number)
        return "refunded"

    t = _decide_when_waiting(operator, k, "approve", "customer verified")
    assert refund(250000) == "refunded"
    t.join()
    assert runs == [1]
    a = agent.action_by_key(k)
    assert a.status == "succeeded"
    assert a.approval is not None and [v.by.name for v in a.approval.approvals] == ["sdk-operator@example.com"]


def test_approval_denied(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("refund", uniq)
    spec = arbiter.Spec(key=k, tool="payments.refund", require_approval=True, approval_wait=30)
    t = _decide_when_waiting(operator, k, "reject", "looks like fraud")
    with pytest.raises(arbiter.DeniedError) as e:
        agent.run(spec, lambda _: pytest.fail("ran without approval"))
    t.join()
    assert (e.value.expired, e.value.by, e.value.reason) == (False, "sdk-operator@example.com", "looks like fraud")
    with pytest.raises(arbiter.DeniedError):  # and for good
        agent.run(spec, lambda _: pytest.fail("ran after a rejection"))


def test_pending_approval_without_waiting(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("delete", uniq)
    with pytest.raises(arbiter.PendingApprovalError) as e:
        with agent.guard(key=k, tool="accounts.delete", require_approval=True):
            pytest.fail("ran without approval")
    a = agent.action_by_key(k)
    assert (a.status, a.attempt, e.value.action_id) == ("awaiting_approval", 0, a.id)


def test_a_policy_whose_condition_fails_holds_the_intent_and_says_why(
        agent: arbiter.Client, admin: arbiter.Client, uniq: str) -> None:
    tool = f"payments.refund.{uniq}"
    p = admin.create_policy(f"large refunds ({uniq})", "sdk", [tool], condition="params.amount > 100")
    k = arbiter.key("refund", uniq)
    with pytest.raises(arbiter.PendingApprovalError) as e:
        agent.run(arbiter.Spec(key=k, tool=tool), lambda _: pytest.fail("ran without approval"))
    [failing] = e.value.policy_errors
    assert failing.startswith(f"large refunds ({uniq}): ") and len(failing) > len(p.name) + 2
    assert "held because a policy's condition failed: " + failing in str(e.value)
    a = agent.action_by_key(k)
    assert a.approval is not None
    [held_by] = a.approval.policies
    assert (held_by.id, held_by.error) == (p.id, failing.split(": ", 1)[1])
