"""The cluster's steps: enable the APIs, `xpk cluster create`, the RayOperator and Lustre CSI
addons (with the GPU nodes recreated for the driver), the cluster's credentials."""

from __future__ import annotations

from shlex import join
from typing import TYPE_CHECKING, Any

from .codelab import APIS
from . import xpkstate
from .context import Context
from .step import PermanentError, Probe, StepOutput, StepState, TransientError
from .steps_base import ContextStep, _gke_lock

if TYPE_CHECKING:
    from ..cloud.detached import Detached, Outcome

class EnableApisStep(ContextStep):
    name, title = "enable_apis", "Enable APIs"
    expected_key = "enable_apis"
    destroyable = False  # other things in the project may use them

    def command(self) -> str:
        return join(["gcloud", "services", "enable", *APIS, f"--project={self.cfg.project_id}"])

    def down_title(self) -> str:
        return "Enabled APIs"

    async def kept(self, ctx: Context, settled: dict[str, StepState]) -> tuple[StepState, str]:
        return StepState.SKIPPED, "kept: other things in the project may use them"

    async def probe(self, ctx: Context) -> Probe:
        missing = set(APIS) - await ctx.network.enabled_apis()
        return Probe(exists=not missing, detail=", ".join(sorted(missing)))

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await ctx.network.enable_apis(APIS, out.line)


MANAGED_BY = {"managed-by": "rltui"}


