"""The sandbox's `--capacity` knob: GPU capacity of a kind (Spot, on-demand) the zone does not have,
so a GPU node pool asking for it fails as GKE's does when Compute Engine is out of stock.

GKE makes the pool and keeps it in an error state while its managed instance group waits for
VMs (hashicorp/terraform-provider-google PR 10121: "GCP behavior is to create a node pool in error
state and keep waiting for resources"); the create's operation ends with Compute Engine's words,
"Google Compute Engine: Not all instances running in IGM after <d>s. Expected N, running 0,
transitioning N. Current errors: [GCE_STOCKOUT]: Instance '<vm>' creation failed: The zone
'projects/<p>/zones/<z>' does not have enough resources available to fulfill the request.
'(resource type:compute)'." (that PR; akka/akka-core 32992; tranquilitybase-io/tb-gcp 589), and
container_v1 StatusCondition.Code has GCE_STOCKOUT. **Not verified**: the operation's canonical
error code (the sandbox gives RESOURCE_EXHAUSTED, as for a quota failure: world_gke_pools) and
whether GKE keeps retrying later (the sandbox's pool stays ERROR). Flex-start has no pool here.
"""

from __future__ import annotations

from typing import Any

from google.cloud import container_v1

from rltui_sandbox.world_model import pool_vm

KINDS = ("spot", "on-demand")


def parse_knob(item: str) -> str:
    """`--capacity KIND=unavailable` -> KIND; ValueError naming the flag for anything else."""
    kind, _, state = item.partition("=")
    if kind.strip() not in KINDS or state.strip() != "unavailable":
        raise ValueError(f"--capacity: {item!r}: use KIND=unavailable, KIND one of {', '.join(KINDS)}"
                         " (flex-start has no pool in the sandbox)")
    return kind.strip()


def pool_kind(np: container_v1.NodePool) -> str:
    """The capacity a GPU pool asks for ("" for a pool without GPUs)."""
    if not np.config.accelerators:
        return ""
    return "spot" if np.config.spot or np.config.preemptible else "on-demand"


def out_of_stock(world: Any, np: container_v1.NodePool) -> bool:
    kind = pool_kind(np)
    return bool(kind) and kind in world.unavailable_capacity


def fail_for_stockout(world: Any, project: str, location: str, cluster: str, np: Any,
                      operation: str) -> None:
    """End the pool's create as a stockout (see the module docstring)."""
    zone = np.locations[0] if np.locations else location
    message = (f"Instance '{pool_vm(cluster, np.name)}' creation failed: The zone 'projects/{project}/zones/{zone}'"
               " does not have enough resources available to fulfill the request.  '(resource type:compute)'.")
    world._fail_pool(project, location, cluster, np, operation, "Google Compute Engine",
                     container_v1.StatusCondition.Code.GCE_STOCKOUT, message, canonical_code=8,
                     detail_condition=False, error_detail=True)
