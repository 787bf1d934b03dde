"""What every codelab step shares: its Context, its reference durations, the GKE lock."""

from __future__ import annotations

from typing import Any

from .context import Context
from .step import Step

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
