"""`GkeNodes`: the World's GKE clusters as the Kubernetes API sees them. It keeps Nodes in step
with the World's running node pools, answers for the add-ons (RayOperator, Lustre CSI) and
plays Spot preemption.

A node gets the Lustre CSI driver (lustre_csi.py) only when it is registered while its
cluster's add-on is enabled: enabling the add-on on a running cluster does not reach existing
nodes until they are recreated (xpk src/xpk/core/cluster.py
update_gke_cluster_with_lustre_driver_enabled then core/nodepool.py
recreate_nodes_in_existing_node_pools); a Spot replacement made after enablement has it.
An UPGRADE_NODES operation (World.update_node_pool) recreates its pool's nodes, max_surge +
max_unavailable at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable

from google.cloud import container_v1, lustre_v1

from rltui_sandbox.grpc_util import CloudError
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import KubeStore
from rltui_sandbox.nodes.lustre_csi import (
    CSI_NODEID,
    LNET_PORT_NOTE,
    LUSTRE_DRIVER,
    csi_drivers,
    has_lustre_driver,
    sync_lustre_daemonset,
)
from rltui_sandbox.nodes.objects import (
    CLUSTER_NOTE,
    NODEPOOL_LABEL,
    cluster_key,
    create_node,
    free_node_index,
    gpu_count,
    node_manifest,
    node_name,
    node_status,
    pool_zones,
)
from rltui_sandbox.profile import Clock
from rltui_sandbox.world import GKE_VERSION, World, WorldEvent

log = logging.getLogger("rltui_sandbox.nodes")  # the logger's name from before the split

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
        """An UPGRADE_NODES operation: `batch` nodes at a time (the pool's max_surge +
        max_unavailable) go NotReady and away (their pods are killed, as the pool's drain and VM
        recreation do) and register again per_node_s later."""
        key = cluster_key(project, location, cluster)
        per_node = float(pool.get("per_node_s") or 0.0)
        batch = max(1, int(pool.get("batch") or 1))
        version = str(pool.get("version") or GKE_VERSION)
        names = sorted(n["metadata"]["name"] for n in self.store.list_sync("nodes")
                       if (n["metadata"].get("annotations") or {}).get(CLUSTER_NOTE) == key
                       and (n["metadata"].get("labels") or {}).get(NODEPOOL_LABEL) == pool["node_pool"])
        loop = asyncio.get_running_loop()
        began = loop.time()
        for start in range(0, len(names), batch):
            await asyncio.gather(*(self._recreate_node(key, pool, name, version,
                                                       began + (start // batch + 1) * per_node * 0.9)
                                   for name in names[start:start + batch]))

    async def _recreate_node(self, key: str, pool: dict[str, Any], name: str, version: str, back_at: float) -> None:
        """One node of an upgrade: away now, registered again at `back_at` (loop time: a fixed
        schedule a little ahead of the World's end of the operation, whatever the work costs)."""
        loop = asyncio.get_running_loop()
        old = self.node(name)
        if old is None:
            return
        old = copy.deepcopy(old)
        self._returning.add(name)
        try:
            await self._record(old, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady",
                               "node-controller")
            await self._record(old, "Normal", "UpgradeNodes",
                               f"Recreating node {name} for node pool {pool['node_pool']} upgrade to {version} "
                               f"(operation {pool.get('operation', '')})", "gke-upgrade")
            await self.drop_node(name)
            await asyncio.sleep(max(0.0, back_at - loop.time()))
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

    def preemption_target(self, node: str | None = None, head: bool = False) -> dict:
        """The GPU node a Spot preemption takes (default: one hosting a Ray worker but not the head;
        `head`: the one running a Ray head pod). LookupError when there is no such GPU node."""
        gpu_nodes = sorted((n for n in self.store.list_sync("nodes") if gpu_count(n) > 0),
                           key=lambda n: n["metadata"]["name"])
        # Compute Engine preempts Spot (and preemptible) VMs only: on-demand or reserved nodes
        # (CAPACITY) are never taken this way (cloud.google.com/kubernetes-engine/docs/concepts/spot-vms).
        spot = [n for n in gpu_nodes if (n["metadata"].get("labels") or {}).get("cloud.google.com/gke-spot") == "true"]
        if gpu_nodes and not spot:
            raise LookupError("no Spot GPU node: Compute Engine preempts only Spot VMs, and this cluster's GPU"
                              " nodes are on demand or reserved")
        gpu_nodes = spot
        ray_pods = [p for p in self.store.list_sync("pods", label_selector="ray.io/node-type")
                    if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        if head:
            heads = sorted(p["spec"].get("nodeName") or "" for p in ray_pods
                           if p["metadata"]["labels"]["ray.io/node-type"] == "head")
            if not any(heads):
                raise LookupError("no Ray head pod runs on a node now")
            node = next(n for n in heads if n)
            if node not in {n["metadata"]["name"] for n in gpu_nodes}:
                raise LookupError(f"the Ray head pod runs on {node}, which is no Spot GPU node")
        if node is not None:
            target = next((n for n in gpu_nodes if n["metadata"]["name"] == node), None)
            if target is None:
                names = ", ".join(n["metadata"]["name"] for n in gpu_nodes) or "none"
                raise LookupError(f'no GPU node named "{node}"; GPU nodes: {names}')
            return target
        if not gpu_nodes:
            raise LookupError("no GPU node to preempt: the cluster has no GPU node up")

        def hosts(n: dict, node_type: str) -> bool:
            return any(p["spec"].get("nodeName") == n["metadata"]["name"]
                       and p["metadata"]["labels"]["ray.io/node-type"] == node_type for p in ray_pods)
        with_worker = [n for n in gpu_nodes if hosts(n, "worker")]
        return next((n for n in with_worker if not hosts(n, "head")), None) or (with_worker or gpu_nodes)[0]

    async def take_node(self, target: dict) -> list[str]:
        """The preempted VM is gone: its Node and the pods bound to it go, and a fresh node
        comes back, without images, after `spot_replace`. Returns the pods it took."""
        name = target["metadata"]["name"]
        if name in self._preempted or self.node(name) is None:
            return []
        self._preempted[name] = asyncio.ensure_future(self._replace(target, self.clock.seconds("spot_replace")))
        return await self.drop_node(name)

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
