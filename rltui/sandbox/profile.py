"""How long each emulated cloud operation takes: the reference latency profile and a scaled clock.

The profile holds real-world minutes with their sources; the Clock turns them into real
seconds at a speed factor (60 = one profile minute per real second) with a small seeded jitter,
so a run is reproducible for a given seed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

REFERENCE_FILE = Path(__file__).with_name("latency_profile.json")

# The stable keys every profile file must define, in the codelab's order.
OPERATION_KEYS: tuple[str, ...] = (
    "enable_apis",
    "xpk_networks",
    "xpk_control_plane",
    "xpk_node_pool",
    "xpk_done",
    "addon_update",
    "address_create",
    "peering_connect",
    "lustre_create",
    "lustre_delete",
    "k8s_apply",
    "image_pull",
    "pod_start",
    "raycluster_delete",
    "xpk_delete",
    "peering_delete",
    "address_delete",
    "spot_replace",
)


@dataclass(frozen=True)
class Operation:
    minutes: float
    source: str
    what: str


@dataclass(frozen=True)
class LatencyProfile:
    operations: dict[str, Operation]
    path: Path

    @classmethod
    def load(cls, path: Path | None = None) -> "LatencyProfile":
        """Read a profile file (default: the packaged reference); ValueError names file and key."""
        path = Path(path) if path is not None else REFERENCE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read latency profile: {exc}") from exc
        ops = data.get("operations") if isinstance(data, dict) else None
        if not isinstance(ops, dict):
            raise ValueError(f"{path}: key 'operations' must be an object of operation -> minutes")
        unknown = sorted(set(ops) - set(OPERATION_KEYS))
        if unknown:
            raise ValueError(f"{path}: unknown operation key {unknown[0]!r} (known: {', '.join(OPERATION_KEYS)})")
        parsed: dict[str, Operation] = {}
        for key in OPERATION_KEYS:
            parsed[key] = _parse_operation(path, key, ops.get(key))
        return cls(parsed, path)

    def minutes(self, key: str) -> float:
        return self.operations[key].minutes


def _parse_operation(path: Path, key: str, entry: object) -> Operation:
    if entry is None:
        raise ValueError(f"{path}: operation {key!r} is missing")
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: operation {key!r} must be an object with minutes, source, what")
    minutes = entry.get("minutes")
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes < 0:
        raise ValueError(f"{path}: operation {key!r}: 'minutes' must be a number >= 0, got {minutes!r}")
    for field in ("source", "what"):
        if not isinstance(entry.get(field), str) or not entry[field].strip():
            raise ValueError(f"{path}: operation {key!r}: {field!r} must be a non-empty string")
    return Operation(float(minutes), entry["source"], entry["what"])


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
