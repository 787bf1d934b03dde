"""The sandbox's Cloud Monitoring: google.monitoring.v3.MetricService over the Lustre meter.

The real `monitoring_v3.MetricServiceClient` reads Lustre throughput and capacity from here,
computed from the bytes actually written to and read from each instance's local folder.
Only the read side is served; every other MetricService method answers UNIMPLEMENTED.

The metric type names below are NOT verified against Google's documentation (it could not
be read from here); the monitored resource `lustre.googleapis.com/Instance` and its labels
are. Clients should discover the types with ListMetricDescriptors, as the wizard does.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Sequence

import grpc
from google.api import label_pb2, launch_stage_pb2, metric_pb2, monitored_resource_pb2
from google.cloud import monitoring_v3
from google.protobuf import timestamp_pb2

from rltui.sandbox.lustre_meter import InstanceKey, LustreMeter, MeterPoint

SERVICE = "google.monitoring.v3.MetricService"
RESOURCE_TYPE = "lustre.googleapis.com/Instance"
READ_BYTES = "lustre.googleapis.com/instance/read_bytes_count"
WRITE_BYTES = "lustre.googleapis.com/instance/write_bytes_count"
USED_BYTES = "lustre.googleapis.com/instance/capacity/used_bytes"
CAPACITY_BYTES = "lustre.googleapis.com/instance/capacity/total_bytes"
MIN_ALIGNMENT_S = 60.0  # the real API's minimum alignment_period
DEFAULT_PAGE_SIZE = 100_000

_pb = {
    "ListTimeSeriesRequest": monitoring_v3.ListTimeSeriesRequest.pb(),
    "ListTimeSeriesResponse": monitoring_v3.ListTimeSeriesResponse.pb(),
    "ListMetricDescriptorsRequest": monitoring_v3.ListMetricDescriptorsRequest.pb(),
    "ListMetricDescriptorsResponse": monitoring_v3.ListMetricDescriptorsResponse.pb(),
    "GetMetricDescriptorRequest": monitoring_v3.GetMetricDescriptorRequest.pb(),
    "ListMonitoredResourceDescriptorsRequest": monitoring_v3.ListMonitoredResourceDescriptorsRequest.pb(),
    "ListMonitoredResourceDescriptorsResponse": monitoring_v3.ListMonitoredResourceDescriptorsResponse.pb(),
}
_TimeSeries = monitoring_v3.TimeSeries.pb()
_Aligner = monitoring_v3.Aggregation.pb().Aligner
_Reducer = monitoring_v3.Aggregation.pb().Reducer
_View = _pb["ListTimeSeriesRequest"].TimeSeriesView
_Kind = metric_pb2.MetricDescriptor.MetricKind
_Value = metric_pb2.MetricDescriptor.ValueType

ProjectInstances = Callable[[str], Iterable[InstanceKey]]


class _Invalid(Exception):
    """An INVALID_ARGUMENT answer, with the real API's kind of message."""


@dataclass(frozen=True)
class _Metric:
    type: str
    kind: int
    display_name: str
    description: str
    value: Callable[[LustreMeter, InstanceKey, MeterPoint], int]


_METRICS: dict[str, _Metric] = {
    m.type: m
    for m in (
        _Metric(READ_BYTES, _Kind.DELTA, "Bytes read", "Bytes read from the instance by clients.",
                lambda _m, _k, p: p.read_bytes),
        _Metric(WRITE_BYTES, _Kind.DELTA, "Bytes written", "Bytes written to the instance by clients.",
                lambda _m, _k, p: p.written_bytes),
        _Metric(USED_BYTES, _Kind.GAUGE, "Used capacity", "Bytes of storage capacity in use.",
                lambda _m, _k, p: p.used_bytes),
        _Metric(CAPACITY_BYTES, _Kind.GAUGE, "Total capacity", "Provisioned storage capacity in bytes.",
                lambda m, k, _p: m.capacity_bytes(k)),
    )
}
_RESOURCE_LABELS = {
    "resource_container": "The identifier of the GCP consumer project associated with this resource.",
    "location": "The Google Cloud location in which the managed instance is running.",
    "instance_id": "The ID of the managed instance.",
}


# -- filters ---------------------------------------------------------------------------------

_CLAUSE = re.compile(
    r'\s*(?P<lhs>[A-Za-z_][\w.]*)\s*(?P<op>!=|=)\s*'
    r'(?:"(?P<lit>[^"]*)"|(?P<fn>starts_with|ends_with|has_substring)\(\s*"(?P<arg>[^"]*)"\s*\))\s*'
)
_AND = re.compile(r"\s+AND\s+")


