"""google.monitoring.v3.MetricService over the Lustre meter (and the GPU meter, for GKE's
accelerator metrics: accelerators.py): the read methods the real
`monitoring_v3.MetricServiceClient` calls (ListMetricDescriptors, GetMetricDescriptor,
ListMonitoredResourceDescriptors, ListTimeSeries), with the real API's request checks and
paging; every other MetricService method answers UNIMPLEMENTED.

What is imitated, and from where (read 2026-12-01):

- points become visible up to 120 s after their sample time: the sandbox hides each point for
  exactly `visibility_delay_s` (120 reference seconds) after it was sampled;
- aggregation: the 60 s minimum alignment period, and "cross_series_reducer needs an aligner
  other than ALIGN_NONE": the docstrings of google.cloud.monitoring_v3.types.Aggregation
  (monitoring 2.32.0); the aligner refusal's wording `Field aggregation.perSeriesAligner had an
  invalid value of "ALIGN_RATE": The aligner cannot be applied to metrics with kind GAUGE and
  value type INT64.`: seen in public reports (Stackdriver/stackdriver-prometheus#14,
  google/exposure-notifications-verification-server#659);
- a series whose interval holds no point is not returned (ListTimeSeries lists data).

Not verified (the sandbox's own choice): the wording of the other INVALID_ARGUMENT messages.
"""

from __future__ import annotations

import re
import time
from typing import Awaitable, Callable, Iterable

import grpc
from google.api import label_pb2, launch_stage_pb2, metric_pb2, monitored_resource_pb2
from google.cloud import monitoring_v3

from rltui_sandbox.grpc_monitoring.aggregation import (
    _ALIGNERS,
    _REDUCERS,
    _align,
    _Aligner,
    _group_key,
    _raw_series,
    _reduce,
    _Reducer,
    _seconds,
    _Series,
    _set_point,
)
from rltui_sandbox.grpc_monitoring import accelerators
from rltui_sandbox.grpc_monitoring.filters import _container_fields, _Invalid, _parse_filter, _resource_fields
from rltui_sandbox.grpc_monitoring.metrics import (
    _LABEL_DOCS,
    _METRICS,
    _RESOURCE_LABELS,
    RESOURCE_TYPE,
    SAMPLE_PERIOD_S,
    VISIBILITY_DELAY_S,
    _Kind,
    _Metric,
    _Value,
)
from rltui_sandbox.gpu_meter import GpuMeter
from rltui_sandbox.lustre_meter import InstanceKey, LustreMeter
from rltui_sandbox.record import Record

SERVICE = "google.monitoring.v3.MetricService"
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
_View = _pb["ListTimeSeriesRequest"].TimeSeriesView

ProjectInstances = Callable[[str], Iterable[InstanceKey]]


