"""Kubernetes resource quantities ("500m", "64Gi") and what the scheduler charges a pod for:
each container's requests, its limits where it requests nothing."""

from __future__ import annotations

import re
from typing import Any

_SUFFIX = {"Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4, "Pi": 1024 ** 5,
           "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def quantity(value: Any) -> float:
    """A Kubernetes quantity ("500m", "64Gi", "8", 2) as a number of base units."""
    text = str(value).strip()
    match = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?\d+)?)([a-zA-Z]*)", text)
    if not match or match.group(2) not in ("", *_SUFFIX):
        raise ValueError(f"quantities must match the regular expression, got {text!r}")
    return float(match.group(1)) * _SUFFIX.get(match.group(2), 1)


def format_quantity(amount: float, binary: bool = False) -> str:
    """Canonical-ish form: memory as Gi/Mi/Ki when it divides evenly, CPU as cores or millicores."""
    if binary:
        for suffix in ("Ti", "Gi", "Mi", "Ki"):
            unit = _SUFFIX[suffix]
            if amount >= unit and amount % unit == 0:
                return f"{int(amount // unit)}{suffix}"
        return str(int(amount))
    if amount == int(amount):
        return str(int(amount))
    return f"{round(amount * 1000)}m"


def pod_requests(pod: dict) -> dict[str, float]:
    """What the scheduler charges a pod: each container's requests, limits where no request."""
    total: dict[str, float] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        wanted = dict(resources.get("limits") or {})
        wanted.update(resources.get("requests") or {})
        for name, value in wanted.items():
            total[name] = total.get(name, 0.0) + quantity(value)
    return total
