"""Lustre throughput and capacity for the Metrics screen, from Cloud Monitoring."""

from __future__ import annotations

import math
import time

from ..seam import LustreMetrics
from .context import Context


async def lustre_metrics(ctx: Context, minutes: float = 30.0) -> LustreMetrics:
    from ..cloud.monitoring import MonitoringAdapter

    cfg = ctx.cfg
    mon = ctx._get("monitoring", lambda: MonitoringAdapter(ctx.endpoints, cfg.project_id))
    # One reference minute per point: Cloud Monitoring samples the Lustre metrics every 60 s
    # ("Sampled every 60 seconds", docs.cloud.google.com/monitoring/api/metrics_gcp_i_o) and
    # 60 s is the API's shortest alignment period. A sandbox running faster aligns on shorter
    # periods: whole seconds, rounded up, so that neither the period nor the app's polls (one
    # per period, app.poll_metrics) come more often than a reference minute.
    period = max(1, math.ceil(60 * ctx.endpoints.time_scale - 1e-9))
    instance = cfg.lustre_instance_id
    at = time.time()
    rates = await mon.throughput(instance, minutes=minutes, period_s=period)
    used = await mon.used_bytes(instance, minutes=minutes, period_s=period)
    return LustreMetrics(at, period, tuple(rates["read"]), tuple(rates["write"]), tuple(used),
                         cfg.lustre_capacity)