class XpkClusterStep(ContextStep):
    """`xpk cluster create` from one fixed folder per cluster, then the `managed-by: rltui`
    label: ownership is read from the cloud (the label), plus xpk's own state when present.

    Down deletes the cluster through the GKE API (DeleteCluster) as soon as what runs on it is
    gone (the RayCluster, the PV/PVC, the Secret: through `credentials`), while the Lustre
    instance is deleted: only xpk's networks must wait for the peering and the IP range, and
    they are NetworkReadyStep's row (`xpk cluster delete`, which finds the cluster gone and
    removes the rest). It deletes only a cluster that is rltui's: made by xpk from this folder
    (its blueprint is there) or labelled managed-by=rltui.
    Whether a failed xpk is worth another try is read from the cloud after it exits (a GKE
    operation that failed is final); xpk's own words are only quoted.
    """

    name, title = "xpk_cluster", "xpk cluster create"
    needs = ("enable_apis",)
    expected_key, destroy_key = "xpk_done", "gke_cluster_delete"
    # What runs on the cluster goes first (credentials: the Kubernetes objects); nothing else.
    destroy_needs = ("addons", "credentials")
    max_attempts = 3  # each try can take most of an hour: a crash gets two more, no more

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.locks = (_gke_lock(ctx),)

    def down_title(self) -> str:
        return f"GKE cluster {self.cfg.cluster_name} (GKE API)"

    def _argv(self, verb: str) -> list[str]:
        c = self.cfg
        common = [f"--project={c.project_id}", f"--zone={c.zone}", f"--cluster={c.cluster_name}"]
        if verb == "delete":
            return ["xpk", "cluster", "delete", *common, "--force"]
        return ["xpk", "cluster", "create", f"--num-nodes={c.num_nodes}",
                f"--device-type={c.device_type}", "--default-pool-cpu-machine-type=e2-standard-4",
                "--spot", "--enable-lustre-csi-driver", *common]

    def command(self) -> str:
        return f'cd "{self.ctx.xpk_dir}" && {join(self._argv("create"))}'

    def down_command(self) -> str:
        c = self.cfg
        return join(["gcloud", "container", "clusters", "delete", c.cluster_name,
                     f"--region={c.region}", f"--project={c.project_id}", "--quiet"])

    def xpk_delete_command(self) -> str:
        """`xpk cluster delete` from its state folder (NetworkReadyStep's down runs it)."""
        return f'(cd "{self.ctx.xpk_dir}" && {join(self._argv("delete"))})'


    def has_xpk_state(self, ctx: Context) -> bool:
        c = self.cfg
        return xpkstate.has_state(ctx.xpk_dir, c.project_id, c.region, c.cluster_name)

    @staticmethod
    def labelled(cluster: Any) -> bool:
        return cluster is not None and cluster.resource_labels.get("managed-by") == "rltui"

    async def probe(self, ctx: Context) -> Probe:
        cluster = await ctx.gke.get()
        if cluster is None:
            network = await ctx.network.network(self.cfg.network)
            # Networks left by an xpk that died half way are xpk's too (down must find them).
            return Probe(exists=network is not None, ready=False,
                         detail="networks only" if network else "")
        # Made by our xpk but not labelled yet (a crash in between): apply labels it.
        unlabelled = self.has_xpk_state(ctx) and not self.labelled(cluster)
        return Probe(exists=True, ready=self._built(cluster) and not unlabelled,
                     detail=cluster.status.name + (", not labelled yet" if unlabelled else ""))

    def _built(self, cluster: Any) -> bool:
        """Made by xpk: the cluster and the GPU pool xpk makes, at full size, past creation.
        RECONCILING is GKE at work on a made cluster or pool ("such as upgrading the master or
        node software": google-cloud-container 2.67.0, Cluster.Status and NodePool.Status),
        e.g. the auto-upgrade right after a create: xpk's part is done, it is not run again."""
        return gpu_pool_built(cluster, self.cfg)

    def _detached(self) -> Detached:
        from ..cloud.detached import Detached

        return Detached(self.ctx.xpk_dir, "xpk")

    async def _xpk(self, verb: str, out: StepOutput, expected_s: float) -> Outcome:
        """Run `xpk cluster <verb>` detached (cloud/detached.py): it outlives rltui, and a live
        one in this folder is re-attached to, never started twice. A live delete while up wants
        create is waited for first; a live create while down wants delete is stopped first.
        Returns its Outcome (returncode None when re-attached: unknown, the cloud decides)."""
        from ..cloud.errors import CloudError

        tool = self._detached()
        timeout_s = max(3 * expected_s, 300.0)
        while True:
            rec, started = tool.start(self._argv(verb), verb, self.ctx.endpoints.subprocess_env())
            if started or rec.verb == verb:
                break
            if verb == "create":
                out.note(f"waiting for {rec.describe()} to end before creating")
                await tool.attach(rec, out.line, attached=True)
            else:
                out.note(f"stopping {rec.describe()} before deleting")
                await tool.stop(rec)
        if not started:
            out.note(f"re-attaching to {rec.describe()}: its log is {rec.log}")
        try:
            return await tool.attach(rec, out.line, offset=rec.log_offset if started else None,
                                     deadline=rec.started_at + timeout_s, attached=not started)
        except TimeoutError:
            await tool.stop(rec)   # rltui's own limit: 3x the expected time, as before
            raise CloudError(f"xpk cluster {verb} did not finish within {timeout_s:.0f} s",
                             transient=True, code="Timeout") from None

    async def _failed_operations(self, ctx: Context, since: float) -> list[str]:
        """Failures GKE recorded for this cluster since `since` (epoch seconds, a minute of
        clock skew allowed)."""
        failed = []
        for op in await ctx.gke.operations():
            message = ctx.gke.operation_failure(op)
            if message and _epoch(op.start_time) >= since - 60:
                failed.append(f"{op.operation_type.name}: {message}")
        return failed

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        import time

        cluster = await ctx.gke.get()
        running = self._detached().live()
        if running is not None or not (cluster is not None and self._built(cluster)
                                       and self.has_xpk_state(ctx)):
            since = time.time() if running is None else running.started_at
            res = await self._xpk("create", out, self.expected_s)
            if res.returncode is None:
                # Re-attached: its exit code is its parent's to know. The cloud says.
                since = res.record.started_at
                cluster = await ctx.gke.get()
                if not (cluster is not None and self._built(cluster) and self.has_xpk_state(ctx)):
                    failed = await self._failed_operations(ctx, since)
                    if failed:
                        raise PermanentError(f"xpk cluster create failed: {'; '.join(failed)}")
                    raise TransientError("xpk cluster create ended (exit code unknown: started"
                                         " by another rltui) and the cluster is not built yet")
            elif not res.ok:
                failed = await self._failed_operations(ctx, since)
                said = f" (xpk: {res.error_line()})"
                if failed:
                    raise PermanentError(f"xpk cluster create failed: {'; '.join(failed)}{said}")
                # No failure in the cloud: xpk itself stopped (a crash, a lost connection).
                # Re-running continues from what exists.
                raise TransientError(f"xpk cluster create exited with {res.returncode}{said}")
        await self.wait_cluster_idle(ctx, out)   # GKE's own upgrade starts as xpk exits
        out.note("labelling the cluster managed-by=rltui")
        await ctx.gke.set_labels(MANAGED_BY, expected_s=ctx.expected("k8s_apply"))

    async def down_probe(self, ctx: Context) -> Probe:
        """The cluster itself (the up probe also counts networks xpk left: NetworkReadyStep's),
        or an xpk create still running in this folder (it must be stopped)."""
        cluster = await ctx.gke.get()
        live = self._detached().live()
        return Probe(exists=cluster is not None or live is not None,
                     detail="" if cluster is None else cluster.status.name)

    async def destroy(self, ctx: Context, out: StepOutput) -> None:
        running = self._detached().live()
        if running is not None and running.verb == "create":
            out.note(f"stopping {running.describe()} before deleting")
            await self._detached().stop(running)
        cluster = await ctx.gke.get()
        if cluster is None:
            return
        if not (self.has_xpk_state(ctx) or self.labelled(cluster)):
            raise PermanentError(f"cluster {self.cfg.cluster_name} carries no managed-by=rltui"
                                 f" label and {ctx.xpk_dir} holds no xpk state for it: not"
                                 " rltui's, left alone (delete it with xpk from the folder it"
                                 " was created in)")
        ctx.owned_networks = True   # xpk's networks are rltui's too (NetworkReadyStep.destroy)
        out.note("deleting the cluster through the GKE API while Lustre goes; xpk cluster delete"
                 " removes the rest once the peering and the range are gone")
        await ctx.gke.delete(expected_s=self.destroy_expected_s or self.expected_s)

    async def run_xpk_delete(self, ctx: Context, out: StepOutput, expected_s: float) -> Outcome:
        """`xpk cluster delete` from its state folder, detached (a create still running there
        is stopped first): NetworkReadyStep's down, after this step's."""
        return await self._xpk("delete", out, expected_s)

    async def delete_blueprint_leftovers(self, ctx: Context, out: StepOutput) -> bool:
        """Firewall rules, then subnets, then networks (each refuses while the next holds it)."""
        names = xpkstate.blueprint_names(self.cfg.cluster_name)
        present = {n.name for n in await ctx.network.networks()}
        mine = [n for n in names.networks if n in present]
        if not mine:
            return False
        for rule in await ctx.network.firewalls():
            if rule.name in names.firewalls or rule.network.rsplit("/", 1)[-1] in mine:
                out.line(f"deleting firewall rule {rule.name}")
                await ctx.network.delete_firewall(rule.name)
        for subnet in await ctx.network.subnetworks(self.cfg.region):
            if subnet.name in names.subnets or subnet.network.rsplit("/", 1)[-1] in mine:
                out.line(f"deleting subnetwork {subnet.name}")
                await ctx.network.delete_subnetwork(self.cfg.region, subnet.name)
        for network in mine:
            out.line(f"deleting network {network}")
            await ctx.network.delete_network(network)
        return True


