"""Names xpk 1.16.0 derives, shared by the World and the fake xpk (standard library only, so
the fake tool starts fast). Source: AI-Hypercomputer/xpk 1.16.0 src/xpk/utils/objects.py
hash_string, src/xpk/commands/cluster_gcluster.py get_unique_name / get_prefix_path,
src/xpk/core/gcloud_context.py zone_to_region; reimplemented from the algorithm."""

from __future__ import annotations

import hashlib

# --device-type -> the machine type of xpk's Cluster Toolkit blueprint (core/system_characteristics.py).
TOOLKIT_MACHINE_TYPES = {"b200-8": "a4-highgpu-8g"}


def hash_string(text: str, length: int) -> str:
    """The SHA-256 of `text` as an integer, written in base 36 (0-9 then a-z), most significant
    digit first, keeping the `length` least significant digits, zero-padded on the left."""
    value = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out: list[str] = []
    while value and len(out) < length:
        value, rest = divmod(value, 36)
        out.append(digits[rest])
    return "".join(reversed(out)).rjust(length, "0")


def zone_to_region(zone: str) -> str:
    """us-east1-b -> us-east1 (a region stays itself)."""
    parts = zone.split("-")
    return "-".join(parts[:2]) if len(parts) == 3 else zone


def unique_name(project: str, region: str, cluster: str) -> str:
    """The deployment and blueprint name: `<cluster>-<h5>`, h5 the 5-character hash_string of
    `<project>-<region>-<cluster>` lowercased."""
    return f"{cluster}-{hash_string(f'{project}-{region}-{cluster}'.lower(), 5)}"


def prefix_path(project: str, region: str) -> str:
    """The per-project-and-region folder under blueprints/ and gcluster-out/."""
    return f"{project}-{region}".lower()
