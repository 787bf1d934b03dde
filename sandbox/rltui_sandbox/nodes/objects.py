"""Node objects as GKE registers them, and reading them back.

Names and labels follow what GKE puts on a node (`gke-<cluster>-<pool>-<8 hex>-<4 chars>`,
`cloud.google.com/gke-nodepool`, ...); capacity and allocatable come from the machine type and
GKE's documented reservations, so a pod asking for more than a B200 node has stays Pending.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import KubeStore
from rltui_sandbox.nodes.quantities import format_quantity, quantity

GPU = "nvidia.com/gpu"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
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


CLUSTER_NOTE = "rltui_sandbox/cluster"  # the sandbox's own note: the GKE cluster owning a node


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
