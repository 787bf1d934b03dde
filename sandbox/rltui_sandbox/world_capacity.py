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

import uuid
from typing import Any

from google.cloud import container_v1

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
    from rltui_sandbox.grpc_util import ResourceExhausted

    zone = np.locations[0] if np.locations else location
    vm = f"gke-{cluster}-{np.name}"[:40].rstrip("-") + "-" + uuid.uuid4().hex[:8] + "-" + uuid.uuid4().hex[:4]
    message = (f"Instance '{vm}' creation failed: The zone 'projects/{project}/zones/{zone}' does not have enough"
               " resources available to fulfill the request.  '(resource type:compute)'.")
    count = np.initial_node_count * max(1, len(np.locations))
    detail = (f"Google Compute Engine: Not all instances running in IGM after "
              f"{world.clock.seconds('xpk_node_pool') * world.clock.speed:.6f}s. Expected {count}, running 0, "
              f"transitioning {count}. Current errors: [GCE_STOCKOUT]: {message}")
    op = world._project(project).cluster_ops.get(operation)
    if op is not None:
        op.detail = detail
        op.nodepool_conditions = [container_v1.StatusCondition(
            canonical_code=8, code=container_v1.StatusCondition.Code.GCE_STOCKOUT, message=message)]
    np.status = container_v1.NodePool.Status.ERROR
    np.status_message = detail
    world._finish_cluster_op(project, operation, ResourceExhausted(detail))
    world._emit("node_pool_failed", project, location, cluster, node_pool=np.name, message=message)
