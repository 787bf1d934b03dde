"""Metrics: Lustre throughput with the checkpoint saves on the same time axis, capacity, and
reward, step time and checkpoint seconds per step.

The codelab's point is "high throughput, low checkpoint latency": each save should line up
with a write spike. Monitoring points are rates over a period ending at `t`; a save is known
only from its log line (CheckpointEvent: step, seconds, no time), stamped here on arrival,
which is when its step's timing table is printed, right after the save ended.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Sparkline, Static

from ..joblog import CheckpointEvent, TrainingStep
from ..widgets.charts import (ChartSpec, Chart, Series, Span, bar, downsample, nice_ticks,
                              rate_unit, time_ticks)
from .base import WizardScreen

GIB = 1024 ** 3
WAITING = "Waiting for the first Monitoring points: Lustre reports once a minute"
NO_REWARD = "No GRPO step yet.\nThe reward appears as the job logs each step (Job, F7)."
NO_STEP_TIME = "No GRPO step yet.\nStep times appear as the job logs each step's timing."
STEP_TIME_TITLE = "Step time per step (s) · [$warning]●[/] saved a checkpoint"
NO_SAVES = ("No checkpoint saved yet.\n"
            "The codelab saves every 2 steps (checkpointing.save_period=2).")


@dataclass(frozen=True)
class Save:
    step: int
    seconds: float
    path: str | None
    ended: float | None  # when its log line arrived; None: unknown (old log lines)
    seen: bool = True    # its CheckpointEvent arrived (not only its step's record)


class Saves:
    """The saves seen so far, each stamped with the time its log line arrived."""

    def __init__(self) -> None:
        self.by_step: dict[int, Save] = {}
        self._last: tuple[float, int] | None = None  # (arrival, step) of the newest event

    def ordered(self) -> list[Save]:
        return [self.by_step[k] for k in sorted(self.by_step)]

    def add(self, event: CheckpointEvent, now: float) -> None:
        """Saves run one after another, so two arriving closer together than the later one
        lasted are old log lines replayed at once: neither has a known time."""
        old = self.by_step.get(event.step)
        if old is not None and old.seen and old.seconds == event.seconds:  # the same line again
            self.by_step[event.step] = replace(old, path=event.path or old.path)
            return
        ended: float | None = now
        if self._last is not None and now - self._last[0] < event.seconds:
            ended = None
            previous = self.by_step.get(self._last[1])
            if previous is not None:
                self.by_step[previous.step] = replace(previous, ended=None)
        self.by_step[event.step] = Save(event.step, event.seconds, event.path, ended)
        self._last = (now, event.step)

    def add_record(self, record: TrainingStep) -> bool:
        """A save known only from its step's record (its event comes next, or was missed)."""
        if record.checkpoint_s is None or record.global_step in self.by_step:
            return False
        self.by_step[record.global_step] = Save(record.global_step, record.checkpoint_s,
                                                record.checkpoint_path, None, seen=False)
        return True


def throughput_spec(metrics: dict[str, Any] | None, key: str, saves: list[Save],
                    width: int) -> tuple[ChartSpec, str]:
    """The chart of one rate metric on a time axis ending at the poll, and its title."""
    name = f"Lustre {key} throughput"
    if not metrics or not metrics.get(key):
        return ChartSpec(empty=WAITING), name
    points = metrics[key]
    at, period = metrics["at"], float(metrics.get("period_s") or 60)
    # A point is the rate over the period ending at t: draw it in the middle of that period.
    xs = [p.t - period / 2 - at for p in points]
    peak = max(p.value for p in points)
    scale, unit = rate_unit(peak)
    ys = [p.value / scale for p in points]
    start = min(xs[0] - period / 2, 0.0)
    spans = tuple(Span(s.ended - s.seconds - at, s.ended - at, f"ckpt {s.step}")
                  for s in saves if s.ended is not None and s.ended - at > start)
    end = max([0.0, *(s.x1 for s in spans)])
    per, ticks = time_ticks(-start)
    xs, ys = downsample(xs, ys, max(2 * width, 16))
    spec = ChartSpec(series=(Series(xs, ys, "accent" if key == "write" else "secondary"),),
                     spans=spans, xlim=(start, end),
                     xticks=tuple((t * per, label) for t, label in ticks),
                     yticks=nice_ticks(peak / scale))
    return spec, f"{name} ({unit}) · peak {peak / scale:.3g} {unit} · period {period:g} s"


