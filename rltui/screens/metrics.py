"""Metrics: Lustre throughput with the checkpoint saves on the same time axis, under it the
GPUs' duty cycle (GKE's accelerator metrics, the mean over the RayCluster's pods) on that axis
too, the Lustre instance (state, IP, mount point, capacity used, tier), and reward, step time
per step.

The codelab's point is "high throughput, low checkpoint latency": each save should line up with
a write spike. A save's moment and duration come from rltui/saves.py (its `Saving checkpoint`
line's arrival, or for a backlog an estimate from the step timers and the Ray job's own end
time; its step's `checkpointing` timer), on the app's `saves` topic. Monitoring points are
rates over a period ending at `t` (Point.t: the interval's end time, epoch seconds:
cloud/monitoring.py); the sandbox's meter stamps its samples with the same wall clock
(sandbox/lustre_meter.py, time.time()) even when it runs faster than real time
(`endpoints.time_scale` shortens the periods, not the clock), so saves and points share one x
axis: seconds before the poll (`LustreMetrics.at`, time.time()).

At 80x24 (or below 100 columns or 32 rows) one chart shows at a time, `v` picks the next one;
the saves and the Lustre panel sit side by side under it. From 100x32 all seven panes show.
"""

from __future__ import annotations

import time
from typing import ClassVar, Literal

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.events import Resize
from textual.widgets import Static

from .. import runs
from ..joblog import TrainingStep
from ..saves import Save, merge
from ..seam import GpuMetrics, JobStatusUpdate, LustreInstance, LustreMetrics
from ..widgets.charts import (
    Chart,
    ChartSpec,
    Series,
    Span,
    bar,
    downsample,
    fit_labels,
    nice_ticks,
    plot_columns,
    rate_unit,
    time_ticks,
)
from .base import WizardScreen, stylesheet

GIB = 1024 ** 3
TIB_GIB = 1024
WAITING = "Waiting for the first Monitoring points: Lustre reports once a minute"
NO_REWARD = "No GRPO step yet.\nThe reward appears as the job logs each step (Job, F7)."
NO_STEP_TIME = "No GRPO step yet.\nStep times appear as the job logs each step's timing."
STEP_TIME_TITLE = "Step time per step (s) · [$warning]●[/] saved a checkpoint"
REWARD_TITLE = "Reward per step (avg reward)"
PREVIOUS_COLOR = "secondary"   # the previous run's reward curve, under this run's (p)
NO_PREVIOUS = "No earlier run with a reward is recorded (`rltui runs` lists the runs)"
NO_SAVES = ["No checkpoint saved yet.", "The codelab saves every 2 steps",
            "(checkpointing.save_period=2)."]
NO_LUSTRE = ["Waiting for the Lustre instance", "(asked on open and every minute)"]
CHARTS = ("write", "gpu", "read", "reward", "step-time")
NO_GPU = "Waiting for GKE's GPU metrics: each worker's GPUs report once a minute"
PANES = ("write-chart", "saves-pane", "gpu-chart", "lustre-pane", "read-chart", "reward-chart",
         "step-time-chart")   # compose's order
GPU_TITLE = "GPU busy (duty cycle %, mean over the workers)"
WIDE_COLS, TALL_ROWS = 100, 32   # below either: one chart at a time


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def fmt_rate(value: float) -> str:
    scale, unit = rate_unit(value)
    return f"{value / scale:.3g} {unit}"


def save_spans(saves: list[Save], at: float, xlim: tuple[float, float], cols: int
               ) -> tuple[Span, ...]:
    """One marker per save in the window, at least a column wide, labels that never overlap
    ("ckpt 12", else "12", else every label that fits, newest first); estimated saves dimmer."""
    per_col = (xlim[1] - xlim[0]) / max(1, cols)
    shown = [s for s in saves if (s.ended if s.ended is not None else at) - at > xlim[0]]
    x0s = [s.started - at for s in shown]
    x1s = [max(x0 + per_col, (s.ended if s.ended is not None else at) - at)
           for x0, s in zip(x0s, shown, strict=True)]
    centers = [((a + b) / 2 - xlim[0]) / per_col for a, b in zip(x0s, x1s, strict=True)]
    labels = fit_labels(centers, [(f"{'~' if s.estimated else ''}ckpt {s.step}",
                                   f"{'~' if s.estimated else ''}{s.step}") for s in shown], cols)
    return tuple(Span(a, b, label, "warning-darken-2" if s.estimated else "warning",
                      dashed=s.estimated) for a, b, label, s in zip(x0s, x1s, labels, shown, strict=True))


