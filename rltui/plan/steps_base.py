"""What every codelab step shares: its Context, its reference durations, the GKE lock."""

from __future__ import annotations

from typing import Any

from .context import Context
from .step import Step, StepOutput

def _gke_lock(ctx: Context) -> str:
    return f"gke:{ctx.cfg.project_id}/{ctx.cfg.cluster_name}"


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

    async def wait_control_plane(self, ctx: Context, out: StepOutput) -> Any:
        """The cluster once its create is DONE, polled every reference second while xpk makes
        it (the addon update must land before gcluster's next call: AddonsStep's docstring)."""
        import asyncio

        from .step import TransientError

        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(2 * ctx.expected("xpk_done"), 60.0)
        fine = max(0.02, ctx.endpoints.time_scale)          # one reference second
        coarse = max(fine, min(10.0, ctx.expected("xpk_control_plane") / 40))
        waited = False
        while True:
            cluster = await ctx.gke.get()
            if cluster is not None and cluster.status.name in ("RUNNING", "RECONCILING"):
                return cluster
            if not waited:
                out.note("waiting for xpk's GKE control plane")
                waited = True
            if loop.time() > deadline:
                raise TransientError(f"cluster {self.cfg.cluster_name} is not running yet")
            await asyncio.sleep(fine if cluster is not None else coarse)

    async def wait_cluster_idle(self, ctx: Context, out: StepOutput) -> None:
        """Until no operation runs on the cluster (GKE runs one at a time: an upgrade of its
        own right after a create, xpk's node pool), read from its operations list at about a
        hundredth of GKE's upgrade, so that the next call neither waits out a long retry
        backoff nor is refused; a minute of patience past three upgrades, then on anyway
        (the call's own retry still waits for a busy cluster)."""
        import asyncio

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
