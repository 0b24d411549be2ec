"""Heartbeats extend an attempt's lease from a background thread while its
function runs."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable, Optional

from .errors import APIError, ArbiterError, LeaseLostError
from .types import Entry

if TYPE_CHECKING:
    from .client import Client

DEFAULT_LEASE = 300.0  # the server's lease when an intent names none
FRACTION_OF_LEASE = 1 / 3  # sdk/vectors.json: heartbeat


class Heartbeats:
    """Sends a heartbeat for one attempt about every third of the lease
    until stopped. When Arbiter answers that the attempt may not continue
    (lease_lost, stale_attempt) it stops, sets ``lost`` and calls
    ``on_lost``. A beat that gets no answer is sent again soon, with
    backoff: the function keeps running through a short outage."""

    def __init__(
        self,
        client: Client,
        entry: Entry,
        lease: float,
        lost: threading.Event,
        on_lost: Optional[Callable[[], None]] = None,
    ) -> None:
        self._client = client
        self._entry = entry
        self._lease = lease
        self._every = lease * FRACTION_OF_LEASE
        self._stop = threading.Event()
        self.lost = lost
        self.lost_error: Optional[APIError] = None
        self._on_lost = on_lost
        self._thread = threading.Thread(target=self._loop, name=f"arbiter-heartbeat {entry.key}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        wait, fails = self._every, 0
        while not self._stop.wait(wait):
            began = time.monotonic()
            try:
                # A beat may take up to two thirds of the lease: slow is
                # still in time, as long as it lands before the lease ends.
                self._client._submit(self._entry, timeout=self._lease - self._every)
            except APIError as e:
                if e.code in ("lease_lost", "stale_attempt"):
                    self.lost_error = e
                    self.lost.set()
                    if self._on_lost is not None:
                        self._on_lost()
                    return
                fails += 1
                wait = min(self._client.backoff.pause(fails), self._every / 2)
            except ArbiterError:
                # No answer: try again soon rather than a whole third later;
                # the lease leaves room for a short outage, not for waiting
                # it out.
                fails += 1
                wait = min(self._client.backoff.pause(fails), self._every / 2)
            else:
                fails = 0
                wait = max(0.0, self._every - (time.monotonic() - began))

    def end(self) -> None:
        """Tells the heartbeats to stop, without waiting for a beat in
        flight: safe on an event loop, and done even if the stop() that
        follows in a thread never gets its turn."""
        self._stop.set()

    def stop(self) -> Optional[LeaseLostError]:
        """Ends the heartbeats, waits for a beat in flight, and says whether
        the lease was lost. May be called more than once."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        if self.lost_error is not None:
            return LeaseLostError(f"arbiter: the lease of this attempt was lost: {self.lost_error}")
        return None
