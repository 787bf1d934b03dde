"""Lustre throughput and capacity for the Metrics screen, from Cloud Monitoring."""

from __future__ import annotations

import time
from typing import Any

from .context import Context


async def lustre_metrics(ctx: Context, minutes: float = 30.0) -> dict[str, Any]:
    from ..cloud.monitoring import MonitoringAdapter

    cfg = ctx.cfg
    mon = ctx._get("monitoring", lambda: MonitoringAdapter(ctx.endpoints, cfg.project_id))
    # One reference minute per point (Lustre samples every 60 s); a sandbox running faster
    # aligns on shorter periods.
    period = max(1, round(60 * ctx.endpoints.time_scale))
    instance = cfg.lustre_instance_id
    out: dict[str, Any] = {"at": time.time(), "period_s": period}
    out.update(await mon.throughput(instance, minutes=minutes, period_s=period))
    out["used"] = await mon.used_bytes(instance, minutes=minutes, period_s=period)
    out["capacity_gib"] = cfg.lustre_capacity
    return out
