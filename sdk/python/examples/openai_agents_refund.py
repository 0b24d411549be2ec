"""An OpenAI Agents SDK agent whose refund tool Arbiter guards, with a
scripted model in place of a provider's (no model key needed).

Every refund needs a person's approval (require_approval; a policy on the
server does the same for the refunds it matches). The first call records
its intent when the tool runs (after the framework's tool input
guardrails), Arbiter holds it, and the model is told it waits for
approval. When the model asks again, the run pauses on the framework's own
approval interruption; once someone approves the action in Arbiter (the
dashboard link is printed), decide() approves it in the run state and the
run goes on: the refund runs once. The model then asks for the same refund
again, and the ledger answers with the saved result.

Run it against `arbiter demo` (see sdk/python/README.md), with the pinned
openai-agents installed:
    ARBITER_URL=http://127.0.0.1:8080 ARBITER_API_KEY=ak_... python3 openai_agents_refund.py
With ARBITER_OPERATOR_KEY (an operator key of the same namespace) the
example approves by itself, standing in for the person.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any, Dict, List

from agents import Agent, Model, ModelResponse, Runner, Usage, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import arbiter
from arbiter.adapters.openai_agents import decide, guarded_tool

refunds: Dict[str, str] = {}  # the fake provider: one refund per idempotency key


@guarded_tool(tool="payments.refund", effect="keyed", require_approval=True,
              key=lambda order_id, **_: arbiter.key("refund", order_id))
def refund(order_id: str, amount_cents: int, attempt: arbiter.Attempt) -> Dict[str, str]:
    """Refunds an order.

    Args:
        order_id: the order to refund.
        amount_cents: how much, in cents.
    """
    ref = refunds.setdefault(attempt.key, f"re_{len(refunds) + 1:04d}")
    return {"refund_id": ref}


class ScriptedModel(Model):
    """Answers each turn from a script: tool calls, then a final text."""

    def __init__(self, turns: List[Any]) -> None:
        self.turns = turns

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            out: List[Any] = [ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                                    content=[ResponseOutputText(type="output_text", text=turn,
                                                                                annotations=[])])]
        else:
            name, call_args = turn
            out = [ResponseFunctionToolCall(type="function_call", call_id=uuid.uuid4().hex, name=name,
                                            arguments=json.dumps(call_args))]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main(order: str) -> None:
    set_tracing_disabled(True)
    ask = ("refund", {"order_id": order, "amount_cents": 4200})
    bot = Agent(name="support", tools=[refund],
                model=ScriptedModel([ask, ask, ask, f"Refunded {order}, once."]))
    result = await Runner.run(bot, f"Please refund {order}.")
    while result.interruptions:
        client = arbiter.default_client()
        a = client.action_by_key(arbiter.key("refund", order))
        print(f"paused: {a.key} awaits approval in Arbiter: {client.action_url(a.id)}")
        if os.environ.get("ARBITER_OPERATOR_KEY"):
            operator = arbiter.Client(client.base_url, os.environ["ARBITER_OPERATOR_KEY"])
            operator.decide(a.id, "approve", "the example approves its own refund")
        state = result.to_state()
        if await decide(state, wait=300):
            sys.exit("nobody decided within 5 minutes")
        result = await Runner.run(bot, state)
    print(result.final_output)
    print(f"refunds at the provider: {len(refunds)}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else f"order-{uuid.uuid4().hex[:8]}"))