def throughput_spec(metrics: LustreMetrics | None, key: Literal["read", "write"], saves: list[Save],
                    width: int) -> tuple[ChartSpec, str]:
    """The chart of one rate metric on a time axis ending at the poll, and its title."""
    name = f"Lustre {key} throughput"
    points = metrics.rate(key) if metrics else ()
    if not metrics or not points:
        return ChartSpec(empty=WAITING), name
    at, period = metrics.at, float(metrics.period_s or 60)
    # A point is the rate over the period ending at t: draw it in the middle of that period.
    xs = [p.t - period / 2 - at for p in points]
    peak = max(p.value for p in points)
    scale, unit = rate_unit(peak)
    ys = [p.value / scale for p in points]
    yticks = nice_ticks(peak / scale)
    start = min(xs[0] - period / 2, 0.0)
    end = max([0.0, *((s.ended or at) - at for s in saves)])
    spans = save_spans(saves, at, (start, end), plot_columns(width, yticks)) if saves else ()
    end = max([end, *(s.x1 for s in spans)])
    per, ticks = time_ticks(-start)
    drawn_xs, drawn_ys = downsample(xs, ys, max(2 * width, 16))
    spec = ChartSpec(series=(Series(drawn_xs, drawn_ys, "accent" if key == "write" else "secondary"),),
                     spans=spans, xlim=(start, end),
                     xticks=tuple((t * per, label) for t, label in ticks), yticks=yticks)
    return spec, f"{name} ({unit}) · peak {peak / scale:.3g} {unit} · period {period:g} s"


def gpu_spec(gpu: GpuMetrics | None, saves: list[Save], width: int,
             xlim: tuple[float, float] | None) -> tuple[ChartSpec, str]:
    """The workers' mean duty cycle on the write chart's time axis (`xlim`, seconds before the
    poll), with the same save markers: a save's write spike sits over the GPUs' dip."""
    line = gpu.mean_busy() if gpu else []
    if not gpu or not line:
        return ChartSpec(empty=NO_GPU), GPU_TITLE
    at, period = gpu.at, float(gpu.period_s or 60)
    xs = [t - period / 2 - at for t, _ in line]  # a period's mean, drawn mid-period
    yticks = nice_ticks(100.0)
    if xlim is None:
        xlim = (min(xs[0] - period / 2, 0.0), max([0.0, *((s.ended or at) - at for s in saves)]))
    spans = save_spans(saves, at, xlim, plot_columns(width, yticks)) if saves else ()
    per, ticks = time_ticks(-xlim[0])
    drawn_xs, drawn_ys = downsample(xs, [v for _, v in line], max(2 * width, 16))
    spec = ChartSpec(series=(Series(drawn_xs, drawn_ys, "success"),), spans=spans, xlim=xlim,
                     xticks=tuple((t * per, label) for t, label in ticks), yticks=yticks)
    return spec, f"GPU busy (%, mean of {len(gpu.busy)} workers) · now {line[-1][1]:.0f}% · period {period:g} s"


def step_ticks(last: int) -> tuple[tuple[float, str], ...]:
    """1, then round steps up to the last one."""
    step = int(max(1, nice_ticks(last, 4)[1][0])) if last > 4 else 1
    return tuple((float(s), str(s)) for s in sorted({1, *range(step, last + 1, step)}))


