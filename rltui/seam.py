"""The wizard's seam: what rltui/app.py (and its screens) call on a session, and the messages
its bus carries that are rltui's own (the other topics carry rltui's values: ConfigState,
PlanView, Resource, ...; rltui/bus.py lists them).

`WizardSession` is met by the in-process Session (rltui/session.py) and by RemoteSession
(rltui/remote.py), whose cloud worker returns the same objects, pickled. Stdlib only at run
time: the wizard imports this before its first frame, and the worker unpickles these classes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from .cloud.endpoints import Endpoints
    from .cloud.monitoring import Point
    from .config import RLConfig
    from .cost import Estimate
    from .jobfeed import JobUpdate
    from .joblog import TrainingStep
    from .plan.background import Background
    from .plan.inventory import Resource
    from .plan.pods import KubeEvent
    from .plan.preflight import Check
    from .plan.runner import RunEvent, Runner, RunResult
    from .plan.view import PlanView
    from .session import ConfigState


# --- the bus's own messages ---

@dataclass(frozen=True)
class JobStatusUpdate:
    """The `job_status` topic: the followed job's status, from the app's log follower (RUNNING,
    then the final one), from the supervisor's record (with `recovery`), or a reset."""

    id: str | None                 # the job's submission id; None: no job (after a teardown)
    # A JobStatus value (oncluster/jobstatus.py), or a run's own word from the supervisor's
    # record (SUBMITTED, RECOVERING: plan/supervision.py); "" with a reset to no job.
    status: str
    reset: bool = False            # a new job (or none): what screens show of the old one goes
    recovery: str | None = None    # the supervisor's word on the newest preemption ("": none);
    #                                None: this message says nothing of it
    guard: str | None = None       # the budget guard's line (plan/guard.py guard_line; "": none);
    #                                None: this message says nothing of it
    guard_short: str = ""          # the same in at most 43 columns (guard_short), for a narrow strip


@dataclass(frozen=True)
class Notice:
    """The `notice` topic: a worker's failure, or a poll's warning, as the notices show it."""

    severity: Literal["error", "warning"]
    group: str | None              # the app's worker group (e.g. "teardown", "metrics")
    message: str


@dataclass(frozen=True)
class LustreMetrics:
    """The `metrics` topic (Session.lustre_metrics, plan/metrics.py): Cloud Monitoring's Lustre
    points over the chart's window, each the rate (or gauge) of the period ending at Point.t."""

    at: float                      # when the points were asked for (time.time())
    period_s: float                # the alignment period of every point
    read: tuple[Point, ...]        # bytes per second read, all targets together
    write: tuple[Point, ...]       # bytes per second written
    used: tuple[Point, ...]        # bytes used over the OSTs
    capacity_gib: int              # env.sh's LUSTRE_CAPACITY

    def rate(self, key: Literal["read", "write"]) -> tuple[Point, ...]:
        return self.read if key == "read" else self.write


STALE_PERIODS = 4  # Cloud Monitoring shows a point up to 120 s (2 periods) after it was sampled


@dataclass(frozen=True)
class PodGpu:
    """One pod's GPUs at the newest point: what Monitor's pods table shows."""

    busy_pct: float                # duty cycle, the mean over the pod's GPUs
    memory_used: float             # bytes, summed over the pod's GPUs
    memory_total: float


