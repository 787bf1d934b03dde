"""GKE nodes for the sandbox's Kubernetes API: Node objects as GKE registers them, the scheduler's
fit check, the `lustre-csi-node` DaemonSet of the Lustre CSI add-on, and `GkeNodes`, which keeps
Nodes in step with the World's node pools and plays Spot preemption.

Names and labels follow what GKE puts on a node (`gke-<cluster>-<pool>-<8 hex>-<4 chars>`,
`cloud.google.com/gke-nodepool`, ...); capacity and allocatable come from the machine type and
GKE's documented reservations, so a pod asking for more than a B200 node has stays Pending.

The Lustre CSI driver is per node: a node registers it only when it is created (or recreated)
while the cluster's LustreCsiDriver add-on is enabled, as the kubelet records in the Node's
`csi.volume.kubernetes.io/nodeid` annotation. Enabling the add-on on a running cluster does not
reach existing nodes until they are recreated (xpk src/xpk/core/cluster.py
update_gke_cluster_with_lustre_driver_enabled then core/nodepool.py
recreate_nodes_in_existing_node_pools); a Spot replacement made after enablement has it. The
node also keeps the LNet port its driver was installed with (988, or 6988 with
enable_legacy_lustre_port; LustreCsiDriverConfig docstring, google-cloud-container 2.67.0).
An UPGRADE_NODES operation (World.update_node_pool) recreates its pool's nodes one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

from google.cloud import container_v1, lustre_v1

from rltui.sandbox.grpc_util import CloudError
from rltui.sandbox.kube.errors import KubeError
from rltui.sandbox.kube.store import KubeStore
from rltui.sandbox.profile import Clock
from rltui.sandbox.world import GKE_VERSION, World, WorldEvent

log = logging.getLogger(__name__)

GPU = "nvidia.com/gpu"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
LUSTRE_CSI = "lustre-csi-node"
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
CSI_NODEID = "csi.volume.kubernetes.io/nodeid"  # the kubelet's record of the CSI drivers registered on a node
LNET_PORT_NOTE = "rltui.sandbox/lustre-lnet-port"  # the sandbox's own note: the port the driver installed LNet with
MAX_PODS = 110
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}
_GIB = 1024 ** 3


@dataclass(frozen=True)
class Machine:
    cpus: int
    memory_gib: int
    boot_disk: str


# Compute Engine machine types the codelab uses (A4: 224 vCPU, 3,968 GB, Hyperdisk only).
MACHINES: dict[str, Machine] = {
    "a4-highgpu-8g": Machine(224, 3968, "hyperdisk-balanced"),
    "e2-standard-4": Machine(4, 16, "pd-balanced"),
}


def machine(machine_type: str) -> Machine:
    """The table's entry, else a guess from the `-N` suffix (N vCPUs, 4 GiB each)."""
    if machine_type in MACHINES:
        return MACHINES[machine_type]
    match = re.search(r"-(\d+)[a-z]*$", machine_type)
    cpus = int(match.group(1)) if match else 2
    return Machine(cpus, 4 * cpus, "pd-balanced")


# ---- quantities ------------------------------------------------------------------------------

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


# ---- GKE node objects ------------------------------------------------------------------------

def _reserved_cpu(cpus: int) -> float:
    """GKE's CPU reservation: 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% above."""
    tiers = ((1, 0.06), (1, 0.01), (2, 0.005), (float("inf"), 0.0025))
    left, reserved = float(cpus), 0.0
    for size, share in tiers:
        take = min(left, size)
        reserved += take * share
        left -= take
    return reserved


def _reserved_memory(gib: float) -> float:
    """GKE's memory reservation (25/20/10/6/2 % tiers) plus the 100 MiB eviction threshold, bytes."""
    tiers = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02))
    left, reserved = gib, 0.0
    for size, share in tiers:
        take = min(left, size)
        reserved += take * share
        left -= take
    return reserved * _GIB + 100 * 1024 ** 2