def gpu_pool_built(cluster: Any, cfg: Any) -> bool:
    """The cluster and its GPU pools made, at full size, past creation (RUNNING, or RECONCILING
    while GKE works on them)."""
    made = ("RUNNING", "RECONCILING")
    gpu_pools = [p for p in cluster.node_pools
                 if any(a.accelerator_type == cfg.device.accelerator for a in p.config.accelerators)]
    return (cluster.status.name in made and bool(gpu_pools)
            and sum(p.initial_node_count for p in gpu_pools) >= cfg.num_nodes
            and all(p.status.name in made for p in gpu_pools))


def _epoch(rfc3339: str) -> float:
    """GKE's operation times ("2026-12-01T09:00:00.123456789Z") as epoch seconds; 0 if unset."""
    import datetime
    import re

    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?$", rfc3339 or "")
    if m is None:
        return 0.0
    stamp = datetime.datetime.fromisoformat(m[1] + (m[3] or "Z").replace("Z", "+00:00"))
    return stamp.timestamp() + float(m[2] or 0)


# Nodes older than this need the CSI driver's legacy port (6988) to reach Lustre
# (google-cloud-container 2.67.0, LustreCsiDriverConfig.enable_legacy_lustre_port).
LEGACY_PORT_BEFORE = (1, 33, 2, 4655000)
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
CSI_NODE_IDS = "csi.volume.kubernetes.io/nodeid"


def gke_version(text: str) -> tuple[int, ...]:
    """"1.33.5-gke.1201000" -> (1, 33, 5, 1201000)."""
    import re

    return tuple(int(n) for n in re.findall(r"\d+", text or "")[:4])


