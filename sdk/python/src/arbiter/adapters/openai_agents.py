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
key (from the model's arguments, as the decorator's ``key`` says) when the
tool really runs, that is in the tool's invocation, after the framework's
tool input guardrails, so a call a guardrail rejects leaves nothing in
Arbiter. The function runs only on proceed, and its outcome is reported.
The framework asks ``needs_approval`` before the guardrails, for calls it
may then drop, so ``needs_approval`` only reads the action: true while
Arbiter holds it for approval (and once people decided), false for a key
the ledger has not seen. A first call that a policy (or
``require_approval``) holds therefore records its intent and tells the
model it waits for approval; the next call with the same key pauses the
run with the framework's own interruption, and ``decide`` turns what people
decided in Arbiter into the run state's approvals. A framework approval
without Arbiter's is not enough: the call asks the ledger again and tells
the model it still waits. What the model is told comes from
sdk/vectors.json "model_messages" (arbiter.messages).

The framework is imported when a tool is made, never by ``import
arbiter``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import typing
from typing import TYPE_CHECKING, Any, Callable, Collection, Dict, List, Optional, Union

from .. import cancel, execute
from ..aio import MAX_WORKERS
from ..errors import APIError, PendingApprovalError
from ..execute import Attempt, Spec
from ..guard import Guard, arun
from ..messages import model_message
from ..outcomes import Classifier
from ..types import APPROVED, AWAITING_APPROVAL, COMPENSATED, CONFIRMED, DENIED, EffectOrDefault
from . import framework, model_answer

if TYPE_CHECKING:
    from agents import FunctionTool, RunContextWrapper, RunState, ToolApprovalItem

    from ..client import Client

__all__ = ["guarded_tool", "decide", "tool_error"]


def guarded_tool(
    *,
    tool: str,
    key: Union[str, Callable[..., str]],
    effect: EffectOrDefault = "",
    params: Any = None,
    timeout: float = 0,
    reference: Union[str, Callable[..., str]] = "",
    agent: str = "",
    key_ttl: float = 0,
    compensate: Optional[Callable[[Attempt], Any]] = None,
    require_approval: bool = False,
    approval_wait: float = 0,
    frozen_wait: float = 0,
    wait: float = 0,
    retriable: execute.ExcTypes = (),
    unknown: execute.ExcTypes = (),
    not_done_statuses: Collection[int] = (),
    classify: Optional[Classifier] = None,
    serialize: Optional[Callable[[Any], Any]] = None,
    client: Optional[Client] = None,
    max_workers: int = MAX_WORKERS,
    **function_tool_options: Any,
) -> Callable[[Callable[..., Any]], FunctionTool]:
    """Makes a function a FunctionTool whose calls Arbiter guards. The
    options are arbiter.guard's (``tool`` is Arbiter's name of the
    operation; the model sees the function's name, or ``name_override``);
    ``key``, ``params`` and ``reference`` are functions of the model's
    arguments (with the function's defaults). A parameter named ``attempt``
    receives the Attempt and is hidden from the model. Any other keyword is
    passed to ``agents.function_tool`` (``failure_error_function`` defaults
    to tool_error). The requests of an ``async def`` tool, of
    ``needs_approval`` and of ``decide`` run in the tool's own pool of at
    most ``max_workers`` threads (an AsyncClient's default), never on the
    event loop's default executor; a cancelled call stops waiting and
    retrying as an AsyncClient's does."""

    function_tool = framework("agents", "openai-agents").function_tool

    def decorate(fn: Callable[..., Any]) -> FunctionTool:
        g = Guard(tool=tool, key=key, effect=effect, params=params, timeout=timeout, reference=reference,
                  agent=agent, key_ttl=key_ttl, compensate=compensate, require_approval=require_approval,
                  approval_wait=approval_wait, frozen_wait=frozen_wait, wait=wait, retriable=retriable,
                  unknown=unknown, not_done_statuses=not_done_statuses, classify=classify, serialize=serialize,
                  client=client)
        guarded = _Guarded(g, fn, cancel.Pool(f"guarded tool {tool!r}", max_workers, "arbiter-tool"))
        function_tool_options.setdefault("failure_error_function", tool_error)
        ft = function_tool(guarded.tool_function(), needs_approval=guarded.needs_approval, **function_tool_options)
        ft.arbiter_guarded = guarded  # type: ignore[attr-defined]  # how decide finds the key of a call
        return ft

    return decorate