def step_ticks(last: int) -> tuple[tuple[float, str], ...]:
    """1, then round steps up to the last one."""
    step = int(max(1, nice_ticks(last, 4)[1][0])) if last > 4 else 1
    return tuple((float(s), str(s)) for s in sorted({1, *range(step, last + 1, step)}))


def step_specs(records: list[TrainingStep], width: int) -> tuple[ChartSpec, ChartSpec]:
    """Reward per step, and step time per step with the steps that saved marked."""
    if not records:
        return ChartSpec(empty=NO_REWARD), ChartSpec(empty=NO_STEP_TIME)
    last = max(max(r.global_step for r in records), records[-1].total_steps)
    xlim, xticks = (0.5, last + 0.5), step_ticks(last)
    rewarded = [(float(r.global_step), r.avg_reward) for r in records if r.avg_reward is not None]
    timed = [r for r in records if r.step_time_s is not None]
    saved = [r for r in timed if r.checkpoint_s is not None]
    marks = (Series(tuple(float(r.global_step) for r in saved),
                    tuple(r.step_time_s for r in saved), "warning", "scatter"),) if saved else ()

    def spec(pairs: list[tuple[float, float]], extra: tuple[Series, ...], color: str,
             signed: bool) -> ChartSpec:
        if not pairs:
            return ChartSpec(empty="Waiting for the first step to finish")
        xs, ys = downsample([x for x, _ in pairs], [y for _, y in pairs], max(2 * width, 16),
                            pick=lambda v: sum(v) / len(v))
        lo, hi = min(ys), max(ys)
        if signed and lo < 0:  # rewards may be negative: let plotext place the ticks
            return ChartSpec((Series(xs, ys, color), *extra), xlim=xlim, xticks=xticks,
                             ylim=(lo, hi if hi > lo else lo + 1))
        return ChartSpec((Series(xs, ys, color), *extra), xlim=xlim, xticks=xticks,
                         yticks=nice_ticks(hi))

    return (spec(rewarded, (), "success", True),
            spec([(float(r.global_step), r.step_time_s) for r in timed], marks, "primary", False))


def peak_write(metrics: dict[str, Any] | None, save: Save) -> float | None:
    """The highest write rate of the periods the save overlaps: its spike."""
    if save.ended is None or not metrics:
        return None
    period = float(metrics.get("period_s") or 60)
    rates = [p.value for p in metrics.get("write") or []
             if p.t > save.ended - save.seconds and p.t - period < save.ended]
    return max(rates, default=None)


def saves_text(saves: list[Save], metrics: dict[str, Any] | None, width: int) -> str:
    """Checkpoint seconds per save with a bar, and the write spike under each (markup)."""
    if not saves:
        return f"[dim]{NO_SAVES}[/]"
    longest = max(s.seconds for s in saves)
    bar_w = max(3, width - 30)
    rows = [f"[dim]{'save':<9}{'seconds':>9} {'':<{bar_w}} {'peak write':>10}[/]"]
    for s in saves:
        filled, rest = bar(s.seconds / longest, bar_w)
        mark = " " if s.ended is not None else "?"
        peak = peak_write(metrics, s)
        rate = "" if peak is None else f"{peak / rate_unit(peak)[0]:.3g} {rate_unit(peak)[1]}"
        rows.append(f"[b]ckpt {s.step:<3}[/]{mark}{s.seconds:7.1f} s [$warning]{filled}[/]"
                    f"{' ' * len(rest)} {rate:>10}")
    mean = sum(s.seconds for s in saves) / len(saves)
    rows.append(f"[dim]{len(saves)} saves · mean {mean:.1f} s · max {longest:.1f} s[/]")
    if any(s.ended is None for s in saves):
        rows.append("[dim]? time unknown (old log lines)[/]")
    newest = saves[-1].path
    if newest:
        room = max(8, width - 8)
        shown = newest if len(newest) <= room else "…" + newest[-(room - 1):]
        rows.append(f"[dim]newest[/] {shown}")
    return "\n".join(rows)


def capacity_text(metrics: dict[str, Any] | None, width: int) -> tuple[str, list[float]]:
    """"312 GiB of 9000 GiB" with a bar, and the used-bytes series for a sparkline."""
    if not metrics or not metrics.get("used"):
        return f"[dim]{WAITING}[/]", []
    used = metrics["used"]
    capacity = float(metrics.get("capacity_gib") or 0)
    now_gib = used[-1].value / GIB
    lines = []
    if capacity > 0:
        filled, rest = bar(now_gib / capacity, max(4, width))
        lines += [f"[b]{now_gib:,.0f} GiB[/] of {capacity:,.0f} GiB  ({now_gib / capacity:.1%})",
                  f"[$accent]{filled}[/][dim]{rest}[/]",
                  f"{capacity - now_gib:,.0f} GiB free"]
    else:
        lines.append(f"[b]{now_gib:,.0f} GiB[/] used")
    grown = (used[-1].value - used[0].value) / GIB
    lines.append(f"[dim]{grown:+,.1f} GiB over the chart's window[/]")
    return "\n".join(lines), [p.value for p in used]


