"""The sandbox's Cloud Monitoring: google.monitoring.v3.MetricService over the Lustre meter.

The real `monitoring_v3.MetricServiceClient` reads Managed Lustre's metrics from here, computed
from the bytes actually written to and read from each instance's local folder. Only the read
side is served; every other MetricService method answers UNIMPLEMENTED.

What is imitated, and from where (read 2026-12-01):

- the metric descriptors (type, kind, value type, unit, labels, display name, BETA launch
  stage, 60 s sample period, 120 s ingest delay) and the monitored resource
  `lustre.googleapis.com/Instance` (resource_container, location, instance_id): Google Cloud
  metrics list, docs.cloud.google.com/monitoring/api/metrics_gcp_i_o, section "lustre";
- one time series per storage target (labels `component` = "ost"/"mdt", `target`, and
  `operation` where documented), so totals need cross_series_reducer=REDUCE_SUM; there is no
  "used" metric (used = sum capacity_bytes - sum free_bytes over component="ost"): same page;
- "Performance metrics are generated only when there is I/O": a DELTA point is written only
  for a sampling period with a non-zero change (docs.cloud.google.com/managed-lustre/docs/monitoring);
- points become visible up to 120 s after their sample time: the sandbox hides each point for
  exactly `visibility_delay_s` (120 reference seconds) after it was sampled;
- aggregation: the aligners' input kinds and output kinds/value types, the 60 s minimum
  alignment period, and "cross_series_reducer needs an aligner other than ALIGN_NONE": the
  docstrings of google.cloud.monitoring_v3.types.Aggregation (monitoring 2.32.0); the aligner
  refusal's wording `Field aggregation.perSeriesAligner had an invalid value of "ALIGN_RATE":
  The aligner cannot be applied to metrics with kind GAUGE and value type INT64.`: seen in
  public reports (Stackdriver/stackdriver-prometheus#14,
  google/exposure-notifications-verification-server#659);
- a series whose interval holds no point is not returned (ListTimeSeries lists data).

Not verified (the sandbox's own choice): the values of the `operation` label ("read"/"write"
on the byte and sample counters; Lustre's md_stats names on metadata_operations_total), the
wording of the other INVALID_ARGUMENT messages, and periods without data: the real aligners
interpolate them for DELTA metrics, the sandbox leaves them out. io_time_milliseconds_total
is described but has no data (the sandbox measures no latency).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Sequence

import grpc
from google.api import label_pb2, launch_stage_pb2, metric_pb2, monitored_resource_pb2
from google.cloud import monitoring_v3
from google.protobuf import timestamp_pb2

from rltui.sandbox.lustre_meter import InstanceKey, LustreMeter, MeterPoint, TargetSample

SERVICE = "google.monitoring.v3.MetricService"
RESOURCE_TYPE = "lustre.googleapis.com/Instance"
PREFIX = "lustre.googleapis.com/instance/"
READ_BYTES = PREFIX + "read_bytes_total"
WRITE_BYTES = PREFIX + "write_bytes_total"
READ_SAMPLES = PREFIX + "read_samples_total"
WRITE_SAMPLES = PREFIX + "write_samples_total"
CAPACITY_BYTES = PREFIX + "capacity_bytes"
FREE_BYTES = PREFIX + "free_bytes"
AVAILABLE_BYTES = PREFIX + "available_bytes"
CONNECTED_CLIENTS = PREFIX + "connected_clients"
INODES_FREE = PREFIX + "inodes_free"
INODES_MAXIMUM = PREFIX + "inodes_maximum"
IO_TIME = PREFIX + "io_time_milliseconds_total"
METADATA_OPERATIONS = PREFIX + "metadata_operations_total"
MIN_ALIGNMENT_S = 60.0  # the real API's minimum alignment_period
SAMPLE_PERIOD_S = 60.0  # "Sampled every 60 seconds"
VISIBILITY_DELAY_S = 120.0  # "After sampling, data is not visible for up to 120 seconds"
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
Labels = tuple[tuple[str, str], ...]  # sorted (key, value) metric labels of one series


class _Invalid(Exception):
    """An INVALID_ARGUMENT answer, with the real API's kind of message."""


_LABEL_DOCS = {
    "component": "The type of the Lustre target device.",
    "target": "The name of the Lustre target device.",
    "operation": "The operation type.",
    "size": "The bucketed latency range (e.g. 512 includes the count of operations that took "
            "between 512 and 1024 milliseconds).",
}