class _MetricService:
    def __init__(self, meter: LustreMeter, project_instances: ProjectInstances | None,
                 min_alignment_s: float, visibility_delay_s: float, record: Record | None = None,
                 gpu_meter: GpuMeter | None = None) -> None:
        self.meter = meter
        self.gpu_meter = gpu_meter
        self.record = record
        self.project_instances = project_instances
        self.min_alignment_s = min_alignment_s
        self.visibility_delay_s = visibility_delay_s

    def _project(self, name: str) -> str:
        m = re.fullmatch(r"projects/([^/]+)", name)
        if m is None:
            raise _Invalid(f"Name must be of the form projects/[PROJECT_ID_OR_NUMBER], got {name!r}")
        return m[1]

    def _keys(self, project: str, gpu: bool) -> list:
        """The resources a project's series come from: its containers' GPUs, or its instances."""
        if gpu:
            return self.gpu_meter.keys(project) if self.gpu_meter is not None else []
        return self._instances(project)

    def _instances(self, project: str) -> list[InstanceKey]:
        tracked = set(self.meter.keys())
        if self.project_instances is None:
            wanted = [k for k in tracked if k[0] == project]
        else:
            wanted = [tuple(k) for k in self.project_instances(project)]
        return sorted(k for k in wanted if k in tracked)

    def _descriptor(self, project: str, m: _Metric) -> metric_pb2.MetricDescriptor:
        gpu = m.type in accelerators.METRICS
        stage = launch_stage_pb2.GA if gpu else launch_stage_pb2.BETA
        docs = accelerators.LABEL_DOCS if gpu else _LABEL_DOCS
        d = metric_pb2.MetricDescriptor(
            name=f"projects/{project}/metricDescriptors/{m.type}", type=m.type,
            metric_kind=m.kind, value_type=_Value.INT64, unit=m.unit, description=m.description,
            display_name=m.display_name, launch_stage=stage,
            monitored_resource_types=[_resource_type(m)],
            labels=[label_pb2.LabelDescriptor(key=k, description=docs[k]) for k in m.labels],
        )
        d.metadata.launch_stage = stage
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
            self._descriptor(project, m) for m in _ALL.values()
            if all(c.matches(m.type if c.lhs == "metric.type" else _resource_type(m)) for c in clauses)
        ]
        page, token = _page(found, req.page_size, req.page_token)
        return _pb["ListMetricDescriptorsResponse"](metric_descriptors=page, next_page_token=token)

    async def get_metric_descriptor(self, req, ctx):
        m = re.fullmatch(r"(projects/[^/]+)/metricDescriptors/(.+)", req.name)
        if m is None:
            raise _Invalid(f"Invalid metric descriptor name: {req.name!r}")
        metric = _ALL.get(m[2])
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
        metric = _ALL.get(types[0].value)
        if self.record is not None:  # per metric type: how often each series is asked for
            self.record.count(f"monitoring:ListTimeSeries:{types[0].value}")
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
        gpu = metric is not None and metric.type in accelerators.METRICS
        names = accelerators.RESOURCE_LABELS if gpu else _LUSTRE_LABELS
        if metric is not None:  # an unknown type matches nothing, as in the real API
            for key in self._keys(project, gpu):
                history = self.gpu_meter.history(key) if gpu and self.gpu_meter else self.meter.history(key)
                for labels, raw in sorted(_raw_series(metric, history, visible_until).items()):
                    fields = {"metric.type": metric.type,
                              **(_container_fields(key) if gpu else _resource_fields(key)),
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
            found = _reduce(found, reducer, groups, names)
        headers_only = req.view == _View.HEADERS
        unit = metric.unit if metric else ""
        if aligner == _Aligner.ALIGN_RATE and unit:
            unit = f"{unit}/s" if not unit.startswith("{") else "1/s"
        out = [self._time_series(metric, s, out_kind, out_value, unit, headers_only,
                                 keep_resource=reducer == _Reducer.REDUCE_NONE, groups=groups, names=names)
               for s in found]
        page, token = _page(out, req.page_size, req.page_token)
        return _pb["ListTimeSeriesResponse"](time_series=page, next_page_token=token, unit=unit)

    def _time_series(self, metric: _Metric | None, s: _Series, kind: int, value_type: int, unit: str,
                     headers_only: bool, keep_resource: bool, groups: list[tuple[str, str]],
                     names: tuple[str, ...]):
        ts = _TimeSeries(metric_kind=kind, value_type=value_type, unit=unit)
        ts.metric.type = metric.type if metric else ""
        ts.metric.labels.update(dict(s.labels))
        ts.resource.type = _resource_type(metric) if metric else RESOURCE_TYPE
        resource = dict(zip(names, s.key))
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


_ALL: dict[str, _Metric] = {**_METRICS, **accelerators.METRICS}
_LUSTRE_LABELS = ("resource_container", "location", "instance_id")


def _resource_type(m: _Metric) -> str:
    return accelerators.CONTAINER_RESOURCE if m.type in accelerators.METRICS else RESOURCE_TYPE


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
                           visibility_delay_s: float | None = None, record: Record | None = None,
                           gpu_meter: GpuMeter | None = None) -> None:
    """Serve MetricService's read methods on `server` from `meter`.

    `project_instances(project)` names the instances a project owns (project id or number,
    as in `projects/P`); by default, the tracked instances whose key starts with P.
    `speed` is the sandbox's (a real second is `speed` reference seconds): points stay hidden
    for 120 reference seconds after sampling (`visibility_delay_s`, default 120/speed) and the
    minimum alignment period is 60 reference seconds (`min_alignment_s`, default 60/speed).
    At speed 1 both are Google's. With `record`, each ListTimeSeries is counted there under
    `monitoring:ListTimeSeries:<metric type>` (the request's one `metric.type`). With
    `gpu_meter`, GKE's accelerator metrics of the pods' containers are served too.
    """
    if not speed > 0:
        raise ValueError(f"speed must be > 0, got {speed}")
    svc = _MetricService(meter, project_instances,
                         MIN_ALIGNMENT_S / speed if min_alignment_s is None else min_alignment_s,
                         VISIBILITY_DELAY_S / speed if visibility_delay_s is None else visibility_delay_s,
                         record, gpu_meter)
    handlers = {
        "ListMetricDescriptors": _handler(svc.list_metric_descriptors, _pb["ListMetricDescriptorsRequest"]),
        "GetMetricDescriptor": _handler(svc.get_metric_descriptor, _pb["GetMetricDescriptorRequest"]),
        "ListMonitoredResourceDescriptors": _handler(
            svc.list_monitored_resource_descriptors, _pb["ListMonitoredResourceDescriptorsRequest"]),
        "ListTimeSeries": _handler(svc.list_time_series, _pb["ListTimeSeriesRequest"]),
    }
    # Methods not listed here get UNIMPLEMENTED from gRPC itself.
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
