"""The message bus's signals: each remembers what it published, so that a screen built later
(modes are built on first visit) gets it when it subscribes (rltui/app.py Bus)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from textual.signal import Signal

if TYPE_CHECKING:
    from textual.app import App

    from .cost import Estimate
    from .joblog import CheckpointEvent, TrainingStep
    from .plan.inventory import Resource
    from .plan.pods import KubeEvent
    from .plan.preflight import Check
    from .plan.runner import RunEvent, RunResult
    from .plan.view import PlanView
    from .saves import Save
    from .seam import GpuMetrics, JobStatusUpdate, LustreInstance, LustreMetrics, Notice
    from .session import ConfigState
    from .widgets.chrome import HeaderInfo

T = TypeVar("T")


class ReplaySignal(Signal[T], Generic[T]):
    """A signal that remembers: a screen created later (modes are built on first visit)
    receives the last value, or the bounded history of a stream, when it subscribes."""

    def __init__(self, owner: App[Any], name: str, keep: int) -> None:
        super().__init__(owner, name)
        self.history: deque[T] = deque(maxlen=keep)

    @property
    def last(self) -> T | None:
        return self.history[-1] if self.history else None

    def publish(self, data: T) -> None:
        self.history.append(data)
        super().publish(data)

    def subscribe(self, node: Any, callback: Callable[[T], Any], immediate: bool = False) -> None:
        super().subscribe(node, callback, immediate)
        for data in list(self.history):
            callback(data)


class BatchReplaySignal(ReplaySignal[list[T]], Generic[T]):
    """A stream published in batches (one per flush: a burst is one message, not one per
    item) whose history is bounded by items, not batches: a screen built later replays at
    most `keep` of the newest. Bounded by batches, a burst's history held every line of it, and
    a message per step record cost its screen a flush (docs/decisions/wizard-latency.md)."""

    def __init__(self, owner: App[Any], name: str, keep: int) -> None:
        super().__init__(owner, name, keep=keep)
        self.history = deque()
        self.keep_items = keep
        self.items = 0

    def publish(self, data: list[T]) -> None:
        if len(data) > self.keep_items:
            data = data[-self.keep_items:]
        if not self.history:
            self.items = 0  # cleared (reset_job): nothing left to count
        self.history.append(data)
        self.items += len(data)
        while self.items - len(self.history[0]) >= self.keep_items:
            self.items -= len(self.history.popleft())
        Signal.publish(self, data)

    def replayed(self) -> list[T]:
        """What a screen subscribing now receives, as one list."""
        return [item for batch in self.history for item in batch]


LOG_REPLAY_LINES = 10_000  # the log pane's MAX_LINES: a later screen can show no more


class Bus:
    """The topics screens subscribe to. State topics replay their last value; streams replay
    a bounded history (of events; of items for the batched ones). Each topic's payload type
    is declared below."""

    STATE: ClassVar[tuple[str, ...]] = (
        "header", "config", "preflight", "plan", "run_result", "inventory", "kube_events",
        "job_status", "metrics", "gpu", "dashboard", "raycluster", "lustre", "saves", "cost")
    STREAMS: ClassVar[dict[str, int]] = {
        "run_event": 2000, "pod_event": 5000, "log_lines": LOG_REPLAY_LINES, "step_records": 5000,
        "checkpoints": 1000, "teardown_event": 2000, "notice": 100}
    BATCHED: ClassVar[tuple[str, ...]] = ("log_lines", "step_records", "checkpoints")
    TOPICS: ClassVar[tuple[str, ...]] = STATE + tuple(STREAMS)

    def __init__(self, owner: App[Any]) -> None:
        for topic in self.STATE:
            setattr(self, topic, ReplaySignal(owner, topic, keep=1))
        for topic, keep in self.STREAMS.items():
            kind = BatchReplaySignal if topic in self.BATCHED else ReplaySignal
            setattr(self, topic, kind(owner, topic, keep=keep))

    # What each topic carries (set in __init__ from STATE and STREAMS).
    header: ReplaySignal[HeaderInfo]
    config: ReplaySignal[ConfigState]
    preflight: ReplaySignal[list[Check]]
    plan: ReplaySignal[PlanView]
    run_result: ReplaySignal[RunResult]
    inventory: ReplaySignal[list[Resource]]
    kube_events: ReplaySignal[list[dict[str, Any]]]
    job_status: ReplaySignal[JobStatusUpdate]
    metrics: ReplaySignal[LustreMetrics]              # Session.lustre_metrics
    gpu: ReplaySignal[GpuMetrics]                     # Session.gpu_metrics
    dashboard: ReplaySignal[str]                      # the Ray dashboard's URL, once known
    raycluster: ReplaySignal[dict[str, Any]]          # the RayCluster object ({}: none)
    lustre: ReplaySignal[LustreInstance]              # Session.lustre_instance
    saves: ReplaySignal[list[Save]]                   # every save of the followed job, timed
    cost: ReplaySignal[Estimate | None]               # the Estimate of what exists; None: no prices
    run_event: ReplaySignal[RunEvent]
    pod_event: ReplaySignal[KubeEvent]
    log_lines: BatchReplaySignal[str]                 # a burst of lines, written in one batch
    step_records: BatchReplaySignal[TrainingStep]     # each changed step's newest version
    checkpoints: BatchReplaySignal[CheckpointEvent]
    teardown_event: ReplaySignal[RunEvent | str]      # runner events, and lines about stopped jobs
    notice: ReplaySignal[Notice]
