"""arbiter.adapters.openai_agents inside the OpenAI Agents SDK's own run
loop (Runner.run, its tool planning and run-state approvals), with a
scripted model instead of a provider."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Dict, List

import pytest

if sys.version_info < (3, 11):
    pytest.skip("the pinned agent frameworks are resolved for Python 3.11", allow_module_level=True)

from agents import Agent, Runner, set_tracing_disabled  # noqa: E402

import arbiter  # noqa: E402
from arbiter.adapters.openai_agents import decide, guarded_tool  # noqa: E402
from conftest import types_of, wait_status  # noqa: E402
from scripted_models import openai_model  # noqa: E402

set_tracing_disabled(True)  # no traces to export: there is no provider


class Provider:
    """A payment provider that honours idempotency keys; ``calls`` counts
    every request it got, by key."""

    def __init__(self) -> None:
        self.refunds: Dict[str, str] = {}
        self.calls: List[str] = []

    def refund(self, key: str) -> str:
        self.calls.append(key)
        return self.refunds.setdefault(key, f"re_{len(self.refunds) + 1}")


def refund_tool(client: arbiter.Client, psp: Provider, tool: str, **options: Any) -> Any:
    @guarded_tool(tool=tool, effect="keyed", key=lambda order_id, **_: arbiter.key("refund", order_id),
                  client=client, **options)
    def refund(order_id: str, amount_cents: int, attempt: arbiter.Attempt) -> Dict[str, Any]:
        """Refunds an order.

        Args:
            order_id: the order to refund.
            amount_cents: how much, in cents.
        """
        return {"refund_id": psp.refund(attempt.key), "attempt": attempt.number}

    return refund


def tool_outputs(model: Any) -> List[str]:
    """The tool results the framework sent the model in its last turn (the
    whole conversation so far), in order."""
    return [item["output"] for item in model.inputs[-1]
            if isinstance(item, dict) and item.get("type") == "function_call_output"]


def test_a_guarded_tool_runs_once_and_a_second_call_replays(agent: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    refund = refund_tool(agent, psp, f"payments.refund.{uniq}")
    assert refund.name == "refund"
    assert set(refund.params_json_schema["properties"]) == {"order_id", "amount_cents"}  # attempt is hidden
    call = ("refund", {"order_id": order, "amount_cents": 4200}, "call_1")
    model = openai_model([[call], [("refund", call[1], "call_2")], "refunded"])

    result = asyncio.run(Runner.run(Agent(name="support", model=model, tools=[refund]), "refund it"))

    assert result.final_output == "refunded"
    assert psp.calls == [arbiter.key("refund", order)]  # the second call did not reach the provider
    first, second = (json.loads(o.replace("'", '"')) for o in tool_outputs(model))
    assert first == second == {"refund_id": "re_1", "attempt": 1}  # the second is the saved result
    a = agent.action_by_key(arbiter.key("refund", order))
    assert (a.status, a.attempt, a.params) == ("succeeded", 1, {"order_id": order, "amount_cents": 4200})
    assert types_of(agent, a.id) == ["intent", "succeeded"]  # a replay writes nothing


def test_approval_in_arbiter_pauses_the_run_and_approving_continues_it(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    refund = refund_tool(agent, psp, f"payments.refund.{uniq}", require_approval=True)
    bot = Agent(name="support", model=openai_model([[("refund", {"order_id": order, "amount_cents": 99000}, "c1")],
                                                   "refunded after approval"]), tools=[refund])

    result = asyncio.run(Runner.run(bot, "refund it"))

    # The framework's own pause: one interruption for the refund, nothing ran.
    assert [i.tool_name for i in result.interruptions] == ["refund"]
    assert psp.calls == []
    a = wait_status(agent, arbiter.key("refund", order), "awaiting_approval")
    state = result.to_state()
    assert len(asyncio.run(decide(state))) == 1  # nobody decided yet
    operator.decide(a.id, "approve", "the customer was double-charged")
    assert asyncio.run(decide(state, wait=10)) == []

    result = asyncio.run(Runner.run(bot, state))

    assert result.final_output == "refunded after approval"
    assert psp.calls == [arbiter.key("refund", order)]
    done = agent.action_by_key(a.key)
    assert (done.status, done.attempt, done.result) == ("succeeded", 1, {"refund_id": "re_1", "attempt": 1})


def test_rejection_in_arbiter_refuses_the_call_and_tells_the_model(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    refund = refund_tool(agent, psp, f"payments.refund.{uniq}", require_approval=True)
    model = openai_model([[("refund", {"order_id": order, "amount_cents": 99000}, "c1")], "not refunded"])
    bot = Agent(name="support", model=model, tools=[refund])
    result = asyncio.run(Runner.run(bot, "refund it"))
    a = wait_status(agent, arbiter.key("refund", order), "awaiting_approval")
    operator.decide(a.id, "reject", "over the customer's total")
    state = result.to_state()
    assert asyncio.run(decide(state, wait=10)) == []

    result = asyncio.run(Runner.run(bot, state))

    assert result.final_output == "not refunded"
    assert psp.calls == []
    [told] = tool_outputs(model)
    assert "Refused" in told and "over the customer's total" in told
    assert agent.action_by_key(a.key).status == "denied"


def test_a_framework_approval_without_arbiters_does_not_run_the_tool(
        agent: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    refund = refund_tool(agent, psp, f"payments.refund.{uniq}", require_approval=True)
    model = openai_model([[("refund", {"order_id": order, "amount_cents": 99000}, "c1")], "waiting"])
    bot = Agent(name="support", model=model, tools=[refund])
    result = asyncio.run(Runner.run(bot, "refund it"))
    state = result.to_state()
    for item in result.interruptions:
        state.approve(item)  # someone clicks yes in the app, not in Arbiter

    result = asyncio.run(Runner.run(bot, state))

    assert psp.calls == []
    [told] = tool_outputs(model)
    assert "waits for a person's approval" in told
    assert agent.action_by_key(arbiter.key("refund", order)).status == "awaiting_approval"


def test_a_held_action_is_not_run_again_and_the_model_learns_why(agent: arbiter.Client, uniq: str) -> None:
    psp, order, tool = Provider(), f"order-{uniq}", f"payments.refund.{uniq}"
    k = arbiter.key("refund", order)
    params = {"order_id": order, "amount_cents": 4200}

    def lost(a: arbiter.Attempt) -> None:
        psp.refund(a.key)
        raise arbiter.Unknown("the provider's answer was lost")

    try:
        agent.run(arbiter.Spec(key=k, tool=tool, effect="keyed", params=params, timeout=1), lost)
    except arbiter.OutcomeUnknownError:
        pass
    wait_status(agent, k, "timed_out")
    model = openai_model([[("refund", params, "c1")], "a person decides"])

    result = asyncio.run(Runner.run(Agent(name="support", model=model, tools=[refund_tool(agent, psp, tool)]), "go"))

    assert result.final_output == "a person decides"
    assert psp.calls == [k]  # only the lost attempt's
    [told] = tool_outputs(model)
    assert "a person decides" in told and "/actions/" in told


def test_a_call_that_needs_no_approval_runs_while_another_of_the_turn_waits(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp = Provider()
    small = refund_tool(agent, psp, f"payments.refund.{uniq}")
    large = refund_tool(agent, psp, f"payments.refund.large.{uniq}", require_approval=True,
                        name_override="refund_large")
    ks = arbiter.key("refund", f"small-{uniq}"), arbiter.key("refund", f"large-{uniq}")
    bot = Agent(name="support", tools=[small, large], model=openai_model([[
        ("refund", {"order_id": f"small-{uniq}", "amount_cents": 100}, "c1"),
        ("refund_large", {"order_id": f"large-{uniq}", "amount_cents": 990000}, "c2")], "both refunded"]))

    result = asyncio.run(Runner.run(bot, "refund both"))

    assert [i.tool_name for i in result.interruptions] == ["refund_large"]
    assert psp.calls == [ks[0]]  # ran from the answer its approval check got: one intent
    a = wait_status(agent, ks[1], "awaiting_approval")
    operator.decide(a.id, "approve", "checked")
    state = result.to_state()
    assert asyncio.run(decide(state, wait=10)) == []
    result = asyncio.run(Runner.run(bot, state))
    assert result.final_output == "both refunded"
    assert psp.calls == list(ks)
    assert [agent.action_by_key(k).status for k in ks] == ["succeeded", "succeeded"]