@dataclass(frozen=True)
class _Clause:
    lhs: str
    op: str
    fn: str  # "eq", "starts_with", "ends_with", "has_substring"
    value: str

    def matches(self, actual: str | None) -> bool:
        if actual is None:
            hit = False
        elif self.fn == "eq":
            hit = actual == self.value
        elif self.fn == "starts_with":
            hit = actual.startswith(self.value)
        elif self.fn == "ends_with":
            hit = actual.endswith(self.value)
        else:
            hit = self.value in actual
        return hit if self.op == "=" else not hit


def _parse_filter(text: str) -> list[_Clause]:
    """The subset of the Monitoring filter language the sandbox understands: ANDed clauses."""
    clauses: list[_Clause] = []
    if not text.strip():
        return clauses
    for part in _AND.split(text.strip()):
        m = _CLAUSE.fullmatch(part)
        if m is None:
            raise _Invalid(f"Could not parse filter: {text!r} (near {part.strip()!r})")
        fn = m["fn"] or "eq"
        value = m["arg"] if m["fn"] else m["lit"]
        lhs = m["lhs"].replace("resource.label.", "resource.labels.").replace("metric.label.", "metric.labels.")
        if not (lhs in ("metric.type", "resource.type") or lhs.startswith(("resource.labels.", "metric.labels."))):
            raise _Invalid(f"Unknown field in filter: {m['lhs']!r}")
        clauses.append(_Clause(lhs, m["op"], fn, value))
    return clauses


def _resource_fields(key: InstanceKey) -> dict[str, str]:
    project, location, instance_id = key
    return {
        "resource.type": RESOURCE_TYPE,
        "resource.labels.resource_container": project,
        "resource.labels.location": location,
        "resource.labels.instance_id": instance_id,
    }


# -- aggregation -----------------------------------------------------------------------------

def _ts(t: float) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(round(t * 1e9))
    return ts


def _seconds(ts: timestamp_pb2.Timestamp) -> float:
    return ts.seconds + ts.nanos / 1e9


def _period_of(t: float, end: float, period: float) -> int:
    """Index of the period (end - (k+1)*period, end - k*period] holding time t; 0 is newest."""
    return max(0, int((end - t) / period + 1e-9))


def _raw_points(metric: _Metric, meter: LustreMeter, key: InstanceKey,
                history: Sequence[MeterPoint]) -> list[tuple[float, float, int]]:
    """(start, end, value) oldest first: DELTA points span consecutive samples."""
    if metric.kind == _Kind.GAUGE:
        return [(p.t, p.t, metric.value(meter, key, p)) for p in history]
    return [
        (a.t, b.t, metric.value(meter, key, b) - metric.value(meter, key, a))
        for a, b in zip(history, history[1:])
    ]


