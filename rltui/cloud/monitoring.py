"""Lustre throughput and capacity from Cloud Monitoring (async, gRPC).

The Lustre metric type names are discovered at run time (starts_with the service's prefix),
not hard-coded: they were not verifiable when this was written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import retry

PREFIX = "lustre.googleapis.com/"


@dataclass(frozen=True)
class Point:
    t: float       # end of the period, seconds since the epoch
    value: float


@dataclass(frozen=True)
class LustreMetricTypes:
    read: str | None
    write: str | None
    used: str | None
    total: str | None


class MonitoringAdapter:
    def __init__(self, endpoints: Endpoints, project: str) -> None:
        self.endpoints, self.project = endpoints, project
        self._client: Any = None
        self._types: LustreMetricTypes | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.endpoints.monitoring()
        return self._client

    async def metric_types(self) -> LustreMetricTypes:
        if self._types is None:
            async def call() -> list[str]:
                pager = await self.client.list_metric_descriptors(request={
                    "name": f"projects/{self.project}",
                    "filter": f'metric.type = starts_with("{PREFIX}")'}, timeout=CALL_TIMEOUT_S)
                return [d.type async for d in pager]

            types = await retry(call, what="Lustre metric descriptors")

            def pick(*words: str) -> str | None:
                return next((t for t in types if all(w in t for w in words)), None)

            self._types = LustreMetricTypes(read=pick("read", "bytes"), write=pick("write", "bytes"),
                                            used=pick("used"), total=pick("total"))
        return self._types

    async def series(self, metric_type: str, instance_id: str, *, minutes: float,
                     period_s: int = 60, aligner: str = "ALIGN_RATE") -> list[Point]:
        """One instance's points over the last `minutes`, oldest first."""
        from google.cloud import monitoring_v3

        now = time.time()
        interval = monitoring_v3.TimeInterval(end_time={"seconds": int(now)},
                                              start_time={"seconds": int(now - minutes * 60)})
        aggregation = monitoring_v3.Aggregation(
            alignment_period={"seconds": period_s},
            per_series_aligner=getattr(monitoring_v3.Aggregation.Aligner, aligner))
        flt = (f'metric.type = "{metric_type}" AND resource.type = "lustre.googleapis.com/Instance"'
               f' AND resource.labels.instance_id = "{instance_id}"')

        async def call() -> list[Point]:
            pager = await self.client.list_time_series(request=monitoring_v3.ListTimeSeriesRequest(
                name=f"projects/{self.project}", filter=flt, interval=interval,
                aggregation=aggregation,
                view=monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL),
                timeout=CALL_TIMEOUT_S)
            points: list[Point] = []
            async for ts in pager:
                for p in ts.points:
                    v = p.value
                    value = v.double_value if "double_value" in v else float(v.int64_value)
                    points.append(Point(p.interval.end_time.timestamp(), value))
            return sorted(points, key=lambda p: p.t)

        return await retry(call, what=f"{metric_type} of {instance_id}")
