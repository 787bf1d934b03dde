"""The RayCluster's pods as a watch reports them, with a preempted worker flagged at once.

A pod deleted by Spot preemption or node loss keeps its row, marked PREEMPTED, so the user
sees which worker went; a pod deleted the ordinary way leaves the table.
"""

from __future__ import annotations

import time
from typing import Callable

from rich.text import Text
from textual.widgets import DataTable

from ..plan.pods import KubeEvent, PodRow, pod_row

COLUMNS = ("NAME", "TYPE", "NODE", "PHASE", "R", "AGE")
FIXED = {"TYPE": 6, "NODE": 5, "PHASE": 17, "R": 2, "AGE": 5}
WAITING = {"Pending", "ContainerCreating", "PodInitializing", "Terminating", "Init:0/1"}


def age_text(seconds: float) -> str:
    """kubectl's AGE column (HumanDuration)."""
    s = int(seconds)
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    return f"{d}d"


def tail(text: str, width: int) -> str:
    """Keep the end (a generated pod or node suffix is what tells rows apart)."""
    return text if len(text) <= width else "…" + text[-(width - 1):]


class PodsTable(DataTable):
    """Rows from `pod_event`s; `apply()` returns the pods it has just seen preempted."""

    COMPONENT_CLASSES = {"pods--preempted", "pods--waiting", "pods--failed", "pods--running"}
    DEFAULT_CSS = """
    PodsTable > .pods--preempted { color: $error; text-style: bold; }
    PodsTable > .pods--failed { color: $error; }
    PodsTable > .pods--waiting { color: $warning; }
    PodsTable > .pods--running { color: $success; }
    """

    def __init__(self, *, now: Callable[[], float] = time.time, prefix: str = "", **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.now = now
        self.prefix = prefix          # "<cluster>-": left out of NAME (the title shows it)
        self.synced = False
        self._pods: dict[str, tuple[dict, bool]] = {}   # name -> (object, gone)
        self._flagged: set[str] = set()
        self._order: list[str] = []
        self._name_width = 0
        self._redraw_pending = False

    def on_mount(self) -> None:
        self.set_interval(1.0, self.redraw)  # ages move on
        self.redraw()

    # --- data ---

    def apply(self, event: KubeEvent) -> list[str]:
        """Fold one watch event in; the names of pods newly seen preempted."""
        if event.type == "SYNCED":
            self.synced = True
            return []
        meta = event.obj.get("metadata") or {}
        name = meta.get("name", "")
        if not name:
            return []
        gone = event.type == "DELETED"
        row = pod_row(event.obj, gone=gone, now=self.now())
        if gone and row.phase != "PREEMPTED":
            self._pods.pop(name, None)
        else:
            self._pods[name] = (event.obj, gone)
        self._schedule_redraw()
        if row.phase == "PREEMPTED" and name not in self._flagged:
            self._flagged.add(name)
            return [name]
        return []

    def pod_rows(self) -> list[PodRow]:
        now = self.now()
        rows = [pod_row(obj, gone=gone, now=now) for obj, gone in self._pods.values()]
        rank = {"head": 0, "worker": 1}
        return sorted(rows, key=lambda r: (rank.get(r.type, 2), r.name))

    @property
    def preempted_count(self) -> int:
        return sum(r.phase == "PREEMPTED" for r in self.pod_rows())

    def row_at(self, row_index: int) -> PodRow | None:
        rows = self.pod_rows()
        return rows[row_index] if 0 <= row_index < len(rows) else None

    # --- drawing ---

    def _columns(self) -> None:
        width = self.size.width or 60
        fixed = sum(FIXED.values()) + 2 * self.cell_padding * len(COLUMNS)
        name_width = max(12, width - fixed)
        if name_width == self._name_width and self.columns:
            return
        self._name_width = name_width
        self.clear(columns=True)
        self._order = []
        for label in COLUMNS:
            self.add_column(label, width=FIXED.get(label, name_width), key=label)

    def on_resize(self) -> None:
        self.redraw()

    def _cells(self, row: PodRow) -> list[Text]:
        if row.phase == "PREEMPTED":
            style = self.get_component_rich_style("pods--preempted")
            phase_style = style
        else:
            style = None
            phase_style = self.get_component_rich_style(
                "pods--running" if row.phase in ("Running", "Completed") else
                "pods--waiting" if row.phase in WAITING else "pods--failed")
        name = row.name[len(self.prefix):] if self.prefix and row.name.startswith(self.prefix) else row.name
        node = row.node.rsplit("-", 1)[-1] if row.node else "-"
        values = [tail(name, self._name_width), row.type or "-", tail(node, FIXED["NODE"]),
                  row.phase, str(row.restarts), age_text(row.age_s)]
        cells = [Text(v, style=style or "") for v in values]
        cells[3] = Text(row.phase, style=phase_style)
        return cells

    def _schedule_redraw(self) -> None:
        """One redraw per frame, however many events came (a replayed watch brings thousands)."""
        if not self._redraw_pending:
            self._redraw_pending = True
            self.call_after_refresh(self.redraw)

    def redraw(self) -> None:
        self._redraw_pending = False
        if not self.is_mounted:
            return
        self._columns()
        rows = self.pod_rows()
        names = [r.name for r in rows]
        if names != self._order:
            cursor = self.cursor_row
            self.clear()
            for row in rows:
                self.add_row(*self._cells(row), key=row.name)
            self._order = names
            if rows:
                self.move_cursor(row=min(cursor, len(rows) - 1), animate=False)
            return
        for row in rows:
            for label, cell in zip(COLUMNS, self._cells(row)):
                self.update_cell(row.name, label, cell)
