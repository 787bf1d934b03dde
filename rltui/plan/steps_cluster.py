"""The cluster's steps: enable the APIs, `xpk cluster create` (down: `xpk cluster delete`),
the cluster's credentials. The addons are steps_addons.py's."""

from __future__ import annotations

from shlex import join
from typing import TYPE_CHECKING, Any

from .codelab import APIS
from . import xpkstate
from .context import Context
from .ownership import MANAGED_BY, hand_delete, marked, not_rltuis
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
    label: ownership is read from the cloud (the label), plus xpk's own state when present.

    Up: nothing of rltui's changes the GKE cluster while xpk (its Terraform) runs: the addons
    wait for xpk to exit (AddonsStep says why), and so does the label. It goes on again after
    every xpk run: a re-apply of the blueprint sets the cluster's resource_labels back to the
    blueprint's own (Cluster Toolkit v1.94.0 modules/scheduler/gke-cluster/main.tf line 127,
    `resource_labels = local.labels`). Whether a failed xpk is worth another try is read from
    the cloud after it exits (a GKE operation that failed is final); xpk's own words are only
    quoted.

    Down: `xpk cluster delete` from xpk's state folder, detached, while the cluster still
    exists, once everything rltui put on the cluster and on its network is gone (the
    Kubernetes objects, Lustre, the peering, the range, rltui's firewall rule): xpk 1.16.0
    runs `gcluster destroy` on the a4 blueprint (commands/cluster_gcluster.py cluster_delete,
    lines 178-226), which destroys the cluster and the whole blueprint (networks, subnets,
    firewall rules, routers, NAT, NAT IPs). Its plan reads `data "google_container_cluster"`
    first (modules/management/kubectl-apply/main.tf lines 163-167,
    modules/compute/gke-node-pool/main.tf lines 96-99), which fails once the cluster is gone:
    so the cluster is never deleted through the GKE API while xpk's state exists. Without
    xpk's state, a cluster labelled managed-by=rltui is deleted through the GKE API
    (DeleteCluster), and NetworkReadyStep deletes its blueprint by name. A cluster with
    neither is not rltui's: kept, with the command to delete it by hand.
    """

    name, title = "xpk_cluster", "xpk cluster create"
    needs = ("enable_apis",)
    expected_key = "xpk_done"
    # What runs on the cluster goes first (credentials: the Kubernetes objects; addons: the
    # RayCluster); whatever holds its network is let finish first, failed or not: the billed
    # cluster goes even if the network must stay.
    destroy_needs = ("addons", "credentials")
    destroy_after = ("lustre_instance", "peering", "ip_range", "lustre_firewall")
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
                "--spot", "--enable-lustre-csi-driver", *common]

    def command(self) -> str:
        return f'cd "{self.ctx.xpk_dir}" && {join(self._argv("create"))}'

    def down_command(self) -> str:
        """`xpk cluster delete` from its state folder (the codelab's way)."""
        return f'(cd "{self.ctx.xpk_dir}" && {join(self._argv("delete"))})'

    def has_xpk_state(self, ctx: Context) -> bool:
        c = self.cfg
        return xpkstate.has_state(ctx.xpk_dir, c.project_id, c.region, c.cluster_name)

    @staticmethod
    def labelled(cluster: Any) -> bool:
        return cluster is not None and marked(cluster.resource_labels)

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
        # xpk has exited: from here on only rltui works on the cluster.
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
        state = self.has_xpk_state(ctx)
        if cluster is not None and not (state or self.labelled(cluster)):
            raise Kept(not_rltuis(
                f"no managed-by=rltui label, and {ctx.xpk_dir} holds no xpk state for it; if"
                " xpk made it, delete it with xpk from the folder it ran in",
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
        ctx.owned_networks = True   # labelled rltui's: so is the blueprint made for it
        out.note("xpk's state folder is missing: deleting the cluster through the GKE API; its"
                 " blueprint goes by name next")
        await ctx.gke.delete(expected_s=ctx.expected("gke_cluster_delete"))
        return "deleted through the GKE API (xpk's state was lost)"


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


class CredentialsStep(ContextStep):
    """The cluster's credentials once its control plane answers, not once xpk exits: the
    Secret and the PV/PVC are then in place long before the GPU nodes (issue 13). They are
    Kubernetes objects, not GKE operations: Terraform's busy-cluster refusals are not
    theirs, and the blueprint's kubectl-apply modules apply only their own manifests, each a
    Helm release of its own (Cluster Toolkit v1.94.0 modules/management/kubectl-apply/main.tf,
    module "kubectl_apply_manifests", lines 171-189, for_each over its apply_manifests), so
    they neither see nor touch rltui's objects. The wait ends as soon as no xpk is at work."""

    name, title = "credentials", "Cluster credentials"
    connects = True
    needs = ("network_ready",)
    alongside = ("xpk_cluster",)
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
        out.note(f"{len(nodes)} nodes")
