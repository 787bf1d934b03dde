"""The Managed Lustre metrics Cloud Monitoring describes, and how each one's series are read off
a LustreMeter sample.

What is imitated, and from where (read 2026-12-01):

- the metric descriptors (type, kind, value type, unit, labels, display name, BETA launch
  stage, 60 s sample period, 120 s ingest delay) and the monitored resource
  `lustre.googleapis.com/Instance` (resource_container, location, instance_id): Google Cloud
  metrics list, docs.cloud.google.com/monitoring/api/metrics_gcp_i_o, section "lustre";
- one time series per storage target (labels `component` = "ost"/"mdt", `target`, and
  `operation` where documented), so totals need cross_series_reducer=REDUCE_SUM; there is no
  "used" metric (used = sum capacity_bytes - sum free_bytes over component="ost"): same page.

Not verified (the sandbox's own choice): the values of the `operation` label ("read"/"write"
on the byte and sample counters; Lustre's md_stats names on metadata_operations_total).
io_time_milliseconds_total is described but has no data (the sandbox measures no latency).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from google.api import metric_pb2

from rltui_sandbox.lustre_meter import MeterPoint, TargetSample

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
SAMPLE_PERIOD_S = 60.0  # "Sampled every 60 seconds"
VISIBILITY_DELAY_S = 120.0  # "After sampling, data is not visible for up to 120 seconds"

_Kind = metric_pb2.MetricDescriptor.MetricKind
_Value = metric_pb2.MetricDescriptor.ValueType

Labels = tuple[tuple[str, str], ...]  # sorted (key, value) metric labels of one series


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
    # the series of one sample (a MeterPoint; a GpuPoint for accelerators.py): metric labels ->
    # value (cumulative for DELTA metrics)
    values: Callable[[Any], dict[Labels, int]]


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