def step_specs(records: list[TrainingStep], width: int,
               previous: list[tuple[float, float]] | None = None) -> tuple[ChartSpec, ChartSpec]:
    """Reward per step, and step time per step with the steps that saved marked. `previous`:
    another run's (step, reward) pairs, drawn under this run's reward (PREVIOUS_COLOR)."""
    previous = previous or []
    if not records and not previous:
        return ChartSpec(empty=NO_REWARD), ChartSpec(empty=NO_STEP_TIME)
    last = max([*(r.global_step for r in records), *(int(x) for x, _ in previous),
                records[-1].total_steps if records else 1])
    xlim, xticks = (0.5, last + 0.5), step_ticks(last)
    rewarded = [(float(r.global_step), r.avg_reward) for r in records if r.avg_reward is not None]
    timed = [(float(r.global_step), r.step_time_s) for r in records if r.step_time_s is not None]
    saved = [(float(r.global_step), r.step_time_s) for r in records
             if r.step_time_s is not None and r.checkpoint_s is not None]
    marks = (Series(tuple(x for x, _ in saved),
                    tuple(t for _, t in saved), "warning", "scatter"),) if saved else ()

    def spec(pairs: list[tuple[float, float]], extra: tuple[Series, ...], color: str,
             signed: bool, under: list[tuple[float, float]] | None = None) -> ChartSpec:
        if not pairs and not under:
            return ChartSpec(empty="Waiting for the first step to finish")
        pick = lambda v: sum(v) / len(v)  # noqa: E731 - the mean of a bucket
        drawn: list[Series] = []
        for points, hue in ((under or [], PREVIOUS_COLOR), (pairs, color)):
            if points:
                xs, ys = downsample([x for x, _ in points], [y for _, y in points],
                                    max(2 * width, 16), pick=pick)
                drawn.append(Series(xs, ys, hue))
        every = [y for series in drawn for y in series.ys]
        lo, hi = min(every), max(every)
        if signed and lo < 0:  # rewards may be negative: let plotext place the ticks
            return ChartSpec((*drawn, *extra), xlim=xlim, xticks=xticks,
                             ylim=(lo, hi if hi > lo else lo + 1))
        return ChartSpec((*drawn, *extra), xlim=xlim, xticks=xticks, yticks=nice_ticks(hi))

    return (spec(rewarded, (), "success", True, previous),
            spec(timed, marks, "primary", False)
            if timed else ChartSpec(empty=NO_STEP_TIME if not records else
                                    "Waiting for the first step to finish"))


def peak_write(metrics: LustreMetrics | None, save: Save) -> float | None:
    """The highest write rate of the periods the save overlaps: its spike."""
    if not metrics:
        return None
    period = float(metrics.period_s or 60)
    end = save.ended if save.ended is not None else metrics.at
    rates = [p.value for p in metrics.write
             if p.t > save.started and p.t - period < end]
    return max(rates, default=None)


def saves_lines(saves: list[Save], metrics: LustreMetrics | None, width: int) -> list[str]:
    """Per save: its start (clock time, ~ when estimated), seconds with a bar when there is
    room, and the write spike under it (markup)."""
    if not saves:
        return [f"[dim]{line}[/]" for line in NO_SAVES]
    done = [s.seconds for s in saves if s.seconds is not None]
    longest = max(done, default=1.0)
    show_peak = width >= 35
    bar_w = width - (35 if show_peak else 24) - 1
    rows = [f"[dim]{'step':>4}  {'started':<8} {'seconds':>9}"
            + (f" {'':<{bar_w}}" if bar_w >= 3 else "")
            + (f" {'peak write':>10}" if show_peak else "") + "[/]"]
    for s in saves:
        mark = "~" if s.estimated else " "
        secs = "saving…" if s.seconds is None else f"{s.seconds:7.1f} s"
        row = f"[b]{s.step:>4}[/] {mark}{clock(s.started)} {secs:>9}"
        if bar_w >= 3:
            filled, rest = bar((s.seconds or 0.0) / longest, bar_w)
            row += f" [$warning]{filled}[/]{' ' * len(rest)}"
        if show_peak:
            peak = peak_write(metrics, s)
            row += f" {'' if peak is None else fmt_rate(peak):>10}"
        rows.append(row)
    if done:
        rows.append(f"[dim]{len(done)} saved · mean {sum(done) / len(done):.1f} s"
                    f" · max {longest:.1f} s[/]")
    if any(s.estimated for s in saves):
        rows.append("[dim]~ estimated from old log lines[/]")
    newest = next((s.path for s in reversed(saves) if s.path), None)
    if newest:
        room = max(8, width - 8)
        shown = newest if len(newest) <= room else "…" + newest[-(room - 1):]
        rows.append(f"[dim]newest[/] {shown}")
    return rows


