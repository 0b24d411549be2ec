"""A ``@function_tool`` of the OpenAI Agents SDK (``pip install
openai-agents``) guarded by Arbiter, with the tool's ``needs_approval``
answered from Arbiter's approvals.

    from agents import Agent, Runner
    from arbiter.adapters.openai_agents import guarded_tool, decide

    @guarded_tool(tool="payments.refund", effect="keyed",
                  key=lambda order_id, **_: arbiter.key("refund", order_id))
    def refund(order_id: str, amount_cents: int, attempt: arbiter.Attempt) -> str:
        return psp.refund(order_id, amount_cents, idempotency_key=attempt.key)

    result = await Runner.run(Agent(name="support", tools=[refund]), "refund order 8812")
    while result.interruptions:             # Arbiter holds a call for people's approval
        state = result.to_state()
        await decide(state, wait=60)        # approved → state.approve, rejected → state.reject
        result = await Runner.run(agent, state)

Each call of the tool is one guarded call: the intent is recorded under the
key (from the model's arguments, as the decorator's ``key`` says), the
function runs only on proceed, and its outcome is reported. The framework
asks ``needs_approval`` first; the adapter answers it by recording the
intent: an intent a policy holds (or ``require_approval``) pauses the run
with the framework's own interruption, any other answer lets the call go on
with that answer (the intent is not sent twice). ``decide`` turns what
people decided in Arbiter into the run state's approvals. A framework
approval without Arbiter's is not enough: the call asks the ledger again and
refuses while the action awaits approval.

The framework is imported when a tool is made, never by ``import
arbiter``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
import typing
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Union

from .. import execute
from ..errors import APIError, ArbiterError, Compensated, PendingApprovalError
from ..execute import Attempt, Spec
from ..guard import Guard, arun
from ..types import AWAITING_APPROVAL, DENIED, EntryResult
from . import framework, model_message

if TYPE_CHECKING:
    from agents import FunctionTool, RunContextWrapper, RunState, ToolApprovalItem

    from ..client import Client

__all__ = ["guarded_tool", "decide", "tool_error"]


def guarded_tool(
    *,
    tool: str,
    key: Union[str, Callable[..., str]],
    effect: str = "",
    params: Any = None,
    timeout: float = 0,
    reference: Union[str, Callable[..., str]] = "",
    agent: str = "",
    key_ttl: float = 0,
    compensate: Optional[Callable[[Attempt], Any]] = None,
    require_approval: bool = False,
    wait: float = 0,
    retriable: execute.ExcTypes = (),
    unknown: execute.ExcTypes = (),
    client: Optional[Client] = None,
    **function_tool_options: Any,
) -> Callable[[Callable[..., Any]], FunctionTool]:
    """Makes a function a FunctionTool whose calls Arbiter guards. The
    options are arbiter.guard's (``tool`` is Arbiter's name of the
    operation; the model sees the function's name, or ``name_override``);
    ``key``, ``params`` and ``reference`` are functions of the model's
    arguments (with the function's defaults). A parameter named ``attempt``
    receives the Attempt and is hidden from the model. Any other keyword is
    passed to ``agents.function_tool`` (``failure_error_function`` defaults
    to tool_error)."""

    function_tool = framework("agents", "openai-agents").function_tool

    def decorate(fn: Callable[..., Any]) -> FunctionTool:
        g = Guard(tool=tool, key=key, effect=effect, params=params, timeout=timeout, reference=reference,
                  agent=agent, key_ttl=key_ttl, compensate=compensate, require_approval=require_approval,
                  wait=wait, retriable=retriable, unknown=unknown, client=client)
        guarded = _Guarded(g, fn)
        function_tool_options.setdefault("failure_error_function", tool_error)
        ft = function_tool(guarded.tool_function(), needs_approval=guarded.needs_approval, **function_tool_options)
        ft.arbiter_guarded = guarded  # type: ignore[attr-defined]  # how decide finds the key of a call
        return ft

    return decorate


class _Guarded:
    """One guarded tool: its Guard, the user's function, and the answers to
    intents that needs_approval recorded, by call id, for the call to go on
    from."""

    def __init__(self, g: Guard, fn: Callable[..., Any]) -> None:
        self.guard, self.fn = g, fn
        self.signature = inspect.signature(fn)
        self.takes_attempt = "attempt" in self.signature.parameters
        self._lock = threading.Lock()
        self._answers: Dict[str, Union[EntryResult, Exception]] = {}

    def spec(self, raw: Union[str, Dict[str, Any], None]) -> Spec:
        """The Spec of a call from the model's arguments (JSON text or the
        parsed object), with the function's defaults: the same in
        needs_approval and in the call, so both name one action."""
        args = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        shown = self.signature.replace(
            parameters=[p for n, p in self.signature.parameters.items() if n != "attempt"])
        bound = shown.bind_partial(**args)
        bound.apply_defaults()
        return self.guard.spec(dict(bound.arguments))

    async def needs_approval(self, ctx: RunContextWrapper[Any], params: Dict[str, Any], call_id: str) -> bool:
        """The framework's approval check: records the intent. Pending
        approval pauses the run; any other answer (or error) is kept for the
        call, which goes on from it."""
        with self._lock:
            if call_id in self._answers:
                return False  # asked already (a resumed run)
        try:
            res: Union[EntryResult, Exception] = await asyncio.to_thread(
                execute.ask, self.guard.client, self.spec(params))
        except PendingApprovalError:
            return True
        except Exception as err:  # the call raises it, and the model is told
            res = err
        with self._lock:
            self._answers[call_id] = res
        return False

    def _answer(self, call_id: str) -> Optional[EntryResult]:
        with self._lock:
            got = self._answers.pop(call_id, None)
        if isinstance(got, Exception):
            raise got
        return got

    def tool_function(self) -> Callable[..., Any]:
        """A function for agents.function_tool: the user's signature without
        ``attempt``, after the ToolContext, whose calls are guarded."""
        from agents.tool_context import ToolContext

        fn, takes_attempt = self.fn, self.takes_attempt
        hints = typing.get_type_hints(fn, include_extras=True)
        ctx = inspect.Parameter("arbiter_tool_context", inspect.Parameter.POSITIONAL_ONLY, annotation=ToolContext)
        shown = [p.replace(annotation=hints.get(n, p.annotation))
                 for n, p in self.signature.parameters.items() if n != "attempt"]
        sig = self.signature.replace(parameters=[ctx, *shown],
                                     return_annotation=hints.get("return", inspect.Signature.empty))

        def extra(a: Attempt) -> Dict[str, Any]:
            return {"attempt": a} if takes_attempt else {}

        if inspect.iscoroutinefunction(fn):
            async def call_async(tc: ToolContext[Any], *args: Any, **kwargs: Any) -> Any:
                spec, answer = self.spec(tc.tool_arguments), self._answer(tc.tool_call_id)
                out = await arun(self.guard.client, spec, lambda a: fn(*args, **kwargs, **extra(a)), answer)
                return _returned(out)

            wrapper: Callable[..., Any] = call_async
        else:
            def call(tc: ToolContext[Any], *args: Any, **kwargs: Any) -> Any:
                # The framework runs a plain function in a thread: the
                # requests may block.
                spec, answer = self.spec(tc.tool_arguments), self._answer(tc.tool_call_id)
                out = execute.run(self.guard.client, spec, lambda a: fn(*args, **kwargs, **extra(a)), answer)
                return _returned(out)

            wrapper = call
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(wrapper, attr, getattr(fn, attr, None))
        wrapper.__signature__ = sig  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
        if sig.return_annotation is not inspect.Signature.empty:
            wrapper.__annotations__["return"] = sig.return_annotation
        return wrapper


def _returned(out: execute.Outcome) -> Any:
    if out.compensated:
        raise Compensated(out)
    return out.result


def tool_error(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """The default failure_error_function of a guarded tool: what the
    ledger said, when it did not let the call run (held, awaiting approval,
    denied, unreachable …); the framework's default message otherwise."""
    if isinstance(error, ArbiterError):
        return model_message(error)
    from agents.tool import default_tool_error_function

    return default_tool_error_function(ctx, error)


