"""How a cancelled await reaches the thread doing its requests: the thread
stops waiting and retrying between attempts (a request already sent is
never abandoned half-way, nor its answer misreported), so a cancelled call
frees its thread as soon as the request in flight returns."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from concurrent.futures import Executor
from typing import Any, Callable, Optional, TypeVar

from .errors import ArbiterError

__all__ = ["Stopped", "in_thread", "sleep", "stopped"]

T = TypeVar("T")

# Set in a thread that runs for an await: the event is set once the await
# is cancelled.
_stop: contextvars.ContextVar[Optional[threading.Event]] = contextvars.ContextVar("arbiter_stop", default=None)


class Stopped(ArbiterError):
    """The await this work ran for was cancelled: nobody waits for its
    answer any more."""


def stopped() -> bool:
    """Whether the await this thread runs for was cancelled."""
    ev = _stop.get()
    return ev is not None and ev.is_set()


def sleep(seconds: float) -> bool:
    """Pauses between attempts; returns True, at once, when the await this
    thread runs for is cancelled (the caller stops retrying)."""
    ev = _stop.get()
    if ev is None:
        time.sleep(seconds)
        return False
    return ev.wait(seconds)


async def in_thread(executor: Optional[Executor], fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs) in a thread of executor (None: the loop's
    default), with the caller's context variables as asyncio.to_thread
    passes them. Cancelling the await tells fn's retry loops to stop."""
    loop = asyncio.get_running_loop()
    ev = threading.Event()
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, _stoppable, ev, functools.partial(fn, *args, **kwargs))
    try:
        return await loop.run_in_executor(executor, call)
    except asyncio.CancelledError:
        ev.set()
        raise


def _stoppable(ev: threading.Event, fn: Callable[[], T]) -> T:
    _stop.set(ev)
    return fn()
