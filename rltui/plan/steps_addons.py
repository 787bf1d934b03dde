"""The RayOperator and Lustre CSI addons, and the GPU nodes recreated where the driver has not
reached them."""

from __future__ import annotations

import json
from shlex import join
from typing import Any

from .context import Context
from .step import PermanentError, Probe, StepOutput, StepState, TransientError
from .steps_base import ContextStep
from .steps_cluster import gpu_pool_built, pool_note

# Nodes older than this need the CSI driver's legacy port (6988) to reach Lustre
# (google-cloud-container 2.67.0, LustreCsiDriverConfig.enable_legacy_lustre_port).
LEGACY_PORT_BEFORE = (1, 33, 2, 4655000)
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
CSI_NODE_IDS = "csi.volume.kubernetes.io/nodeid"
# How long the driver may take to register on nodes that exist, in reference minutes.
DRIVER_WAIT_MIN = 2.0
# The blueprint's upgrade settings of its pools (Cluster Toolkit v1.94.0
# modules/compute/gke-node-pool/main.tf locals.upgrade_settings, lines 22-28: max_surge
# coalesce(.., 0), max_unavailable coalesce(.., 1)): put back after a recreation, so that a
# later GKE auto-upgrade or a Terraform re-apply finds the pool as the blueprint has it.
BLUEPRINT_SURGE, BLUEPRINT_UNAVAILABLE = 0, 1


def gke_version(text: str) -> tuple[int, ...]:
    """"1.33.5-gke.1201000" -> (1, 33, 5, 1201000)."""
    import re

    return tuple(int(n) for n in re.findall(r"\d+", text or "")[:4])


async def legacy_port_wanted(ctx: Context, cluster: Any) -> bool:
    """Whether the Lustre CSI driver must use the legacy port 6988: nodes older than
    1.33.2-gke.4655000, or an existing Lustre instance made with the deprecated
    gke_support_enabled (google-cloud-lustre 0.4.3 Instance.gke_support_enabled, deprecated: "no
    longer required for GKE"; google-cloud-container 2.67.0
    LustreCsiDriverConfig.enable_legacy_lustre_port). `cluster` None: the instance alone."""
    old = cluster is not None and any(gke_version(p.version) < LEGACY_PORT_BEFORE
                                      for p in cluster.node_pools if p.version)
    inst = await ctx.lustre.get(ctx.cfg.lustre_instance_id)
    return old or bool(inst is not None and inst.gke_support_enabled)


def _workload(pod: dict[str, Any]) -> bool:
    """A pod that holds work: running or about to (not Succeeded or Failed), outside
    kube-system, not one a DaemonSet puts on every node (metadata.ownerReferences[].kind)."""
    meta = pod.get("metadata") or {}
    if meta.get("namespace") == "kube-system":
        return False
    if any((ref or {}).get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or []):
        return False
    return ((pod.get("status") or {}).get("phase") or "") not in ("Succeeded", "Failed")


async def pods_on_node(kube: Any, node: str) -> list[dict[str, Any]]:
    """Every pod bound to `node`, in every namespace: GET /api/v1/pods with the field selector
    spec.nodeName=<node> (CoreV1Api.list_pod_for_all_namespaces; spec.nodeName is one of the
    pod fields the API server selects on: kubernetes.io/docs/concepts/overview/
    working-with-objects/field-selectors). Through the adapter's own list (its retries and
    errors: KubeAdapter.pods_everywhere)."""
    items: list[dict[str, Any]] = await kube.pods_everywhere(f"spec.nodeName={node}")
    return items


class Stale:
    """A GPU pool with nodes on which the Lustre driver has not registered."""

    def __init__(self) -> None:
        self.nodes: list[str] = []      # every GPU node of the pool
        self.lacking: list[str] = []    # those without the driver


