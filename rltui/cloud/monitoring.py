"""Lustre throughput and capacity from Cloud Monitoring (async, gRPC).

The metric types are Managed Lustre's documented ones (sandbox/SOURCES.md#lustre-metrics;
docs.cloud.google.com/monitoring/api/metrics_gcp_i_o): byte counters are DELTA per storage
target, so every query aligns each series (ALIGN_RATE for bytes/s, ALIGN_MEAN for gauges)
and sums across targets with `cross_series_reducer=REDUCE_SUM`. There is no "used" metric:
used = sum(capacity_bytes) - sum(free_bytes) over the OSTs (component="ost"). Points are
sampled every 60 s and show up to 120 s late; there are none while nothing is read or written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import retry

RESOURCE = "lustre.googleapis.com/Instance"
_BASE = "lustre.googleapis.com/instance/"
READ_BYTES = _BASE + "read_bytes_total"
WRITE_BYTES = _BASE + "write_bytes_total"
CAPACITY_BYTES = _BASE + "capacity_bytes"
FREE_BYTES = _BASE + "free_bytes"
OSTS = 'metric.labels.component = "ost"'

# GKE system metrics of a container's GPUs (docs.cloud.google.com/monitoring/api/metrics_kubernetes,
# "kubernetes.io/container/accelerator/..."): GAUGE per container and GPU (metric labels make,
# model, accelerator_id), on the k8s_container resource (project_id, location, cluster_name,
# namespace_name, pod_name, container_name), so a pod's rows join by pod_name. Not verified:
# that GKE writes them for A4 (B200) nodes with its default system metrics; managed DCGM's
# prometheus.googleapis.com/DCGM_FI_DEV_GPU_UTIL/gauge is the documented alternative once enabled.
CONTAINER = "k8s_container"
_GPU = "kubernetes.io/container/accelerator/"
DUTY_CYCLE = _GPU + "duty_cycle"      # % of the sample period the GPU was busy
MEMORY_USED = _GPU + "memory_used"    # bytes
MEMORY_TOTAL = _GPU + "memory_total"  # bytes


@dataclass(frozen=True)
class Point:
    t: float       # end of the period, seconds since the epoch
    value: float


def _end_s() -> int:
    """An interval end in whole seconds, never before the newest sample."""
    return int(time.time()) + 1


def _value(p: Any) -> float:
    v = p.value
    return v.double_value if "double_value" in v else float(v.int64_value)


class MonitoringAdapter:
    def __init__(self, endpoints: Endpoints, project: str) -> None:
        self.endpoints, self.project = endpoints, project
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.endpoints.monitoring()
        return self._client

    async def series(self, metric_type: str, instance_id: str, *, minutes: float,
                     period_s: int = 60, aligner: str = "ALIGN_RATE",
                     extra_filter: str = "", end_s: int | None = None) -> list[Point]:
        """The instance's `metric_type` summed over its storage targets, oldest first. Periods
        are counted back from the interval's end (Cloud Monitoring aligns on it): series meant
        to be combined point by point must be asked with the same `end_s` (see _end_s)."""
        from google.cloud import monitoring_v3

        now = end_s if end_s is not None else _end_s()
        interval = monitoring_v3.TimeInterval(end_time={"seconds": now},
                                              start_time={"seconds": int(now - minutes * 60)})
        aggregation = monitoring_v3.Aggregation(
            alignment_period={"seconds": period_s},
            per_series_aligner=getattr(monitoring_v3.Aggregation.Aligner, aligner),
            cross_series_reducer=monitoring_v3.Aggregation.Reducer.REDUCE_SUM)
        flt = (f'metric.type = "{metric_type}" AND resource.type = "{RESOURCE}"'
               f' AND resource.labels.instance_id = "{instance_id}"')
        if extra_filter:
            flt += f" AND {extra_filter}"

        async def call() -> list[Point]:
            pager = await self.client.list_time_series(request=monitoring_v3.ListTimeSeriesRequest(
                name=f"projects/{self.project}", filter=flt, interval=interval,
                aggregation=aggregation,
                view=monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL),
                timeout=CALL_TIMEOUT_S)
            points: list[Point] = []
            async for ts in pager:
                points += [Point(p.interval.end_time.timestamp(), _value(p)) for p in ts.points]
            return sorted(points, key=lambda p: p.t)

        return await retry(call, what=f"{metric_type} of {instance_id}")

    async def throughput(self, instance_id: str, *, minutes: float,
                         period_s: int = 60) -> dict[str, list[Point]]:
        """Bytes per second read and written, all targets together."""
        end = _end_s()  # one end for both, so read and write points share their times
        return {key: await self.series(metric, instance_id, minutes=minutes, period_s=period_s, end_s=end)
                for key, metric in (("read", READ_BYTES), ("write", WRITE_BYTES))}

    async def used_bytes(self, instance_id: str, *, minutes: float,
                         period_s: int = 60) -> list[Point]:
        """sum(capacity) - sum(free) over the OSTs, at the periods both series have."""
        end = _end_s()  # one end for both: else a second between the calls shifts every period
        capacity = await self.series(CAPACITY_BYTES, instance_id, minutes=minutes,
                                     period_s=period_s, aligner="ALIGN_MEAN", extra_filter=OSTS, end_s=end)
        free = await self.series(FREE_BYTES, instance_id, minutes=minutes, period_s=period_s,
                                 aligner="ALIGN_MEAN", extra_filter=OSTS, end_s=end)
        free_at = {p.t: p.value for p in free}
        return [Point(p.t, max(0.0, p.value - free_at[p.t])) for p in capacity if p.t in free_at]

    async def per_pod(self, metric_type: str, cluster: str, namespace: str, *, minutes: float,
                      period_s: int = 60, end_s: int | None = None) -> dict[str, list[Point]]:
        """A GPU metric of the cluster's pods in `namespace`: each series (one per container and
        GPU) aligned to its period mean, then per pod_name the mean of the GPUs (duty cycle) or
        their sum (memory), oldest first. One ListTimeSeries; the pods' GPUs are combined here,
        not with a cross-series reducer, so that every pod keeps its own series."""
        from google.cloud import monitoring_v3

        now = end_s if end_s is not None else _end_s()
        interval = monitoring_v3.TimeInterval(end_time={"seconds": now},
                                              start_time={"seconds": int(now - minutes * 60)})
        aggregation = monitoring_v3.Aggregation(
            alignment_period={"seconds": period_s},
            per_series_aligner=monitoring_v3.Aggregation.Aligner.ALIGN_MEAN)
        flt = (f'metric.type = "{metric_type}" AND resource.type = "{CONTAINER}"'
               f' AND resource.labels.cluster_name = "{cluster}"'
               f' AND resource.labels.namespace_name = "{namespace}"')
        mean = metric_type == DUTY_CYCLE

        async def call() -> dict[str, list[Point]]:
            pager = await self.client.list_time_series(request=monitoring_v3.ListTimeSeriesRequest(
                name=f"projects/{self.project}", filter=flt, interval=interval,
                aggregation=aggregation,
                view=monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL),
                timeout=CALL_TIMEOUT_S)
            at: dict[str, dict[float, list[float]]] = {}
            async for ts in pager:
                pod = at.setdefault(ts.resource.labels["pod_name"], {})
                for p in ts.points:
                    pod.setdefault(p.interval.end_time.timestamp(), []).append(_value(p))
            return {name: [Point(t, sum(vs) / len(vs) if mean else sum(vs)) for t, vs in sorted(by_t.items())]
                    for name, by_t in sorted(at.items())}

        return await retry(call, what=f"{metric_type} of {cluster}")
