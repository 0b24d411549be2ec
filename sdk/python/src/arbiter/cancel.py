"""How async code runs the blocking requests: in a Pool of threads its
owner (an AsyncClient, a Worker, a guarded tool of an adapter) holds, never
on the event loop's default executor; and how a cancelled await reaches
the thread doing its requests: the thread stops waiting and retrying
between attempts (a request already sent is never abandoned half-way, nor
its answer misreported), so a cancelled call frees its thread as soon as
the request in flight returns."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Callable, Optional, TypeVar

from .errors import ArbiterError

__all__ = ["Pool", "Stopped", "in_thread", "sleep", "stopped"]

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


MAX_WORKERS = 8  # the default bound of a pool: an AsyncClient's, a guard's, a tool's


class Pool:
    """The bounded threads of one owner (``name`` says which in errors,
    ``thread_name`` prefixes its threads' names): at most ``max_workers`` of its calls run at once, the
    others wait their turn in its queue, and none takes a thread of the
    host application's default executor. ``close()`` ends it: what is
    under way and queued finishes, later calls raise ArbiterError."""

    def __init__(self, name: str, max_workers: int, thread_name: str) -> None:
        if max_workers < 1:
            raise ValueError(f"arbiter: {name}: max_workers must be at least 1, not {max_workers}")
        self.name = name
        self.max_workers = max_workers
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=thread_name)
        self._closed = False

    def executor(self) -> ThreadPoolExecutor:
        """The pool's executor, for arbiter.guard's async paths; raises
        ArbiterError once closed."""
        if self._closed:
            raise ArbiterError(f"arbiter: the {self.name} is closed")
        return self._executor

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """fn(*args, **kwargs) in one of the pool's threads (in_thread):
        cancelling the await tells fn's retry loops to stop."""
        return await in_thread(self.executor(), fn, *args, **kwargs)

    def close(self) -> None:
        """Ends the pool without waiting. May be called more than once."""
        self._closed = True
        self._executor.shutdown(wait=False)