class AddonsStep(ContextStep):
    """RayOperator and the Lustre CSI driver in one cluster update, then the GPU nodes
    recreated where the driver has not reached them.

    The driver's legacy port must agree with the Lustre instance: rltui makes instances
    without the deprecated gke_support_enabled, so the port stays off, unless the nodes are
    older than 1.33.2-gke.4655000 or an existing instance was made with gke_support_enabled
    (FACTS, "Lustre CSI port"). A running cluster's existing nodes get the driver only when
    recreated (FACTS; xpk recreates every pool): whether a node has it is Kubernetes' own
    answer, the kubelet's list of registered CSI drivers on the Node. Only the GPU pools are recreated: the Ray head and
    workers, the only pods that mount Lustre, run there.

    So the update is sent the moment the control plane's create is DONE, before xpk makes
    the GPU pool: xpk 1.16's Toolkit blueprint cannot ask for the addons at creation
    (core/blueprint/blueprint_generator.py generate_a4_blueprint sets no enable_ray_operator
    or enable_managed_lustre_csi on its gke-cluster module, though the module has both), and
    gcluster's Terraform learns the create is done only on its next poll of the operation,
    up to 10 s later (terraform-provider-google: transport config PollInterval 10 s), then
    retries its node pool while the cluster is busy (retryWhileIncompatibleOperation). When
    the update gets in first, the GPU nodes are made with the driver and none is recreated
    (issue 13: 32 reference minutes for 8 nodes); when Terraform's pool got in first, the
    update waits for it and the pool's nodes are recreated as before. Hence no GKE lock and
    no need of xpk_cluster: the step waits for the control plane itself, then for xpk's GPU
    pool, and is done only once that pool's nodes all have the driver.
    """

    name, title = "addons", "Addons (RayOperator + Lustre CSI)"
    needs = ("network_ready",)   # xpk has started (it makes the network first)
    alongside = ("xpk_cluster",)
    expected_key = "addon_update"
    destroyable = False  # they go with the cluster

    async def kept(self, ctx: Context, settled: dict[str, StepState]) -> tuple[StepState, str]:
        return StepState.SKIPPED, "kept: they go with the GKE cluster"

    def command(self) -> str:
        c = self.cfg
        # xpk ignores --enable-lustre-csi-driver for b200-8; one update enables both.
        return join(["gcloud", "container", "clusters", "update", c.cluster_name,
                     f"--region={c.region}", f"--project={c.project_id}",
                     "--update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED"])

    async def legacy_port_wanted(self, ctx: Context, cluster: Any) -> bool:
        old = any(gke_version(p.version) < LEGACY_PORT_BEFORE for p in cluster.node_pools
                  if p.version)
        inst = await ctx.lustre.get(self.cfg.lustre_instance_id)
        return old or bool(inst is not None and inst.gke_support_enabled)

    async def _stale_pools(self, ctx: Context) -> list[str]:
        """GPU pools with a node whose kubelet has not registered the Lustre driver. The node
        annotation `csi.volume.kubernetes.io/nodeid` (a JSON map, driver -> node ID) is the
        kubelet's own record of its registered CSI drivers (Kubernetes CSI node registration)."""
        import json

        kube = await self.kube_if_cluster(ctx)
        if kube is None:
            return []
        accel = self.cfg.device.accelerator
        stale = set()
        for node in await kube.list("nodes"):
            meta = node.get("metadata") or {}
            labels = meta.get("labels") or {}
            if labels.get("cloud.google.com/gke-accelerator") != accel:
                continue
            try:
                drivers = json.loads((meta.get("annotations") or {}).get(CSI_NODE_IDS) or "{}")
            except ValueError:
                drivers = {}
            if LUSTRE_DRIVER not in drivers:
                stale.add(labels.get(NODE_POOL_LABEL, ""))
        return sorted(p for p in stale if p)

    async def _gpu_nodes_registered(self, ctx: Context) -> None:
        """Until every GPU node of the made pool is a Node (their drivers are read there)."""
        import asyncio

        kube = await ctx.kube()
        accel, deadline = self.cfg.device.accelerator, asyncio.get_running_loop().time() + 60.0
        while asyncio.get_running_loop().time() < deadline:
            nodes = [n for n in await kube.list("nodes")
                     if ((n.get("metadata") or {}).get("labels") or {})
                     .get("cloud.google.com/gke-accelerator") == accel]
            if len(nodes) >= self.cfg.num_nodes:
                return
            await asyncio.sleep(max(0.05, min(2.0, ctx.expected("k8s_apply") / 10)))

    async def probe(self, ctx: Context) -> Probe:
        cluster = await ctx.gke.get()
        if cluster is None:
            return Probe(exists=False)
        enabled = ctx.gke.addons_enabled(cluster)
        off = [k for k, v in enabled.items() if not v]
        if not off and ctx.gke.legacy_port(cluster) != await self.legacy_port_wanted(ctx, cluster):
            off.append("LustreCsiDriver legacy port")
        if off:
            return Probe(exists=False, detail="off: " + ", ".join(off))
        if not gpu_pool_built(cluster, self.cfg):
            return Probe(exists=True, ready=False, detail="xpk's GPU pool is not made yet")
        stale = await self._stale_pools(ctx)
        return Probe(exists=True, ready=not stale,
                     detail=f"driver not on nodes of {', '.join(stale)}" if stale else "")

    async def _gpu_pool(self, ctx: Context, out: StepOutput) -> Any:
        """The cluster once xpk's GPU pool is made at full size; a Transient error when no xpk
        runs to make it (the xpk step says why)."""
        import asyncio

        from ..cloud.detached import Detached

        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(2 * ctx.expected("xpk_done"), 60.0)
        interval = max(0.2, min(10.0, ctx.expected("xpk_node_pool") / 100))
        noted = False
        while True:
            cluster = await ctx.gke.get()
            if cluster is not None and gpu_pool_built(cluster, self.cfg):
                return cluster
            if Detached(ctx.xpk_dir, "xpk").live() is None or loop.time() > deadline:
                raise TransientError("xpk's GPU node pool is not made and no xpk is making it")
            if not noted:
                out.note("waiting for xpk's GPU node pool")
                noted = True
            await asyncio.sleep(interval)

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        # What the update asks is read before the create ends (the pools' versions are set at
        # creation), so that nothing but the update itself follows the create's DONE.
        early = await ctx.gke.get()
        legacy = early is not None and await self.legacy_port_wanted(ctx, early)
        cluster = await self.wait_control_plane(ctx, out)
        if early is None:
            legacy = await self.legacy_port_wanted(ctx, cluster)
        enabled = ctx.gke.addons_enabled(cluster)
        if not all(enabled.values()) or ctx.gke.legacy_port(cluster) != legacy:
            if cluster.status.name != "RUNNING":   # an operation runs (GKE's upgrade, xpk's pool)
                await self.wait_cluster_idle(ctx, out)
            early = not gpu_pool_built(cluster, self.cfg)
            out.note("enabling RayOperator and LustreCsiDriver in one cluster update"
                     + (" (legacy Lustre port)" if legacy else "")
                     + (", before xpk makes the GPU pool" if early else ""))
            await ctx.gke.enable_addons(expected_s=self.expected_s, legacy_port=legacy)
        if not gpu_pool_built(cluster, self.cfg):
            cluster = await self._gpu_pool(ctx, out)
        sizes = {p.name: max(1, p.initial_node_count) for p in cluster.node_pools}
        await self._gpu_nodes_registered(ctx)
        for pool in await self._stale_pools(ctx):
            await self.wait_cluster_idle(ctx, out)
            out.note(f"recreating the nodes of {pool} so that they get the Lustre CSI driver")
            # Nodes are recreated one at a time (surge 0, unavailable 1): the profile's time is
            # per node.
            await ctx.gke.recreate_node_pool(
                pool, expected_s=ctx.expected("node_pool_recreate") * sizes.get(pool, 1))


class CredentialsStep(ContextStep):
    name, title = "credentials", "Cluster credentials"
    connects = True
    # Once the control plane answers, not once xpk exits: the Secret and the PV/PVC are then
    # in place long before the GPU nodes (issue 13).
    needs = ("network_ready",)
    alongside = ("xpk_cluster",)
    expected_key = "k8s_apply"
    destroyable = False

    def command(self) -> str:
        c = self.cfg
        return join(["gcloud", "container", "clusters", "get-credentials", c.cluster_name,
                     f"--region={c.region}", f"--project={c.project_id}"])

    async def kept(self, ctx: Context, settled: dict[str, StepState]) -> tuple[StepState, str]:
        return StepState.SKIPPED, "nothing in the cloud: rltui's own connection"

    async def probe(self, ctx: Context) -> Probe:
        return Probe(exists=False)  # nothing in the cloud: connect every run

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        await self.wait_control_plane(ctx, out)
        kube = await ctx.kube()
        nodes = await kube.list("nodes")
        out.note(f"{len(nodes)} nodes")