class _Guarded:
    """One guarded tool: its Guard, the user's function, and the pool its
    requests from async code run in."""

    def __init__(self, g: Guard, fn: Callable[..., Any], threads: cancel.Pool) -> None:
        self.guard, self.fn, self.threads = g, fn, threads
        self.signature = inspect.signature(fn)
        self.takes_attempt = "attempt" in self.signature.parameters

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
        """The framework's approval check, asked before the tool's input
        guardrails: it only reads. True while the action awaits people's
        approval in Arbiter, and once they approved or denied it (the
        framework's approval then carries Arbiter's answer, see decide),
        except a denial by a limit, which asked nobody's approval (the call
        tells the model: LimitExceededError); false for a key the ledger has
        not seen (the call records the intent), and when Arbiter cannot be
        asked (the call fails closed)."""
        try:
            a = await self.threads.run(self.guard.client.action_by_key, self.spec(params).key)
        except Exception:
            return False
        return a.status in (AWAITING_APPROVAL, APPROVED) or (a.status == DENIED and a.approval is not None)

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
                # The tool really runs now (after the input guardrails):
                # the intent is recorded here and nowhere else.
                c = self.guard.client
                try:
                    out = await arun(c, self.spec(tc.tool_arguments), lambda a: fn(*args, **kwargs, **extra(a)),
                                     executor=self.threads.executor())
                except PendingApprovalError as err:
                    return model_answer(err, c)
                return _returned(out, c)

            wrapper: Callable[..., Any] = call_async
        else:
            def call(tc: ToolContext[Any], *args: Any, **kwargs: Any) -> Any:
                # The framework runs a plain function in a thread: the
                # requests may block. The intent is recorded here, once the
                # tool really runs.
                c = self.guard.client
                try:
                    out = execute.run(c, self.spec(tc.tool_arguments), lambda a: fn(*args, **kwargs, **extra(a)))
                except PendingApprovalError as err:
                    return model_answer(err, c)
                return _returned(out, c)

            wrapper = call
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(wrapper, attr, getattr(fn, attr, None))
        wrapper.__signature__ = sig  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
        if sig.return_annotation is not inspect.Signature.empty:
            wrapper.__annotations__["return"] = sig.return_annotation
        return wrapper


def _returned(out: execute.Outcome, client: Client) -> Any:
    """What the model gets for a call that ran or replayed: the result, or
    a sentence when there is none to give (a confirm without a result, a
    compensation)."""
    if out.compensated or (out.action is not None and out.action.status == COMPENSATED and not out.ran):
        return model_message("compensated")
    if not out.ran and out.result is None and out.action is not None and out.action.status == CONFIRMED:
        return model_message("confirmed_without_result")
    return out.result


def tool_error(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """The default failure_error_function of a guarded tool: what the
    ledger said, when it did not let the call run or its outcome is unknown
    (held, awaiting approval, denied, unreachable …), in the words of
    sdk/vectors.json "model_messages"; the framework's default otherwise."""
    told = model_answer(error)
    if told is not None:
        return told
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
                a = await guarded.threads.run(c.action_by_key, k)
            except APIError as e:
                if e.code != "not_found":
                    raise
                still.append(item)  # not recorded (yet): nothing to decide
                continue
            if a.status == AWAITING_APPROVAL:
                still.append(item)
            elif a.status == DENIED and a.approval is None:
                # Denied by a limit: nobody's approval was asked.
                denied = execute.denied_error(a, k, c.action_url(a.id))
                state.reject(item, rejection_message=model_answer(denied, c) or str(denied))
            elif a.status == DENIED:
                rej = a.approval.rejection if a.approval is not None else None
                why = (f"Arbiter: rejected by {rej.by.name}: {rej.reason}" if rej is not None
                       else "Arbiter: the approval expired before anyone approved it")
                state.reject(item, rejection_message=model_message("denied", why, c.action_url(a.id)))
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
