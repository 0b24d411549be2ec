"""``arbiter.guard``: a guarded side effect as a decorator or a context
manager, for plain and async code."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Optional, Type, TypeVar, Union

from . import execute
from .errors import ArbiterError, Compensated, Replayed
from .execute import Attempt, Outcome, Spec
from .types import COMPENSATE, PROCEED, EntryResult

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Guard", "guard", "configure", "default_client"]

F = TypeVar("F", bound=Callable[..., Any])

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
        effect: str = "",
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
        retriable: execute.ExcTypes = (),
        unknown: execute.ExcTypes = (),
        client: Optional[Client] = None,
    ) -> None:
        self._key, self._params, self._reference = key, params, reference
        self._options: Dict[str, Any] = dict(
            tool=tool, effect=effect, timeout=timeout, agent=agent, run_id=run_id, wait=wait, key_ttl=key_ttl,
            compensate=compensate, require_approval=require_approval, approval_wait=approval_wait,
            retriable=tuple(retriable), unknown=tuple(unknown))
        self._client = client
        # State of one use as a context manager.
        self._attempt: Optional[Attempt] = None
        self._spec: Optional[Spec] = None
        self._hb: Optional[execute.Heartbeats] = None

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

    def __call__(self, fn: F) -> F:
        """Decorates fn so that each call is guarded: the key (and by
        default the params) come from the call's arguments. A parameter
        named ``attempt`` receives the Attempt (its key is the downstream's
        idempotency key) and is not part of the params. A call returns fn's
        result, or on a replay the saved result without calling fn; raises
        Compensated when the call undid the effect instead."""
        sig = inspect.signature(fn)
        takes_attempt = "attempt" in sig.parameters

        def arguments(args: Any, kwargs: Any) -> Dict[str, Any]:
            bound = sig.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            out = dict(bound.arguments)
            out.pop("attempt", None)
            return out

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                def call(a: Attempt) -> Awaitable[Any]:
                    return fn(*args, **kwargs, **({"attempt": a} if takes_attempt else {}))

                out = await arun(self.client, self.spec(arguments(args, kwargs)), call)
                return _returned(out)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            def call(a: Attempt) -> Any:
                return fn(*args, **kwargs, **({"attempt": a} if takes_attempt else {}))

            return _returned(execute.run(self.client, self.spec(arguments(args, kwargs)), call))

        return wrapper  # type: ignore[return-value]

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
        res = await asyncio.to_thread(execute.ask, self.client, spec)
        return await asyncio.to_thread(self._entered, spec, res)

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await asyncio.to_thread(self._finish, exc)


def guard(
    *,
    tool: str,
    key: Union[str, Callable[..., str]],
    effect: str = "",
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
    retriable: execute.ExcTypes = (),
    unknown: execute.ExcTypes = (),
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
    ``approval_wait`` waits for the decision (Prefer: wait).
    ``retriable`` and ``unknown``: exception types that mean "did not
    happen, may try again" and "may have happened" (see Retriable and
    Unknown). ``client``: default arbiter.configure's, or one from
    ARBITER_URL and ARBITER_API_KEY.
    """
    return Guard(tool=tool, key=key, effect=effect, params=params, timeout=timeout, reference=reference, agent=agent,
                 run_id=run_id, wait=wait, key_ttl=key_ttl, compensate=compensate, require_approval=require_approval,
                 approval_wait=approval_wait, retriable=retriable, unknown=unknown, client=client)


def _returned(out: Outcome) -> Any:
    if out.compensated:
        raise Compensated(out)
    return out.result


async def arun(client: Client, spec: Spec, fn: Callable[[Attempt], Awaitable[Any]],
               answer: Optional[EntryResult] = None) -> Outcome:
    """execute.run for a coroutine function: the requests run in threads,
    fn on the event loop. When the lease is lost, fn's task is cancelled and
    the outcome is unknown."""
    res = answer if answer is not None else await asyncio.to_thread(execute.ask, client, spec)
    if res.outcome == COMPENSATE:
        comp = spec.compensate
        if comp is not None and inspect.iscoroutinefunction(comp):
            a = execute.attempt_of(spec, res)
            return await _run_async(client, spec, a, comp, compensation=True)
        return await asyncio.to_thread(execute.compensate, client, spec, res)
    if res.outcome != PROCEED:
        return execute.replayed(spec, res)
    return await _run_async(client, spec, execute.attempt_of(spec, res), fn, compensation=False)


async def _run_async(client: Client, spec: Spec, a: Attempt, fn: Callable[[Attempt], Awaitable[Any]],
                     compensation: bool) -> Outcome:
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(fn(a))
    hb = execute.start_heartbeats(client, spec, a, on_lost=lambda: loop.call_soon_threadsafe(task.cancel))
    try:
        value = await task
    except asyncio.CancelledError as cancelled:
        await asyncio.to_thread(hb.stop)
        if not a.lease_lost.is_set() or not task.cancelled():
            raise  # the caller cancelled: nothing is reported
        from .errors import OutcomeUnknownError

        raise OutcomeUnknownError(a.action_id, a.key, a.number, compensation=compensation) from cancelled
    except Exception as exc:
        await asyncio.to_thread(hb.stop)
        await asyncio.to_thread(execute.finish_failed, client, spec, a, exc, compensation)
        raise
    await asyncio.to_thread(hb.stop)
    if compensation:
        return await asyncio.to_thread(execute.finish_compensated, client, spec, a, value)
    return await asyncio.to_thread(execute.finish_ok, client, spec, a, value)
