"""The checkpoints the job saved: step, when the save started, seconds, path.

Times come from rltui/saves.py on the app's `saves` topic (the list subscribes to it itself,
so a screen only composes it); `add(event)` still takes a bare CheckpointEvent (no time yet).
A time worked out from old log lines shows `~`; a save still running shows "saving…".
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from ..joblog import CheckpointEvent
from ..saves import Save
from ..seam import JobStatusUpdate

MAX_ROWS = 20  # rows drawn in the pane (9,000 saves of a replay cost seconds a frame)

def shorten_path(path: str, width: int) -> str:
    """Keep the end of a path (the step_N directory and its parent), cut on a '/'."""
    if len(path) <= width:
        return path
    keep = path[-(width - 1):]
    cut = keep.find("/")
    return "…" + (keep[cut:] if 0 <= cut < len(keep) - 1 else keep)


def save_row(step: int, started: float | None, estimated: bool, seconds: float | None) -> str:
    """`12     ~12:03:41   188.8` (the first 27 columns of a row)."""
    when = "?" if started is None else time.strftime("%H:%M:%S", time.localtime(started))
    mark = "~" if estimated else " "
    secs = "saving…" if seconds is None else f"{seconds:.1f}"
    return f"{step:<6} {mark}{when:<9} {secs:>8}"


class CheckpointsList(Widget):
    """Newest first; a step saved again (after a resume) replaces its row."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"checkpoints--header", "checkpoints--empty"}
    DEFAULT_CSS = """
    CheckpointsList { height: auto; }
    CheckpointsList > .checkpoints--header { color: $text-muted; text-style: bold; }
    CheckpointsList > .checkpoints--empty { color: $text-muted; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._saved: dict[int, CheckpointEvent | Save] = {}
        self._estimated = False

    def on_mount(self) -> None:
        bus = getattr(self.app, "bus", None)
        if bus is not None:
            bus.saves.subscribe(self, self.show)
            bus.job_status.subscribe(self, self._on_job_status)

    def _on_job_status(self, status: JobStatusUpdate) -> None:
        if status.reset:  # a new job, or none after teardown
            self._saved.clear()
            self._estimated = False
            self.refresh(layout=True)

    def add(self, events: list[CheckpointEvent]) -> None:
        """Saves known from their events only; a timed Save of the same step stays."""
        height, saved = self._height(), self._saved
        for event in events:
            if not isinstance(saved.get(event.step), Save):
                saved[event.step] = event
        self._repaint(height)

    def show(self, saves: list[Save]) -> None:
        height = self._height()
        saved = self._saved
        for save in saves:
            if saved.get(save.step) is not save:  # saves() hands the same object when unchanged
                saved[save.step] = save
        self._count_estimated()
        self._repaint(height)

    def _height(self) -> tuple[int, bool]:
        return min(len(self._saved), MAX_ROWS + 1), self._estimated

    def _repaint(self, height: tuple[int, bool]) -> None:
        """A layout only when the rows' count (capped) or the legend changed: a burst adds
        saves every frame, and a layout there re-rendered the whole screen."""
        self.refresh(layout=self._height() != height)

    @property
    def checkpoints(self) -> list[CheckpointEvent | Save]:
        return [self._saved[s] for s in sorted(self._saved, reverse=True)]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        rows = min(len(self._saved), MAX_ROWS + 1)  # + "N older" (full view: ctrl+o shows all)
        return 1 + max(1, rows) + (1 if self._any_estimated() else 0)

    def _any_estimated(self) -> bool:
        return self._estimated  # kept by show(): a scan of every save on each repaint was slow

    def _count_estimated(self) -> None:
        self._estimated = any(isinstance(s, Save) and s.estimated for s in self._saved.values())

    def lines(self, limit: int | None = None) -> list[str]:
        """The header and the newest `limit` rows (all by default)."""
        room = max(10, self.size.width - 29)
        out = [f"{'STEP':<6} {'STARTED':<10} {'SECONDS':>8}  PATH"]
        steps = sorted(self._saved, reverse=True)[:limit]  # keys come in order: timsort is O(n)
        for ckpt in (self._saved[s] for s in steps):
            path = shorten_path(ckpt.path, room) if ckpt.path else "(directory not known yet)"
            started = ckpt.started if isinstance(ckpt, Save) else None
            estimated = isinstance(ckpt, Save) and ckpt.estimated
            out.append(f"{save_row(ckpt.step, started, estimated, ckpt.seconds)}  {path}")
        return out

    def pane_text(self) -> tuple[str, list[str]] | None:
        return ("Checkpoints", [*self.lines(), *self._legend()]) if self._saved else None

    def _legend(self) -> list[str]:
        return ["~ estimated from old log lines"] if self._any_estimated() else []

    def render(self) -> Text:
        head, *rows = self.lines(MAX_ROWS)  # a long job's replay: thousands of rows a repaint
        if len(self._saved) > MAX_ROWS:
            rows.append(f"… {len(self._saved) - MAX_ROWS:,} older saves (full view: all)")
        text = Text(head, style=self.get_component_rich_style("checkpoints--header"))
        if not rows:
            return text.append("\nnone saved yet",
                               style=self.get_component_rich_style("checkpoints--empty"))
        for row in rows:
            text.append("\n" + row)
        for row in self._legend():
            text.append("\n" + row, style=self.get_component_rich_style("checkpoints--empty"))
        return text
