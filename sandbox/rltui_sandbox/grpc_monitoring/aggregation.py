"""A metric's series as ListTimeSeries computes them: the raw points of one instance's samples,
per-series alignment into periods, cross-series reduction by group_by fields, and writing the
points into a TimeSeries.

What is imitated, and from where (read 2026-12-01):

- "Performance metrics are generated only when there is I/O": a DELTA point is written only
  for a sampling period with a non-zero change (docs.cloud.google.com/managed-lustre/docs/monitoring);
- the aligners' input kinds and output kinds/value types: the docstrings of
  google.cloud.monitoring_v3.types.Aggregation (monitoring 2.32.0).

Not verified (the sandbox's own choice): periods without data: the real aligners interpolate
them for DELTA metrics, the sandbox leaves them out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from google.cloud import monitoring_v3
from google.protobuf import timestamp_pb2

from rltui_sandbox.grpc_monitoring.filters import _Invalid
from rltui_sandbox.grpc_monitoring.metrics import Labels, _Kind, _Metric, _Value
from rltui_sandbox.lustre_meter import InstanceKey, MeterPoint

_Aligner = monitoring_v3.Aggregation.pb().Aligner
_Reducer = monitoring_v3.Aggregation.pb().Reducer


def _ts(t: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(round(t * 1e9))
    return ts


def _seconds(ts: timestamp_pb2.Timestamp) -> float:
    return ts.seconds + ts.nanos / 1e9


def _period_of(t: float, end: float, period: float) -> int:
    """Index of the period (end - (k+1)*period, end - k*period] holding time t; 0 is newest."""
    return max(0, int((end - t) / period + 1e-9))


Raw = list[tuple[float, float, int]]  # (start, end, value) oldest first


def _raw_series(metric: _Metric, history: Sequence[MeterPoint], visible_until: float) -> dict[Labels, Raw]:
    """Every series of one instance, with only the points sampled by `visible_until`.

    GAUGE: one point per sample. DELTA: one point per sampling period with a change (no I/O,
    no point), spanning the period between consecutive samples."""
    history = [p for p in history if p.t <= visible_until]
    out: dict[Labels, Raw] = {}
    if metric.kind == _Kind.GAUGE:
        for p in history:
            for labels, v in metric.values(p).items():
                out.setdefault(labels, []).append((p.t, p.t, v))
        return out
    prev: dict[Labels, int] = {}
    prev_t: float | None = None
    for p in history:
        values = metric.values(p)
        if prev_t is not None:
            for labels, v in values.items():
                delta = v - prev.get(labels, 0)
                if delta > 0:
                    out.setdefault(labels, []).append((prev_t, p.t, delta))
        prev, prev_t = values, p.t
    return out


def _align(raw: Raw, metric: _Metric, aligner: int, period: float,
           start: float, end: float) -> dict[int, tuple[float, float, float]]:
    """Period index (0 = newest, ending at `end`) -> (period_start, period_end, value).

    Deltas are spread over the periods they overlap in proportion to the overlap, clipped to
    the query interval, so sum(rate * period) is the bytes moved within the interval.
    """
    n = max(1, math.ceil((end - start) / period - 1e-9))
    buckets: dict[int, list[float]] = {}
    spread = aligner in (_Aligner.ALIGN_RATE, _Aligner.ALIGN_DELTA) or (
        aligner == _Aligner.ALIGN_SUM and metric.kind == _Kind.DELTA)
    for a, b, v in raw:
        if spread and b > a:
            lo, hi = max(a, start), min(b, end)  # the part of (a, b] inside the interval
            if hi <= lo:
                continue
            for idx in range(_period_of(hi, end, period), min(n, math.ceil((end - lo) / period))):
                overlap = min(hi, end - idx * period) - max(lo, end - (idx + 1) * period)
                if overlap > 0:
                    buckets.setdefault(idx, []).append(v * overlap / (b - a))
        elif start < b <= end or start == end == b:
            buckets.setdefault(min(n - 1, _period_of(b, end, period)), []).append(float(v))
    out = {}
    for idx, vals in buckets.items():
        if aligner in (_Aligner.ALIGN_DELTA, _Aligner.ALIGN_SUM):
            value = sum(vals)
        elif aligner == _Aligner.ALIGN_RATE:
            value = sum(vals) / period
        elif aligner == _Aligner.ALIGN_MEAN:
            value = sum(vals) / len(vals)
        elif aligner == _Aligner.ALIGN_MIN:
            value = min(vals)
        else:
            value = max(vals)
        out[idx] = (end - (idx + 1) * period, end - idx * period, value)
    return out


_ALIGNERS = {
    # aligner: (kinds it applies to, output kind (None: same as input), output value type
    # (None: same as input)), per monitoring_v3.types.Aggregation.Aligner's docstrings
    _Aligner.ALIGN_DELTA: ({_Kind.DELTA, _Kind.CUMULATIVE}, _Kind.DELTA, None),
    _Aligner.ALIGN_RATE: ({_Kind.DELTA, _Kind.CUMULATIVE}, _Kind.GAUGE, _Value.DOUBLE),
    _Aligner.ALIGN_SUM: ({_Kind.DELTA, _Kind.GAUGE}, None, None),
    _Aligner.ALIGN_MEAN: ({_Kind.DELTA, _Kind.GAUGE}, _Kind.GAUGE, _Value.DOUBLE),
    _Aligner.ALIGN_MIN: ({_Kind.DELTA, _Kind.GAUGE}, _Kind.GAUGE, None),
    _Aligner.ALIGN_MAX: ({_Kind.DELTA, _Kind.GAUGE}, _Kind.GAUGE, None),
}
_REDUCERS = {
    # reducer: (combine, output value type (None: same as the aligned input))
    _Reducer.REDUCE_SUM: (sum, None),
    _Reducer.REDUCE_MEAN: (lambda vs: sum(vs) / len(vs), _Value.DOUBLE),
    _Reducer.REDUCE_MAX: (max, None),
    _Reducer.REDUCE_MIN: (min, None),
    _Reducer.REDUCE_COUNT: (len, _Value.INT64),
}


def _set_point(ts, start: float, end: float, value: float, value_type: int, kind: int) -> None:
    p = ts.points.add()
    p.interval.end_time.CopyFrom(_ts(end))
    p.interval.start_time.CopyFrom(_ts(start if kind != _Kind.GAUGE else end))
    if value_type == _Value.DOUBLE:
        p.value.double_value = float(value)
    else:
        p.value.int64_value = round(value)


def _group_key(field: str) -> tuple[str, str]:
    """A group_by field as ("metric" | "resource", label key), or ("resource", "type")."""
    f = field.strip()
    m = re.fullmatch(r"(metric|resource)\.labels?\.([A-Za-z_][\w]*)", f)
    if m:
        return m[1], m[2]
    if f in ("resource.type", "metric.type"):
        return f.split(".")[0], "@type"
    raise _Invalid(f"Field aggregation.groupByFields had an invalid value of \"{field}\": "
                   "expected metric.label.KEY, resource.label.KEY or resource.type")


@dataclass
class _Series:
    key: InstanceKey | tuple[str, ...]  # the resource's label values (a Lustre instance, a container)
    labels: Labels
    points: dict[int, tuple[float, float, float]]  # aligned, or raw indexed by position


_LUSTRE_LABELS = ("resource_container", "location", "instance_id")


def _reduce(series: list[_Series], reducer: int, groups: list[tuple[str, str]],
            names: tuple[str, ...] = _LUSTRE_LABELS) -> list[_Series]:
    """cross_series_reducer over the aligned series, partitioned by group_by_fields; a series'
    key holds the values of its resource's labels `names`."""
    combine = _REDUCERS[reducer][0]
    metric_keys = [k for where, k in groups if where == "metric" and k != "@type"]
    resource_keys = [k for where, k in groups if where == "resource" and k != "@type"]
    parts: dict[tuple, list[_Series]] = {}
    for s in series:
        labels = dict(s.labels)
        res = dict(zip(names, s.key))
        part = (tuple((k, labels.get(k, "")) for k in metric_keys),
                tuple((k, res.get(k, "")) for k in resource_keys))
        parts.setdefault(part, []).append(s)
    out = []
    for (metric_part, resource_part), members in sorted(parts.items()):
        points: dict[int, tuple[float, float, float]] = {}
        for idx in sorted({i for m in members for i in m.points}):
            present = [m.points[idx] for m in members if idx in m.points]
            points[idx] = (present[0][0], present[0][1], combine([p[2] for p in present]))
        res = dict(resource_part)
        key = tuple(res.get(n, "") for n in names)
        out.append(_Series(key, tuple((k, v) for k, v in metric_part if v != ""), points))
    return out
