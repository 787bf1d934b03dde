"""One glance at the job: status, step s/S, the last reward (and its change), the step time.

Fed by `job_status` (rltui.seam.JobStatusUpdate) and `step_records` (batches of rltui.joblog.TrainingStep); a record
is published again as its step fills in, so the newest record per step wins.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypedDict

from rich.text import Text
from textual.widget import Widget

from ..joblog import TrainingStep
from ..seam import JobStatusUpdate

BARS = "▁▂▃▄▅▆▇█"
TREND_POINTS = 12
KEEP = 4 * TREND_POINTS  # the records summary() reads: the newest steps


class JobSummary(TypedDict):
    """What JobStrip.summary() returns."""

    status: str | None
    job_id: str | None
    recovery: str
    guard: str
    step: tuple[int, int] | None  # (step, total_steps) of the step running now
    epoch: int | None  # its epoch from the second on: NeMo-RL's step count restarts each epoch
    reward: float | None
    reward_delta: float | None
    step_time_s: float | None
    rewards: list[float]
    step_times: list[float]


def sparkline(values: list[float]) -> str:
    """Unicode bars, lowest value lowest bar; a flat series sits in the middle."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if hi == lo:
        return BARS[3] * len(values)
    return "".join(BARS[round((v - lo) / (hi - lo) * (len(BARS) - 1))] for v in values)


class JobStrip(Widget):
    """Two lines: `RUNNING  step 7/20  reward 0.410 (+0.050)  412.3 s/step` and the trends."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"strip--ok", "strip--busy", "strip--bad", "strip--label"}
    DEFAULT_CSS = """
    JobStrip { height: 2; }
    JobStrip > .strip--ok { color: $success; text-style: bold; }
    JobStrip > .strip--busy { color: $accent; text-style: bold; }
    JobStrip > .strip--bad { color: $error; text-style: bold; }
    JobStrip > .strip--label { color: $text-muted; }
    """

    def __init__(self, *, empty: str = "no job yet: submit one on the Job screen (F7)",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.empty = empty
        self.job_id: str | None = None
        self.status: str | None = None
        self._records: dict[int, TrainingStep] = {}
        self._last: TrainingStep | None = None   # the step running now (a rerun may go back)
        self.recovery = ""  # "preempted at step 9, resumed from step 8 in 3:10"
        self.guard = ""  # "guard: deletes GPU pool np-gpu when the run ends; spent ~$412 of $500"
        self.guard_short = ""  # "guard: ~$412 of $500; GPUs go at end" (a narrow strip's)

    def set_status(self, status: JobStatusUpdate) -> None:
        if status.reset:   # a new job, or none after teardown: nothing of the old one
            self.job_id, self.status, self.recovery, self.guard = status.id, status.status or None, "", ""
            self.guard_short, self.tooltip = "", None
            self._records.clear()
            self._last = None
            self.refresh()
            return
        if status.id != self.job_id and self.job_id is not None and status.id:
            self._records.clear()  # a new job: its own steps
            self._last = None
        self.job_id = status.id or self.job_id
        self.status = status.status or self.status
        if status.recovery is not None:  # the supervisor's word on the newest preemption, or ""
            self.recovery = status.recovery
        if status.guard is not None:  # the budget guard's line, or ""
            self.guard, self.guard_short = status.guard, status.guard_short
            self.tooltip = self.guard or None  # whole, where the strip shows the short form
        self.refresh()

    def add_records(self, records: list[TrainingStep]) -> None:
        """Each changed step's newest version, in the order steps changed."""
        if not records:
            return
        for record in records:
            self._records[record.global_step] = record
        self._last = records[-1]
        if len(self._records) > 2 * KEEP:  # the strip shows the newest only: the rest would
            for step in sorted(self._records)[:-KEEP]:  # be scanned by every full collection
                del self._records[step]
        self.refresh()

    def summary(self) -> JobSummary:
        """What the strip shows, as values (tests and other screens read it)."""
        # The newest few only: every record of a long job's replay, sorted on each repaint,
        # slowed every frame (docs/decisions/wizard-latency.md).
        records = [self._records[k] for k in sorted(self._records)[-KEEP:]]
        rewards = [r.avg_reward for r in records if r.avg_reward is not None]
        times = [r.step_time_s for r in records if r.step_time_s is not None]
        current = self._last
        reward = rewards[-1] if rewards else None
        delta = rewards[-1] - rewards[-2] if len(rewards) > 1 else None
        return {
            "status": self.status, "job_id": self.job_id, "recovery": self.recovery, "guard": self.guard,
            "step": (current.step, current.total_steps) if current else None,
            "epoch": current.epoch if current and (current.epoch or 0) > 1 else None,
            "reward": reward, "reward_delta": delta,
            "step_time_s": times[-1] if times else None,
            "rewards": rewards[-TREND_POINTS:],
            "step_times": times[-TREND_POINTS:],
        }

    def _status_style(self) -> str:
        status = self.status or ""
        if status in ("SUCCEEDED",):
            return "strip--ok"
        if status in ("FAILED", "STOPPED"):
            return "strip--bad"
        return "strip--busy"

    def render(self) -> Text:
        s = self.summary()
        label = self.get_component_rich_style("strip--label")
        if s["status"] is None and s["step"] is None:
            return Text(self.empty, style=label)
        text = Text()
        text.append(f"{s['status'] or 'UNKNOWN'}", style=self.get_component_rich_style(self._status_style()))
        if s["step"]:
            step, total = s["step"]
            text.append("  step ", style=label).append(f"{step}/{total}", style="bold")
            if s["epoch"]:
                text.append(" of epoch ", style=label).append(str(s["epoch"]), style="bold")
        if s["reward"] is not None:
            text.append("  reward ", style=label).append(f"{s['reward']:.3f}", style="bold")
            if s["reward_delta"] is not None:
                text.append(f" ({s['reward_delta']:+.3f})")
        if s["step_time_s"] is not None:
            text.append(f"  {s['step_time_s']:.1f}", style="bold").append(" s/step", style=label)
        trends = []
        if s["recovery"]:  # first on the second line: at 80 columns the first one is full already
            recovery = str(s["recovery"])
            if len(recovery) > self.size.width:  # 43 columns at 80x24: drop the word "step"
                recovery = recovery.replace("at step ", "at ").replace("from step ", "from ")
            trends.append(Text(recovery, style=self.get_component_rich_style("strip--busy")))
        if s["guard"]:  # beside the recovery line: what the guard will do, what was spent
            guard = str(s["guard"])
            if len(guard) > self.size.width and self.guard_short:  # 43 columns at 80x24
                guard = self.guard_short
            trends.append(Text(guard, style=self.get_component_rich_style(
                "strip--bad" if "FAILED" in guard else "strip--busy")))
        if s["rewards"]:
            trends.append(Text("reward ", style=label).append(sparkline(s["rewards"])))
        if s["step_times"]:
            trends.append(Text("s/step ", style=label).append(sparkline(s["step_times"])))
        if s["job_id"]:
            trends.append(Text("job ", style=label).append(str(s["job_id"])))
        return text.append("\n").append_text(Text("  ").join(trends))
