"""Lustre throughput and capacity, and the GPUs' use per pod, from Cloud Monitoring."""

from __future__ import annotations

import math
import time

from ..seam import GpuMetrics, LustreMetrics
from .context import Context


def _period(ctx: Context) -> int:
    # One reference minute per point: Cloud Monitoring samples the Lustre metrics every 60 s
    # ("Sampled every 60 seconds", docs.cloud.google.com/monitoring/api/metrics_gcp_i_o) and
    # 60 s is the API's shortest alignment period. A sandbox running faster aligns on shorter
    # periods: whole seconds, rounded up, so that neither the period nor the app's polls (one
    # per period, app.poll_metrics) come more often than a reference minute.
    return max(1, math.ceil(60 * ctx.endpoints.time_scale - 1e-9))


async def lustre_metrics(ctx: Context, minutes: float = 30.0) -> LustreMetrics:
    from ..cloud.monitoring import MonitoringAdapter

    cfg = ctx.cfg
    mon = ctx._get("monitoring", lambda: MonitoringAdapter(ctx.endpoints, cfg.project_id))
    period = _period(ctx)
    instance = cfg.lustre_instance_id
    at = time.time()
    rates = await mon.throughput(instance, minutes=minutes, period_s=period)
    used = await mon.used_bytes(instance, minutes=minutes, period_s=period)
    return LustreMetrics(at, period, tuple(rates["read"]), tuple(rates["write"]), tuple(used),
                         cfg.lustre_capacity)


async def gpu_metrics(ctx: Context, minutes: float = 30.0) -> GpuMetrics:
    """Duty cycle and memory of the RayCluster's pods' GPUs (one query per metric), aligned on
    the same end so that their points share their times."""
    from ..cloud.monitoring import DUTY_CYCLE, MEMORY_TOTAL, MEMORY_USED, MonitoringAdapter, _end_s

    cfg = ctx.cfg
    mon = ctx._get("monitoring", lambda: MonitoringAdapter(ctx.endpoints, cfg.project_id))
    period, end, at = _period(ctx), _end_s(), time.time()
    found = {metric: {pod: tuple(points) for pod, points in (await mon.per_pod(
        metric, cfg.cluster_name, "default", minutes=minutes, period_s=period, end_s=end)).items()}
        for metric in (DUTY_CYCLE, MEMORY_USED, MEMORY_TOTAL)}
    return GpuMetrics(at, period, found[DUTY_CYCLE], found[MEMORY_USED], found[MEMORY_TOTAL])