def _align(raw: list[tuple[float, float, int]], metric: _Metric, aligner: int, period: float,
           start: float, end: float) -> list[tuple[float, float, float]]:
    """One (period_start, period_end, value) per period ending at `end`, `end - period`, ...

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
    out = []
    for idx in sorted(buckets):  # newest period first, as the real API returns them
        vals = buckets[idx]
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
        out.append((end - (idx + 1) * period, end - idx * period, value))
    return out


_ALIGNERS = {
    # aligner: (kinds it applies to, output kind (None: same as input), output value type)
    _Aligner.ALIGN_DELTA: ({_Kind.DELTA}, _Kind.DELTA, _Value.INT64),
    _Aligner.ALIGN_RATE: ({_Kind.DELTA}, _Kind.GAUGE, _Value.DOUBLE),
    _Aligner.ALIGN_SUM: ({_Kind.DELTA, _Kind.GAUGE}, None, _Value.INT64),
    _Aligner.ALIGN_MEAN: ({_Kind.DELTA, _Kind.GAUGE}, _Kind.GAUGE, _Value.DOUBLE),
    _Aligner.ALIGN_MIN: ({_Kind.DELTA, _Kind.GAUGE}, _Kind.GAUGE, _Value.INT64),
    _Aligner.ALIGN_MAX: ({_Kind.DELTA, _Kind.GAUGE}, _Kind.GAUGE, _Value.INT64),
}


def _set_point(ts, start: float, end: float, value: float, value_type: int, kind: int) -> None:
    p = ts.points.add()
    p.interval.end_time.CopyFrom(_ts(end))
    p.interval.start_time.CopyFrom(_ts(start if kind != _Kind.GAUGE else end))
    if value_type == _Value.DOUBLE:
        p.value.double_value = float(value)
    else:
        p.value.int64_value = round(value)


# -- the service -----------------------------------------------------------------------------

class _MetricService:
    def __init__(self, meter: LustreMeter, project_instances: ProjectInstances | None,
                 min_alignment_s: float) -> None:
        self.meter = meter
        self.project_instances = project_instances
        self.min_alignment_s = min_alignment_s

    def _project(self, name: str) -> str:
        m = re.fullmatch(r"projects/([^/]+)", name)
        if m is None:
            raise _Invalid(f"Name must be of the form projects/[PROJECT_ID_OR_NUMBER], got {name!r}")
        return m[1]

    def _instances(self, project: str) -> list[InstanceKey]:
        tracked = set(self.meter.keys())
        if self.project_instances is None:
            wanted = [k for k in tracked if k[0] == project]
        else:
            wanted = [tuple(k) for k in self.project_instances(project)]
        return sorted(k for k in wanted if k in tracked)

    def _descriptor(self, project: str, m: _Metric) -> metric_pb2.MetricDescriptor:
        d = metric_pb2.MetricDescriptor(
            name=f"projects/{project}/metricDescriptors/{m.type}", type=m.type,
            metric_kind=m.kind, value_type=_Value.INT64, unit="By", description=m.description,
            display_name=m.display_name, launch_stage=launch_stage_pb2.GA,
            monitored_resource_types=[RESOURCE_TYPE],
        )
        d.metadata.sample_period.FromNanoseconds(round(self.meter.interval_s * 1e9))
        return d

    async def list_metric_descriptors(self, req, _ctx):
        project = self._project(req.name)
        clauses = _parse_filter(req.filter)
        for c in clauses:
            if c.lhs not in ("metric.type", "resource.type"):
                raise _Invalid(f"Field {c.lhs!r} is not allowed in a metric descriptor filter")
        found = [
            self._descriptor(project, m) for m in _METRICS.values()
            if all(c.matches(m.type if c.lhs == "metric.type" else RESOURCE_TYPE) for c in clauses)
        ]
        page, token = _page(found, req.page_size, req.page_token)
        return _pb["ListMetricDescriptorsResponse"](metric_descriptors=page, next_page_token=token)

    async def get_metric_descriptor(self, req, ctx):
        m = re.fullmatch(r"(projects/[^/]+)/metricDescriptors/(.+)", req.name)
        if m is None:
            raise _Invalid(f"Invalid metric descriptor name: {req.name!r}")
        metric = _METRICS.get(m[2])
        if metric is None:
            await ctx.abort(grpc.StatusCode.NOT_FOUND, f"Could not find descriptor for metric '{m[2]}'.")
        return self._descriptor(self._project(m[1]), metric)

    async def list_monitored_resource_descriptors(self, req, _ctx):
        project = self._project(req.name)
        clauses = _parse_filter(req.filter)
        d = monitored_resource_pb2.MonitoredResourceDescriptor(
            name=f"projects/{project}/monitoredResourceDescriptors/{RESOURCE_TYPE}",
            type=RESOURCE_TYPE, display_name="Lustre instance", description="A Lustre Instance.",
            labels=[label_pb2.LabelDescriptor(key=k, description=v) for k, v in _RESOURCE_LABELS.items()],
            launch_stage=launch_stage_pb2.GA,
        )
        keep = all(c.lhs == "resource.type" and c.matches(RESOURCE_TYPE) for c in clauses)
        page, token = _page([d] if keep else [], req.page_size, req.page_token)
        return _pb["ListMonitoredResourceDescriptorsResponse"](resource_descriptors=page, next_page_token=token)

    async def list_time_series(self, req, _ctx):
        project = self._project(req.name)
        clauses = _parse_filter(req.filter)
        types = [c for c in clauses if c.lhs == "metric.type"]
        if len(types) != 1 or types[0].fn != "eq" or types[0].op != "=":
            raise _Invalid("A filter must specify exactly one metric type: metric.type = \"...\"")
        metric = _METRICS.get(types[0].value)
        if not req.interval.HasField("end_time"):
            raise _Invalid("The interval must have an end time")
        end = _seconds(req.interval.end_time)
        start = _seconds(req.interval.start_time) if req.interval.HasField("start_time") else end
        if start > end:
            raise _Invalid("The start time of the interval must be before its end time")
        agg = req.aggregation
        aligner = agg.per_series_aligner
        if agg.cross_series_reducer != _Reducer.REDUCE_NONE:
            raise _Invalid("The sandbox does not support cross_series_reducer; use REDUCE_NONE")
        period = agg.alignment_period.seconds + agg.alignment_period.nanos / 1e9
        kind = metric.kind if metric else _Kind.GAUGE
        out_kind, out_value = kind, _Value.INT64
        if aligner != _Aligner.ALIGN_NONE:
            if aligner not in _ALIGNERS:
                raise _Invalid(f"The sandbox does not support the aligner {_Aligner.Name(aligner)}")
            kinds, out_kind_or_none, out_value = _ALIGNERS[aligner]
            out_kind = out_kind_or_none or kind
            if metric is not None and kind not in kinds:
                raise _Invalid(
                    f"The aligner {_Aligner.Name(aligner)} cannot be applied to metrics with kind "
                    f"{_Kind.Name(kind)} and value type INT64.")
            if not agg.HasField("alignment_period"):
                raise _Invalid("The alignment period is required when an aligner is given")
            if period < self.min_alignment_s:
                raise _Invalid(f"The alignment period must be at least {self.min_alignment_s:g} seconds")
        series = []
        if metric is not None:  # an unknown type matches nothing, as in the real API
            for key in self._instances(project):
                fields = {"metric.type": metric.type, **_resource_fields(key)}
                if not all(c.matches(fields.get(c.lhs)) for c in clauses):
                    continue
                series.append(self._series(metric, key, aligner, period, start, end, out_kind,
                                           out_value, headers_only=req.view == _View.HEADERS))
        page, token = _page(series, req.page_size, req.page_token)
        unit = "By/s" if aligner == _Aligner.ALIGN_RATE else "By"
        return _pb["ListTimeSeriesResponse"](time_series=page, next_page_token=token, unit=unit)

    def _series(self, metric: _Metric, key: InstanceKey, aligner: int, period: float, start: float,
                end: float, kind: int, value_type: int, headers_only: bool):
        project, location, instance_id = key
        ts = _TimeSeries(metric_kind=kind, value_type=value_type,
                         unit="By/s" if aligner == _Aligner.ALIGN_RATE else "By")
        ts.metric.type = metric.type
        ts.resource.type = RESOURCE_TYPE
        ts.resource.labels.update(resource_container=project, location=location, instance_id=instance_id)
        if headers_only:
            return ts
        raw = _raw_points(metric, self.meter, key, self.meter.history(key))
        if aligner == _Aligner.ALIGN_NONE:
            for a, b, v in reversed(raw):
                if start < b <= end or start == end == b:
                    _set_point(ts, a, b, v, value_type, kind)
        else:
            for a, b, v in _align(raw, metric, aligner, period, start, end):
                _set_point(ts, a, b, v, value_type, kind)
        return ts


def _page(items: list, page_size: int, token: str) -> tuple[list, str]:
    try:
        offset = int(token) if token else 0
    except ValueError:
        raise _Invalid(f"Invalid page token: {token!r}") from None
    if offset < 0:
        raise _Invalid(f"Invalid page token: {token!r}")
    size = page_size if page_size > 0 else DEFAULT_PAGE_SIZE
    nxt = offset + size
    return items[offset:nxt], (str(nxt) if nxt < len(items) else "")


def _handler(fn: Callable[..., Awaitable], request_type) -> grpc.RpcMethodHandler:
    async def call(req, ctx):
        try:
            return await fn(req, ctx)
        except _Invalid as e:
            await ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))

    return grpc.unary_unary_rpc_method_handler(
        call, request_deserializer=request_type.FromString,
        response_serializer=lambda msg: msg.SerializeToString())


def add_monitoring_service(server: grpc.aio.Server, meter: LustreMeter,
                           project_instances: ProjectInstances | None = None, *,
                           min_alignment_s: float = MIN_ALIGNMENT_S) -> None:
    """Serve MetricService's read methods on `server` from `meter`.

    `project_instances(project)` names the instances a project owns (project id or number,
    as in `projects/P`); by default, the tracked instances whose key starts with P.
    `min_alignment_s` is the real API's 60 s; lower it only for a livelier local demo.
    """
    svc = _MetricService(meter, project_instances, min_alignment_s)
    handlers = {
        "ListMetricDescriptors": _handler(svc.list_metric_descriptors, _pb["ListMetricDescriptorsRequest"]),
        "GetMetricDescriptor": _handler(svc.get_metric_descriptor, _pb["GetMetricDescriptorRequest"]),
        "ListMonitoredResourceDescriptors": _handler(
            svc.list_monitored_resource_descriptors, _pb["ListMonitoredResourceDescriptorsRequest"]),
        "ListTimeSeries": _handler(svc.list_time_series, _pb["ListTimeSeriesRequest"]),
    }
    # Methods not listed here get UNIMPLEMENTED from gRPC itself.
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