@dataclass(frozen=True)
class _Metric:
    type: str
    kind: int
    unit: str
    display_name: str
    description: str
    labels: tuple[str, ...]
    # the series of one sample: metric labels -> value (cumulative for DELTA metrics)
    values: Callable[[MeterPoint], dict[Labels, int]]


def _per_target(component: str | None, value: Callable[[TargetSample], int],
                operation: str | None = None) -> Callable[[MeterPoint], dict[Labels, int]]:
    def values(p: MeterPoint) -> dict[Labels, int]:
        out: dict[Labels, int] = {}
        for tgt in p.targets:
            if component is None or tgt.component == component:
                labels = {"component": tgt.component, "target": tgt.target}
                if operation is not None:
                    labels["operation"] = operation
                out[tuple(sorted(labels.items()))] = value(tgt)
        return out
    return values


def _metadata_ops(p: MeterPoint) -> dict[Labels, int]:
    return {tuple(sorted({"component": t.component, "operation": op, "target": t.target}.items())): n
            for t in p.targets if t.component == "mdt" for op, n in t.metadata_ops}


_SAMPLED = " Sampled every 60 seconds. After sampling, data is not visible for up to 120 seconds."
_CT, _CTO = ("component", "target"), ("component", "operation", "target")
_METRICS: dict[str, _Metric] = {
    m.type: m
    for m in (
        _Metric(AVAILABLE_BYTES, _Kind.GAUGE, "By", "Available bytes",
                "The number of bytes of storage space for a given Object Storage Target (OST) or Metadata "
                "Target (MDT) that is available to non-root users." + _SAMPLED, _CT,
                _per_target(None, lambda t: t.free_bytes)),
        _Metric(CAPACITY_BYTES, _Kind.GAUGE, "By", "Capacity bytes",
                "The number of bytes provisioned for the given Lustre target. The total cluster usable data "
                "or metadata space for an instance can be obtained by adding the capacity of all targets "
                "for a given type of Lustre target." + _SAMPLED, _CT,
                _per_target(None, lambda t: t.capacity_bytes)),
        _Metric(CONNECTED_CLIENTS, _Kind.GAUGE, "{client}", "Connected clients",
                "The number of clients currently connected to the given Metadata Target (MDT)." + _SAMPLED,
                _CT, _per_target("mdt", lambda t: t.connected_clients)),
        _Metric(FREE_BYTES, _Kind.GAUGE, "By", "Free bytes",
                "The number of bytes of storage space for a given Object Storage Target (OST) or Metadata "
                "Target (MDT) that is available to root users." + _SAMPLED, _CT,
                _per_target(None, lambda t: t.free_bytes)),
        _Metric(INODES_FREE, _Kind.GAUGE, "{inode}", "Free inodes",
                "The number of inodes (objects) available on the given target." + _SAMPLED, _CT,
                _per_target(None, lambda t: t.inodes_free)),
        _Metric(INODES_MAXIMUM, _Kind.GAUGE, "{inode}", "Maximum inodes",
                "The maximum number of inodes (objects) the target can hold." + _SAMPLED, _CT,
                _per_target(None, lambda t: t.inodes_maximum)),
        _Metric(IO_TIME, _Kind.DELTA, "{operation}", "Operation latency",
                "The number of read or write operations whose latency is within the bucketed latency "
                "ranges." + _SAMPLED, ("component", "operation", "size", "target"), lambda _p: {}),
        _Metric(METADATA_OPERATIONS, _Kind.DELTA, "{operation}", "Metadata Operations",
                "Number of metadata operations the filesystem has performed on the given Metadata Target "
                "(MDT)." + _SAMPLED, _CTO, _metadata_ops),
        _Metric(READ_BYTES, _Kind.DELTA, "By", "Data read bytes",
                "The number of data bytes read from the given Object Storage Target (OST)." + _SAMPLED, _CTO,
                _per_target("ost", lambda t: t.read_bytes, "read")),
        _Metric(READ_SAMPLES, _Kind.DELTA, "{operation}", "Data read operations",
                "The number of read operations performed on the given Object Storage Target (OST)."
                + _SAMPLED, _CTO, _per_target("ost", lambda t: t.read_ops, "read")),
        _Metric(WRITE_BYTES, _Kind.DELTA, "By", "Data write bytes",
                "The number of data bytes written to the given Object Storage Target (OST)." + _SAMPLED, _CTO,
                _per_target("ost", lambda t: t.written_bytes, "write")),
        _Metric(WRITE_SAMPLES, _Kind.DELTA, "{operation}", "Data write operations",
                "The number of write operations performed on the given Object Storage Target (OST)."
                + _SAMPLED, _CTO, _per_target("ost", lambda t: t.write_ops, "write")),
    )
}
_RESOURCE_LABELS = {
    "resource_container": "The identifier of the GCP consumer project associated with this resource, "
                          "such as 'my-project'.",
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
    key: InstanceKey
    labels: Labels
    points: dict[int, tuple[float, float, float]]  # aligned, or raw indexed by position


# -- the service -----------------------------------------------------------------------------

class _MetricService:
    def __init__(self, meter: LustreMeter, project_instances: ProjectInstances | None,
                 min_alignment_s: float, visibility_delay_s: float) -> None:
        self.meter = meter
        self.project_instances = project_instances
        self.min_alignment_s = min_alignment_s
        self.visibility_delay_s = visibility_delay_s

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
            metric_kind=m.kind, value_type=_Value.INT64, unit=m.unit, description=m.description,
            display_name=m.display_name, launch_stage=launch_stage_pb2.BETA,
            monitored_resource_types=[RESOURCE_TYPE],
            labels=[label_pb2.LabelDescriptor(key=k, description=_LABEL_DOCS[k]) for k in m.labels],
        )
        d.metadata.launch_stage = launch_stage_pb2.BETA
        d.metadata.sample_period.FromSeconds(int(SAMPLE_PERIOD_S))
        d.metadata.ingest_delay.FromSeconds(int(VISIBILITY_DELAY_S))
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
            launch_stage=launch_stage_pb2.BETA,
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
            raise _Invalid("Field interval.endTime is required")
        end = _seconds(req.interval.end_time)
        start = _seconds(req.interval.start_time) if req.interval.HasField("start_time") else end
        if start > end:
            raise _Invalid("Field interval.startTime had an invalid value: the start time of the interval "
                           "must not be later than its end time")
        agg = req.aggregation
        aligner, reducer = agg.per_series_aligner, agg.cross_series_reducer
        period = agg.alignment_period.seconds + agg.alignment_period.nanos / 1e9
        kind = metric.kind if metric else _Kind.GAUGE
        out_kind, out_value = kind, _Value.INT64
        if aligner != _Aligner.ALIGN_NONE:
            if aligner not in _ALIGNERS:
                raise _Invalid(f"Field aggregation.perSeriesAligner had an invalid value of "
                               f"\"{_Aligner.Name(aligner)}\": the rltui sandbox does not support this aligner")
            kinds, out_kind_or_none, out_value_or_none = _ALIGNERS[aligner]
            out_kind = out_kind_or_none or kind
            out_value = out_value_or_none or _Value.INT64
            if metric is not None and kind not in kinds:
                raise _Invalid(
                    f"Field aggregation.perSeriesAligner had an invalid value of \"{_Aligner.Name(aligner)}\": "
                    f"The aligner cannot be applied to metrics with kind {_Kind.Name(kind)} and value type INT64.")
            if not agg.HasField("alignment_period") or period <= 0:
                raise _Invalid("Field aggregation.alignmentPeriod is required when an aligner other than "
                               "ALIGN_NONE is given")
            if period < self.min_alignment_s - 1e-9:
                raise _Invalid(f"Field aggregation.alignmentPeriod had an invalid value of \"{period:g}s\": "
                               f"The alignment period must be at least {self.min_alignment_s:g} seconds.")
        if reducer != _Reducer.REDUCE_NONE:
            if aligner == _Aligner.ALIGN_NONE:
                raise _Invalid("Field aggregation.perSeriesAligner had an invalid value of \"ALIGN_NONE\": "
                               "a cross-series reducer needs an aligner other than ALIGN_NONE.")
            if reducer not in _REDUCERS:
                raise _Invalid(f"Field aggregation.crossSeriesReducer had an invalid value of "
                               f"\"{_Reducer.Name(reducer)}\": the rltui sandbox does not support this reducer")
            out_value = _REDUCERS[reducer][1] or out_value
        groups = [_group_key(f) for f in agg.group_by_fields]
        visible_until = time.time() - self.visibility_delay_s
        found: list[_Series] = []
        if metric is not None:  # an unknown type matches nothing, as in the real API
            for key in self._instances(project):
                for labels, raw in sorted(_raw_series(metric, self.meter.history(key), visible_until).items()):
                    fields = {"metric.type": metric.type, **_resource_fields(key),
                              **{f"metric.labels.{k}": v for k, v in labels}}
                    if not all(c.matches(fields.get(c.lhs)) for c in clauses):
                        continue
                    if aligner == _Aligner.ALIGN_NONE:
                        pts = {i: p for i, p in enumerate(reversed(raw))
                               if start < p[1] <= end or start == end == p[1]}
                    else:
                        pts = _align(raw, metric, aligner, period, start, end)
                    if pts:
                        found.append(_Series(key, labels, pts))
        if reducer != _Reducer.REDUCE_NONE:
            found = _reduce(found, reducer, groups)
        headers_only = req.view == _View.HEADERS
        unit = metric.unit if metric else ""
        if aligner == _Aligner.ALIGN_RATE and unit:
            unit = f"{unit}/s" if not unit.startswith("{") else "1/s"
        out = [self._time_series(metric, s, out_kind, out_value, unit, headers_only,
                                 keep_resource=reducer == _Reducer.REDUCE_NONE, groups=groups)
               for s in found]
        page, token = _page(out, req.page_size, req.page_token)
        return _pb["ListTimeSeriesResponse"](time_series=page, next_page_token=token, unit=unit)

    def _time_series(self, metric: _Metric | None, s: _Series, kind: int, value_type: int, unit: str,
                     headers_only: bool, keep_resource: bool, groups: list[tuple[str, str]]):
        ts = _TimeSeries(metric_kind=kind, value_type=value_type, unit=unit)
        ts.metric.type = metric.type if metric else ""
        ts.metric.labels.update(dict(s.labels))
        ts.resource.type = RESOURCE_TYPE
        project, location, instance_id = s.key
        resource = {"resource_container": project, "location": location, "instance_id": instance_id}
        if not keep_resource:
            wanted = {k for where, k in groups if where == "resource"}
            resource = {k: v for k, v in resource.items() if k in wanted}
        ts.resource.labels.update(resource)
        if headers_only:
            return ts
        for idx in sorted(s.points):  # newest first, as the real API returns them
            a, b, v = s.points[idx]
            _set_point(ts, a, b, v, value_type, kind)
        return ts


