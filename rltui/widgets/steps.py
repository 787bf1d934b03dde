"""The step graph as a list: state icon, title, a progress bar for long operations, elapsed /
expected. Used by Provision (the plan's steps) and Teardown (one row per deletion).

Teardown's rows (`down=True`) read as deletions: the title is what is deleted, by name, and
is never cut (what does not fit beside it goes on the next line); the right side says what
happened in the runner's words ("deleting", "deleted 0:48 / 1:00", "deleted by xpk cluster
delete", "kept: ...", "nothing to delete").

Rows come from the runner's StepView snapshots. Elapsed time of active steps ticks locally
once a second (no I/O): each row counts from when its data arrived.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from ..plan.runner import RunEvent, StepView
from ..plan.step import StepState
from ..plan.view import fmt_s

S = StepState
LONG_SHARE = 0.1         # a step expected to take this share of the longest one gets a bar
BAR_W = 10
TIME_W = 13              # "17:30 / 25:00"
ACTIVE = frozenset({S.RUNNING, S.DESTROYING})
ICONS: dict[StepState, tuple[str, str]] = {
    S.PENDING: ("·", "muted"), S.WAITING: ("◌", "waiting"), S.RUNNING: ("●", "running"),
    S.DONE: ("✔", "done"), S.EXISTED: ("✔", "done"), S.FAILED: ("✘", "failed"),
    S.BLOCKED: ("⊘", "failed"), S.SKIPPED: ("\N{EN DASH}", "muted"), S.INTERRUPTED: ("!", "waiting"),
    S.DESTROYING: ("●", "running"), S.DESTROYED: ("✔", "done"), S.ABSENT: ("·", "muted"),
}
_PAREN = re.compile(r" \([^)]*\)")


def short_title(title: str) -> str:
    """"Addons (RayOperator + Lustre CSI)" -> "Addons": for tight columns and paths."""
    return _PAREN.sub("", title)


def fraction(view: StepView, elapsed_s: float) -> float | None:
    """The bar's fill: the step's own progress, else elapsed / expected capped at 99%."""
    if view.progress is not None:
        return view.progress
    if view.expected_s > 0:
        return min(elapsed_s / view.expected_s, 0.99)
    return None


def from_event(event: RunEvent) -> StepView:
    """A teardown row from the runner's latest event for that step."""
    return StepView(event.step, event.title, event.state, event.elapsed_s, event.expected_s,
                    event.message, event.progress, (), (), "", 0)


def _ticks(view: StepView) -> bool:
    """Active steps, and a started step waiting for a lock, keep counting."""
    return view.state in ACTIVE or (view.state is S.WAITING and view.elapsed_s > 0)


