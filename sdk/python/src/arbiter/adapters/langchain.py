"""A LangChain v1 agent middleware (``pip install langchain``) that guards
the tool calls it is configured for, each as one guarded call.

    from langchain.agents import create_agent
    from arbiter.adapters.langchain import current_attempt, guard_tools

    @tool
    def refund(order_id: str, amount_cents: int) -> str:
        \"\"\"Refunds an order.\"\"\"
        return psp.refund(order_id, amount_cents, idempotency_key=current_attempt().key)

    agent = create_agent(model, tools=[refund], middleware=[guard_tools({
        "refund": arbiter.guard(tool="payments.refund", effect="keyed",
                                key=lambda order_id, **_: arbiter.key("refund", order_id)),
    })])

For each call of a configured tool (by the name the model calls), the
middleware's ``wrap_tool_call`` hands the rest of the chain the tool
wrapped, so the intent is recorded only when the ToolNode really invokes
it, below every other middleware (a call that HumanInTheLoopMiddleware
interrupts or a person rejects records nothing; an edited call is recorded
as it runs): under the key the Guard's ``key`` makes of the call's
arguments (the params default to the arguments, without the ones the
ToolNode injects), the tool runs only on proceed, with heartbeats, and its
outcome is reported: the ToolMessage's content is the saved result, and an error
ToolMessage (a tool error the ToolNode handled) is recorded as failed. A
replay answers with the saved content and the tool does not run; an answer
that lets nothing run (held, awaiting approval, denied, key reused,
Arbiter unreachable …), or a call whose outcome is unknown (a timeout: the
action goes to a lookup, then a person), becomes an error ToolMessage
telling the model what happened in the words of sdk/vectors.json
"model_messages"; a confirm without a result, and a compensation, reach the
model as a sentence of those too. Inside the tool, ``current_attempt()`` is the Attempt (its
``key`` is the downstream's idempotency key). Other tools pass through
untouched.

The framework is imported when the middleware is made, never by ``import
arbiter``.
"""

from __future__ import annotations

import contextvars
import json
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Mapping, Optional, Sequence

from .. import execute
from ..errors import ArbiterError
from ..execute import Attempt, Done, Outcome
from ..guard import Guard, arun
from ..messages import model_message
from ..types import COMPENSATED, CONFIRMED
from . import framework, model_answer

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware, ToolCallRequest
    from langchain_core.messages import ToolMessage

    from ..client import Client

__all__ = ["guard_tools", "current_attempt"]

_attempt: contextvars.ContextVar[Optional[Attempt]] = contextvars.ContextVar("arbiter_attempt", default=None)


def current_attempt() -> Attempt:
    """The Attempt of the guarded tool call running now (in the tool's
    code): pass its ``key`` to the downstream as the idempotency key."""
    a = _attempt.get()
    if a is None:
        raise ArbiterError("arbiter: current_attempt() outside a tool call guarded by guard_tools")
    return a


