"""The AsyncClient keeps to its own bounded pool of threads, and a cancelled
await stops waiting and retrying: an async fleet riding out an outage does
not starve its host application's default executor."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List

import pytest

import arbiter
from conftest import types_of, wait_status


class Holder:
    """A server that takes requests and never answers them, as an upstream
    that hangs during an outage does."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.conns: List[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def held(self) -> int:
        with self._lock:
            return len(self.conns)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.conns.append(conn)

    def close(self) -> None:
        self._sock.close()
        with self._lock:
            for c in self.conns:
                c.close()


def test_held_requests_stay_off_the_default_executor() -> None:
    holder = Holder()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
        ac = arbiter.AsyncClient(holder.url, "ak_whatever", timeout=10, max_workers=3)
        calls = [asyncio.ensure_future(ac.health()) for _ in range(8)]
        try:
            for _ in range(100):
                if holder.held() >= 3:
                    break
                await asyncio.sleep(0.02)
            # The host's own work still runs at once beside them.
            assert await asyncio.wait_for(loop.run_in_executor(None, lambda: "ran"), 2) == "ran"
            await asyncio.sleep(0.2)
            assert holder.held() == 3  # no more at once than the client's bound
            assert not any(c.done() for c in calls)
        finally:
            for c in calls:
                c.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
            holder.close()
            await ac.aclose()

    asyncio.run(main())


def test_async_guard_on_a_sync_client_stays_off_the_default_executor() -> None:
    # @guard on an async def, with a plain Client and no AsyncClient: its
    # requests run in the guard's own bounded pool, not the loop's.
    holder = Holder()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
        c = arbiter.Client(holder.url, "ak_whatever", timeout=10)

        @arbiter.guard(tool="payments.refund", key=lambda order: arbiter.key("refund", order), client=c)
        async def refund(order: str) -> str:
            return "never: the intent is not answered"

        calls = [asyncio.ensure_future(refund(f"o{i}")) for i in range(12)]
        try:
            for _ in range(100):
                if holder.held() >= arbiter.cancel.MAX_WORKERS:
                    break
                await asyncio.sleep(0.02)
            assert await asyncio.wait_for(loop.run_in_executor(None, lambda: "ran"), 2) == "ran"
            await asyncio.sleep(0.2)
            assert holder.held() == arbiter.cancel.MAX_WORKERS  # the guard's bound, not the calls'
            assert not any(x.done() for x in calls)
        finally:
            for x in calls:
                x.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
            holder.close()

    asyncio.run(main())


def test_closed_client_refuses_calls() -> None:
    async def main() -> None:
        async with arbiter.AsyncClient("http://127.0.0.1:9", "ak_whatever", max_workers=1) as ac:
            pass
        with pytest.raises(arbiter.ArbiterError, match="closed"):
            await ac.health()
        with pytest.raises(arbiter.ArbiterError, match="closed"):
            ac.guard(key="k", tool="t")
        await ac.aclose()  # again: nothing to do

    asyncio.run(main())
    with pytest.raises(ValueError):
        arbiter.AsyncClient("http://127.0.0.1:9", "ak_whatever", max_workers=0)


def test_cancelling_a_call_ends_its_report_retries(proxy, agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("refund", uniq)

    async def main() -> None:
        async with arbiter.AsyncClient(proxy.url, os.environ["ARBITER_AGENT_KEY"], timeout=10, report_budget=60,
                                       backoff=arbiter.Backoff(0.02, 0.05)) as ac:
            async def refund(_: arbiter.Attempt) -> str:
                proxy.unavailable(True)  # Arbiter goes away just after the effect
                return "done"

            call = asyncio.ensure_future(ac.run(arbiter.Spec(key=k, tool="payments.refund", timeout=1), refund))
            for _ in range(500):
                if proxy.refused >= 3:
                    break
                await asyncio.sleep(0.01)
            assert proxy.refused >= 3, "the report was not retried"
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await asyncio.sleep(0.3)  # the request in flight returns
            sent = proxy.refused
            await asyncio.sleep(1)
            assert proxy.refused == sent, "the report is still retried after the call was cancelled"
        proxy.unavailable(False)

    asyncio.run(main())
    # Nothing was recorded for the effect: the action times out for a
    # lookup or a person, never reported failed.
    a = wait_status(agent, k, "timed_out")
    assert types_of(agent, a.id) == ["intent", "timed_out"]


def test_cancelling_a_call_ends_its_wait_for_another_attempt(proxy, agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("refund", uniq)
    first = agent.submit(arbiter.Entry(key=k, type="intent", tool="payments.refund", timeout=30))
    assert first.outcome == "proceed"  # another attempt holds the action

    async def main() -> None:
        async with arbiter.AsyncClient(proxy.url, os.environ["ARBITER_AGENT_KEY"], timeout=10,
                                       backoff=arbiter.Backoff(0.02, 0.05)) as ac:
            call = asyncio.ensure_future(
                ac.run(arbiter.Spec(key=k, tool="payments.refund", wait=60), lambda _: pytest.fail("ran")))
            for _ in range(500):
                if proxy.passed >= 3:
                    break
                await asyncio.sleep(0.01)
            assert proxy.passed >= 3, "the intent was not asked again"
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await asyncio.sleep(0.3)
            sent = proxy.passed
            await asyncio.sleep(1)
            assert proxy.passed == sent, "the intent is still asked again after the call was cancelled"

    asyncio.run(main())
    assert agent.action_by_key(k).status == "in_progress"