def node_name(project: str, location: str, cluster: str, pool: str, zone: str, index: int) -> str:
    """`gke-<cluster>-<pool>-<instance group hash>-<4 chars>`, stable for a pool's n-th node."""
    prefix = f"gke-{cluster}-{pool}"[:40].rstrip("-")
    group = hashlib.blake2b(f"{project}/{location}/{cluster}/{pool}/{zone}".encode(), digest_size=4).hexdigest()
    digest = hashlib.blake2b(f"{group}/{index}".encode(), digest_size=8).digest()
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    suffix = "".join(alphabet[b % 36] for b in digest[:4])
    return f"{prefix}-{group}-{suffix}"


def pool_node_prefix(cluster: str, pool: str) -> str:
    return f"gke-{cluster}-{pool}"[:40].rstrip("-") + "-"


def pool_zones(location: str, pool: dict[str, Any]) -> list[str]:
    """A pool's zones; a regional cluster without any gets its region's `-b` zone."""
    zones = list(pool.get("locations") or [])
    if zones:
        return zones
    return [location] if re.match(r"^[a-z]+-[a-z]+\d+-[a-z]$", location) else [f"{location}-b"]


CLUSTER_NOTE = "rltui.sandbox/cluster"  # the sandbox's own note: the GKE cluster owning a node


def cluster_key(project: str, location: str, cluster: str) -> str:
    return f"{project}/{location}/{cluster}"