async def decide(state: RunState[Any], *, wait: float = 0, client: Optional[Client] = None) -> List[ToolApprovalItem]:
    """Carries people's decisions in Arbiter into the run state: each
    interruption of a guarded tool whose action was approved is approved in
    state, each rejected or expired one is rejected with what Arbiter says
    (the model is told). Waits up to ``wait`` seconds for decisions still
    to come. Returns the interruptions still waiting (and those of other
    tools, which are not Arbiter's to decide); resume the run with state
    when it is empty."""
    deadline = time.monotonic() + wait
    waiting = list(state.get_interruptions())
    n = 0
    while True:
        still: List[ToolApprovalItem] = []
        asked: Optional[Client] = None
        for item in waiting:
            guarded = _guarded_of(item)
            if guarded is None:
                still.append(item)
                continue
            c = asked = client or guarded.guard.client
            k = guarded.spec(item.arguments).key
            try:
                a = await asyncio.to_thread(c.action_by_key, k)
            except APIError as e:
                if e.code != "not_found":
                    raise
                still.append(item)  # not recorded (yet): nothing to decide
                continue
            if a.status == AWAITING_APPROVAL:
                still.append(item)
            elif a.status == DENIED:
                rej = a.approval.rejection if a.approval is not None else None
                why = (f"rejected by {rej.by.name}: {rej.reason}" if rej is not None
                       else "its approval expired")
                state.reject(item, rejection_message=f"Refused: a person decided in Arbiter ({why}). "
                                                     f"It will not run ({c.action_url(a.id)}).")
            else:
                # Approved, or moved on since (the call replays what it came to).
                state.approve(item)
        left = deadline - time.monotonic()
        if asked is None or not still or left <= 0 or all(_guarded_of(i) is None for i in still):
            return still
        await asyncio.sleep(min(asked.backoff.pause(n), left))
        waiting, n = still, n + 1


def _guarded_of(item: ToolApprovalItem) -> Optional[_Guarded]:
    name = item.tool_name or getattr(item, "name", None)
    for t in getattr(item.agent, "tools", None) or []:
        if getattr(t, "name", None) == name and isinstance(getattr(t, "arbiter_guarded", None), _Guarded):
            return t.arbiter_guarded  # type: ignore[no-any-return]
    return None
