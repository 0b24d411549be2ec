"""arbiter.adapters.langchain inside a LangChain v1 agent (create_agent,
its ToolNode and middleware chain), with the framework's fake chat model
answering from a script."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any, Dict, List

import pytest

if sys.version_info < (3, 11):
    pytest.skip("LangChain 1.x needs Python 3.11 or newer", allow_module_level=True)

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

import arbiter  # noqa: E402
from arbiter.adapters.langchain import current_attempt, guard_tools  # noqa: E402
from conftest import eventually, wait_status  # noqa: E402
from scripted_models import langchain_model  # noqa: E402


class Provider:
    """A payment provider that honours idempotency keys; ``calls`` counts
    every request it got, by key."""

    def __init__(self) -> None:
        self.refunds: Dict[str, str] = {}
        self.calls: List[str] = []

    def refund(self, key: str) -> str:
        self.calls.append(key)
        return self.refunds.setdefault(key, f"re_{len(self.refunds) + 1}")


def tools(psp: Provider, looked_up: List[str]) -> List[Any]:
    @tool
    def refund(order_id: str, amount_cents: int) -> str:
        """Refunds an order."""
        return psp.refund(current_attempt().key)

    @tool
    def order_status(order_id: str) -> str:
        """Says where an order is."""
        looked_up.append(order_id)
        return "delivered"

    return [refund, order_status]


def guards(client: arbiter.Client, uniq: str, **options: Any) -> Any:
    return guard_tools({
        "refund": arbiter.guard(tool=f"payments.refund.{uniq}", effect="keyed", client=client,
                                key=lambda order_id, **_: arbiter.key("refund", order_id), **options),
    })


def tool_messages(state: Dict[str, Any]) -> List[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def test_guarded_calls_run_once_replay_and_other_tools_pass_through(agent: arbiter.Client, uniq: str) -> None:
    psp, looked_up, order = Provider(), [], f"order-{uniq}"
    args = {"order_id": order, "amount_cents": 4200}
    model = langchain_model([[("refund", args, "c1"), ("order_status", {"order_id": order}, "c2")],
                             [("refund", args, "c3")], "refunded"])
    bot = create_agent(model, tools=tools(psp, looked_up), middleware=[guards(agent, uniq)])

    state = bot.invoke({"messages": [HumanMessage("refund my order")]})

    assert state["messages"][-1].content == "refunded"
    k = arbiter.key("refund", order)
    assert psp.calls == [k] and looked_up == [order]
    first, status, second = tool_messages(state)
    assert (first.content, first.tool_call_id, first.status) == ("re_1", "c1", "success")
    assert (status.content, second.content, second.tool_call_id) == ("delivered", "re_1", "c3")
    a = agent.action_by_key(k)
    assert (a.status, a.attempt, a.result, a.params) == ("succeeded", 1, "re_1", args)
    assert [x.key for x in agent.list_actions(tool=f"payments.refund.{uniq}").actions] == [k]


def test_async_agent_guards_async_tools(agent: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    seen: List[arbiter.Attempt] = []

    @tool
    async def refund(order_id: str, amount_cents: int) -> str:
        """Refunds an order."""
        seen.append(current_attempt())
        return psp.refund(current_attempt().key)

    args = {"order_id": order, "amount_cents": 10}
    bot = create_agent(langchain_model([[("refund", args, "c1")], [("refund", args, "c2")], "ok"]),
                       tools=[refund], middleware=[guards(agent, uniq)])

    state = asyncio.run(bot.ainvoke({"messages": [HumanMessage("refund")]}))

    assert [m.content for m in tool_messages(state)] == ["re_1", "re_1"]
    assert [(a.key, a.number) for a in seen] == [(arbiter.key("refund", order), 1)]


def test_a_held_action_is_not_run_again_and_the_model_learns_why(agent: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    k, args = arbiter.key("refund", order), {"order_id": order, "amount_cents": 4200}

    def lost(a: arbiter.Attempt) -> None:
        psp.refund(a.key)
        raise arbiter.Unknown("the provider's answer was lost")

    try:
        agent.run(arbiter.Spec(key=k, tool=f"payments.refund.{uniq}", effect="keyed", params=args, timeout=1), lost)
    except arbiter.OutcomeUnknownError:
        pass
    wait_status(agent, k, "timed_out")
    bot = create_agent(langchain_model([[("refund", args, "c1")], "a person decides"]),
                       tools=tools(psp, []), middleware=[guards(agent, uniq)])

    state = bot.invoke({"messages": [HumanMessage("refund my order")]})

    assert psp.calls == [k]  # only the lost attempt's
    [told] = tool_messages(state)
    assert told.status == "error" and "/actions/" in told.content
    assert told.content.startswith("Not done: an earlier attempt's outcome is unknown and a person is checking it.")


def test_a_call_waits_for_approval_in_arbiter_and_runs_once_approved(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    k, args = arbiter.key("refund", order), {"order_id": order, "amount_cents": 99000}
    bot = create_agent(langchain_model([[("refund", args, "c1")], "refunded"]), tools=tools(psp, []),
                       middleware=[guards(agent, uniq, require_approval=True, approval_wait=20)])

    def approve() -> None:
        a = wait_status(operator, k, "awaiting_approval")
        operator.decide(a.id, "approve", "the customer was double-charged")

    approver = threading.Thread(target=approve)
    approver.start()
    state = bot.invoke({"messages": [HumanMessage("refund my order")]})
    approver.join()

    assert psp.calls == [k]
    assert [m.content for m in tool_messages(state)] == ["re_1"]
    assert eventually(lambda: agent.action_by_key(k).status == "succeeded")


def test_a_call_awaiting_approval_does_not_run_and_the_model_is_told(agent: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    args = {"order_id": order, "amount_cents": 99000}
    bot = create_agent(langchain_model([[("refund", args, "c1")], "waiting"]), tools=tools(psp, []),
                       middleware=[guards(agent, uniq, require_approval=True)])

    state = bot.invoke({"messages": [HumanMessage("refund my order")]})

    assert psp.calls == []
    [told] = tool_messages(state)
    assert told.status == "error"
    assert told.content.startswith("Not done yet: this call is waiting for a person's approval. Do not call the tool")


def test_a_call_a_limit_denies_does_not_run_and_the_model_learns_a_limit_refused_it(
        agent: arbiter.Client, admin: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    lim = admin.create_limit(f"py refund freeze {uniq}", "sdk", [f"payments.refund.{uniq}"], 60, 0, over="deny")
    try:
        args = {"order_id": order, "amount_cents": 4200}
        bot = create_agent(langchain_model([[("refund", args, "c1")], "refused"]), tools=tools(psp, []),
                           middleware=[guards(agent, uniq)])

        state = bot.invoke({"messages": [HumanMessage("refund my order")]})

        assert psp.calls == []
        [told] = tool_messages(state)
        assert told.status == "error"
        assert told.content.startswith("Refused: this call would go over a limit set on such actions")
        assert "denied by a limit" in told.content and lim.name in told.content and "/actions/" in told.content
    finally:
        admin.delete_limit(lim.id)


def test_a_call_of_a_frozen_tool_does_not_run_and_the_model_learns_it_is_paused(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    f = operator.start_freeze("sdk", "provider incident", tools=[f"payments.refund.{uniq}"])
    try:
        args = {"order_id": order, "amount_cents": 4200}
        bot = create_agent(langchain_model([[("refund", args, "c1")], "paused"]), tools=tools(psp, []),
                           middleware=[guards(agent, uniq)])

        state = bot.invoke({"messages": [HumanMessage("refund my order")]})

        assert psp.calls == []
        [told] = tool_messages(state)
        assert told.status == "error"
        assert told.content.startswith("Not done: a person has frozen such actions for now (a freeze: ")
        assert "provider incident" in told.content and "/actions/" in told.content
    finally:
        operator.lift_freeze(f.id, "over")


def test_a_misspelled_tool_name_is_refused(agent: arbiter.Client, uniq: str) -> None:
    g = {"refnud": arbiter.guard(tool=f"payments.refund.{uniq}", client=agent, key=lambda order_id, **_: order_id)}
    agent_tools = tools(Provider(), [])
    with pytest.raises(ValueError, match="no tool named 'refnud'.*refund"):
        guard_tools(g, tools=agent_tools)
    # Without tools=, at the first model call: before any tool runs.
    psp = Provider()
    bot = create_agent(langchain_model([[("refund", {"order_id": "o", "amount_cents": 1}, "c1")], "done"]),
                       tools=tools(psp, []), middleware=[guard_tools(g)])
    with pytest.raises(ValueError, match="misspelled name would leave the real tool unguarded"):
        bot.invoke({"messages": [HumanMessage("refund")]})
    assert psp.calls == []


def test_a_timeout_in_the_tool_is_an_unknown_outcome_the_model_is_told(agent: arbiter.Client, uniq: str) -> None:
    order = f"order-{uniq}"
    k, args = arbiter.key("refund", order), {"order_id": order, "amount_cents": 4200}

    @tool
    def refund(order_id: str, amount_cents: int) -> str:
        """Refunds an order."""
        raise TimeoutError("the provider did not answer within 30 s")

    bot = create_agent(langchain_model([[("refund", args, "c1")], "a person checks"]), tools=[refund],
                       middleware=[guards(agent, uniq)])

    state = bot.invoke({"messages": [HumanMessage("refund my order")]})

    [told] = tool_messages(state)
    assert told.status == "error" and told.content.startswith("Unknown: the call was made but its outcome")
    a = agent.action_by_key(k)
    assert a.status == "timed_out"  # at once: reported outcome_unknown
    assert [e.type for e in agent.entries(a.id)] == ["intent", "outcome_unknown"]


def test_a_confirm_without_a_result_reaches_the_model_as_a_sentence(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    from arbiter.messages import model_message

    psp, order = Provider(), f"order-{uniq}"
    k, args = arbiter.key("refund", order), {"order_id": order, "amount_cents": 4200}
    with pytest.raises(arbiter.OutcomeUnknownError):
        agent.run(arbiter.Spec(key=k, tool=f"payments.refund.{uniq}", effect="keyed", params=args),
                  lambda a: (_ for _ in ()).throw(TimeoutError("no answer")))
    operator.decide(agent.action_by_key(k).id, "confirm", "the provider shows it")
    bot = create_agent(langchain_model([[("refund", args, "c1")], "done"]), tools=tools(psp, []),
                       middleware=[guards(agent, uniq)])

    state = bot.invoke({"messages": [HumanMessage("refund my order")]})

    assert [m.content for m in tool_messages(state)] == [model_message("confirmed_without_result")]
    assert psp.calls == []


@pytest.mark.parametrize("mode", ["per_call", "batched"])
def test_a_call_a_person_rejects_in_the_loop_leaves_nothing_in_arbiter(
        agent: arbiter.Client, uniq: str, mode: str) -> None:
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    psp, order = Provider(), f"order-{uniq}"
    args = {"order_id": order, "amount_cents": 4200}
    # The guard outermost: the reviewer's middleware runs inside it (per
    # call, its interrupt is raised in wrap_tool_call).
    bot = create_agent(langchain_model([[("refund", args, "c1")], "not refunded"]), tools=tools(psp, []),
                       middleware=[guards(agent, uniq),
                                   HumanInTheLoopMiddleware(interrupt_on={"refund": True}, interrupt_mode=mode)],
                       checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": uniq}}

    paused = bot.invoke({"messages": [HumanMessage("refund my order")]}, config, version="v2")

    assert paused.interrupts
    k = arbiter.key("refund", order)
    with pytest.raises(arbiter.APIError) as e:
        agent.action_by_key(k)  # paused before the tool: nothing recorded
    assert e.value.code == "not_found"
    reject = {"type": "reject", "message": "not this one"}
    resume = ({i.id: reject for i in paused.interrupts} if mode == "per_call" else {"decisions": [reject]})
    bot.invoke(Command(resume=resume), config, version="v2")
    assert psp.calls == []
    with pytest.raises(arbiter.APIError) as e:
        agent.action_by_key(k)
    assert e.value.code == "not_found"