def lustre_lines(inst: LustreInstance | None, metrics: LustreMetrics | None,
                 width: int) -> list[str]:
    """The instance as google-cloud-lustre's Instance describes it (state, mount_point
    `IP@tcp:/FS`, capacity_gib, per_unit_storage_throughput in MBps per TiB, 0 = Dynamic
    tier), and capacity used from Monitoring (used = capacity - free over the OSTs) in GiB
    and percent of the capacity (markup)."""
    rows: list[str] = []
    capacity = float(metrics.capacity_gib or 0) if metrics else 0.0
    if inst is None:
        rows += [f"[dim]{line}[/]" for line in NO_LUSTRE]
    elif not inst.found:
        rows.append(f"[$error]no instance {inst.id}[/]: Provision (F4) creates it")
    else:
        state = inst.state or "?"
        color = "success" if state == "ACTIVE" else "warning"
        rows.append(f"[b]{inst.id}[/] [${color}]{state}[/]")
        mount = inst.mount_point
        rows.append(f"[dim]IP[/]       {mount.split('@', 1)[0] if mount else '(not yet)'}")
        rows.append(f"[dim]mount[/]    {mount or '(once ACTIVE)'}")
        capacity = float(inst.capacity_gib or capacity)
        tier = inst.throughput
        rows.append(f"[dim]tier[/]     {f'{tier} MBps per TiB' if tier else 'Dynamic'}")
        if tier and capacity:  # the tier's throughput per TiB times the capacity
            rows.append(f"[dim]max[/]      {fmt_rate(tier * 1e6 * capacity / TIB_GIB)}")
        rows.append(f"[dim]capacity[/] {capacity:,.0f} GiB")
    used = metrics.used if metrics else ()
    if used:
        now_gib = used[-1].value / GIB
        if capacity > 0:
            filled, rest = bar(now_gib / capacity, max(4, width - 2))
            rows += [f"[dim]used[/]     [b]{now_gib:,.0f}[/] of {capacity:,.0f} GiB"
                     f" ({now_gib / capacity:.1%})", f"[$accent]{filled}[/][dim]{rest}[/]"]
        else:
            rows.append(f"[dim]used[/]     [b]{now_gib:,.0f} GiB[/]")
        grown = (used[-1].value - used[0].value) / GIB
        rows.append(f"[dim]{grown:+,.1f} GiB over the chart's window[/]")
    return rows


