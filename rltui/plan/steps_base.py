"""What every codelab step shares: its Context, its reference durations, the GKE lock, and the
waits on what xpk makes (they end as soon as no xpk is at work to make it)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .context import Context
from .step import Step, StepOutput, TransientError

T = TypeVar("T")
# A step that waits on xpk gets two tries: a wait that ended because xpk is gone is tried once
# more (xpk_cluster may start xpk again), never the runner's six times a wait of up to an hour.
XPK_WAIT_ATTEMPTS = 2


def _gke_lock(ctx: Context) -> str:
    return f"gke:{ctx.cfg.project_id}/{ctx.cfg.cluster_name}"


class XpkWatch:
    """Whether an xpk is still at work in this cluster's folder: its detached record there
    (cloud/detached.py: live while its process, by PID, start time and command line, runs).

    A wait begins when its step does, which may be a moment before xpk_cluster starts xpk
    (both follow enable_apis): xpk counts as gone once it was seen running and is not, once
    a run that started during the wait has ended, or, when none was seen, after `grace`."""

    def __init__(self, ctx: Context) -> None:
        self.tool = ctx.xpk()
        self.t0 = time.time()
        # Five reference k8s_apply (a minute against Google), at least 3 real seconds: room
        # for xpk_cluster's own first call before it starts xpk.
        self.grace = max(3.0, 5 * ctx.expected("k8s_apply"))
        self.seen = False

    def gone(self) -> str | None:
        """None while xpk runs or may still start; else why the wait must end, with its log."""
        if self.tool.live() is not None:
            self.seen = True
            return None
        rec = self.tool.read()
        ended = rec is not None and rec.started_at >= self.t0 - 1.0
        if not (self.seen or ended) and time.time() - self.t0 < self.grace:
            return None
        log = rec.log if rec is not None else str(self.tool.log_path("create"))
        return f"xpk is not running (its log: {log})"


class ContextStep(Step):
    """A step bound to one Context: expected durations come from the reference profile."""

    expected_key = ""
    destroy_key: str | None = None

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        if self.expected_key:
            self.expected_s = ctx.expected(self.expected_key)
        if self.destroy_key:
            self.destroy_expected_s = ctx.expected(self.destroy_key)

    async def kube_if_cluster(self, ctx: Context) -> Any:
        """The Kubernetes adapter, or None when the GKE cluster (and so its objects) is gone."""
        cluster = await ctx.gke.get()
        if cluster is None or cluster.status.name not in ("RUNNING", "RECONCILING"):
            return None
        return await ctx.kube()

    async def wait_for_xpk(self, ctx: Context, out: StepOutput, what: str,
                           made: Callable[[], Awaitable[T | None]], *,
                           interval_s: float) -> T:
        """`made()`'s answer once it is not None, polled every `interval_s` while xpk makes
        it. Ends at once, Transient, when no xpk is at work and it is still not there (the
        step's second try gives an xpk that xpk_cluster starts again its chance); past twice
        xpk's reference time (a backstop: xpk_cluster stops an xpk at three times) too."""
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(2 * ctx.expected("xpk_done"), 60.0)
        watch = XpkWatch(ctx)
        noted = False
        while True:
            found = await made()
            if found is not None:
                return found
            gone = watch.gone()
            if gone is not None:
                # Asked once more: xpk may have made it just before it exited.
                found = await made()
                if found is not None:
                    return found
                raise TransientError(f"{what} does not exist and {gone}")
            if loop.time() > deadline:
                raise TransientError(f"{what} has not appeared yet")
            if not noted:
                out.note(f"waiting for xpk to create {what}")
                noted = True
            await asyncio.sleep(interval_s)

    async def wait_control_plane(self, ctx: Context, out: StepOutput) -> Any:
        """The cluster once its create is DONE (RUNNING, or RECONCILING while GKE works on
        it), polled while xpk makes it; ends as soon as no xpk is at work (`wait_for_xpk`)."""
        async def running() -> Any:
            cluster = await ctx.gke.get()
            made = cluster is not None and cluster.status.name in ("RUNNING", "RECONCILING")
            return cluster if made else None

        interval = max(0.02, min(10.0, ctx.expected("xpk_control_plane") / 40))
        return await self.wait_for_xpk(ctx, out, f"the GKE control plane of"
                                       f" {self.cfg.cluster_name}", running, interval_s=interval)

    async def wait_gpu_pool(self, ctx: Context, out: StepOutput) -> Any:
        """The cluster once xpk's GPU pool is made at full size (steps_cluster.gpu_pool_built);
        ends as soon as no xpk is at work to make it."""
        from .steps_cluster import gpu_pool_built

        async def built() -> Any:
            cluster = await ctx.gke.get()
            return cluster if cluster is not None and gpu_pool_built(cluster, self.cfg) else None

        interval = max(0.2, min(10.0, ctx.expected("xpk_node_pool") / 100))
        return await self.wait_for_xpk(ctx, out, f"xpk's GPU node pool of"
                                       f" {self.cfg.cluster_name}", built, interval_s=interval)

    async def wait_xpk_exit(self, ctx: Context, out: StepOutput) -> None:
        """Until no xpk runs in rltui's folder for this cluster (cloud/detached.py `live`: its
        record, by PID, start time and command line), since nothing of rltui's may change the
        GKE cluster while xpk's Terraform works on it (AddonsStep says why). Polled at about
        a two-hundredth of xpk's reference time; past three times that reference time (when
        XpkClusterStep stops an xpk of its own), Transient: the step's next try waits again."""
        import asyncio

        tool = ctx.xpk()
        loop = asyncio.get_running_loop()
        reference = ctx.expected("xpk_done")
        deadline = loop.time() + max(3 * reference, 60.0)
        noted = False
        while (rec := tool.live()) is not None:
            if loop.time() > deadline:
                raise TransientError(f"{rec.describe()} still runs: rltui changes nothing on"
                                     " the cluster while it does")
            if not noted:
                out.note(f"waiting for {rec.describe()} to end: nothing changes the cluster"
                         " while xpk's Terraform works on it")
                noted = True
            await asyncio.sleep(max(0.05, min(5.0, reference / 200)))

    async def wait_cluster_idle(self, ctx: Context, out: StepOutput) -> None:
        """Until no xpk runs (`wait_xpk_exit`) and no operation runs on the cluster (GKE runs
        one at a time: an upgrade of its own right after a create, xpk's node pool), read
        from its operations list at about a hundredth of GKE's upgrade, so that the next call
        neither waits out a long retry backoff nor is refused; a minute of patience past three
        upgrades, then on anyway (the call's own retry still waits for a busy cluster)."""
        import asyncio

        await self.wait_xpk_exit(ctx, out)
        loop = asyncio.get_running_loop()
        upgrade = ctx.expected("gke_auto_upgrade")
        deadline = loop.time() + 3 * upgrade + 60.0
        interval = max(0.05, min(5.0, upgrade / 100))
        waited = False
        while loop.time() < deadline:
            running = [op for op in await ctx.gke.operations() if op.status.name != "DONE"]
            if not running:
                return
            if not waited:
                out.note(f"waiting for GKE's {running[0].operation_type.name} to end")
                waited = True
            await asyncio.sleep(interval)
