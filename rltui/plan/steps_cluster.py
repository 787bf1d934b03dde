"""The cluster's steps: enable the APIs, `xpk cluster create` (down: `xpk cluster delete`),
the cluster's credentials. The addons are steps_addons.py's."""

from __future__ import annotations

from shlex import join
from typing import TYPE_CHECKING, Any

from ..words import count
from . import xpkstate
from .codelab import APIS
from .context import Context
from .ownership import MANAGED_BY, cluster_marked, hand_delete, marked, not_rltuis
from .step import Kept, PermanentError, Probe, StepOutput, StepState, TransientError
from .steps_base import XPK_WAIT_ATTEMPTS, ContextStep, _gke_lock

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


class XpkClusterStep(ContextStep):
    """`xpk cluster create` from one fixed folder per cluster, then the `managed-by: rltui`
    label. Whose the cluster is comes from the cloud and from rltui's own record, never from
    xpk's blueprint (`owns`): the label, or its unique Cluster.id being the one rltui
    recorded when its own xpk made it (plan/xpkstate.py `record_owned`: after an `xpk cluster
    create` of rltui's that exits 0, or, at first sight, a cluster created after the last
    xpk create rltui started in its folder began: `made_by_own_create`, which is what a run
    that was stopped or failed after making the cluster leaves). xpk writes its blueprint
    before Terraform runs and never removes it, so after an xpk of rltui's failed because the
    name was taken, a same-named cluster of someone else's would otherwise pass for rltui's.
    A cluster not known as rltui's is not labelled by `up`: xpk runs again instead, which is
    harmless (Terraform's state in rltui's folder decides; a cluster it did not make fails
    the apply with 409).

    Up: nothing of rltui's changes the GKE cluster while xpk (its Terraform) runs: the probe
    says "not ready" while an xpk is live in rltui's folder (apply re-attaches and waits), the
    addons wait for its exit (AddonsStep says why), and so does the label. The label is set
    once: terraform-provider-google v7's resource_labels are non-authoritative ("will only
    manage the labels present in your configuration": v7.40.0
    google/services/container/resource_container_cluster.go, lines 2162-2169), so a re-apply
    of the blueprint (Cluster Toolkit v1.94.0 modules/scheduler/gke-cluster/main.tf line 127,
    `resource_labels = local.labels`) keeps it; apply sets it again only where it is missing.
    Whether a failed xpk is worth another try is read from the cloud after it exits (a GKE
    operation that failed is final); xpk's own words are only quoted.

    Down: `xpk cluster delete` from xpk's state folder, detached, while the cluster still
    exists, once what rltui put on the cluster and on its network has settled, whatever its
    outcome (`destroy_after`): xpk 1.16.0 runs `gcluster destroy` on the a4 blueprint
    (commands/cluster_gcluster.py cluster_delete, lines 178-226), which destroys the cluster
    and the whole blueprint (networks, subnets, firewall rules, routers, NAT, NAT IPs). Its
    plan reads `data "google_container_cluster"` first (modules/management/kubectl-apply/
    main.tf lines 163-167, modules/compute/gke-node-pool/main.tf lines 96-99), which fails
    once the cluster is gone: so the cluster is never deleted through the GKE API while xpk's
    blueprint is there. Without it, a cluster that is rltui's is deleted through the GKE API
    (DeleteCluster), and NetworkReadyStep deletes its blueprint by name. A cluster that is not
    rltui's is kept, with the command to delete it by hand.
    """

    name, title = "xpk_cluster", "xpk cluster create"
    needs = ("enable_apis",)
    expected_key = "xpk_done"
    # Down: what runs on the cluster (the RayCluster, the Secret, the PV/PVC; the addons and
    # the credentials keep nothing) and whatever holds its network are let settle first,
    # failed or not: the Kubernetes objects vanish with the cluster, and a RayCluster whose
    # pods hang Terminating on a NotReady Spot node, a refused Kubernetes call or a network
    # that must stay does not keep the billed GPU nodes and NAT.
    destroy_needs = ()
    destroy_after = ("raycluster", "secret", "pv_pvc", "addons", "credentials",
                     "lustre_instance", "peering", "ip_range", "lustre_firewall")
    max_attempts = 3  # each try can take most of an hour: a crash gets two more, no more

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.locks = (_gke_lock(ctx),)
        self.destroy_expected_s = ctx.expected(
            "xpk_delete" if self.has_xpk_state(ctx) else "gke_cluster_delete")

    def down_title(self) -> str:
        if self.has_xpk_state(self.ctx):
            return f"GKE cluster {self.cfg.cluster_name} and its blueprint (xpk cluster delete)"
        return f"GKE cluster {self.cfg.cluster_name} (GKE API)"

    def _argv(self, verb: str) -> list[str]:
        c = self.cfg
        common = [f"--project={c.project_id}", f"--zone={c.zone}", f"--cluster={c.cluster_name}"]
        if verb == "delete":
            return ["xpk", "cluster", "delete", *common, "--force"]
        return ["xpk", "cluster", "create", f"--num-nodes={c.num_nodes}",
                f"--device-type={c.device_type}", "--default-pool-cpu-machine-type=e2-standard-4",
                *c.capacity_type.xpk_flags(), "--enable-lustre-csi-driver", *common]

    def command(self) -> str:
        return f'cd "{self.ctx.xpk_dir}" && {join(self._argv("create"))}'

    def down_command(self) -> str:
        """`xpk cluster delete` from its state folder (the codelab's way)."""
        return f'(cd "{self.ctx.xpk_dir}" && {join(self._argv("delete"))})'

    def has_xpk_state(self, ctx: Context) -> bool:
        """xpk's blueprint in rltui's folder: its delete takes the Toolkit path (not whose the
        cluster is: `owns`)."""
        c = self.cfg
        return xpkstate.has_state(ctx.xpk_dir, c.project_id, c.region, c.cluster_name)

    def recorded(self, ctx: Context) -> xpkstate.Owned | None:
        c = self.cfg
        return xpkstate.read_owned(ctx.xpk_dir, c.project_id, c.region, c.cluster_name)

    def owns(self, ctx: Context, cluster: Any) -> bool:
        """The cluster is rltui's: labelled, the one rltui recorded (by its unique id), or
        made by the last xpk create rltui started here (recorded at first sight: `_claim`)."""
        return cluster is not None and (
            cluster_marked(cluster, self.recorded(ctx))
            or xpkstate.made_by_own_create(ctx.xpk_dir, cluster.create_time))

    def blueprint_owned(self, ctx: Context, cluster: Any, left: Any = None) -> bool:
        """xpk's blueprint for this cluster is rltui's: its cluster is; gone, it was recorded
        as rltui's and not forgotten yet (a teardown forgets it once nothing is left), was
        deleted by this teardown, or what is left of it (`left`, plan/leftovers.py) was made
        by the last xpk create rltui started here (leftovers.made_by_own_create)."""
        from . import leftovers

        if cluster is not None:
            return self.owns(ctx, cluster)
        return self.recorded(ctx) is not None or ctx.owned_networks or (
            left is not None and leftovers.made_by_own_create(ctx.xpk_dir, left))

    def _record(self, ctx: Context, cluster: Any) -> None:
        c = self.cfg
        xpkstate.record_owned(ctx.xpk_dir, c.project_id, c.region, c.cluster_name,
                              cluster.id, cluster.create_time)

    def _claim(self, ctx: Context, cluster: Any) -> None:
        """Record a cluster the last xpk create of rltui's made, at first sight: the next xpk
        run in this folder replaces that run's record, and with it the proof."""
        if cluster is not None and not xpkstate.owns(self.recorded(ctx), cluster) and \
                xpkstate.made_by_own_create(ctx.xpk_dir, cluster.create_time):
            self._record(ctx, cluster)

    @staticmethod
    def labelled(cluster: Any) -> bool:
        return cluster is not None and marked(cluster.resource_labels)

    async def probe(self, ctx: Context) -> Probe:
        cluster = await ctx.gke.get()
        live = self._detached().live()
        if cluster is None:
            network = await ctx.network.network(self.cfg.network)
            # Networks left by an xpk that died half way are xpk's too (down must find them).
            return Probe(exists=network is not None, ready=False,
                         detail="networks only" if network else "")
        status = cluster.status.name
        if live is not None:
            # Terraform is at work on it: apply re-attaches and waits for it.
            return Probe(exists=True, ready=False, detail=f"{status}; {live.describe()} runs")
        if not self.owns(ctx, cluster):
            return Probe(exists=True, ready=False,
                         detail=f"{status}, not known as rltui's (no managed-by=rltui label,"
                                " no record of its id): up runs xpk, whose Terraform state"
                                " decides")
        # Made by our xpk but not labelled yet (a crash in between): apply labels it.
        unlabelled = not self.labelled(cluster)
        note = pool_note(cluster, self.cfg)
        return Probe(exists=True, ready=self._built(cluster) and not unlabelled,
                     detail=status + (f"; {note}" if note else "")
                     + (", not labelled yet" if unlabelled else ""))

    def _built(self, cluster: Any) -> bool:
        """Made by xpk: the cluster and the GPU pool xpk makes, at full size, past creation
        (`gpu_pool_built`): xpk's part is done, it is not run again."""
        return gpu_pool_built(cluster, self.cfg)

    def _detached(self) -> Detached:
        return self.ctx.xpk()

    async def _xpk(self, verb: str, out: StepOutput, expected_s: float) -> Outcome:
        """Run `xpk cluster <verb>` detached (cloud/detached.py): it outlives rltui, and a live
        one in this folder is re-attached to, never started twice. A live delete while up wants
        create is waited for first, for at most three times a delete's expected time from its
        start (as for rltui's own runs); a live create while down wants delete is stopped
        first. Returns its Outcome (returncode None when re-attached: unknown, the cloud
        decides)."""
        from ..cloud.errors import CloudError

        tool = self._detached()
        timeout_s = max(3 * expected_s, 300.0)
        while True:
            rec, started = tool.start(self._argv(verb), verb, self.ctx.endpoints.subprocess_env())
            if started or rec.verb == verb:
                break
            if verb == "create":
                out.note(f"waiting for {rec.describe()} to end before creating")
                bound = max(3 * self.ctx.expected("xpk_delete"), 300.0)
                try:
                    await tool.attach(rec, out.line, attached=True,
                                      deadline=rec.started_at + bound)
                except TimeoutError:
                    raise TransientError(
                        f"{rec.describe()} did not end within {bound:.0f} s (three times an"
                        f" xpk cluster delete's expected time): run up again once it has"
                        f" (its log: {rec.log})") from None
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
        self._claim(ctx, cluster)      # made by an xpk of rltui's that did not see it end
        running = self._detached().live()
        if running is not None or not (cluster is not None and self._built(cluster)
                                       and self.owns(ctx, cluster)):
            since = time.time() if running is None else running.started_at
            res = await self._xpk("create", out, self.expected_s)
            cluster = await ctx.gke.get()
            self._claim(ctx, cluster)  # made by this run, whatever its end
            if res.returncode is None:
                # Re-attached: its exit code is its parent's to know. The cloud says.
                since = res.record.started_at
                if not (cluster is not None and self._built(cluster)):
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
            elif cluster is None:
                raise TransientError(f"xpk cluster create exited with 0 and cluster"
                                     f" {self.cfg.cluster_name} does not exist")
            else:
                # rltui's own xpk exited 0: Terraform's state in rltui's folder holds this
                # cluster (one it did not make fails its apply with 409).
                self._record(ctx, cluster)
        if cluster is None or not self.owns(ctx, cluster):
            raise TransientError(f"cluster {self.cfg.cluster_name} is built but not known as"
                                 " rltui's yet: xpk runs again")
        # xpk has exited: from here on only rltui works on the cluster.
        if not self.labelled(cluster):
            await self.wait_cluster_idle(ctx, out)   # GKE's own upgrade starts as xpk exits
            out.note("labelling the cluster managed-by=rltui")
            await ctx.gke.set_labels(MANAGED_BY, expected_s=ctx.expected("k8s_apply"))

    async def down_probe(self, ctx: Context) -> Probe:
        """The cluster itself (the up probe also counts networks xpk left: NetworkReadyStep's),
        or an xpk still running in this folder (a create is stopped, a delete re-attached)."""
        cluster = await ctx.gke.get()
        live = self._detached().live()
        return Probe(exists=cluster is not None or live is not None,
                     detail="" if cluster is None else cluster.status.name)

    async def destroy(self, ctx: Context, out: StepOutput) -> str:
        import time

        c = self.cfg
        running = self._detached().live()
        if running is not None and running.verb == "create":
            out.note(f"stopping {running.describe()} before deleting")
            await self._detached().stop(running)
            running = None
        cluster = await ctx.gke.get()
        self._claim(ctx, cluster)   # before xpk's delete replaces the create's record
        state = self.has_xpk_state(ctx)
        if cluster is not None and not self.owns(ctx, cluster):
            raise Kept(not_rltuis(
                f"no managed-by=rltui label, and its id is not the one rltui recorded for the"
                f" cluster its xpk made ({xpkstate.owned_path(ctx.xpk_dir)}); if xpk made it,"
                " delete it with xpk from the folder it ran in",
                hand_delete("GKE cluster", c.cluster_name, c)))
        if state and (cluster is not None or running is not None):
            ctx.owned_networks = True   # the blueprint goes with it, or by name after it
            since = time.time() if running is None else running.started_at
            out.note(f"deleting the cluster and its blueprint with xpk from its state folder"
                     f" {ctx.xpk_dir}")
            res = await self._xpk("delete", out, self.destroy_expected_s or self.expected_s)
            if await ctx.gke.get() is not None:
                said = f" (xpk: {res.error_line()})"
                failed = [f for f in await self._failed_operations(ctx, since)
                          if f.startswith("DELETE_CLUSTER")]
                if failed:
                    raise PermanentError(f"xpk cluster delete failed: {'; '.join(failed)}{said}")
                raise TransientError(f"xpk cluster delete exited with {res.returncode} and"
                                     f" cluster {c.cluster_name} is still there{said}")
            if not res.ok:
                out.note(f"xpk cluster delete exited with {res.returncode} (xpk:"
                         f" {res.error_line()}): what it left goes by the blueprint's names next")
                return "deleted by xpk cluster delete (which left some of its blueprint)"
            return "deleted by xpk cluster delete, with its blueprint"
        if cluster is None:
            return "already gone"
        ctx.owned_networks = True   # rltui's: so is the blueprint made for it
        out.note("xpk's state folder is missing: deleting the cluster through the GKE API; its"
                 " blueprint goes by name next")
        await ctx.gke.delete(expected_s=ctx.expected("gke_cluster_delete"))
        return "deleted through the GKE API (xpk's state was lost)"