class MetricsScreen(WizardScreen):
    MODE = "metrics"
    TITLE = "Metrics"
    BINDINGS = [Binding("r", "refresh_metrics", "refresh now")]

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.clock = clock  # stamps checkpoint saves; fixed in tests
        self._metrics: dict[str, Any] | None = None
        self._saves = Saves()
        self._records: dict[int, TrainingStep] = {}

    def compose_body(self) -> ComposeResult:
        with Vertical(id="metrics-body"):
            with Horizontal(id="metrics-write-row", classes="metrics-row"):
                yield Chart(WAITING, id="write-chart", classes="metrics-pane wide")
                with VerticalScroll(id="saves-pane", classes="metrics-pane narrow"):
                    yield Static(f"[dim]{NO_SAVES}[/]", id="saves")
            with Horizontal(id="metrics-read-row", classes="metrics-row"):
                yield Chart(WAITING, id="read-chart", classes="metrics-pane wide")
                with Vertical(id="capacity-pane", classes="metrics-pane narrow"):
                    yield Static(f"[dim]{WAITING}[/]", id="capacity")
                    yield Sparkline([], id="used-sparkline")
            with Horizontal(id="metrics-steps-row", classes="metrics-row"):
                yield Chart(NO_REWARD, id="reward-chart", classes="metrics-pane")
                yield Chart(NO_STEP_TIME, id="step-time-chart", classes="metrics-pane")

    def on_mount(self) -> None:
        titles = {"#write-chart": "Lustre write throughput",
                  "#read-chart": "Lustre read throughput",
                  "#saves-pane": "Checkpoint seconds per save",
                  "#capacity-pane": "Capacity used",
                  "#reward-chart": "Reward per step (avg reward)",
                  "#step-time-chart": STEP_TIME_TITLE}
        for selector, title in titles.items():
            self.query_one(selector).border_title = title
        bus = self.wizard.bus
        bus.metrics.subscribe(self, self._on_metrics)
        bus.checkpoint.subscribe(self, self._on_checkpoint)
        bus.step_record.subscribe(self, self._on_step_record)
        if self.wizard.session is not None:
            self.wizard.poll_metrics()  # loops by itself; exclusive, so never twice

    def action_refresh_metrics(self) -> None:
        if self.wizard.session is None:
            self.notify("No project or sandbox attached: nothing to poll", severity="warning")
            return
        self.wizard.poll_metrics()

    # --- data in ---

    def _on_metrics(self, metrics: dict[str, Any]) -> None:
        self._metrics = metrics
        self._draw_throughput()
        self._draw_saves()  # the spike under each save
        pane = self.query_one("#capacity-pane")
        text, used = capacity_text(metrics, max(4, pane.content_size.width or 36))
        self.query_one("#capacity", Static).update(text)
        sparkline = self.query_one("#used-sparkline", Sparkline)
        sparkline.data, sparkline.display = used, bool(used)

    def _on_checkpoint(self, event: CheckpointEvent) -> None:
        self._saves.add(event, self.clock())
        self._draw_throughput()
        self._draw_saves()

    def _on_step_record(self, record: TrainingStep) -> None:
        self._records[record.global_step] = record
        if self._saves.add_record(record):
            self._draw_saves()
        records = [self._records[k] for k in sorted(self._records)]
        reward, step_time = step_specs(records, self._width("#reward-chart"))
        self.query_one("#reward-chart", Chart).show(reward)
        self.query_one("#step-time-chart", Chart).show(step_time)

    # --- drawing ---

    def _width(self, selector: str) -> int:
        return self.query_one(selector).content_size.width or 80

    def _draw_throughput(self) -> None:
        saves = self._saves.ordered()
        for key in ("write", "read"):
            chart = self.query_one(f"#{key}-chart", Chart)
            spec, title = throughput_spec(self._metrics, key, saves if key == "write" else [],
                                          self._width(f"#{key}-chart"))
            chart.border_title = title
            chart.show(spec)

    def _draw_saves(self) -> None:
        pane = self.query_one("#saves-pane")
        self.query_one("#saves", Static).update(
            saves_text(self._saves.ordered(), self._metrics, pane.content_size.width or 36))
