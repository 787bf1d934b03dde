"""Charts with axes over textual-plotext: drawn from a plain spec, rebuilt at most once a second.

A plotext build's cost grows with the points (docs/decisions/wizard-latency.md), so
series are downsampled to about twice the chart's width and a burst of updates is coalesced
into one trailing redraw.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from rich.text import Text
from textual.app import RenderResult
from textual.color import Color
from textual.timer import Timer
from textual_plotext import PlotextPlot

from .textual_compat import plotext_theme_name, set_plot_size

MIN_REDRAW_S = 1.0

Tick = tuple[float, str]


@dataclass(frozen=True)
class Series:
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: str = "accent"  # a theme variable ("accent", "warning", ...) or a plotext colour
    kind: Literal["line", "scatter"] = "line"


@dataclass(frozen=True)
class Span:
    """A labelled interval drawn above the data, e.g. a checkpoint save on a time axis."""
    x0: float
    x1: float
    label: str   # "" draws the marker alone
    color: str = "warning"
    dashed: bool = False  # a lighter marker, e.g. a time that was estimated


@dataclass(frozen=True)
class ChartSpec:
    series: tuple[Series, ...] = ()
    spans: tuple[Span, ...] = ()
    xlim: tuple[float, float] | None = None
    ylim: tuple[float, float] | None = None   # default: 0 up to the last y tick
    xticks: tuple[Tick, ...] = ()
    yticks: tuple[Tick, ...] = ()   # the last one is the top of the data area
    empty: str = ""                 # shown instead of a plot: why there is nothing yet

    @property
    def points(self) -> int:
        return sum(len(s.xs) for s in self.series)


# --- pure helpers ------------------------------------------------------------------------

RATE_UNITS = ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s"), (1.0, "B/s"))


def rate_unit(peak_bytes_per_s: float) -> tuple[float, str]:
    """The decimal unit that puts the peak between 1 and 999 (B/s at and below 1 B/s)."""
    for scale, name in RATE_UNITS:
        if peak_bytes_per_s >= scale:
            return scale, name
    return 1.0, "B/s"


def fit_labels(centers: Sequence[float], labels: Sequence[tuple[str, ...]], cols: int,
               gap: int = 1) -> list[str]:
    """One label per marker (columns from the plot's left edge), none overlapping: each
    marker's alternatives (longest first) all at their longest, else all at their shortest,
    else the shortest of as many as fit, newest (rightmost) first; "" = no label."""
    def fits(chosen: Sequence[str]) -> bool:
        spans = sorted((c - len(t) / 2, c + len(t) / 2) for c, t in zip(centers, chosen, strict=True) if t)
        return all(b[0] - a[1] >= gap for a, b in pairwise(spans))

    for level in (0, -1):
        chosen = [alts[level] if alts else "" for alts in labels]
        if fits(chosen):
            return chosen
    shortest = [alts[-1] if alts else "" for alts in labels]
    out = [""] * len(centers)
    left_edge = math.inf
    for i in sorted(range(len(centers)), key=lambda i: centers[i], reverse=True):
        text = shortest[i]
        if text and centers[i] + len(text) / 2 + gap <= left_edge:
            out[i] = text
            left_edge = centers[i] - len(text) / 2
    return out


def plot_columns(width: int, yticks: Sequence[Tick]) -> int:
    """About how many columns plotext leaves for the data beside the y tick labels."""
    label_w = max((len(label) for _, label in yticks), default=3)
    return max(1, width - label_w - 3)


def nice_ticks(peak: float, count: int = 4) -> tuple[Tick, ...]:
    """0 up to a round top >= peak, in steps of 1, 2, 2.5 or 5 times a power of ten."""
    if not peak > 0 or not math.isfinite(peak):
        peak = 1.0
    raw = peak / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    n = math.ceil(peak / step - 1e-9)
    return tuple((i * step, f"{round(i * step, 6):g}") for i in range(n + 1))


def time_ticks(span_s: float, count: int = 4) -> tuple[float, tuple[Tick, ...]]:
    """Ticks for a time axis ending at 0 ("now"): (seconds per unit, ticks in that unit)."""
    per, unit = (60.0, "min") if span_s >= 600 else (1.0, "s")
    width = max(span_s / per, 1.0)
    raw = width / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    ticks = [-i * step for i in range(int(width // step) + 1)][::-1]
    labels = [f"{t:g}" for t in ticks]
    labels[0] = f"{labels[0]} {unit}"
    labels[-1] = "now"
    return per, tuple(zip(ticks, labels, strict=True))


def downsample(xs: Sequence[float], ys: Sequence[float], buckets: int,
               pick: Callable[[Sequence[float]], float] = max
               ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """At most `buckets` points; `max` keeps a spike as tall as it was."""
    n = len(xs)
    if n <= buckets or buckets <= 0:
        return tuple(xs), tuple(ys)
    out_x, out_y = [], []
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        if hi > lo:
            out_x.append(xs[(lo + hi - 1) // 2])
            out_y.append(pick(ys[lo:hi]))
    return tuple(out_x), tuple(out_y)


def bar(fraction: float, width: int) -> tuple[str, str]:
    """A text bar: the filled part and the rest."""
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled, "░" * (width - filled)


# --- the widget --------------------------------------------------------------------------

class Chart(PlotextPlot, can_focus=True):
    """Shows a ChartSpec. `builds` and `build_seconds` count and time the plotext builds.
    Focusable, so ctrl+o opens its points and markers as text (tab moves between charts)."""

    DEFAULT_CSS = """
    Chart {
        content-align: center middle;
        color: $text-muted;
    }
    Chart:focus {
        background: $boost;
    }
    """

    def __init__(self, empty: str = "", *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._spec = ChartSpec(empty=empty)
        self._built: tuple[ChartSpec, int, int, str] | None = None   # (spec, width, height, theme)
        self._text: Text = Text()
        self._last_build = -math.inf
        self._timer: Timer | None = None
        self.builds = 0
        self.build_seconds = 0.0
        self.build_times: list[float] = []              # monotonic, for tests and profiling

    @property
    def spec(self) -> ChartSpec:
        """The newest spec (it may wait for its redraw)."""
        return self._spec

    @property
    def drawn_spec(self) -> ChartSpec | None:
        """The spec of the frame on screen."""
        if self._spec.empty:
            return self._spec
        return self._built[0] if self._built is not None else None

    def show(self, spec: ChartSpec) -> None:
        """Draw now if the last build is a second old, else once when it is."""
        if spec == self._spec:
            return
        self._spec = spec
        self._schedule()

    def pane_text(self) -> tuple[str, list[str]] | None:
        """The spec as text (pane protocol): markers, then each series' points."""
        spec, title = self._spec, str(self.border_title or "Chart")
        if spec.empty:
            return title, [spec.empty]
        lines = [f"marker {s.label or '(unlabelled)'}: x {s.x0:.6g} .. {s.x1:.6g}"
                 for s in spec.spans]
        for n, series in enumerate(spec.series, 1):
            lines.append(f"series {n} ({series.kind}): x y")
            lines += [f"{x:.6g} {y:.6g}" for x, y in zip(series.xs, series.ys, strict=True)]
        return title, lines

    def _schedule(self) -> None:
        wait = self._last_build + MIN_REDRAW_S - time.monotonic()
        if wait <= 0 or self._spec.empty:
            self.refresh()
        elif self._timer is None:
            self._timer = self.set_timer(wait, self._due)

    def _due(self) -> None:
        self._timer = None
        self.refresh()

    def render(self) -> RenderResult:
        spec, (w, h) = self._spec, self.size
        if spec.empty:
            return Text(spec.empty, justify="center")
        frame = (w, h, self.app.theme)
        if self._built is not None and self._built[1:] == frame:
            if self._built[0] == spec:
                return self._text
            if time.monotonic() - self._last_build < MIN_REDRAW_S:
                self._schedule()  # a repaint asked for by something else: keep the old frame
                return self._text
        started = time.monotonic()
        self._text = self._build(spec, w, h)
        self._last_build = time.monotonic()
        self.build_seconds = self._last_build - started
        self.build_times.append(self._last_build)
        self.builds += 1
        self._built = (spec, *frame)
        return self._text

    def _color(self, name: str) -> str | tuple[int, int, int]:
        value = self.app.theme_variables.get(name)
        return Color.parse(value).rgb if value else name

    def _build(self, spec: ChartSpec, width: int, height: int) -> Text:
        plt = self.plt
        plt.clear_figure()
        plt.plotsize(width, height)
        set_plot_size(plt, width, height)  # see textual-plotext's own render()
        plt.theme(plotext_theme_name(self, self.app.theme))
        for s in spec.series:
            draw = plt.plot if s.kind == "line" else plt.scatter
            draw(list(s.xs), list(s.ys), marker="braille" if s.kind == "line" else "●",
                 color=self._color(s.color))
        low, top = spec.ylim or (0.0, spec.yticks[-1][0] if spec.yticks else 1.0)
        if spec.spans:
            # Two rows above the data: the save markers, and their labels over them. plotext
            # maps y onto its rows as round((y - low) / (top - low) * (rows - 1)).
            rows = max(5, height - 3)   # its data rows: the frame and the x axis aside
            top = low + (top - low) * (rows - 1) / (rows - 3)
            line_y, label_y = low + (top - low) * (rows - 2) / (rows - 1), top
            for span in spec.spans:
                color = self._color(span.color)
                plt.plot([span.x0, span.x1], [line_y, line_y], color=color,
                         marker="╌" if span.dashed else "━")
                if span.label:
                    plt.text(span.label, (span.x0 + span.x1) / 2, label_y, color=color,
                             alignment="center")
        plt.ylim(low, top)
        if spec.yticks:
            # More ticks than rows: plotext keeps an arbitrary one per row. Keep every k-th.
            data_rows = max(2, height - 3 - (2 if spec.spans else 0))
            k = max(1, math.ceil((len(spec.yticks) - 1) / (data_rows - 1)))
            ticks = [t for i, t in enumerate(spec.yticks) if i % k == 0]
            plt.yticks([t for t, _ in ticks], [label for _, label in ticks])
        if spec.xlim is not None:
            plt.xlim(*spec.xlim)
        if spec.xticks:
            plt.xticks([t for t, _ in spec.xticks], [label for _, label in spec.xticks])
        return Text.from_ansi(plt.build())