def node_manifest(project: str, location: str, cluster: str, pool: dict[str, Any], zone: str,
                  name: str, index: int) -> dict:
    """The Node object GKE's node registration creates (status is written separately)."""
    mt = pool.get("machine_type") or "e2-medium"
    spec_machine = machine(mt)
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": mt,
        "cloud.google.com/gke-boot-disk": spec_machine.boot_disk,
        "cloud.google.com/gke-container-runtime": "containerd",
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/machine-family": mt.split("-")[0],
        NODEPOOL_LABEL: pool["node_pool"],
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": mt,
        "topology.kubernetes.io/region": zone[:-2], "topology.kubernetes.io/zone": zone,
    }
    if pool.get("spot"):
        labels["cloud.google.com/gke-spot"] = "true"
        labels["cloud.google.com/gke-provisioning"] = "spot"
    if pool.get("accelerator_type"):
        labels[ACCELERATOR_LABEL] = pool["accelerator_type"]
    labels.update(pool.get("labels") or {})
    taints = [{"key": t["key"], "value": t.get("value", ""), "effect": _EFFECTS.get(t["effect"], t["effect"])}
              for t in pool.get("taints") or []]
    if pool.get("accelerator_count") and not any(t["key"] == GPU for t in taints):
        taints.append(dict(GPU_TAINT))  # GKE taints every GPU node so only GPU pods land there
    cidr = f"10.8.{index}.0/24"
    meta = {"name": name, "labels": labels, "annotations": {
        "container.googleapis.com/instance_id": str(int(hashlib.blake2b(name.encode(), digest_size=7).hexdigest(), 16)),
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        CLUSTER_NOTE: cluster_key(project, location, cluster),
    }}
    spec: dict[str, Any] = {"podCIDR": cidr, "podCIDRs": [cidr], "providerID": f"gce://{project}/{zone}/{name}"}
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_status(node: dict, machine_type: str, gpus: int, version: str) -> dict:
    """A freshly booted, Ready node: no images cached yet."""
    spec_machine = machine(machine_type)
    memory = spec_machine.memory_gib * _GIB
    capacity = {"cpu": str(spec_machine.cpus), "ephemeral-storage": "98831908Ki",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                "memory": f"{memory // 1024}Ki", "pods": str(MAX_PODS)}
    allocatable = dict(capacity, **{
        "cpu": format_quantity(spec_machine.cpus - _reserved_cpu(spec_machine.cpus)),
        "ephemeral-storage": "47060071478",
        "memory": f"{int(memory - _reserved_memory(spec_machine.memory_gib)) // 1024}Ki",
    })
    if gpus:
        capacity[GPU] = allocatable[GPU] = str(gpus)
    now = _now()

    def cond(kind: str, status: str, reason: str, message: str) -> dict:
        return {"type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now}
    index = int(node["spec"]["podCIDR"].split(".")[2])
    return {
        "capacity": capacity, "allocatable": allocatable,
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [{"type": "InternalIP", "address": f"192.168.{index // 250}.{index % 250 + 2}"},
                      {"type": "Hostname", "address": node["metadata"]["name"]}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"architecture": "amd64", "bootID": str(uuid.uuid4()),
                     "containerRuntimeVersion": "containerd://2.0.4", "kernelVersion": "6.6.97+",
                     "kubeProxyVersion": f"v{version}", "kubeletVersion": f"v{version}",
                     "machineID": uuid.uuid4().hex, "operatingSystem": "linux",
                     "osImage": "Container-Optimized OS from Google", "systemUUID": str(uuid.uuid4())},
        "images": [],
    }


def csi_drivers(node: dict | None) -> dict[str, str]:
    raw = ((node or {}).get("metadata", {}).get("annotations") or {}).get(CSI_NODEID, "")
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def has_lustre_driver(node: dict | None) -> bool:
    """Whether the Lustre CSI driver is registered on this node (created after enablement)."""
    return LUSTRE_DRIVER in csi_drivers(node)


def lnet_port(node: dict | None) -> int:
    """The LNet port the node's Lustre driver uses: 6988 with the legacy port, else 988."""
    note = ((node or {}).get("metadata", {}).get("annotations") or {}).get(LNET_PORT_NOTE, "988")
    return int(note) if str(note).isdigit() else 988


def internal_ip(node: dict) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return address["address"]
    return ""


def is_ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def gpu_count(node: dict) -> int:
    return int(quantity(((node.get("status") or {}).get("allocatable") or {}).get(GPU, 0)))


def has_image(node: dict, image: str) -> bool:
    return any(image in (entry.get("names") or []) for entry in (node.get("status") or {}).get("images") or [])


async def create_node(store: KubeStore, manifest: dict, status: dict) -> dict | None:
    """Register a node (no-op if it exists): create, then its status as the kubelet posts it."""
    try:
        await store.create("nodes", manifest)
    except KubeError as exc:
        if exc.code != 409:
            raise
        return None
    return await store.patch_status("nodes", manifest["metadata"]["name"], status)


def free_node_index(store: KubeStore) -> int:
    """The lowest /24 of the pod range no node uses (nodes keep theirs across restarts)."""
    used = {int(n["spec"]["podCIDR"].split(".")[2]) for n in store.list_sync("nodes")
            if (n.get("spec") or {}).get("podCIDR", "").startswith("10.8.")}
    return next(i for i in range(len(used) + 1) if i not in used)


# ---- scheduling ------------------------------------------------------------------------------

def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists" and not tol.get("key"):
            return True
        if tol.get("key") != taint.get("key"):
            continue
        if tol.get("operator") == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def misfit(pod: dict, node: dict, placed: list[dict]) -> list[str]:
    """Why `pod` cannot go on `node` beside `placed` pods, in the scheduler's words ([] = fits)."""
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return ["node(s) were unschedulable"]
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return ["node(s) didn't match Pod's node affinity/selector"]
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations") or [], taint):
            return [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    used: dict[str, float] = {"pods": float(len(placed))}
    for other in placed:
        for name, amount in pod_requests(other).items():
            used[name] = used.get(name, 0.0) + amount
    wanted = dict(pod_requests(pod), pods=1.0)
    return [f"Insufficient {name}" for name, amount in sorted(wanted.items())
            if amount > 0 and used.get(name, 0.0) + amount > quantity(allocatable.get(name, 0)) + 1e-9]


def unschedulable_message(reasons: dict[str, int], total: int) -> str:
    if total == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


def free_share(node: dict, placed: list[dict]) -> float:
    """LeastAllocated score: the mean free fraction of CPU and memory (spreads pods out)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    used: dict[str, float] = {}
    for other in placed:
        for name, amount in pod_requests(other).items():
            used[name] = used.get(name, 0.0) + amount
    shares = []
    for name in ("cpu", "memory"):
        total = quantity(allocatable.get(name, 0))
        shares.append(1.0 - used.get(name, 0.0) / total if total else 0.0)
    return sum(shares) / len(shares)


# ---- the Lustre CSI add-on's DaemonSet -------------------------------------------------------

def lustre_daemonset() -> dict:
    labels = {"k8s-app": LUSTRE_CSI}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": LUSTRE_CSI, "namespace": "kube-system",
                     "labels": {**labels, "addonmanager.kubernetes.io/mode": "Reconcile"}},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"priorityClassName": "system-node-critical",
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "lustre-csi-driver",
                                     "image": "gke.gcr.io/lustre-csi-driver:v1.0.0-gke.0",
                                     "args": [f"--driver-name={LUSTRE_DRIVER}", "--node=true"]}]}}},
    }


async def sync_lustre_daemonset(store: KubeStore, enabled: bool) -> None:
    """The add-on's node DaemonSet: present (one ready pod per node) iff the add-on is enabled."""
    exists = bool(store.list_sync("daemonsets", "kube-system", field_selector=f"metadata.name={LUSTRE_CSI}"))
    if not enabled:
        if exists:
            await store.delete("daemonsets", LUSTRE_CSI, "kube-system")
        return
    if not exists:
        await store.create("daemonsets", lustre_daemonset(), "kube-system")
    count = len(store.list_sync("nodes"))
    await store.patch_status("daemonsets", LUSTRE_CSI, {
        "currentNumberScheduled": count, "desiredNumberScheduled": count, "numberAvailable": count,
        "numberMisscheduled": 0, "numberReady": count, "updatedNumberScheduled": count,
        "observedGeneration": 1}, "kube-system")


# ---- the GKE side of the sandbox's cluster: clusters, add-ons, node pools, Spot preemption -----

Record = Callable[..., Awaitable[None]]  # record(obj, type, reason, message, component, host=None)
ClusterStatus = container_v1.Cluster.Status
UP = (ClusterStatus.RUNNING, ClusterStatus.RECONCILING)


def _pool_info(np: container_v1.NodePool) -> dict[str, Any]:
    """What the World's node_pool_ready event carries, from a stored NodePool."""
    accel = np.config.accelerators[0] if np.config.accelerators else None
    return {"node_pool": np.name, "node_count": np.initial_node_count, "machine_type": np.config.machine_type,
            "spot": np.config.spot, "accelerator_type": accel.accelerator_type if accel else "",
            "accelerator_count": accel.accelerator_count if accel else 0, "labels": dict(np.config.labels),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect.name} for t in np.config.taints],
            "locations": list(np.locations)}


