"""Exponential backoff with full jitter, for outcome reports, intents
waiting for another attempt, heartbeats after a failed beat and polls."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """The n-th pause (n from 0) is drawn uniformly from [0, min(largest,
    first * 2**n)] seconds, so clients that failed together spread out
    instead of retrying in step (sdk/vectors.json)."""

    first: float = 0.2
    largest: float = 10.0

    def bound(self, n: int) -> float:
        b = self.first
        for _ in range(n):
            if b >= self.largest:
                break
            b *= 2
        return max(0.0, min(b, self.largest))

    def pause(self, n: int) -> float:
        return random.uniform(0.0, self.bound(n))