def _drivers(node: dict[str, Any]) -> set[str]:
    """The kubelet's record of the CSI drivers registered on a Node: the annotation
    `csi.volume.kubernetes.io/nodeid`, a JSON map driver -> node ID (Kubernetes CSI node
    registration)."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(CSI_NODE_IDS) or "{}"
    try:
        value = json.loads(raw)
    except ValueError:
        return set()
    return set(value) if isinstance(value, dict) else set()


class AddonsStep(ContextStep):
    """RayOperator and the Lustre CSI driver in one cluster update once xpk has exited, then
    the GPU nodes recreated where the driver has not reached them.

    Nothing changes the GKE cluster while xpk's Terraform works on it. Terraform's
    google_container_cluster create deletes the blueprint's `default-pool` right after the
    create's operation is DONE (remove_default_node_pool = true: Cluster Toolkit v1.94.0
    modules/scheduler/gke-cluster/main.tf line 130) through transport_tpg.Retry with the
    default retry predicates only (terraform-provider-google v7.40.0
    google/services/container/resource_container_cluster.go lines 3234-3246,
    google/transport/error_retry_predicates.go): GKE's refusal of a busy cluster (400
    failedPrecondition) is not among them, so an update sent then fails the apply, taints the
    cluster, and the next xpk run replaces it. Hence `needs xpk_cluster`: the update goes in
    after xpk exits. A re-apply of the blueprint turns both addons off again (they are in the
    gke-cluster module's addons_config, lines 302-325, not in its lifecycle ignore_changes,
    lines 367-372): after any xpk run this step is probed again, and enables them again.

    xpk 1.16's Toolkit blueprint cannot ask for the addons at creation
    (core/blueprint/blueprint_generator.py generate_a4_blueprint sets no enable_ray_operator
    or enable_managed_lustre_csi on its gke-cluster module, though the module has both).

    The driver's legacy port must agree with the Lustre instance (`legacy_port_wanted`). A
    running cluster's nodes run the driver once the kubelet has registered it: the CSINode
    object (storage.k8s.io/v1 csinodes/<node>, .spec.drivers[].name) or the Node annotation
    `csi.volume.kubernetes.io/nodeid` says so. After the update the GPU nodes are re-read for
    up to DRIVER_WAIT_MIN reference minutes; only the pools whose nodes still lack it are
    recreated, by upgrading them to their own version (xpk 1.16.0 core/nodepool.py
    recreate_nodes_in_existing_node_pools does the same), all of a pool's nodes at once:
    max_surge 0, max_unavailable = its node count ("(maxUnavailable + maxSurge) determines the
    level of parallelism", google-cloud-container 2.67.0 NodePool.UpgradeSettings), then the
    blueprint's 0 and 1 are put back. Only the GPU pools are recreated: the Ray head and
    workers, the only pods that mount Lustre, run there.

    Only a pool no work runs on is recreated: every `up` probes this step, and a Spot node
    that replaced a preempted one may not have registered the driver yet while the job runs
    on the others. A pool with workload pods on its nodes (`_workload`: not a DaemonSet's,
    outside kube-system; the Ray pods carry ray.io labels) ends the step with one line naming
    the nodes without the driver: rltui does not recreate nodes under a running job.
    Nor does it touch the cluster while an xpk is live in its folder (`wait_xpk_exit`).
    """

    name, title = "addons", "Addons (RayOperator + Lustre CSI)"
    needs = ("xpk_cluster",)   # after xpk exits: nothing may change the cluster under Terraform
    expected_key = "addon_update"
    destroyable = False  # they go with the cluster
    # Down: the RayCluster settles first, whatever its outcome (they keep nothing to delete).
    destroy_needs = ()
    destroy_after = ("raycluster",)
    # A try can hold an update, a bounded wait and a recreation: a third is plenty.
    max_attempts = 3

    async def kept(self, ctx: Context, settled: dict[str, StepState]) -> tuple[StepState, str]:
        return StepState.SKIPPED, "kept: they go with the GKE cluster"

    def command(self) -> str:
        c = self.cfg
        # xpk ignores --enable-lustre-csi-driver for b200-8; one update enables both.
        return join(["gcloud", "container", "clusters", "update", c.cluster_name,
                     f"--region={c.region}", f"--project={c.project_id}",
                     "--update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED"])

    async def legacy_port_wanted(self, ctx: Context, cluster: Any) -> bool:
        return await legacy_port_wanted(ctx, cluster)

    def _gpu_pools(self, cluster: Any) -> list[Any]:
        accel = self.cfg.device.accelerator
        return [p for p in cluster.node_pools
                if any(a.accelerator_type == accel for a in p.config.accelerators)]

    @staticmethod
    def _left_parallel(pool: Any) -> bool:
        """Upgrade settings a recreation of rltui's set and did not put back (a crash between):
        surge 0 with more than the blueprint's one node unavailable at a time."""
        us = pool.upgrade_settings
        return int(us.max_surge) == BLUEPRINT_SURGE and int(us.max_unavailable) > \
            BLUEPRINT_UNAVAILABLE

    async def _gpu_nodes(self, ctx: Context, kube: Any) -> list[dict[str, Any]]:
        accel = self.cfg.device.accelerator
        return [n for n in await kube.list("nodes")
                if ((n.get("metadata") or {}).get("labels") or {}).get(ACCELERATOR_LABEL)
                == accel]

    async def _registered(self, kube: Any, node: dict[str, Any]) -> bool:
        """The kubelet registered the Lustre driver on this node: its Node annotation, else
        its CSINode (a 404 there: not registered yet)."""
        if LUSTRE_DRIVER in _drivers(node):
            return True
        name = (node.get("metadata") or {}).get("name") or ""
        csinode = await kube.get("csinodes", name) if name else None
        drivers = ((csinode or {}).get("spec") or {}).get("drivers") or []
        return any(isinstance(d, dict) and d.get("name") == LUSTRE_DRIVER for d in drivers)

    async def _stale_pools(self, ctx: Context, kube: Any | None = None) -> dict[str, Stale]:
        """GPU pools with a node that has not registered the Lustre driver -> their nodes."""
        kube = kube if kube is not None else await self.kube_if_cluster(ctx)
        if kube is None:
            return {}
        pools: dict[str, Stale] = {}
        for node in await self._gpu_nodes(ctx, kube):
            meta = node.get("metadata") or {}
            pool = (meta.get("labels") or {}).get(NODE_POOL_LABEL, "")
            entry = pools.setdefault(pool, Stale())
            entry.nodes.append(meta.get("name") or "")
            if not await self._registered(kube, node):
                entry.lacking.append(meta.get("name") or "")
        return {p: pools[p] for p in sorted(pools) if p and pools[p].lacking}

    async def _workloads(self, kube: Any, nodes: list[str]) -> list[str]:
        """The workload pods (`_workload`) bound to these nodes, by name."""
        found: list[str] = []
        for node in nodes:
            found += [(p.get("metadata") or {}).get("name") or "?"
                      for p in await pods_on_node(kube, node) if _workload(p)]
        return found

    async def _wait_registered(self, ctx: Context, out: StepOutput) -> dict[str, Stale]:
        """Re-read the GPU nodes until each has the driver or DRIVER_WAIT_MIN reference
        minutes pass; the pools still without it."""
        import asyncio

        kube = await ctx.kube()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRIVER_WAIT_MIN * 60.0 * ctx.endpoints.time_scale
        interval = max(0.01, min(2.0, ctx.expected("k8s_apply") / 10))
        noted = False
        while True:
            stale = await self._stale_pools(ctx, kube)
            if not stale or loop.time() >= deadline:
                return stale
            if not noted:
                out.note(f"waiting for the Lustre CSI driver on the nodes of {', '.join(stale)}")
                noted = True
            await asyncio.sleep(interval)

    async def _gpu_nodes_listed(self, ctx: Context) -> None:
        """Until every GPU node of the made pool is a Node (their drivers are read there)."""
        import asyncio

        kube = await ctx.kube()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(DRIVER_WAIT_MIN * 60.0 * ctx.endpoints.time_scale, 1.0)
        while loop.time() < deadline:
            if len(await self._gpu_nodes(ctx, kube)) >= self.cfg.num_nodes:
                return
            await asyncio.sleep(max(0.05, min(2.0, ctx.expected("k8s_apply") / 10)))

    async def probe(self, ctx: Context) -> Probe:
        cluster = await ctx.gke.get()
        if cluster is None:
            return Probe(exists=False)
        live = ctx.xpk().live()
        if live is not None:
            # A re-apply turns the addons off: whatever they are now, apply waits for xpk.
            return Probe(exists=True, ready=False, detail=f"{live.describe()} runs: the addons"
                                                          " wait for it")
        enabled = ctx.gke.addons_enabled(cluster)
        off = [k for k, v in enabled.items() if not v]
        if not off and ctx.gke.legacy_port(cluster) != await self.legacy_port_wanted(ctx, cluster):
            off.append("LustreCsiDriver legacy port")
        if off:
            return Probe(exists=False, detail="off: " + ", ".join(off))
        if not gpu_pool_built(cluster, self.cfg):
            return Probe(exists=True, ready=False, detail="xpk's GPU pool is not made yet")
        left = [p.name for p in self._gpu_pools(cluster) if self._left_parallel(p)]
        if left:
            return Probe(exists=True, ready=False,
                         detail=f"upgrade settings of {', '.join(left)} not put back")
        stale = await self._stale_pools(ctx)
        if stale:
            return Probe(exists=True, ready=False,
                         detail=f"driver not on nodes of {', '.join(stale)}")
        return Probe(exists=True, ready=True, detail=pool_note(cluster, self.cfg))

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await self.wait_xpk_exit(ctx, out)   # nothing changes the cluster under Terraform
        cluster = await ctx.gke.get()
        if cluster is None or not gpu_pool_built(cluster, self.cfg):
            # xpk_cluster is done, so xpk has exited: nothing will make it now.
            cluster = await self.wait_gpu_pool(ctx, out)
        legacy = await self.legacy_port_wanted(ctx, cluster)
        enabled = ctx.gke.addons_enabled(cluster)
        if not all(enabled.values()) or ctx.gke.legacy_port(cluster) != legacy:
            await self.wait_cluster_idle(ctx, out)   # GKE's own upgrade starts as xpk exits
            out.note("enabling RayOperator and LustreCsiDriver in one cluster update"
                     + (" (legacy Lustre port)" if legacy else ""))
            await ctx.gke.enable_addons(expected_s=self.expected_s, legacy_port=legacy)
        for pool in [p.name for p in self._gpu_pools(cluster) if self._left_parallel(p)]:
            await self._restore(ctx, out, pool)
        await self._gpu_nodes_listed(ctx)
        stale = await self._wait_registered(ctx, out)
        kube = await ctx.kube()
        for pool, entry in stale.items():
            busy = await self._workloads(kube, entry.nodes)
            if busy:
                raise PermanentError(
                    f"the Lustre CSI driver is not on GPU node(s) {', '.join(entry.lacking)} of"
                    f" {pool} yet, and work runs on the pool ({_some(busy)}): rltui will not"
                    " recreate its nodes, which takes them all at once, under a running job;"
                    " wait for the driver to register and run up again, or end the job first"
                    " (`rltui down`)")
        for pool, entry in stale.items():
            await self._recreate(ctx, out, pool, len(entry.nodes))
        if stale:
            still = await self._wait_registered(ctx, out)
            if still:
                raise TransientError(f"the Lustre CSI driver is not on the nodes of"
                                     f" {', '.join(still)} after recreating them")

    async def _recreate(self, ctx: Context, out: StepOutput, pool: str, nodes: int) -> None:
        """All of the pool's nodes at once (no work runs there: apply checked), then the
        blueprint's upgrade settings back, even when the recreation failed."""
        await self.wait_cluster_idle(ctx, out)
        out.note(f"recreating the {nodes} nodes of {pool} at once so that they get the Lustre"
                 " CSI driver")
        quick = ctx.expected("k8s_apply")
        await ctx.gke.set_upgrade_settings(pool, max_surge=0, max_unavailable=max(1, nodes),
                                           expected_s=quick)
        try:
            await self.wait_cluster_idle(ctx, out)
            # Every node at once: about one node's recreation (the profile's time is per node).
            await ctx.gke.recreate_node_pool(pool, expected_s=ctx.expected("node_pool_recreate"))
        finally:
            await self._restore(ctx, out, pool)

    async def _restore(self, ctx: Context, out: StepOutput, pool: str) -> None:
        await self.wait_cluster_idle(ctx, out)
        out.note(f"putting back the blueprint's upgrade settings of {pool} (surge"
                 f" {BLUEPRINT_SURGE}, unavailable {BLUEPRINT_UNAVAILABLE})")
        await ctx.gke.set_upgrade_settings(pool, max_surge=BLUEPRINT_SURGE,
                                           max_unavailable=BLUEPRINT_UNAVAILABLE,
                                           expected_s=ctx.expected("k8s_apply"))


def _some(names: list[str], most: int = 3) -> str:
    """"a, b, c and 4 more"."""
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")
