"""GKE nodes for the sandbox's Kubernetes API, one module per job:
- objects.py: Node objects as GKE registers them (names, labels, taints, capacity and
  allocatable from the machine type and GKE's reservations), and reading them back;
- quantities.py: Kubernetes quantities and what a pod requests;
- fit.py: the scheduler's fit check, its FailedScheduling summary and LeastAllocated score;
- lustre_csi.py: the Lustre CSI driver on a node (registered, LNet port) and the add-on's
  `lustre-csi-node` DaemonSet;
- pools.py: `GkeNodes`, which keeps Nodes in step with the World's node pools (recreated on
  UPGRADE_NODES) and plays Spot preemption.

Everything is importable from here, as from the single module this package was.
"""

from rltui_sandbox.nodes.fit import free_share, misfit, unschedulable_message
from rltui_sandbox.nodes.lustre_csi import (
    CSI_NODEID,
    LNET_PORT_NOTE,
    LUSTRE_CSI,
    LUSTRE_DRIVER,
    csi_drivers,
    has_lustre_driver,
    lnet_port,
    lustre_daemonset,
    sync_lustre_daemonset,
)
from rltui_sandbox.nodes.objects import (
    ACCELERATOR_LABEL,
    CLUSTER_NOTE,
    GPU,
    GPU_TAINT,
    MACHINES,
    MAX_PODS,
    NODEPOOL_LABEL,
    Machine,
    cluster_key,
    create_node,
    free_node_index,
    gpu_count,
    has_image,
    internal_ip,
    is_ready,
    machine,
    node_manifest,
    node_name,
    node_status,
    pool_node_prefix,
    pool_zones,
)
from rltui_sandbox.nodes.pools import UP, ClusterStatus, GkeNodes, Record
from rltui_sandbox.nodes.quantities import format_quantity, pod_requests, quantity

__all__ = [
    "ACCELERATOR_LABEL", "CLUSTER_NOTE", "CSI_NODEID", "ClusterStatus", "GPU", "GPU_TAINT", "GkeNodes",
    "LNET_PORT_NOTE", "LUSTRE_CSI", "LUSTRE_DRIVER", "MACHINES", "MAX_PODS", "Machine", "NODEPOOL_LABEL",
    "Record", "UP", "cluster_key", "create_node", "csi_drivers", "format_quantity", "free_node_index",
    "free_share", "gpu_count", "has_image", "has_lustre_driver", "internal_ip", "is_ready", "lnet_port",
    "lustre_daemonset", "machine", "misfit", "node_manifest", "node_name", "node_status", "pod_requests",
    "pool_node_prefix", "pool_zones", "quantity", "sync_lustre_daemonset", "unschedulable_message",
]