def _reduce(series: list[_Series], reducer: int, groups: list[tuple[str, str]]) -> list[_Series]:
    """cross_series_reducer over the aligned series, partitioned by group_by_fields."""
    combine = _REDUCERS[reducer][0]
    metric_keys = [k for where, k in groups if where == "metric" and k != "@type"]
    resource_keys = [k for where, k in groups if where == "resource" and k != "@type"]
    parts: dict[tuple, list[_Series]] = {}
    for s in series:
        labels = dict(s.labels)
        res = dict(zip(("resource_container", "location", "instance_id"), s.key))
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
        key = (res.get("resource_container", ""), res.get("location", ""), res.get("instance_id", ""))
        out.append(_Series(key, tuple((k, v) for k, v in metric_part if v != ""), points))
    return out


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
                           min_alignment_s: float | None = None, speed: float = 1.0,
                           visibility_delay_s: float | None = None) -> None:
    """Serve MetricService's read methods on `server` from `meter`.

    `project_instances(project)` names the instances a project owns (project id or number,
    as in `projects/P`); by default, the tracked instances whose key starts with P.
    `speed` is the sandbox's (a real second is `speed` reference seconds): points stay hidden
    for 120 reference seconds after sampling (`visibility_delay_s`, default 120/speed) and the
    minimum alignment period is 60 reference seconds (`min_alignment_s`, default 60/speed).
    At speed 1 both are Google's.
    """
    if not speed > 0:
        raise ValueError(f"speed must be > 0, got {speed}")
    svc = _MetricService(meter, project_instances,
                         MIN_ALIGNMENT_S / speed if min_alignment_s is None else min_alignment_s,
                         VISIBILITY_DELAY_S / speed if visibility_delay_s is None else visibility_delay_s)
    handlers = {
        "ListMetricDescriptors": _handler(svc.list_metric_descriptors, _pb["ListMetricDescriptorsRequest"]),
        "GetMetricDescriptor": _handler(svc.get_metric_descriptor, _pb["GetMetricDescriptorRequest"]),
        "ListMonitoredResourceDescriptors": _handler(
            svc.list_monitored_resource_descriptors, _pb["ListMonitoredResourceDescriptorsRequest"]),
        "ListTimeSeries": _handler(svc.list_time_series, _pb["ListTimeSeriesRequest"]),
    }
    # Methods not listed here get UNIMPLEMENTED from gRPC itself.
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
