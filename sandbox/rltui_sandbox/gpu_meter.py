"""The sandbox's GPU nodes measured as GKE reports a container's GPUs to Cloud Monitoring.

GKE's system metrics `kubernetes.io/container/accelerator/{duty_cycle,memory_used,memory_total}`
(docs.cloud.google.com/monitoring/api/metrics_kubernetes) are the kubelet's AcceleratorStats of
each container (kubernetes.io/docs/reference/kubelet-api/stats.v1alpha1: dutyCycle "Percent of
time over the past sample period during which the accelerator was actively processing",
memoryUsed "Total accelerator memory allocated", memoryTotal), one series per GPU, on the
k8s_container resource. Here the sandbox's GPUs are the demo job's: every `interval_s` (60
reference seconds, Cloud Monitoring's sample period for these metrics) the meter reads each
RayCluster's file (kuberay/placement.py: the worker pods and their GPUs) and the driver's activity
file beside it (grpo_demo/activity.py: busy in a step's phases, idle while it saves), and records
per worker container and GPU:
- duty_cycle: the share of the period since the last sample that the job's phases ran (0 with no
  job on the pod);
- memory_used: the job's share of each GPU (the vLLM memory fraction) while the job runs, else 0;
- memory_total: the GPU's memory: a B200 of an A4 machine has 180 GB (A4: 8 B200, 1,440 GB of
  HBM3e; docs.cloud.google.com/compute/docs/accelerator-optimized-machines, A4 series).
Not verified (the sandbox's own choice): the accelerator_id values (GPU-<index> here; the real
ones are the device's id as the kubelet reports it) and the model label's spelling for a B200.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from rltui_sandbox.grpo_demo.activity import FORMAT as ACTIVITY_FORMAT, SUFFIX, busy_seconds
from rltui_sandbox.grpo_demo.cluster import FORMAT as CLUSTER_FORMAT

B200_MEMORY_BYTES = 180 * 10**9
MAKE, MODEL = "nvidia", "nvidia-b200"
WORKER_CONTAINER = "ray-worker"  # the codelab's manifest names the worker container so (rltui/manifests.py)
KEEP_POINTS = 1440  # a day of minutes

GkeCluster = tuple[str, str, str]
"""(project_id, location, cluster_name) of a GKE cluster whose pods the kube API holds."""
ContainerKey = tuple[str, str, str, str, str, str]
"""The k8s_container labels: project_id, location, cluster_name, namespace_name, pod_name, container_name."""
LABELS = ("project_id", "location", "cluster_name", "namespace_name", "pod_name", "container_name")


class GpuPoint(NamedTuple):
    """One container's GPUs at a sample: each of its `gpus` GPUs reads the same values."""

    t: float
    gpus: int
    duty_pct: int
    memory_used: int
    memory_total: int


@dataclass
class _Pod:
    busy_s: float  # the job's busy seconds at the previous sample (cumulative)
    t: float
    job: str       # the activity file it came from ("": none)


class GpuMeter:
    """Per container, the GPU points of the last KEEP_POINTS samples."""

    def __init__(self, clusters_dir: Path, gke_clusters: Callable[[], Iterable[GkeCluster]],
                 interval_s: float = 60.0, clock: Callable[[], float] = time.time) -> None:
        self.clusters_dir, self.gke_clusters = clusters_dir, gke_clusters
        self.interval_s, self.clock = interval_s, clock
        self._history: dict[ContainerKey, deque[GpuPoint]] = {}
        self._pods: dict[str, _Pod] = {}  # pod uid -> its last sample
        self._lock = threading.Lock()  # samples run in a thread; the MetricService reads on the loop

    def keys(self, project: str) -> list[ContainerKey]:
        with self._lock:
            return sorted(k for k in self._history if k[0] == project)

    def history(self, key: ContainerKey) -> list[GpuPoint]:
        with self._lock:
            return list(self._history.get(key, ()))

    def _read(self, path: Path, fmt: str) -> dict | None:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) and doc.get("format") == fmt else None

    def sample(self, clusters: list[GkeCluster] | None = None) -> None:
        """One sample of every worker pod's GPUs; `clusters`: the GKE clusters to label them
        with (default: ask gke_clusters now)."""
        now = self.clock()
        jobs: dict[str, tuple[str, dict]] = {}  # pod uid -> (activity file, its content), running jobs only
        workers: list[dict] = []
        for path in sorted(self.clusters_dir.glob("*.json")):
            if path.name.endswith(SUFFIX):
                continue
            doc = self._read(path, CLUSTER_FORMAT)
            if doc is None:
                continue
            workers += [p for p in doc.get("pods") or [] if p.get("nodeType") == "worker" and p.get("gpus")]
            activity = self._read(Path(str(path) + SUFFIX), ACTIVITY_FORMAT)
            if activity is not None and not activity.get("ended"):
                jobs.update({p["uid"]: (str(path), activity) for p in activity.get("pods") or []})
        if clusters is None:
            clusters = list(self.gke_clusters())
        seen = set()
        for pod in workers:
            uid, gpus = str(pod["uid"]), int(pod["gpus"])
            seen.add(uid)
            job, activity = jobs.get(uid, ("", None))
            busy = busy_seconds(activity, now) if activity is not None else 0.0
            last = self._pods.get(uid)
            duty = 0.0
            if activity is not None and last is not None and last.job == job and now > last.t:
                duty = 100.0 * (busy - last.busy_s) / (now - last.t)
            elif activity is not None and last is None:  # first sample: since the job's record began
                duty = 100.0 if activity.get("busy") else 0.0
            self._pods[uid] = _Pod(busy, now, job)
            used = int(B200_MEMORY_BYTES * float(activity.get("memory_fraction") or 0)) if activity else 0
            point = GpuPoint(now, gpus, round(min(100.0, max(0.0, duty))), used, B200_MEMORY_BYTES)
            with self._lock:
                for project, location, cluster in clusters:
                    key = (project, location, cluster, str(pod.get("namespace") or "default"), str(pod["pod"]),
                           WORKER_CONTAINER)
                    self._history.setdefault(key, deque(maxlen=KEEP_POINTS)).append(point)
        for uid in set(self._pods) - seen:
            del self._pods[uid]

    async def run(self) -> None:
        """Sample every `interval_s` until cancelled (file reads run in a thread)."""
        while True:
            # The world is asked on the loop (its own thread), the files read off it.
            await asyncio.to_thread(self.sample, list(self.gke_clusters()))
            await asyncio.sleep(self.interval_s)
