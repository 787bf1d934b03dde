"""GKE's accelerator metrics of a container, as Cloud Monitoring describes them, and how each
one's series are read off a GpuMeter point (sandbox/rltui_sandbox/gpu_meter.py).

What is imitated, and from where (read 2026-12-05):
- the metric types kubernetes.io/container/accelerator/duty_cycle, memory_used and
  memory_total, GAUGE INT64, their metric labels make, model and accelerator_id, on the
  k8s_container resource (project_id, location, cluster_name, namespace_name, pod_name,
  container_name): the GKE system metrics list (docs.cloud.google.com/monitoring/api/
  metrics_kubernetes) and the agent that first wrote them, kubernetes-retired/heapster
  metrics/sinks/stackdriver (metadata.go: the kinds and value types; stackdriver.go:
  getContainerResourceLabels and the make/model/accelerator_id labels); one series per GPU of a
  container, as the kubelet lists one AcceleratorStats per device
  (kubernetes.io/docs/reference/kubelet-api/stats.v1alpha1);
- "Sampled every 60 seconds. After sampling, data is not visible for up to 120 seconds": the
  list's note for GKE's container metrics (the sandbox's Lustre delay and period as well).
Not verified (the sandbox's own choice): the launch stage written on the descriptors (GA), the
units ("%", "By"), and whether GKE fills these for A4 (B200) nodes with the system metrics it
collects by default: the kubelet stopped reporting accelerator stats (DisableAcceleratorUsageMetrics,
on by default since Kubernetes 1.20: kubernetes.io/blog, "Third Party Device Metrics Reaches GA",
2020-12-16), and Google documents NVIDIA DCGM metrics
(prometheus.googleapis.com/DCGM_FI_DEV_GPU_UTIL/gauge, on k8s_container via Managed Service for
Prometheus) as the GPU source once managed DCGM collection is turned on, which the codelab's
cluster does not do.
"""

from __future__ import annotations

from google.api import metric_pb2

from rltui_sandbox.gpu_meter import LABELS, MAKE, MODEL, GpuPoint
from rltui_sandbox.grpc_monitoring.metrics import Labels, _Metric

CONTAINER_RESOURCE = "k8s_container"
PREFIX = "kubernetes.io/container/accelerator/"
DUTY_CYCLE = PREFIX + "duty_cycle"
MEMORY_USED = PREFIX + "memory_used"
MEMORY_TOTAL = PREFIX + "memory_total"
RESOURCE_LABELS = LABELS

_Kind = metric_pb2.MetricDescriptor.MetricKind

LABEL_DOCS = {
    "make": "Make of the accelerator (e.g. nvidia)",
    "model": "Model of the accelerator (e.g. 'Tesla P100')",
    "accelerator_id": "ID of the accelerator.",
}


def _per_gpu(value: str):
    def values(p: GpuPoint) -> dict[Labels, int]:
        return {(("accelerator_id", f"GPU-{i}"), ("make", MAKE), ("model", MODEL)): int(getattr(p, value))
                for i in range(p.gpus)}
    return values


_SAMPLED = " Sampled every 60 seconds. After sampling, data is not visible for up to 120 seconds."
_LABELS = ("accelerator_id", "make", "model")
METRICS: dict[str, _Metric] = {m.type: m for m in (
    _Metric(DUTY_CYCLE, _Kind.GAUGE, "%", "Accelerator duty cycle",
            "Percent of time over the past sample period (10s) during which the accelerator was actively "
            "processing." + _SAMPLED, _LABELS, _per_gpu("duty_pct")),
    _Metric(MEMORY_USED, _Kind.GAUGE, "By", "Accelerator memory used",
            "Total accelerator memory allocated in bytes." + _SAMPLED, _LABELS, _per_gpu("memory_used")),
    _Metric(MEMORY_TOTAL, _Kind.GAUGE, "By", "Accelerator memory capacity",
            "Total accelerator memory in bytes." + _SAMPLED, _LABELS, _per_gpu("memory_total")),
)}
