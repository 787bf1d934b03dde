"""The data tables env.sh is checked against: Managed Lustre's capacity tiers, the GPU device
types xpk knows, the 70B config's model parallelism. Limits change: they are kept here, and only
here (rltui/config.py re-exports them). Pure core: the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LustreTier:
    """Allowed capacities for one per-unit storage throughput tier (MB/s per TiB)."""

    throughput: int
    min_gib: int
    max_gib: int | None
    # (up to and including this capacity, capacities must be a multiple of this step)
    steps: tuple[tuple[int | None, int], ...]

    def step_for(self, capacity: int) -> int:
        for upper, step in self.steps:
            if upper is None or capacity <= upper:
                return step
        return self.steps[-1][1]

    def check(self, capacity: int) -> str | None:
        if capacity < self.min_gib:
            return f"at least {self.min_gib} GiB for throughput tier {self.throughput}"
        if self.max_gib is not None and capacity > self.max_gib:
            return f"at most {self.max_gib} GiB for throughput tier {self.throughput}"
        step = self.step_for(capacity)
        if capacity % step:
            lower = capacity - capacity % step
            nearest = [c for c in (lower, lower + step) if c >= self.min_gib]
            return (f"must be a multiple of {step} GiB for throughput tier {self.throughput}"
                    f" (nearest: {' or '.join(str(c) for c in nearest)})")
        return None

    def allows(self, capacity: int) -> bool:
        return self.check(capacity) is None

    def describe(self) -> str:
        parts = [f"min {self.min_gib}"]
        for upper, step in self.steps:
            parts.append(f"step {step}" + (f" up to {upper}" if upper else ""))
        if self.max_gib:
            parts.append(f"max {self.max_gib}")
        return ", ".join(parts)


# Managed Lustre docs, "Performance tiers" (2026): the one table of allowed capacities.
LUSTRE_TIERS: dict[int, LustreTier] = {
    1000: LustreTier(1000, 9_000, 10_008_000, ((1_530_000, 9_000), (None, 72_000))),
    500: LustreTier(500, 18_000, 20_016_000, ((3_060_000, 18_000), (None, 144_000))),
    250: LustreTier(250, 36_000, 40_032_000, ((6_120_000, 36_000), (None, 288_000))),
    125: LustreTier(125, 72_000, 12_240_000, ((None, 72_000),)),
}


@dataclass(frozen=True)
class DeviceType:
    """What an xpk --device-type means on GKE."""

    name: str
    gpus_per_node: int
    accelerator: str  # the node label cloud.google.com/gke-accelerator
    machine_type: str


DEVICE_TYPES: dict[str, DeviceType] = {
    d.name: d
    for d in (
        DeviceType("b200-8", 8, "nvidia-b200", "a4-highgpu-8g"),
        DeviceType("h200-141gb-8", 8, "nvidia-h200-141gb", "a3-ultragpu-8g"),
        DeviceType("h100-mega-80gb-8", 8, "nvidia-h100-mega-80gb", "a3-megagpu-8g"),
        DeviceType("h100-80gb-8", 8, "nvidia-h100-80gb", "a3-highgpu-8g"),
        DeviceType("gb200-4", 4, "nvidia-gb200", "a4x-highgpu-4g"),
    )
}

# Model parallelism of grpo_math_70B_megatron.yaml at NeMo-RL v0.4.0 (TP x PP x CP).
MODEL_PARALLEL_SIZE = 4 * 4 * 1