class TextPane(VerticalScroll):
    """A bordered, scrollable pane of markup lines; opens full-screen (pane protocol)."""

    DEFAULT_CSS = """
    TextPane { scrollbar-size-vertical: 1; }
    TextPane > .pane-text { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, lines: list[str], *, id: str, classes: str = "") -> None:
        super().__init__(Static("\n".join(lines), classes="pane-text"), id=id, classes=classes)
        self._lines = lines

    def update(self, lines: list[str]) -> None:
        self._lines = lines
        self.query_one(".pane-text", Static).update("\n".join(lines))

    def pane_text(self) -> tuple[str, list[str]] | None:
        from textual.content import Content

        return str(self.border_title or ""), [Content.from_markup(line).plain
                                              for line in self._lines]


class MetricsScreen(WizardScreen):
    CSS_PATH = stylesheet(__file__)
    MODE = "metrics"
    TITLE = "Metrics"
    AUTO_FOCUS = "#write-chart"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+u", "refresh_metrics", "ask again"),
        Binding("v", "next_chart", "next chart"),
        Binding("p", "previous_run", "previous run",
                tooltip="Overlay the previous run's reward curve (rltui runs), again: off")]

    def __init__(self) -> None:
        super().__init__()
        self._metrics: LustreMetrics | None = None
        self._gpu: GpuMetrics | None = None
        self._lustre: LustreInstance | None = None
        self._saves: dict[int, Save] = {}
        self._records: dict[int, TrainingStep] = {}
        self.chart = "write"   # the one chart shown when the screen is compact
        self.previous: runs.RunSummary | None = None   # the run overlaid on the reward (p)
        self._job_id: str | None = None                # the followed job: never its own overlay

    def compose_body(self) -> ComposeResult:
        with Grid(id="metrics-body"):
            yield Chart(WAITING, id="write-chart", classes="metrics-pane chart")
            yield TextPane(saves_lines([], None, 36), id="saves-pane", classes="metrics-pane")
            yield Chart(NO_GPU, id="gpu-chart", classes="metrics-pane chart")
            yield TextPane(lustre_lines(None, None, 36), id="lustre-pane", classes="metrics-pane")
            yield Chart(WAITING, id="read-chart", classes="metrics-pane chart")
            yield Chart(NO_REWARD, id="reward-chart", classes="metrics-pane chart")
            yield Chart(NO_STEP_TIME, id="step-time-chart", classes="metrics-pane chart")

    def on_mount(self) -> None:
        titles = {"#write-chart": "Lustre write throughput",
                  "#read-chart": "Lustre read throughput",
                  "#gpu-chart": GPU_TITLE,
                  "#saves-pane": "Checkpoint saves",
                  "#lustre-pane": "Lustre instance",
                  "#reward-chart": REWARD_TITLE,
                  "#step-time-chart": STEP_TIME_TITLE}
        for selector, title in titles.items():
            self.query_one(selector).border_title = title
        self._layout(self.app.size.width, self.app.size.height)
        bus = self.wizard.bus
        bus.metrics.subscribe(self, self._on_metrics)
        bus.gpu.subscribe(self, self._on_gpu)
        bus.saves.subscribe(self, self._on_saves)
        bus.lustre.subscribe(self, self._on_lustre)
        bus.step_records.subscribe(self, self._on_step_records)
        bus.job_status.subscribe(self, self._on_job_status)
        if self.wizard.session is not None:
            self._poll()

    def _poll(self) -> None:
        self.wizard.poll_metrics()  # both loop by themselves; exclusive, so never twice
        self.wizard.poll_lustre()

    def system_commands(self) -> list[SystemCommand]:
        return [SystemCommand("Metrics: next chart", "Show the next chart when only one fits (v)",
                              self.action_next_chart),
                SystemCommand("Metrics: overlay the previous run",
                              "The previous run's reward curve under this one's (p)",
                              self.action_previous_run)]

    def action_previous_run(self) -> None:
        """Toggle the previous run's reward curve: the newest recorded run with a reward that is
        not the followed job (rltui/runs.py reads the summaries under the state folder)."""
        if self.previous is not None:
            self.previous = None
        else:
            self.previous = runs.previous(runs.all_runs(), self._job_id)
            if self.previous is None:
                self.notify(NO_PREVIOUS, severity="warning")
                return
        reward = self.query_one("#reward-chart", Chart)
        reward.border_title = REWARD_TITLE if self.previous is None else (
            f"Reward per step · [${PREVIOUS_COLOR}]━[/] previous run"
            f" {time.strftime('%m-%d %H:%M', time.localtime(self.previous.started_at))}")
        if self.compact and self.previous is not None and self.chart != "reward":
            self.chart = "reward"   # one chart fits: show the one the key changed
            self._layout(self.size.width, self.size.height)
        self._draw_steps()

    def action_refresh_metrics(self) -> None:
        if self.wizard.session is None:
            self.notify("No project or sandbox attached: nothing to poll", severity="warning")
            return
        self._poll()

    def action_next_chart(self) -> None:
        self.chart = CHARTS[(CHARTS.index(self.chart) + 1) % len(CHARTS)]
        self._layout(self.size.width, self.size.height)
        self._redraw_all()

    # --- layout ---

    def on_resize(self, event: Resize) -> None:
        self._layout(event.size.width, event.size.height)
        self.call_after_refresh(self._redraw_all)

    def on_screen_resume(self) -> None:  # resized while another screen was shown
        if self.compact != (self.app.size.width < WIDE_COLS or self.app.size.height < TALL_ROWS):
            self._layout(self.app.size.width, self.app.size.height)
            self.call_after_refresh(self._redraw_all)

    def _layout(self, width: int, height: int) -> None:
        compact = width < WIDE_COLS or height < TALL_ROWS
        self.set_class(compact, "-compact")
        for name in CHARTS:
            self.query_one(f"#{name}-chart").set_class(compact and name == self.chart, "-shown")
        # The grid places panes in DOM order: compact, the shown chart first (over saves |
        # Lustre); wide, compose's order (write over the GPUs, beside saves and Lustre).
        body = self.query_one("#metrics-body")
        for pane in reversed(PANES):
            body.move_child(self.query_one(f"#{pane}"), before=0)
        if compact:
            body.move_child(self.query_one(f"#{self.chart}-chart"), before=0)

    @property
    def compact(self) -> bool:
        return self.has_class("-compact")

    # --- data in ---

    def _on_metrics(self, metrics: LustreMetrics) -> None:
        self._metrics = metrics
        self._draw_throughput()
        self._draw_saves()  # the spike under each save
        self._draw_lustre()

    def _on_gpu(self, gpu: GpuMetrics) -> None:
        self._gpu = gpu
        self._draw_throughput()

    def _on_saves(self, saves: list[Save]) -> None:
        self._saves = merge(self._saves, saves)
        self._draw_throughput()
        self._draw_saves()

    def _on_lustre(self, inst: LustreInstance) -> None:
        self._lustre = inst
        self._draw_lustre()

    def _on_job_status(self, status: JobStatusUpdate) -> None:
        # A reset names the new job, or none after a teardown (then no run is the current one).
        self._job_id = status.id if status.reset else status.id or self._job_id
        if status.reset:  # a new job, or none after teardown: nothing of the old one
            self._saves, self._records = {}, {}
            self._redraw_all()
            for name in ("reward", "step-time"):
                self.query_one(f"#{name}-chart", Chart).show(
                    ChartSpec(empty=NO_REWARD if name == "reward" else NO_STEP_TIME))
            self._draw_steps()   # the overlay stays, alone until a step arrives

    def _on_step_records(self, records: list[TrainingStep]) -> None:
        for record in records:
            self._records[record.global_step] = record
        self._draw_steps()

    # --- drawing ---

    def saves(self) -> list[Save]:
        return [self._saves[k] for k in sorted(self._saves)]

    def _width(self, selector: str) -> int:
        pane = self.query_one(selector)
        width = pane.content_size.width or 80
        return width - 1 if isinstance(pane, TextPane) else width  # its scrollbar's column

    def _redraw_all(self) -> None:
        self._draw_throughput()
        self._draw_saves()
        self._draw_lustre()
        self._draw_steps()

    def _draw_throughput(self) -> None:
        saves = self.saves()
        xlim = None
        for key in ("write", "read"):
            chart = self.query_one(f"#{key}-chart", Chart)
            spec, title = throughput_spec(self._metrics, key, saves if key == "write" else [],
                                          self._width(f"#{key}-chart"))
            xlim = spec.xlim if key == "write" else xlim
            chart.border_title = title
            chart.show(spec)
        chart = self.query_one("#gpu-chart", Chart)
        spec, chart.border_title = gpu_spec(self._gpu, saves, self._width("#gpu-chart"), xlim)
        chart.show(spec)

    def _draw_saves(self) -> None:
        self.query_one("#saves-pane", TextPane).update(
            saves_lines(self.saves(), self._metrics, self._width("#saves-pane")))

    def _draw_lustre(self) -> None:
        self.query_one("#lustre-pane", TextPane).update(
            lustre_lines(self._lustre, self._metrics, self._width("#lustre-pane")))

    def _draw_steps(self) -> None:
        previous = [(float(s.step), s.reward) for s in self.previous.steps
                    if s.reward is not None] if self.previous is not None else []
        if not self._records and not previous:
            if self.previous is None:   # the overlay was turned off with no step of this run
                self.query_one("#reward-chart", Chart).show(ChartSpec(empty=NO_REWARD))
            return
        records = [self._records[k] for k in sorted(self._records)]
        reward, step_time = step_specs(records, self._width("#reward-chart"), previous)
        self.query_one("#reward-chart", Chart).show(reward)
        self.query_one("#step-time-chart", Chart).show(step_time)

