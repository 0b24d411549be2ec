"""A LangChain v1 agent whose refund tool Arbiter guards through an agent
middleware, with LangChain's fake chat model scripted in place of a
provider's (no model key needed).

The model asks for the same refund twice and looks the order up: the
first refund runs (its idempotency key is the action's key), the second is
answered from the ledger, and the lookup, which the middleware was not
configured for, passes through.

Run it against `arbiter demo` (see sdk/python/README.md), with the pinned
langchain installed:
    ARBITER_URL=http://127.0.0.1:8080 ARBITER_API_KEY=ak_... python3 langchain_refund.py
"""

from __future__ import annotations

import sys
import uuid
from typing import Any, Dict

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

import arbiter
from arbiter.adapters.langchain import current_attempt, guard_tools

refunds: Dict[str, str] = {}  # the fake provider: one refund per idempotency key


@tool
def refund(order_id: str, amount_cents: int) -> str:
    """Refunds an order."""
    return refunds.setdefault(current_attempt().key, f"re_{len(refunds) + 1:04d}")


@tool
def order_status(order_id: str) -> str:
    """Says where an order is."""
    return "delivered"


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, which answers from a list of messages,
    taught to accept tools."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def main(order: str) -> None:
    def call(name: str, **args: Any) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": uuid.uuid4().hex, "type": "tool_call"}])

    model = ScriptedModel(messages=iter([
        call("refund", order_id=order, amount_cents=4200),
        call("order_status", order_id=order),
        call("refund", order_id=order, amount_cents=4200),  # asked again: answered from the ledger
        AIMessage(f"Refunded {order}, once."),
    ]))
    agent = create_agent(model, tools=[refund, order_status], middleware=[guard_tools({
        "refund": arbiter.guard(tool="payments.refund", effect="keyed",
                                key=lambda order_id, **_: arbiter.key("refund", order_id)),
    })])
    state = agent.invoke({"messages": [HumanMessage(f"Please refund {order}.")]})
    for m in state["messages"]:
        if m.type == "tool":
            print(f"{m.name}: {m.content}")
    print(state["messages"][-1].content)
    print(f"refunds at the provider: {len(refunds)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else f"order-{uuid.uuid4().hex[:8]}")
