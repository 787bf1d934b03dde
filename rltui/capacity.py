"""CAPACITY in env.sh: how the GPU nodes are obtained, and the xpk flags that ask for it.

xpk 1.16.0 takes exactly one of `--spot`, `--flex`, `--reservation=NAME`, `--on-demand`
(src/xpk/core/capacity.py get_capacity_type: more than one is "ERROR: User specified more than
one of the following arguments"), and its a4 blueprint (core/blueprint/blueprint_generator.py
generate_a4_blueprint) turns each into the GPU pool's settings: Spot `spot: true`; a reservation
`reservation_affinity {consume_reservation_type: SPECIFIC_RESERVATION, specific_reservations:
[{name}]}`; on demand neither (`NO_RESERVATION`); flex-start `get_dws_flex_start()` (a queued-
provisioning pool with `autoscaling_total_min_nodes: 0` and no static nodes).

Flex-start is refused: on xpk's path its nodes come only through a ProvisioningRequest that
Kueue makes for an admitted workload (xpk core/kueue_manager.py), and a KubeRay RayCluster's
workers reaching such a pool was not built or tried here, so rltui does not offer it yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SPOT, FLEX_START, ON_DEMAND, RESERVATION = "spot", "flex-start", "on-demand", "reservation"
MODES = (SPOT, FLEX_START, f"{RESERVATION}:NAME", ON_DEMAND)
# A Compute Engine resource name (RFC 1035, 1-63 characters): what `reservations.get` takes.
RESERVATION_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Capacity:
    mode: str                 # SPOT, FLEX_START, ON_DEMAND or RESERVATION
    reservation: str = ""     # the reservation's name, for RESERVATION only

    @property
    def preemptible(self) -> bool:
        """Only Spot nodes are preempted by Compute Engine; the other modes' nodes are not."""
        return self.mode == SPOT

    def xpk_flags(self) -> list[str]:
        """The one xpk 1.16.0 flag of the mode (tests/data/xpk_1.16.0_flags.json)."""
        if self.mode == RESERVATION:
            return [f"--reservation={self.reservation}"]
        return {SPOT: ["--spot"], FLEX_START: ["--flex"], ON_DEMAND: ["--on-demand"]}[self.mode]

    def words(self) -> str:
        return f"reservation {self.reservation}" if self.mode == RESERVATION else \
            {SPOT: "Spot", FLEX_START: "flex-start", ON_DEMAND: "on-demand"}[self.mode]

    def __str__(self) -> str:
        return f"{RESERVATION}:{self.reservation}" if self.mode == RESERVATION else self.mode


def parse_capacity(value: str) -> Capacity:
    """CAPACITY's value as a Capacity; ValueError with the message a user reads."""
    v = value.strip()
    if v in (SPOT, ON_DEMAND, FLEX_START):
        return Capacity(v)
    if v.startswith(f"{RESERVATION}:"):
        name = v.split(":", 1)[1]
        if not RESERVATION_NAME.match(name):
            raise ValueError(f"{name!r} is not a reservation name (1-63 lowercase letters, digits"
                             " or hyphens, starting with a letter): use reservation:NAME")
        return Capacity(RESERVATION, name)
    raise ValueError(f"{v!r} is not a capacity; use one of {', '.join(MODES)}")


def capacity_problem(value: str) -> str | None:
    """CAPACITY's message for env.sh, or None when rltui can use it."""
    try:
        cap = parse_capacity(value)
    except ValueError as exc:
        return str(exc)
    if cap.mode == FLEX_START:
        return ("flex-start is not supported by rltui yet (xpk's flex-start pool gets nodes only"
                " through Kueue's ProvisioningRequests, which rltui's RayCluster does not make):"
                " use spot, on-demand or reservation:NAME")
    return None