@dataclass(frozen=True)
class GpuMetrics:
    """The `gpu` topic (Session.gpu_metrics, plan/metrics.py): GKE's accelerator metrics of the
    RayCluster's pods over the chart's window, per pod name, each a period's mean at Point.t."""

    at: float                      # when the points were asked for (time.time())
    period_s: float                # the alignment period of every point
    busy: dict[str, tuple[Point, ...]]          # pod -> duty cycle % (mean over its GPUs)
    memory_used: dict[str, tuple[Point, ...]]   # pod -> bytes in use (sum over its GPUs)
    memory_total: dict[str, tuple[Point, ...]]  # pod -> bytes its GPUs have

    def latest(self, pod: str) -> PodGpu | None:
        """The pod's newest duty cycle and memory; None: Cloud Monitoring has no recent point
        for it (none within STALE_PERIODS periods: points show up to 2 periods late)."""
        busy = self.busy.get(pod)
        if not busy or busy[-1].t < self.at - STALE_PERIODS * self.period_s:
            return None
        used, total = self.memory_used.get(pod) or (), self.memory_total.get(pod) or ()
        return PodGpu(busy[-1].value, used[-1].value if used else 0.0, total[-1].value if total else 0.0)

    def mean_busy(self) -> list[tuple[float, float]]:
        """(t, duty cycle %) averaged over the pods reporting at t, oldest first: the chart's line."""
        at: dict[float, list[float]] = {}
        for points in self.busy.values():
            for p in points:
                at.setdefault(p.t, []).append(p.value)
        return [(t, sum(vs) / len(vs)) for t, vs in sorted(at.items())]


@dataclass(frozen=True)
class LustreInstance:
    """The `lustre` topic (Session.lustre_instance): the instance as google-cloud-lustre's
    Instance describes it, or `found=False` with only its id."""

    id: str
    found: bool
    state: str = ""                # e.g. ACTIVE, CREATING
    mount_point: str = ""          # `IP@tcp:/FS`, once ACTIVE
    ip: str = ""                   # the mount point's IP
    capacity_gib: int = 0
    throughput: int = 0            # per_unit_storage_throughput, MBps per TiB (0: Dynamic tier)
    filesystem: str = ""
    network: str = ""


# --- the session, as the wizard uses it ---

class WizardSession(Protocol):
    """What the app and its screens call on a session; the results are the Session's own."""

    @property
    def cfg(self) -> RLConfig | None: ...            # None while env.sh does not validate

    @property
    def endpoints(self) -> Endpoints: ...            # built on first use (may start a sandbox)

    @property
    def downloads_models(self) -> bool | None: ...

    # env.sh
    def load_env(self) -> None: ...
    def config_state(self) -> ConfigState: ...
    def save_env(self, values: dict[str, str]) -> Path: ...

    # the plan
    def plan_view(self) -> PlanView: ...
    def runner(self, listener: Callable[[RunEvent], None] | None = None) -> Runner: ...
    async def up(self, listener: Callable[[RunEvent], None], targets: set[str] | None = None) -> RunResult: ...
    async def down(self, listener: Callable[[RunEvent | str], None], export_to: str | None = None) -> RunResult: ...
    async def probe_plan(self) -> None: ...
    def background(self) -> Background | None: ...
    async def inventory(self) -> list[Resource]: ...
    async def cost(self, resources: list[Resource]) -> Estimate | None: ...
    async def preflight(self) -> list[Check]: ...

    # the job
    async def submit(self, resume: bool, new_folder: bool = False) -> str: ...
    def last_job_id(self) -> str | None: ...
    def last_job_supervised(self) -> bool: ...
    async def follow_job(self, on_update: Callable[[JobUpdate], Any],
                         job_id: str | None = None) -> tuple[str, TrainingStep | None]: ...
    async def job_summary(self) -> dict[str, Any] | None: ...

    # the cluster (async iterators: watches, a log)
    def pod_events(self) -> AsyncIterator[KubeEvent]: ...
    def kube_events(self) -> AsyncIterator[list[dict[str, Any]]]: ...
    def raycluster_events(self) -> AsyncIterator[dict[str, Any]]: ...
    def pod_log(self, name: str, tail_lines: int = 500) -> AsyncIterator[str]: ...
    async def dashboard(self) -> str: ...
    async def describe_pod(self, name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]: ...
    async def delete_pod(self, name: str) -> None: ...

    # Lustre
    async def lustre_metrics(self, minutes: float = 30.0) -> LustreMetrics: ...
    async def lustre_instance(self) -> LustreInstance: ...
    async def gpu_metrics(self, minutes: float = 30.0) -> GpuMetrics: ...

    async def close(self) -> None: ...
