"""A clock for the sandbox: the reference latency profile's minutes as real seconds.

The Clock turns profile minutes into real seconds at a speed factor (60 = one profile minute
per real second) with a small seeded jitter, so a run is reproducible for a given seed.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import defaultdict
from typing import Iterable

from rltui.latency import OPERATION_KEYS, REFERENCE_FILE, LatencyProfile, Operation

__all__ = ["Clock", "LatencyProfile", "Operation", "OPERATION_KEYS", "REFERENCE_FILE"]


class Clock:
    """Profile minutes -> real seconds at `speed` (60 = a profile minute per real second)."""

    def __init__(self, profile: LatencyProfile, speed: float = 60.0, seed: int = 0, jitter: float = 0.1) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        if not 0.0 <= jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {jitter}")
        self.profile = profile
        self.speed = speed
        self.seed = seed
        self.jitter = jitter
        self._counts: dict[str, int] = defaultdict(int)

    def _factor(self, key: str) -> float:
        # The n-th draw for a key depends on (seed, key, n) only, not on other keys' draws.
        n = self._counts[key]
        self._counts[key] = n + 1
        digest = hashlib.blake2b(f"{self.seed}\0{key}\0{n}".encode(), digest_size=8).digest()
        unit = int.from_bytes(digest, "big") / 2**64
        return 1.0 + self.jitter * (2.0 * unit - 1.0)

    def seconds(self, key: str) -> float:
        """Real seconds for one occurrence of operation `key` (each call is a new draw)."""
        return self.profile.minutes(key) * 60.0 / self.speed * self._factor(key)

    def offsets(self, keys: Iterable[str]) -> list[float]:
        """Real seconds from a common start for milestones given 'after start' (xpk_*), never decreasing."""
        out: list[float] = []
        for key in keys:
            out.append(max(self.seconds(key), out[-1] if out else 0.0))
        return out

    async def sleep(self, key: str) -> float:
        delay = self.seconds(key)
        await asyncio.sleep(delay)
        return delay

    def now(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return f"Clock(speed={self.speed}, seed={self.seed}, jitter={self.jitter}, profile={self.profile.path})"