# Cluster.Status and NodePool.Status (google-cloud-container 2.67.0,
# container_v1/types/cluster_service.py lines 5017-5021 and 9053-9062): RECONCILING is GKE at
# work on a made cluster or pool ("such as upgrading the master or node software"), e.g. the
# auto-upgrade right after a create; a pool RUNNING_WITH_ERROR "has been created and is
# partially usable" (some nodes could not be made: a Spot stockout). Both are made: running
# xpk again over them would re-apply the blueprint (the addons off under a running RayCluster:
# AddonsStep) and change nothing that GKE is not already retrying.
CLUSTER_MADE = ("RUNNING", "RECONCILING")
POOL_MADE = ("RUNNING", "RECONCILING", "RUNNING_WITH_ERROR")


def _gpu_pools(cluster: Any, cfg: Any) -> list[Any]:
    return [p for p in cluster.node_pools
            if any(a.accelerator_type == cfg.device.accelerator for a in p.config.accelerators)]


def gpu_pool_built(cluster: Any, cfg: Any) -> bool:
    """The cluster and its GPU pools made, at full size (their create-time count), past
    creation (CLUSTER_MADE, POOL_MADE)."""
    gpu_pools = _gpu_pools(cluster, cfg)
    return (cluster.status.name in CLUSTER_MADE and bool(gpu_pools)
            and sum(p.initial_node_count for p in gpu_pools) >= cfg.num_nodes
            and all(p.status.name in POOL_MADE for p in gpu_pools))


