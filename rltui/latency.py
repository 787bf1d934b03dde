"""The reference latency profile: real-world minutes of every cloud operation, with sources.

The plan's expected durations and ETA come from it, and so do the sandbox's durations
(scaled by its speed). Pure: standard library only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

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
    "gke_auto_upgrade",
    "gke_set_labels",
    "node_pool_recreate",
    "peering_release_lag",
    "gke_cluster_delete",
    "gke_node_pool_delete",
    "gke_system_pool_create",
    "spot_shutdown",
    "node_monitor_grace",
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
    def load(cls, path: Path | None = None) -> LatencyProfile:
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


def reference_seconds(key: str, scale: float = 1.0) -> float:
    """The reference duration of `key` in real seconds, times `scale` (a sandbox's 1/speed)."""
    return _reference().minutes(key) * 60.0 * scale


_REFERENCE: LatencyProfile | None = None


def _reference() -> LatencyProfile:
    global _REFERENCE
    if _REFERENCE is None:
        _REFERENCE = LatencyProfile.load()
    return _REFERENCE
