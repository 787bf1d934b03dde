"""Deterministic transient faults: the n-th call on a channel fails or not, by seed alone.

Each channel (e.g. "grpc:Lustre/CreateInstance", "kube:POST", "xpk") has its own counter, so
the outcome of a call does not depend on how calls on other channels interleave with it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from typing import Sequence, TypeVar

T = TypeVar("T")


class Faults:
    """Fail a fraction `p` of calls per channel, reproducibly for a given `seed`."""

    def __init__(self, p: float = 0.0, seed: int = 0) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"fault probability must be between 0 and 1, got {p}")
        self.p = p
        self.seed = seed
        self._counts: dict[str, int] = defaultdict(int)
        self._forced: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def _draw(self, channel: str, salt: str = "") -> float:
        with self._lock:
            n = self._counts[channel]
            self._counts[channel] = n + 1
        digest = hashlib.blake2b(f"{self.seed}\0{channel}\0{n}\0{salt}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64

    def hit(self, channel: str) -> bool:
        """True when this call on `channel` should fail (transiently, for API channels)."""
        with self._lock:
            if self._forced[channel] > 0:
                self._forced[channel] -= 1
                return True
        if self.p <= 0.0:
            return False
        return self._draw(channel) < self.p

    def force(self, channel: str, times: int = 1) -> None:
        """Make the next `times` calls on `channel` fail whatever `p` is (tests, demos), e.g.
        "lustre:create-late": the next Lustre create's operation ends in error."""
        with self._lock:
            self._forced[channel] += times

    def choice(self, channel: str, options: Sequence[T]) -> T:
        """A deterministic pick among `options` (which error to raise), on its own counter."""
        return options[int(self._draw(channel + "#choice") * len(options))]

    def __repr__(self) -> str:
        return f"Faults(p={self.p}, seed={self.seed})"
