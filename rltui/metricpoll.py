"""The wizard's Cloud Monitoring poll: Lustre's points for Metrics and the RayCluster's GPUs for
Monitor and Metrics, in one loop, so that polls never overlap and each metric is asked for once
per alignment period (a minute against Google; shorter in a faster sandbox). Lustre and the GPUs
fail apart: a missing instance must not blank the GPU column, nor a GPU error the charts."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .seam import Notice

if TYPE_CHECKING:
    from .bus import Bus
    from .seam import WizardSession


async def poll_metrics(session: WizardSession, bus: Bus) -> None:
    """Forever: ask, publish (`metrics`, `gpu`), sleep one period from the end of the asking."""
    while True:
        period = 60.0 * session.endpoints.time_scale  # a failed poll: again in a minute
        try:
            metrics = await session.lustre_metrics()
            bus.metrics.publish(metrics)
            period = float(metrics.period_s or period)
        except Exception as exc:  # noqa: BLE001 - a failed poll must not end the charts
            bus.notice.publish(Notice("warning", "metrics", str(exc)[:300]))
        try:
            bus.gpu.publish(await session.gpu_metrics())
        except Exception as exc:  # noqa: BLE001 - nor the GPU column
            bus.notice.publish(Notice("warning", "gpu", str(exc)[:300]))
        await asyncio.sleep(max(1.0, period))
