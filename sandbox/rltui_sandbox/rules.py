"""The sandbox's own copy of Google's rules: Managed Lustre capacity tiers and name formats.

The sandbox imitates Google, not rltui: it never reads rltui's tables (rltui.config), so a
mistake there shows up as a refusal here instead of being agreed with. Each rule names the
source it was copied from (read 2026-12-01; none was tried against a live project).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class LustreTier:
    """Allowed capacities of one per-unit storage throughput tier (MB/s per TiB)."""

    throughput: int
    min_gib: int
    max_gib: int
    # (up to and including this capacity, capacities are multiples of this step); None: above
    steps: tuple[tuple[int | None, int], ...]

    def step_for(self, capacity: int) -> int:
        for upper, step in self.steps:
            if upper is None or capacity <= upper:
                return step
        return self.steps[-1][1]

    def check(self, capacity: int) -> str | None:
        """Why `capacity` is not allowed (the sandbox's wording), or None."""
        if capacity < self.min_gib:
            return f"at least {self.min_gib} GiB for throughput tier {self.throughput}"
        if capacity > self.max_gib:
            return f"at most {self.max_gib} GiB for throughput tier {self.throughput}"
        step = self.step_for(capacity)
        if capacity % step:
            lower = capacity - capacity % step
            nearest = [c for c in (lower, lower + step) if self.min_gib <= c <= self.max_gib]
            return (f"must be a multiple of {step} GiB for throughput tier {self.throughput}"
                    f" (nearest: {' or '.join(str(c) for c in nearest)})")
        return None

    def allows(self, capacity: int) -> bool:
        return self.check(capacity) is None


# Managed Lustre "Performance tiers" (docs.cloud.google.com/managed-lustre/docs/performance-tiers,
# the same table in .../docs/increase-capacity): min, max and step per tier; the step grows above
# a threshold. The Dynamic tier (per_unit_storage_throughput 0 with dynamic_tier_options,
# 472,000-84,016,000 GiB in steps of 472,000) is not emulated: the sandbox refuses throughput 0.
LUSTRE_TIERS: dict[int, LustreTier] = {
    1000: LustreTier(1000, 9_000, 10_008_000, ((1_530_000, 9_000), (None, 72_000))),
    500: LustreTier(500, 18_000, 20_016_000, ((3_060_000, 18_000), (None, 144_000))),
    250: LustreTier(250, 36_000, 40_032_000, ((6_120_000, 36_000), (None, 288_000))),
    125: LustreTier(125, 72_000, 12_240_000, ((None, 72_000),)),
}

# google-cloud-lustre 0.4.3, CreateInstanceRequest.instance_id: lowercase letters, numbers and
# hyphens; starts with a letter; 1-63 characters; ends with a number or a letter.
LUSTRE_INSTANCE_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
# google-cloud-lustre 0.4.3, Instance.filesystem: "eight characters or less and can only contain
# letters and numbers".
LUSTRE_FILESYSTEM = re.compile(r"^[A-Za-z0-9]{1,8}$")
# google-cloud-lustre 0.4.3, Instance.network: projects/{project_id}/global/networks/{network_name}.
NETWORK_PATH = re.compile(r"^projects/(?P<project>[^/]+)/global/networks/(?P<network>[^/]+)$")
# google-cloud-compute 1.56.0, Network.name (and every compute resource name): RFC 1035,
# 1-63 characters matching [a-z]([-a-z0-9]*[a-z0-9])?
GCE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# google-cloud-container 2.67.0, Cluster.name: up to 40 characters, lowercase letters, numbers and
# hyphens only, starts with a letter, ends with a number or a letter.
GKE_CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
