"""arbiter.adapters.openai_agents inside the OpenAI Agents SDK's own run
loop (Runner.run, its tool planning and run-state approvals), with a
scripted model instead of a provider."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List

import pytest

if sys.version_info < (3, 11):
    pytest.skip("the pinned agent frameworks are resolved for Python 3.11", allow_module_level=True)

from agents import (  # noqa: E402
    Agent,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    set_tracing_disabled,
    tool_input_guardrail,
)

import arbiter  # noqa: E402
from arbiter.adapters.openai_agents import decide, guarded_tool  # noqa: E402
from arbiter.messages import model_message  # noqa: E402
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


PENDING = "Not done yet: this call is waiting for a person's approval. Do not call the tool again"


def test_approval_in_arbiter_pauses_the_run_and_approving_continues_it(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    refund = refund_tool(agent, psp, f"payments.refund.{uniq}", require_approval=True)
    call = ("refund", {"order_id": order, "amount_cents": 99000}, "c1")
    first = openai_model([[call], "it waits for approval"])

    # The tool records its intent when it runs: held, and the model hears it waits.
    result = asyncio.run(Runner.run(Agent(name="support", model=first, tools=[refund]), "refund it"))
    assert result.interruptions == []
    [told] = tool_outputs(first)
    assert told.startswith(PENDING) and "/actions/" in told
    assert psp.calls == []
    a = wait_status(agent, arbiter.key("refund", order), "awaiting_approval")

    # The same call again: the framework's own pause, one interruption.
    bot = Agent(name="support", model=openai_model([[("refund", call[1], "c2")], "refunded after approval"]),
                tools=[refund])
    result = asyncio.run(Runner.run(bot, "refund it"))
    assert [i.tool_name for i in result.interruptions] == ["refund"]
    assert psp.calls == []
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
        agent: arbiter.Client, operator: arbiter.Client, admin: arbiter.Client, uniq: str) -> None:
    psp, order, tool = Provider(), f"order-{uniq}", f"payments.refund.{uniq}"
    admin.create_policy(f"refunds over 500 ({uniq})", "sdk", [tool], condition="params.amount_cents > 50000")
    refund = refund_tool(agent, psp, tool)
    call = ("refund", {"order_id": order, "amount_cents": 99000}, "c1")
    first = openai_model([[call], "waiting"])
    asyncio.run(Runner.run(Agent(name="support", model=first, tools=[refund]), "refund it"))
    assert tool_outputs(first)[0].startswith(PENDING)  # the policy held it
    a = wait_status(agent, arbiter.key("refund", order), "awaiting_approval")
    model = openai_model([[("refund", call[1], "c2")], "not refunded"])
    bot = Agent(name="support", model=model, tools=[refund])
    result = asyncio.run(Runner.run(bot, "refund it"))
    assert len(result.interruptions) == 1
    operator.decide(a.id, "reject", "over the customer's total")
    state = result.to_state()
    assert asyncio.run(decide(state, wait=10)) == []

    result = asyncio.run(Runner.run(bot, state))

    assert result.final_output == "not refunded"
    assert psp.calls == []
    [told] = tool_outputs(model)
    assert told == model_message("denied", "Arbiter: rejected by sdk-operator@example.com: over the customer's total",
                                 agent.action_url(a.id))
    assert agent.action_by_key(a.key).status == "denied"


def test_a_framework_approval_without_arbiters_does_not_run_the_tool(
        agent: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    refund = refund_tool(agent, psp, f"payments.refund.{uniq}", require_approval=True)
    args = {"order_id": order, "amount_cents": 99000}
    asyncio.run(Runner.run(Agent(name="support", model=openai_model([[("refund", args, "c1")], "waiting"]),
                                 tools=[refund]), "refund it"))
    model = openai_model([[("refund", args, "c2")], "waiting"])
    bot = Agent(name="support", model=model, tools=[refund])
    result = asyncio.run(Runner.run(bot, "refund it"))
    state = result.to_state()
    assert len(result.interruptions) == 1
    for item in result.interruptions:
        state.approve(item)  # someone clicks yes in the app, not in Arbiter

    result = asyncio.run(Runner.run(bot, state))

    assert psp.calls == []
    [told] = tool_outputs(model)
    assert told.startswith(PENDING)
    assert agent.action_by_key(arbiter.key("refund", order)).status == "awaiting_approval"


def test_a_call_a_tool_input_guardrail_rejects_leaves_nothing_in_arbiter_and_a_worker_never_runs_it(
        agent: arbiter.Client, uniq: str) -> None:
    psp, order, tool = Provider(), f"order-{uniq}", f"payments.refund.{uniq}"

    @tool_input_guardrail
    def small_refunds_only(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        if json.loads(data.context.tool_arguments)["amount_cents"] > 100:
            return ToolGuardrailFunctionOutput.reject_content("refunds over 1.00 need a person")
        return ToolGuardrailFunctionOutput.allow()

    # A short lease: an attempt begun for the rejected call would time out
    # at once, and the worker's lookup (which finds nothing) would retry it.
    refund = refund_tool(agent, psp, tool, timeout=1, tool_input_guardrails=[small_refunds_only])
    model = openai_model([[("refund", {"order_id": order, "amount_cents": 500}, "c1")], "refused"])

    result = asyncio.run(Runner.run(Agent(name="support", model=model, tools=[refund]), "refund it"))

    assert result.interruptions == []
    assert tool_outputs(model) == ["refunds over 1.00 need a person"]
    worked: List[str] = []
    w = arbiter.Worker(agent, poll=0.05, max_poll=0.2, lookup_retry=0.2)
    w.handle(tool, lambda a: worked.append(a.key) or "re_worker")
    w.handle_lookup(tool, lambda q: arbiter.LookupResult("not_happened", evidence={"searched": q.key}))
    stop = threading.Event()
    t = threading.Thread(target=w.run, args=(stop,))
    t.start()
    time.sleep(3)  # past the lease, several sweeps and polls
    stop.set()
    t.join(10)
    assert worked == [] and psp.calls == []
    with pytest.raises(arbiter.APIError) as e:
        agent.action_by_key(arbiter.key("refund", order))
    assert (e.value.status, e.value.code) == (404, "not_found")


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
    assert told.startswith("Not done: an earlier attempt's outcome is unknown and a person is checking it. "
                           "Do not call the tool again") and "/actions/" in told


LIMITED = "Refused: this call would go over a limit set on such actions (a budget or a rate), so it will not run."


def test_a_call_a_limit_denies_does_not_run_asks_nobody_and_the_model_learns_a_limit_refused_it(
        agent: arbiter.Client, admin: arbiter.Client, uniq: str) -> None:
    psp, order, tool = Provider(), f"order-{uniq}", f"payments.refund.{uniq}"
    lim = admin.create_limit(f"py refund freeze {uniq}", "sdk", [tool], 60, 0, over="deny")
    try:
        refund = refund_tool(agent, psp, tool)
        params = {"order_id": order, "amount_cents": 4200}
        first = openai_model([[("refund", params, "c1")], "refused"])
        result = asyncio.run(Runner.run(Agent(name="support", model=first, tools=[refund]), "refund it"))
        assert result.final_output == "refused"
        [told] = tool_outputs(first)
        assert told.startswith(LIMITED) and "denied by a limit" in told and lim.name in told, told
        a = agent.action_by_key(arbiter.key("refund", order))
        assert (a.status, a.approval) == ("denied", None)

        # The same call again: nobody's approval was asked, so the framework
        # does not pause; the call tells the model again.
        again = openai_model([[("refund", params, "c2")], "refused again"])
        result = asyncio.run(Runner.run(Agent(name="support", model=again, tools=[refund]), "refund it"))
        assert result.interruptions == []
        [told] = tool_outputs(again)
        assert told.startswith(LIMITED) and "a person rejected" not in told, told
        assert psp.calls == []
    finally:
        admin.delete_limit(lim.id)


FROZEN = "Not done: a person has frozen such actions for now (a freeze: "


def test_a_call_of_a_frozen_tool_does_not_run_and_the_model_learns_it_is_paused(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, order, tool = Provider(), f"order-{uniq}", f"payments.refund.{uniq}"
    k = arbiter.key("refund", order)
    params = {"order_id": order, "amount_cents": 4200}
    refund = refund_tool(agent, psp, tool)
    # A retry an operator asked for, which the freeze then answers frozen.
    with pytest.raises(arbiter.OutcomeUnknownError):
        agent.run(arbiter.Spec(key=k, tool=tool, effect="keyed", params=params),
                  lambda a: (_ for _ in ()).throw(arbiter.Unknown("the provider timed out")))
    operator.decide(wait_status(agent, k, "timed_out").id, "retry", "the provider lost it")
    f = operator.start_freeze("sdk", "provider incident", tools=[tool])
    try:
        model = openai_model([[("refund", params, "c1"), ("refund", dict(params, order_id=f"{order}-2"), "c2")],
                              "paused"])
        result = asyncio.run(Runner.run(Agent(name="support", model=model, tools=[refund]), "refund them"))
        assert result.final_output == "paused"
        retried, fresh = tool_outputs(model)
        assert retried.startswith(FROZEN) and f.id in retried and "/actions/" in retried, retried
        assert fresh.startswith(FROZEN) and "provider incident" in fresh, fresh  # a new key waits for the lift
        assert psp.calls == []
    finally:
        operator.lift_freeze(f.id, "over")


def test_a_call_that_needs_no_approval_runs_while_another_of_the_turn_waits(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp = Provider()
    small = refund_tool(agent, psp, f"payments.refund.{uniq}")
    large = refund_tool(agent, psp, f"payments.refund.large.{uniq}", require_approval=True,
                        name_override="refund_large")
    ks = arbiter.key("refund", f"small-{uniq}"), arbiter.key("refund", f"large-{uniq}")
    big = {"order_id": f"large-{uniq}", "amount_cents": 990000}
    first = openai_model([[("refund", {"order_id": f"small-{uniq}", "amount_cents": 100}, "c1"),
                           ("refund_large", big, "c2")], "one waits"])

    asyncio.run(Runner.run(Agent(name="support", tools=[small, large], model=first), "refund both"))

    assert psp.calls == [ks[0]]
    assert tool_outputs(first)[1].startswith(PENDING)
    a = wait_status(agent, ks[1], "awaiting_approval")
    bot = Agent(name="support", tools=[small, large],
                model=openai_model([[("refund_large", big, "c3")], "both refunded"]))
    result = asyncio.run(Runner.run(bot, "refund the large one"))
    assert [i.tool_name for i in result.interruptions] == ["refund_large"]
    operator.decide(a.id, "approve", "checked")
    state = result.to_state()
    assert asyncio.run(decide(state, wait=10)) == []
    result = asyncio.run(Runner.run(bot, state))
    assert result.final_output == "both refunded"
    assert psp.calls == list(ks)
    assert [agent.action_by_key(k).status for k in ks] == ["succeeded", "succeeded"]


def test_a_confirm_without_a_result_reaches_the_model_as_a_sentence(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, order, tool = Provider(), f"order-{uniq}", f"payments.refund.{uniq}"
    k = arbiter.key("refund", order)
    params = {"order_id": order, "amount_cents": 4200}
    with pytest.raises(arbiter.OutcomeUnknownError):
        agent.run(arbiter.Spec(key=k, tool=tool, effect="keyed", params=params),
                  lambda a: (_ for _ in ()).throw(TimeoutError("the provider did not answer")))
    operator.decide(agent.action_by_key(k).id, "confirm", "the provider shows the refund")
    model = openai_model([[("refund", params, "c1")], "done"])

    asyncio.run(Runner.run(Agent(name="support", model=model, tools=[refund_tool(agent, psp, tool)]), "go"))

    assert tool_outputs(model) == [model_message("confirmed_without_result")]
    assert psp.calls == []


class Recording(arbiter.Client):
    """A client that notes the name of the thread each request runs in."""

    def __init__(self, c: arbiter.Client) -> None:
        super().__init__(c.base_url, c.api_key, timeout=c.timeout, backoff=c.backoff)
        self.threads: List[str] = []

    def _send(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        return super()._send(*args, **kwargs)


def test_an_async_tools_requests_keep_to_the_tools_own_threads(
        agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    psp, order = Provider(), f"order-{uniq}"
    c = Recording(agent)

    @guarded_tool(tool=f"payments.refund.{uniq}", effect="keyed", require_approval=True, client=c, max_workers=2,
                  key=lambda order_id, **_: arbiter.key("refund", order_id))
    async def refund(order_id: str, amount_cents: int, attempt: arbiter.Attempt) -> Dict[str, Any]:
        """Refunds an order."""
        return {"refund_id": psp.refund(attempt.key)}

    call = ("refund", {"order_id": order, "amount_cents": 99000}, "c1")

    async def main() -> None:
        # needs_approval, the held intent, the framework's pause, decide,
        # and the call that runs: none on the host's default executor.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(thread_name_prefix="host-default"))
        await Runner.run(Agent(name="support", model=openai_model([[call], "it waits"]), tools=[refund]), "go")
        bot = Agent(name="support", model=openai_model([[("refund", call[1], "c2")], "refunded"]), tools=[refund])
        result = await Runner.run(bot, "go")
        assert [i.tool_name for i in result.interruptions] == ["refund"]
        a = c.action_by_key(arbiter.key("refund", order))
        operator.decide(a.id, "approve", "double-charged")
        state = result.to_state()
        assert await decide(state, wait=10) == []
        result = await Runner.run(bot, state)
        assert result.final_output == "refunded"

    c.threads.clear()
    asyncio.run(main())
    assert psp.calls == [arbiter.key("refund", order)]
    from_loop = [t for t in c.threads if t != threading.current_thread().name]  # the test's own reads
    assert from_loop and all(t.startswith("arbiter-tool") for t in from_loop), from_loop