class StepsView(Widget, can_focus=True):
    """One row per step; up/down or a click selects (posts StepsView.Selected)."""

    TICK_S: ClassVar[float] = 1.0

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "previous step", show=False),
        Binding("down", "move(1)", "next step", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"steps--header", "steps--cursor", "steps--muted", "steps--waiting",
                         "steps--running", "steps--done", "steps--failed", "steps--bar",
                         "steps--bar-back"}
    DEFAULT_CSS = """
    StepsView { height: auto; }
    StepsView > .steps--header { color: $text-muted; text-style: bold; }
    StepsView > .steps--cursor { background: $boost; }
    StepsView:focus > .steps--cursor { background: $accent 30%; }
    StepsView > .steps--muted { color: $text-muted; }
    StepsView > .steps--waiting { color: $warning; }
    StepsView > .steps--running { color: $accent; text-style: bold; }
    StepsView > .steps--done { color: $success; }
    StepsView > .steps--failed { color: $error; }
    StepsView > .steps--bar { color: $accent; }
    StepsView > .steps--bar-back { color: $panel-lighten-2; }
    """

    class Selected(Message):
        def __init__(self, steps: StepsView, name: str, by_user: bool) -> None:
            super().__init__()
            self.steps, self.name, self.by_user = steps, name, by_user

        @property
        def control(self) -> StepsView:
            return self.steps

    selected: reactive[str | None] = reactive(None)

    def __init__(self, *, title: str = "Steps", empty: str = "", down: bool = False,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title, self.empty, self.down = title, empty, down
        self._views: list[StepView] = []
        self._received: dict[str, float] = {}
        self._now = time.monotonic()
        self._rows: list[str | None] = []   # the step each rendered line belongs to
        self._long_s = 0.0

    def on_mount(self) -> None:
        self.set_interval(self.TICK_S, self._tick)

    # --- data ---

    @property
    def views(self) -> list[StepView]:
        return list(self._views)

    def set_steps(self, views: Iterable[StepView]) -> None:
        """Replace every row (a plan snapshot); rows whose data changed restart their tick."""
        now = time.monotonic()
        old = {v.name: v for v in self._views}
        self._views = list(views)
        for v in self._views:
            if old.get(v.name) != v:
                self._received[v.name] = now
        if self.selected not in {v.name for v in self._views}:
            self.selected = None
        self.refresh(layout=True)

    def update_step(self, view: StepView) -> None:
        """Add or replace one row (teardown events arrive one step at a time)."""
        views = list(self._views)
        for i, v in enumerate(views):
            if v.name == view.name:
                views[i] = view
                break
        else:
            views.append(view)
        self.set_steps(views)

    def elapsed(self, view: StepView) -> float:
        extra = self._now - self._received.get(view.name, self._now)
        return view.elapsed_s + (max(0.0, extra) if _ticks(view) else 0.0)

    def view(self, name: str | None) -> StepView | None:
        return next((v for v in self._views if v.name == name), None)

    def select(self, name: str | None, *, by_user: bool = False) -> None:
        if name != self.selected:
            self.selected = name
            if name is not None:
                self.post_message(self.Selected(self, name, by_user))

    def _tick(self) -> None:
        self._now = time.monotonic()
        if any(_ticks(v) for v in self._views):
            self.refresh()

    def watch_selected(self) -> None:
        self.refresh()
        self.call_after_refresh(self._reveal_selected)

    def _reveal_selected(self) -> None:
        """Keep the selected row in view when the list is taller than its container."""
        # The parent of a mounted widget is a widget (a container, or the screen).
        if self.selected in self._rows and isinstance(self.parent, Widget):
            line = self._rows.index(self.selected)
            region = Region(0, self.virtual_region.y + line, max(1, self.size.width), 1)
            self.parent.scroll_to_region(region, animate=False, immediate=True)

    # --- keys and mouse ---

    def action_move(self, delta: int) -> None:
        names = [v.name for v in self._views]
        if not names:
            return
        i = names.index(self.selected) + delta if self.selected in names else 0
        self.select(names[max(0, min(len(names) - 1, i))], by_user=True)

    def on_click(self, event: events.Click) -> None:
        if 0 <= event.y < len(self._rows) and self._rows[event.y] is not None:
            self.select(self._rows[event.y], by_user=True)

    # --- drawing ---

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Text:
        return Text("\n").join(self._lines(self.size.width))

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"steps--{name}")

    def _lines(self, width: int) -> list[Text]:
        width = max(width, 40)
        self._rows = [None]
        right = "elapsed / expected"
        header = Text(f" {self.title}".ljust(width - len(right) - 1) + right,
                      style=self._style("header"))
        lines = [header]
        if not self._views:
            lines.append(Text(f" {self.empty}", style=self._style("muted")))
            self._rows.append(None)
            return lines
        title_w = width - 4 - (BAR_W + 5) - TIME_W - 1   # the room beside a bar
        # "long" is relative, so a sandbox running 60x faster still shows its bars
        self._long_s = LONG_SHARE * max(v.expected_s for v in self._views)
        for v in self._views:
            rows = self._row(v, width, title_w)
            if v.name == self.selected:
                for row in rows:
                    row.pad_right(width - row.cell_len)
                    row.stylize(self._style("cursor"))
            lines += rows
            self._rows += [v.name] * len(rows)
        return lines

    def _row(self, v: StepView, width: int, title_w: int) -> list[Text]:
        if self.down:
            return self._down_row(v, width)
        icon, tone = ICONS.get(v.state, ("?", "muted"))
        elapsed = self.elapsed(v)
        line = Text(" ")
        line.append(icon, style=self._style(tone))
        line.append(" ")
        limit = title_w if v.state in ACTIVE else width - 4 - 12   # a bar needs the room
        title = v.title if len(v.title) <= limit else v.title[: limit - 1] + "…"
        line.append(title, style=self._style("running") if v.state in ACTIVE else "")
        line.append(" ")
        rest = width - line.cell_len   # what follows is right-aligned to the time column
        if v.state in ACTIVE:
            line.append(" " * max(0, rest - 1 - (BAR_W + 5) - TIME_W))
        extra: list[Text] = []
        if v.state in ACTIVE:
            frac = fraction(v, elapsed)
            if frac is not None and (v.progress is not None or v.expected_s >= self._long_s):
                line.append_text(self._bar(frac))
            else:
                line.append(" " * (BAR_W + 5))
            line.append(self._times(elapsed, v.expected_s).rjust(TIME_W))
            if v.message:
                extra.append(self._note(v.message, width, "muted"))
        elif v.state in (S.DONE, S.DESTROYED):
            said = ("deleted  " if v.state is S.DESTROYED else "") + self._times(elapsed, v.expected_s)
            line.append(said.rjust(rest - 1), style=self._style("done"))
        elif v.state is S.EXISTED:
            line.append("exists".rjust(rest - 1), style=self._style("done"))
        elif v.state in (S.FAILED, S.INTERRUPTED):
            line.append(v.state.value.rjust(rest - 1), style=self._style(tone))
            extra += self._wrapped(v.message, width, tone, 3)
        else:  # pending, waiting, blocked, skipped, absent: what it waits for, or why not
            message = short_title(v.message) or v.state.value
            if len(message) > rest - 1:
                message = message[: rest - 2] + "…"
            line.append(message.rjust(rest - 1), style=self._style(tone))
        return [line, *extra]

    def _down_row(self, v: StepView, width: int) -> list[Text]:
        """A deletion: whole title, then its state; below, the step's latest note."""
        icon, tone = ICONS.get(v.state, ("?", "muted"))
        elapsed = self.elapsed(v)
        line = Text(" ")
        line.append(icon, style=self._style(tone))
        line.append(" ")
        room = width - 4
        title = v.title if len(v.title) <= room else v.title[: room - 1] + "…"
        line.append(title, style=self._style("running") if v.state in ACTIVE else "")
        right, extra = Text(), []
        if v.state in ACTIVE:
            right.append("deleting ", style=self._style("running"))
            frac = fraction(v, elapsed)
            if frac is not None and (v.progress is not None or v.expected_s >= self._long_s):
                right.append_text(self._bar(frac))
            right.append(self._times(elapsed, v.expected_s))
            if v.message and v.message != "deleting":
                extra.append(self._note(v.message, width, "muted"))
        elif v.state is S.DESTROYED:
            said = (v.message if v.message not in ("", "deleted")
                    else f"deleted  {self._times(elapsed, v.expected_s)}")
            right.append(said, style=self._style("done"))
        elif v.state in (S.FAILED, S.INTERRUPTED):
            right.append(v.state.value, style=self._style(tone))
            extra += self._wrapped(v.message, width, tone, 3)
        else:   # kept, nothing to delete, waiting, blocked: the runner's words
            words = short_title(v.message) or v.state.value
            if len(words) <= room:
                right.append(words, style=self._style(tone))
            else:   # e.g. waits for two long names: the state here, the words below
                right.append(v.state.value, style=self._style(tone))
                extra += self._wrapped(words, width, tone, 2)
        gap = width - 1 - line.cell_len - right.cell_len
        if gap >= 1:
            line.append(" " * gap)
            line.append_text(right)
            return [line, *extra]
        below = Text(" " * max(4, width - 1 - right.cell_len))
        below.append_text(right)
        return [line, below, *extra]

    def _bar(self, frac: float) -> Text:
        full = round(frac * BAR_W)
        bar = Text()
        bar.append("━" * full, style=self._style("bar"))
        bar.append("━" * (BAR_W - full), style=self._style("bar-back"))
        bar.append(f" {int(frac * 100):>2}% ")
        return bar

    @staticmethod
    def _times(elapsed: float, expected: float) -> str:
        return f"{fmt_s(elapsed)} / {fmt_s(expected)}" if expected > 0 else fmt_s(elapsed)

    def note_fits(self, message: str) -> bool:
        """Whether a running step's note shows whole under its row (else the detail has it)."""
        return len(message) <= max(self.size.width, 40) - 6

    def _note(self, message: str, width: int, tone: str) -> Text:
        room = width - 6
        text = message if len(message) <= room else message[: room - 1] + "…"
        return Text("   └ " + text, style=self._style(tone))

    def _wrapped(self, message: str, width: int, tone: str, limit: int) -> list[Text]:
        if not message:
            return []
        room, words, out, cur = max(10, width - 5), message.split(), [], ""
        for word in words:
            if cur and len(cur) + 1 + len(word) > room:
                out.append(cur)
                cur = word
            else:
                cur = f"{cur} {word}" if cur else word
        out.append(cur)
        if len(out) > limit:
            out = out[:limit]
            out[-1] = out[-1][: room - 1] + "…"
        return [Text("     " + part, style=self._style(tone)) for part in out]