def guard_tools(guards: Mapping[str, Guard], *, tools: Optional[Sequence[Any]] = None,
                client: Optional[Client] = None) -> AgentMiddleware:
    """The middleware guarding each tool named in guards (the name the
    model calls) with its Guard, made with arbiter.guard(tool=...,
    effect=..., key=...); ``key``, ``params`` and ``reference`` are
    functions of the call's arguments. ``client`` is the Guards' when they
    name none.

    A name that is not one of the agent's tools (a typo would leave the
    real tool unguarded) raises ValueError: here, when ``tools`` (the list
    given to create_agent) is passed, else at the agent's first model call,
    against the tools the model is offered."""
    AgentMiddleware = framework("langchain.agents.middleware", "langchain").AgentMiddleware
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import BaseTool

    table = dict(guards)
    for name, g in table.items():
        if not isinstance(g, Guard):
            raise TypeError(f"arbiter: guard_tools: the guard of {name!r} is a {type(g).__name__}, "
                            "not an arbiter.guard(...)")
    checked = threading.Event()

    def check(offered: Sequence[Any]) -> None:
        names = {_tool_name(t) for t in offered} - {None}
        unknown = sorted(set(table) - names)
        if unknown:
            raise ValueError(f"arbiter: guard_tools: no tool named {', '.join(map(repr, unknown))} among the "
                             f"agent's tools ({', '.join(sorted(str(n) for n in names)) or 'none'}); "
                             "a misspelled name would leave the real tool unguarded")
        checked.set()

    if tools is not None:
        check(tools)

    class _ToolError(Exception):
        """An error ToolMessage from the tool, recorded as failed and then
        given to the model as it was."""

        def __init__(self, msg: ToolMessage) -> None:
            super().__init__(_text(msg.content))
            self.msg = msg

    class GuardedTool(BaseTool):
        """A configured tool, guarded: the intent is recorded when the
        ToolNode invokes it, below every middleware, so a call another
        middleware rejects or interrupts (HumanInTheLoopMiddleware) records
        nothing, and an edited call is recorded as it runs."""

        inner: BaseTool
        arbiter_guard: Any
        arbiter_client: Any

        def _run(self, *args: Any, **kwargs: Any) -> Any:  # never called: invoke is the guarded path
            raise NotImplementedError

        def _guarded(self, input: Any) -> Any:
            """The spec of the call, or None when its arguments are invalid
            (the tool refuses them itself, and nothing is recorded)."""
            if not isinstance(input, dict) or "args" not in input:
                return None
            args = _model_args(self.inner, dict(input.get("args") or {}))
            schema = self.inner.tool_call_schema
            if hasattr(schema, "model_validate"):
                try:
                    schema.model_validate(args)
                except Exception:
                    return None
            return self.arbiter_guard.spec(args)

        def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            spec = self._guarded(input)
            if spec is None:
                return self.inner.invoke(input, config, **kwargs)
            kept: Dict[str, Any] = {}

            def run(a: Attempt) -> Done[Any]:
                token = _attempt.set(a)
                try:
                    msg = self.inner.invoke(input, config, **kwargs)
                finally:
                    _attempt.reset(token)
                return _done(msg, kept)

            try:
                out = execute.run(self.arbiter_client, spec, run)
            except _ToolError as e:
                return e.msg
            except ArbiterError as e:
                return _refused(input, e, self.arbiter_client)
            return _answer(input, out, kept)

        async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
            spec = self._guarded(input)
            if spec is None:
                return await self.inner.ainvoke(input, config, **kwargs)
            kept: Dict[str, Any] = {}

            async def run(a: Attempt) -> Done[Any]:
                _attempt.set(a)  # this task's context only
                return _done(await self.inner.ainvoke(input, config, **kwargs), kept)

            try:
                out = await arun(self.arbiter_client, spec, run, executor=self.arbiter_guard.executor())
            except _ToolError as e:
                return e.msg
            except ArbiterError as e:
                return _refused(input, e, self.arbiter_client)
            return _answer(input, out, kept)

    class ArbiterMiddleware(AgentMiddleware):  # type: ignore[type-arg]
        """Guards the configured tools' calls with Arbiter."""

        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            if not checked.is_set():
                check(request.tools)
            return handler(request)

        async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
            if not checked.is_set():
                check(request.tools)
            return await handler(request)

        def _guarded(self, request: ToolCallRequest) -> ToolCallRequest:
            g = table.get(request.tool_call["name"])
            t = request.tool
            if g is None or t is None or isinstance(t, GuardedTool):
                return request
            c = g._client if g._client is not None else (client or g.client)
            proxy = GuardedTool(name=t.name, description=t.description, args_schema=t.args_schema,
                                return_direct=t.return_direct, response_format=t.response_format,
                                inner=t, arbiter_guard=g, arbiter_client=c)
            return request.override(tool=proxy)

        def wrap_tool_call(self, request: ToolCallRequest,
                           handler: Callable[[ToolCallRequest], Any]) -> Any:
            return handler(self._guarded(request))

        async def awrap_tool_call(self, request: ToolCallRequest,
                                  handler: Callable[[ToolCallRequest], Awaitable[Any]]) -> Any:
            return await handler(self._guarded(request))

    def _done(msg: Any, kept: Dict[str, Any]) -> Done[Any]:
        kept["msg"] = msg
        if isinstance(msg, ToolMessage):
            if msg.status == "error":
                raise _ToolError(msg)
            return Done(msg.content)
        return Done(None)  # a Command: the graph's business, nothing to save

    def _answer(call: Any, out: Outcome, kept: Dict[str, Any]) -> Any:
        if out.ran and "msg" in kept:
            return kept["msg"]
        a = out.action
        if out.compensated or (a is not None and a.status == COMPENSATED):
            content: Any = model_message("compensated")
        elif out.result is None and a is not None and a.status == CONFIRMED:
            content = model_message("confirmed_without_result")
        else:
            content = out.result if isinstance(out.result, (str, list)) else json.dumps(out.result)
        return ToolMessage(content=content, tool_call_id=call["id"], name=call["name"])

    def _refused(call: Any, err: ArbiterError, c: Client) -> ToolMessage:
        return ToolMessage(content=model_answer(err, c) or str(err), tool_call_id=call["id"], name=call["name"],
                           status="error")

    return ArbiterMiddleware()


def _model_args(tool: Any, args: Dict[str, Any]) -> Dict[str, Any]:
    """The arguments the model gave, without those the ToolNode injected
    (state, runtime, store): what the tool's call schema lists."""
    schema = tool.tool_call_schema
    fields = getattr(schema, "model_fields", None)
    if fields is None and isinstance(schema, dict):
        fields = schema.get("properties")
    return {k: v for k, v in args.items() if fields is None or k in fields}


def _tool_name(t: Any) -> Optional[str]:
    """The name the model calls a tool by: a BaseTool's, or a provider
    tool dict's."""
    if isinstance(t, dict):
        fn = t.get("function")
        return str(t.get("name") or (fn.get("name") if isinstance(fn, dict) else "") or "") or None
    name = getattr(t, "name", None) or getattr(t, "__name__", None)
    return str(name) if name else None


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)
