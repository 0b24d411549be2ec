"""``arbiter.guard``: a guarded side effect as a decorator or a context
manager, for plain and async code."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
from concurrent.futures import Executor
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Collection,
    Concatenate,
    Coroutine,
    Dict,
    Optional,
    ParamSpec,
    Type,
    TypeVar,
    Union,
    overload,
)

from . import cancel, execute
from .errors import ArbiterError, Compensated, Replayed
from .execute import Attempt, Done, Outcome, Spec
from .heartbeat import Heartbeats
from .outcomes import Classifier
from .types import COMPENSATE, PROCEED, EffectOrDefault, EntryResult

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Guard", "guard", "configure", "default_client"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
# What an async def returns when called.
Co = Coroutine[Any, Any, R]

_default: Optional[Client] = None
_default_lock = threading.Lock()


def configure(base_url: str, api_key: str, **options: Any) -> Client:
    """Sets the client that guards without a ``client`` use (by default one
    for ARBITER_URL and ARBITER_API_KEY, made on first use)."""
    from .client import Client

    global _default
    with _default_lock:
        _default = Client(base_url, api_key, **options)
        return _default


def default_client() -> Client:
    from .client import Client

    global _default
    with _default_lock:
        if _default is None:
            if not os.environ.get("ARBITER_API_KEY"):
                raise ArbiterError("arbiter: no client: call arbiter.configure(url, api_key) or set ARBITER_API_KEY")
            _default = Client.from_env()
        return _default


class Guard:
    """One guarded side effect. Made by ``arbiter.guard(...)`` or
    ``client.guard(...)``; use it as a decorator or, once, as a context
    manager (``with`` or ``async with``)."""

    def __init__(
        self,
        *,
        tool: str,
        key: Union[str, Callable[..., str]],
        effect: EffectOrDefault = "",
        params: Any = None,
        timeout: float = 0,
        reference: Union[str, Callable[..., str]] = "",
        agent: str = "",
        run_id: str = "",
        wait: float = 0,
        key_ttl: float = 0,
        compensate: Optional[Callable[[Attempt], Any]] = None,
        require_approval: bool = False,
        approval_wait: float = 0,
        frozen_wait: float = 0,
        retriable: execute.ExcTypes = (),
        unknown: execute.ExcTypes = (),
        not_done_statuses: Collection[int] = (),
        classify: Optional[Classifier] = None,
        serialize: Optional[Callable[[Any], Any]] = None,
        client: Optional[Client] = None,
        executor: Optional[Executor] = None,
    ) -> None:
        if classify is not None and not callable(classify):
            raise TypeError(f"arbiter: guard {tool!r}: classify must be a callable, not {type(classify).__name__}")
        if serialize is not None and not callable(serialize):
            raise TypeError(f"arbiter: guard {tool!r}: serialize must be a callable, not {type(serialize).__name__}")
        self._key, self._params, self._reference = key, params, reference
        self._options: Dict[str, Any] = dict(
            tool=tool, effect=effect, timeout=timeout, agent=agent, run_id=run_id, wait=wait, key_ttl=key_ttl,
            compensate=compensate, require_approval=require_approval, approval_wait=approval_wait,
            frozen_wait=frozen_wait, retriable=tuple(retriable), unknown=tuple(unknown),
            not_done_statuses=tuple(not_done_statuses), classify=classify, serialize=serialize)
        self._client = client
        # Where async uses run their requests: an AsyncClient's own pool,
        # else one of the guard's own made at its first async use, never
        # the event loop's default executor (a wait for approval or an
        # outage's report retries would hold the host application's threads).
        self._executor = executor
        self._threads: Optional[cancel.Pool] = None
        self._threads_lock = threading.Lock()
        # State of one use as a context manager.
        self._attempt: Optional[Attempt] = None
        self._spec: Optional[Spec] = None
        self._hb: Optional[Heartbeats] = None

    def executor(self) -> Executor:
        """Where this guard's async uses run their requests: the executor it
        was given, else a pool of its own of at most
        arbiter.cancel.MAX_WORKERS threads, made at its first async use."""
        if self._executor is not None:
            return self._executor
        with self._threads_lock:
            if self._threads is None:
                self._threads = cancel.Pool(f"guard {self._options['tool']!r}", cancel.MAX_WORKERS, "arbiter-guard")
            return self._threads.executor()

    @property
    def client(self) -> Client:
        return self._client if self._client is not None else default_client()

    def spec(self, arguments: Optional[Dict[str, Any]] = None) -> Spec:
        """The Spec of one call; arguments are the decorated function's."""
        args = arguments or {}
        key = self._key(**args) if callable(self._key) else self._key
        ref = self._reference(**args) if callable(self._reference) else self._reference
        if callable(self._params):
            params = self._params(**args)
        elif self._params is None and arguments is not None:
            params = args  # by default the call's arguments are the params
        else:
            params = self._params
        return Spec(key=key, params=params, reference=ref, **self._options)

    # --- decorator ---
    # The overloads say what a call returns: what the function returns, a
    # Done's result for a function that returns Done[R], and for an async
    # def the same, awaited. A parameter ``attempt: Attempt`` (first, or
    # right after self or cls) is not the caller's to pass.

    @overload
    def __call__(self, fn: Callable[Concatenate[Attempt, P], Co[Done[R]]]) -> Callable[P, Co[R]]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[Attempt, P], Co[R]]) -> Callable[P, Co[R]]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[Attempt, P], Done[R]]) -> Callable[P, R]: ...
    @overload
    def __call__(self, fn: Callable[Concatenate[Attempt, P], R]) -> Callable[P, R]: ...  # type: ignore[overload-overlap]
    @overload
    def __call__(self, fn: Callable[Concatenate[S, Attempt, P], Co[Done[R]]]) -> Callable[Concatenate[S, P], Co[R]]: ...  # type: ignore[overload-overlap]
    @overload
    def __call__(self, fn: Callable[Concatenate[S, Attempt, P], Co[R]]) -> Callable[Concatenate[S, P], Co[R]]: ...  # type: ignore[overload-overlap]
    @overload
    def __call__(self, fn: Callable[Concatenate[S, Attempt, P], Done[R]]) -> Callable[Concatenate[S, P], R]: ...  # type: ignore[overload-overlap]
    @overload
    def __call__(self, fn: Callable[Concatenate[S, Attempt, P], R]) -> Callable[Concatenate[S, P], R]: ...
    @overload
    def __call__(self, fn: Callable[P, Co[Done[R]]]) -> Callable[P, Co[R]]: ...
    @overload
    def __call__(self, fn: Callable[P, Co[R]]) -> Callable[P, Co[R]]: ...
    @overload
    def __call__(self, fn: Callable[P, Done[R]]) -> Callable[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]: ...

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorates fn so that each call is guarded: the key (and by
        default the params) come from the call's arguments. A parameter
        named ``attempt`` receives the Attempt (its key is the downstream's
        idempotency key) and is not the caller's to pass; a first parameter
        named ``self`` or ``cls`` (a method) is passed through but is not
        part of the params, nor of the arguments ``key``, ``params`` and
        ``reference`` get. A call returns fn's result as the ledger saved it
        (a Done's result; JSON, after ``serialize``), or on a replay the
        saved result without calling fn; raises Compensated when the call
        undid the effect instead."""
        sig = inspect.signature(fn)
        names = list(sig.parameters)
        takes_attempt = "attempt" in sig.parameters
        # A method: its instance (or class) is how it is reached, not what
        # the action does.
        bound_to = names[0] if names and names[0] in ("self", "cls") else None
        shown = sig.replace(parameters=[p for n, p in sig.parameters.items() if n != "attempt"])

        def prepared(args: Any, kwargs: Any) -> "tuple[Dict[str, Any], Callable[[Attempt], Any]]":
            try:
                bound = shown.bind(*args, **kwargs)
            except TypeError as err:
                raise TypeError(f"{getattr(fn, '__qualname__', fn)}(): {err}") from None
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            if bound_to is not None:
                arguments.pop(bound_to, None)

            def call(a: Attempt) -> Any:
                values = dict(bound.arguments)
                if takes_attempt:
                    values["attempt"] = a
                full = inspect.BoundArguments(sig, values)
                return fn(*full.args, **full.kwargs)

            return arguments, call

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                arguments, call = prepared(args, kwargs)
                out = await arun(self.client, self.spec(arguments), call, executor=self.executor())
                return _returned(out)

            async_wrapper.__signature__ = shown  # type: ignore[attr-defined]
            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            arguments, call = prepared(args, kwargs)
            return _returned(execute.run(self.client, self.spec(arguments), call))

        wrapper.__signature__ = shown  # type: ignore[attr-defined]
        return wrapper

    # --- context manager ---

    def __enter__(self) -> Attempt:
        """Records the intent. The body runs only on proceed, with the
        Attempt (record its result with attempt.record); any other answer
        raises here: Replayed (with the saved result), Compensated, or the
        error of the answer."""
        spec = self.spec()
        return self._entered(spec, execute.ask(self.client, spec))

    def _entered(self, spec: Spec, res: Any) -> Attempt:
        if res.outcome == COMPENSATE:
            raise Compensated(execute.compensate(self.client, spec, res))
        if res.outcome != PROCEED:
            raise Replayed(execute.replayed(spec, res))
        a = execute.attempt_of(spec, res)
        self._spec, self._attempt = spec, a
        self._hb = execute.start_heartbeats(self.client, spec, a)
        return a

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self._finish(exc)

    def _finish(self, exc: Optional[BaseException]) -> Optional[Outcome]:
        spec, a, hb = self._spec, self._attempt, self._hb
        assert spec is not None and a is not None and hb is not None, "the guard was not entered"
        self._spec = self._attempt = self._hb = None
        hb.stop()
        if exc is None:
            return execute.finish_ok(self.client, spec, a, execute.Done(a.result, a.external_ref))
        if isinstance(exc, Exception):
            execute.finish_failed(self.client, spec, a, exc)  # raises exc after recording it
        return None  # KeyboardInterrupt and the like pass through, nothing reported

    async def __aenter__(self) -> Attempt:
        spec = self.spec()
        res = await cancel.in_thread(self.executor(), execute.ask, self.client, spec)
        return await cancel.in_thread(self.executor(), self._entered, spec, res)

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if self._hb is not None:
            self._hb.end()
        await cancel.in_thread(self.executor(), self._finish, exc)


def guard(
    *,
    tool: str,
    key: Union[str, Callable[..., str]],
    effect: EffectOrDefault = "",
    params: Any = None,
    timeout: float = 0,
    reference: Union[str, Callable[..., str]] = "",
    agent: str = "",
    run_id: str = "",
    wait: float = 0,
    key_ttl: float = 0,
    compensate: Optional[Callable[[Attempt], Any]] = None,
    require_approval: bool = False,
    approval_wait: float = 0,
    frozen_wait: float = 0,
    retriable: execute.ExcTypes = (),
    unknown: execute.ExcTypes = (),
    not_done_statuses: Collection[int] = (),
    classify: Optional[Classifier] = None,
    serialize: Optional[Callable[[Any], Any]] = None,
    client: Optional[Client] = None,
) -> Guard:
    """Guards one side effect: the intent is recorded under ``key`` first,
    the code runs only when the ledger answers proceed, heartbeats keep its
    lease (``timeout`` seconds, default 300) alive from a background thread,
    and its outcome is reported, retried with backoff until it lands.

    As a decorator, ``key``, ``params`` and ``reference`` may be functions
    of the call's arguments (``key=lambda order_id, **_: arbiter.key("refund",
    order_id)``); ``params`` defaults to the arguments. As a context manager
    they are values, and the block records its result with
    ``attempt.record(result, external_ref=...)``.

    ``effect``: read_only, idempotent, keyed (the downstream honours the
    key) or unkeyed (the server's default). ``wait``: seconds to wait for
    another attempt that holds the action before InProgressError.
    ``key_ttl``: how long the downstream honours the key. ``compensate``:
    undoes the effect when an operator asks (returns the undoing's id).
    ``require_approval`` holds the first intent for a person;
    ``approval_wait`` waits for the decision (Prefer: wait); a new key of
    a tool a freeze holds waits the same way, for the lift
    (PendingApprovalError names the freezes in ``frozen_by``).
    ``frozen_wait``: seconds to wait out a freeze that holds an existing
    action back (outcome frozen: a retry, an approved action's first run, a
    compensation), asking again after each Retry-After, before FrozenError.
    What an exception of the function means (sdk/vectors.json "outcomes",
    see arbiter.outcomes): ``failed`` only when it proves the effect did
    not happen (NotDone; Retriable or a type in ``retriable``: may try
    again; a status in ``not_done_statuses``, say (400, 402, 404, 409, 422),
    read from the exception's ``status``/``status_code``/``code`` or its
    ``response``'s); ``outcome_unknown`` otherwise (timeouts, lost
    connections, Unknown or a type in ``unknown``, anything else).
    ``classify`` replaces the rule: exception → "failed",
    "failed_retriable" or "outcome_unknown". ``serialize`` turns a result
    that is not JSON (an SDK's response object) into the JSON the ledger
    saves; the call returns what was saved, as a replay does. Without it a
    result that is not JSON raises ResultNotSavedError (a TypeError) at the
    first call. ``client``: default arbiter.configure's, or one from
    ARBITER_URL and ARBITER_API_KEY.
    """
    return Guard(tool=tool, key=key, effect=effect, params=params, timeout=timeout, reference=reference, agent=agent,
                 run_id=run_id, wait=wait, key_ttl=key_ttl, compensate=compensate, require_approval=require_approval,
                 approval_wait=approval_wait, frozen_wait=frozen_wait, retriable=retriable, unknown=unknown,
                 not_done_statuses=not_done_statuses, classify=classify, serialize=serialize, client=client)


def _returned(out: Outcome) -> Any:
    if out.compensated:
        raise Compensated(out)
    return out.result


async def arun(client: Client, spec: Spec, fn: Callable[[Attempt], Awaitable[Any]],
               answer: Optional[EntryResult] = None, executor: Optional[Executor] = None) -> Outcome:
    """execute.run for a coroutine function: the requests run in threads of
    executor (None: the loop's default), fn on the event loop. When the
    lease is lost, fn's task is cancelled and the outcome is unknown. When
    the caller cancels, nothing more is waited for or retried: fn's task is
    cancelled and nothing is reported, and a report under way stops
    retrying (the action then times out, for a lookup or a person)."""
    res = answer if answer is not None else await cancel.in_thread(executor, execute.ask, client, spec)
    if res.outcome == COMPENSATE:
        comp = spec.compensate
        if comp is not None and inspect.iscoroutinefunction(comp):
            a = execute.attempt_of(spec, res)
            return await _run_async(client, spec, a, comp, compensation=True, executor=executor)
        return await cancel.in_thread(executor, execute.compensate, client, spec, res)
    if res.outcome != PROCEED:
        return execute.replayed(spec, res)
    return await _run_async(client, spec, execute.attempt_of(spec, res), fn, compensation=False,
                            executor=executor)


async def _run_async(client: Client, spec: Spec, a: Attempt, fn: Callable[[Attempt], Awaitable[Any]],
                     compensation: bool, executor: Optional[Executor]) -> Outcome:
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(fn(a))
    hb = execute.start_heartbeats(client, spec, a, on_lost=lambda: _ignore(loop.call_soon_threadsafe(task.cancel)))
    try:
        try:
            value = await task
        finally:
            hb.end()
    except asyncio.CancelledError as cancelled:
        await cancel.in_thread(executor, hb.stop)
        if not a.lease_lost.is_set() or not task.cancelled():
            raise  # the caller cancelled: nothing is reported
        from .errors import OutcomeUnknownError

        raise OutcomeUnknownError(a.action_id, a.key, a.number, compensation=compensation) from cancelled
    except Exception as exc:
        await cancel.in_thread(executor, hb.stop)
        await cancel.in_thread(executor, execute.finish_failed, client, spec, a, exc, compensation)
        raise
    await cancel.in_thread(executor, hb.stop)
    if compensation:
        return await cancel.in_thread(executor, execute.finish_compensated, client, spec, a, value)
    return await cancel.in_thread(executor, execute.finish_ok, client, spec, a, value)


def _ignore(_: Any) -> None:
    pass