def pool_note(cluster: Any, cfg: Any) -> str:
    """Words for GPU pools GKE made only partly (RUNNING_WITH_ERROR), "" when none is."""
    partial = [p.name for p in _gpu_pools(cluster, cfg) if p.status.name == "RUNNING_WITH_ERROR"]
    if not partial:
        return ""
    return (f"GPU pool {', '.join(partial)} is RUNNING_WITH_ERROR (made and partly usable: GKE"
            " could not make every node, e.g. no Spot capacity); xpk is not run again over it")


_epoch = xpkstate.epoch   # GKE's operation and creation times as epoch seconds


class CredentialsStep(ContextStep):
    """The cluster's credentials once its control plane answers, not once xpk exits: the
    Secret and the PV/PVC are then in place long before the GPU nodes. They are
    Kubernetes objects, not GKE operations: Terraform's busy-cluster refusals are not
    theirs, and the blueprint's kubectl-apply modules apply only their own manifests, each a
    Helm release of its own (Cluster Toolkit v1.94.0 modules/management/kubectl-apply/main.tf,
    module "kubectl_apply_manifests", lines 171-189, for_each over its apply_manifests), so
    they neither see nor touch rltui's objects. The wait ends as soon as no xpk is at work."""

    name, title = "credentials", "Cluster credentials"
    connects = True
    needs = ("network_ready",)
    alongside = ("xpk_cluster",)
    # Down: it keeps nothing; the Secret and the PV/PVC settle first, whatever their outcome.
    destroy_needs = ()
    destroy_after = ("secret", "pv_pvc")
    expected_key = "k8s_apply"
    destroyable = False
    max_attempts = XPK_WAIT_ATTEMPTS

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
        out.note(count(len(nodes), "node"))