class GkeNodes:
    """The World's GKE clusters as the Kubernetes API sees them: Nodes for running pools, the add-ons'
    state, Lustre lookups for the CSI driver, and Spot preemption. `kill_pod(pod)` removes a pod at
    once (the pod garbage collector); `record(...)` writes an Event."""

    def __init__(self, store: KubeStore, world: World, clock: Clock, project: str | None, *,
                 record: Record, kill_pod: Callable[[dict], Awaitable[None]]) -> None:
        self.store, self.world, self.clock, self.project = store, world, clock, project
        self._record, self._kill_pod = record, kill_pod
        self._preempted: dict[str, asyncio.Task] = {}  # node name -> its replacement timer
        self._recreating: set[asyncio.Future] = set()  # node pool upgrades in progress
        self._returning: set[str] = set()  # nodes an upgrade took away and brings back

    # ---- what the World says --------------------------------------------------------------------

    def projects(self) -> list[str]:
        return [p for p in self.world.projects() if self.project in (None, p)]

    def clusters(self) -> list[container_v1.Cluster]:
        return [c for p in self.projects() for c in self.world.list_clusters(p) if c.status in UP]

    def operator_missing(self) -> str | None:
        """None when a KubeRay operator runs (the RayOperator add-on), else why none does."""
        clusters = self.clusters()
        if any(c.addons_config.ray_operator_config.enabled for c in clusters):
            return None
        if not clusters:
            return "no KubeRay operator reconciles this RayCluster: no GKE cluster is running"
        c = clusters[0]
        return (f"no KubeRay operator reconciles this RayCluster: the RayOperator add-on of GKE cluster "
                f"{c.name} is disabled (gcloud container clusters update {c.name} --location={c.location} "
                f"--update-addons=RayOperator=ENABLED)")

    def lustre_csi_enabled(self) -> bool:
        return any(c.addons_config.lustre_csi_driver_config.enabled for c in self.clusters())

    def lustre(self, handle: str) -> lustre_v1.Instance | None:
        """The instance a CSI volumeHandle `PROJECT/ZONE/ID` names, None if there is none."""
        parts = handle.split("/")
        if len(parts) != 3 or parts[0] not in self.world.projects():
            return None
        try:
            return self.world.get_lustre_instance(*parts)
        except CloudError:
            return None

    def lustre_dir(self, handle: str) -> Path | None:
        parts = handle.split("/")
        return self.world.lustre_dir(*parts) if len(parts) == 3 else None

    def running_pools(self) -> dict[tuple[str, str], tuple[str, container_v1.Cluster, container_v1.NodePool]]:
        """(cluster key, pool name) -> (project, cluster, pool) for every RUNNING pool in scope."""
        out = {}
        for project in self.projects():
            for c in self.world.list_clusters(project):
                for np in c.node_pools if c.status in UP else []:
                    if np.status in (container_v1.NodePool.Status.RUNNING,
                                     container_v1.NodePool.Status.RECONCILING):
                        out[(cluster_key(project, c.location, c.name), np.name)] = (project, c, np)
        return out

    async def on_world(self, event: WorldEvent) -> None:
        if self.project not in (None, event.project):
            return
        key = cluster_key(event.project, event.location, event.name)
        if event.kind == "node_pool_ready":
            await self.add_pool_nodes(event.project, event.location, event.name, event.data)
        elif event.kind == "node_pool_recreating":
            task = asyncio.ensure_future(self._recreate_pool(event.project, event.location, event.name, event.data))
            self._recreating.add(task)
            task.add_done_callback(self._recreating.discard)
        elif event.kind == "addons_changed" and not event.data.get("lustre_csi_driver"):
            await self._unregister_lustre(key)
        elif event.kind == "node_pool_deleted":
            await self.remove_nodes(key, event.data.get("node_pool"))
        elif event.kind == "cluster_deleted":
            await self.remove_nodes(key, None)
        if event.kind in ("addons_changed", "cluster_deleted"):
            await self.sync_daemonset()

    async def sync_daemonset(self) -> None:
        try:
            await sync_lustre_daemonset(self.store, self.lustre_csi_enabled())
        except KubeError as exc:
            log.info("nodes: lustre-csi-node DaemonSet: %s", exc)

    # ---- nodes ----------------------------------------------------------------------------------

    async def sync(self) -> None:
        """After a (re)start: a Node for every node of a running pool, none for pools that are gone."""
        pools = self.running_pools()
        for node in list(self.store.list_sync("nodes")):
            meta = node["metadata"]
            note = (meta.get("annotations") or {}).get(CLUSTER_NOTE)
            if note and (note, (meta.get("labels") or {}).get(NODEPOOL_LABEL)) not in pools:
                await self.drop_node(meta["name"])
        for project, c, np in pools.values():
            await self.add_pool_nodes(project, c.location, c.name, _pool_info(np))
        await self.sync_daemonset()

    def node(self, name: str) -> dict | None:
        found = self.store.list_sync("nodes", field_selector=f"metadata.name={name}")
        return found[0] if found else None

    async def add_pool_nodes(self, project: str, location: str, cluster: str, pool: dict[str, Any]) -> None:
        for zone in pool_zones(location, pool):
            for i in range(int(pool.get("node_count") or 0)):
                name = node_name(project, location, cluster, pool["node_pool"], zone, i)
                if name in self._preempted or name in self._returning or self.node(name) is not None:
                    continue
                manifest = node_manifest(project, location, cluster, pool, zone, name, free_node_index(self.store))
                status = node_status(manifest, pool.get("machine_type") or "e2-medium",
                                     int(pool.get("accelerator_count") or 0), GKE_VERSION)
                await self._register(manifest, status)

    def _csi_notes(self, key: str | None, name: str) -> dict[str, str]:
        """The annotations a node registered now gets for the Lustre CSI driver (none while the
        cluster's add-on is off)."""
        parts = (key or "").split("/")
        if len(parts) != 3:
            return {}
        try:
            c = self.world.get_cluster(*parts)
        except CloudError:
            return {}
        cfg = c.addons_config.lustre_csi_driver_config
        if not cfg.enabled:
            return {}
        return {CSI_NODEID: json.dumps({LUSTRE_DRIVER: name}, separators=(",", ":")),
                LNET_PORT_NOTE: "6988" if cfg.enable_legacy_lustre_port else "988"}

    async def _register(self, manifest: dict, status: dict) -> None:
        notes = manifest["metadata"].setdefault("annotations", {})
        for stale in (CSI_NODEID, LNET_PORT_NOTE):
            notes.pop(stale, None)
        notes.update(self._csi_notes(notes.get(CLUSTER_NOTE), manifest["metadata"]["name"]))
        node = await create_node(self.store, manifest, status)
        if node is not None:
            name = node["metadata"]["name"]
            await self._record(node, "Normal", "Starting", "Starting kubelet.", "kubelet", name)
            await self._record(node, "Normal", "RegisteredNode",
                               f"Node {name} event: Registered Node {name} in Controller", "node-controller")

    async def _unregister_lustre(self, key: str) -> None:
        """The add-on was disabled: its DaemonSet goes, and with it the driver on every node."""
        for node in list(self.store.list_sync("nodes")):
            meta = node["metadata"]
            notes = meta.get("annotations") or {}
            if notes.get(CLUSTER_NOTE) != key or not has_lustre_driver(node):
                continue
            drivers = {k: v for k, v in csi_drivers(node).items() if k != LUSTRE_DRIVER}
            patch = {CSI_NODEID: json.dumps(drivers, separators=(",", ":")) if drivers else None,
                     LNET_PORT_NOTE: None}
            with contextlib.suppress(KubeError):
                await self.store.patch("nodes", meta["name"], {"metadata": {"annotations": patch}})

    async def _recreate_pool(self, project: str, location: str, cluster: str, pool: dict[str, Any]) -> None:
        """An UPGRADE_NODES operation: each node goes NotReady and away (its pods are killed, as the
        pool's drain and VM recreation do) and registers again per_node_s later, one at a time."""
        key = cluster_key(project, location, cluster)
        per_node = float(pool.get("per_node_s") or 0.0)
        version = str(pool.get("version") or GKE_VERSION)
        names = sorted(n["metadata"]["name"] for n in self.store.list_sync("nodes")
                       if (n["metadata"].get("annotations") or {}).get(CLUSTER_NOTE) == key
                       and (n["metadata"].get("labels") or {}).get(NODEPOOL_LABEL) == pool["node_pool"])
        loop = asyncio.get_running_loop()
        began = loop.time()
        for i, name in enumerate(names):
            old = self.node(name)
            if old is None:
                continue
            old = copy.deepcopy(old)
            self._returning.add(name)
            try:
                await self._record(old, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady",
                                   "node-controller")
                await self._record(old, "Normal", "UpgradeNodes",
                                   f"Recreating node {name} for node pool {pool['node_pool']} upgrade to {version} "
                                   f"(operation {pool.get('operation', '')})", "gke-upgrade")
                await self.drop_node(name)
                # Back on a fixed schedule a little ahead of the World's end of the operation
                # (per_node x nodes), whatever the work above cost.
                await asyncio.sleep(max(0.0, began + (i + 1) * per_node * 0.9 - loop.time()))
            finally:
                self._returning.discard(name)
            meta = old["metadata"]
            if (meta.get("annotations") or {}).get(CLUSTER_NOTE) is None or \
                    (key, pool["node_pool"]) not in self.running_pools():
                return  # the pool or its cluster went away meanwhile
            manifest = {"apiVersion": "v1", "kind": "Node",
                        "metadata": {k: copy.deepcopy(meta[k]) for k in ("name", "labels", "annotations") if k in meta},
                        "spec": copy.deepcopy(old.get("spec") or {})}
            status = node_status(manifest, (meta.get("labels") or {}).get("node.kubernetes.io/instance-type", ""),
                                 gpu_count(old), version)
            await self._register(manifest, status)
            await self.sync_daemonset()  # its counts follow the nodes

    async def remove_nodes(self, key: str, pool: str | None) -> None:
        for node in list(self.store.list_sync("nodes")):
            meta = node["metadata"]
            if (meta.get("annotations") or {}).get(CLUSTER_NOTE) == key and \
                    pool in (None, (meta.get("labels") or {}).get(NODEPOOL_LABEL)):
                await self.drop_node(meta["name"])

    async def drop_node(self, name: str) -> list[str]:
        """Delete a node and, as the pod garbage collector does, the pods bound to it."""
        killed = []
        for pod in [copy.deepcopy(p) for p in self.store.list_sync("pods", field_selector=f"spec.nodeName={name}")]:
            killed.append(pod["metadata"]["name"])
            if (pod.get("status") or {}).get("phase") == "Running":
                for c in pod["spec"].get("containers") or []:
                    await self._record(pod, "Normal", "Killing", f"Stopping container {c['name']}", "kubelet", name)
            await self._kill_pod(pod)
        with contextlib.suppress(KubeError):
            await self.store.delete("nodes", name)
        return killed

    # ---- Spot preemption ------------------------------------------------------------------------

    async def preempt(self, node: str | None = None) -> dict:
        """Take a GPU node away like a Spot preemption (default: one hosting a Ray worker but not
        the head). Its pods die; the node comes back empty, without images, after `spot_replace`.
        LookupError when there is no such GPU node."""
        gpu_nodes = sorted((n for n in self.store.list_sync("nodes") if gpu_count(n) > 0),
                           key=lambda n: n["metadata"]["name"])
        if node is not None:
            target = next((n for n in gpu_nodes if n["metadata"]["name"] == node), None)
            if target is None:
                names = ", ".join(n["metadata"]["name"] for n in gpu_nodes) or "none"
                raise LookupError(f'no GPU node named "{node}"; GPU nodes: {names}')
        elif not gpu_nodes:
            raise LookupError("no GPU node to preempt: the cluster has no GPU node up")
        else:
            ray_pods = [p for p in self.store.list_sync("pods", label_selector="ray.io/node-type")
                        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]

            def hosts(n: dict, node_type: str) -> bool:
                return any(p["spec"].get("nodeName") == n["metadata"]["name"]
                           and p["metadata"]["labels"]["ray.io/node-type"] == node_type for p in ray_pods)
            with_worker = [n for n in gpu_nodes if hosts(n, "worker")]
            target = next((n for n in with_worker if not hosts(n, "head")), None) or (with_worker or gpu_nodes)[0]
        target = copy.deepcopy(target)
        name = target["metadata"]["name"]
        delay = self.clock.seconds("spot_replace")
        await self._record(target, "Warning", "Preempted",
                           f"Compute Engine preempted Spot VM {name}; a replacement is created", "gce-spot")
        await self._record(target, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady",
                           "node-controller")
        self._preempted[name] = asyncio.ensure_future(self._replace(target, delay))
        killed = await self.drop_node(name)
        return {"node": name, "pods": killed, "returns_in_s": round(delay, 3),
                "message": f"preempted Spot node {name} (pods killed: {', '.join(killed) or 'none'}); it comes "
                           f"back in {delay:.1f} s ({delay * self.clock.speed / 60:.1f} profile minutes)"}

    async def _replace(self, old: dict, delay: float) -> None:
        meta = old["metadata"]
        try:
            await asyncio.sleep(delay)
        finally:
            self._preempted.pop(meta["name"], None)
        key = (meta.get("annotations") or {}).get(CLUSTER_NOTE)
        if (key, (meta.get("labels") or {}).get(NODEPOOL_LABEL)) not in self.running_pools():
            return  # the pool or its cluster went away meanwhile
        manifest = {"apiVersion": "v1", "kind": "Node",
                    "metadata": {k: copy.deepcopy(meta[k]) for k in ("name", "labels", "annotations") if k in meta},
                    "spec": copy.deepcopy(old.get("spec") or {})}
        version = ((old.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", f"v{GKE_VERSION}")
        status = node_status(manifest, (meta.get("labels") or {}).get("node.kubernetes.io/instance-type", ""),
                             gpu_count(old), version.lstrip("v"))
        await self._register(manifest, status)

    async def stop(self) -> None:
        timers = list(self._preempted.values()) + list(self._recreating)
        for task in timers:
            task.cancel()
        await asyncio.gather(*timers, return_exceptions=True)
