"""The RayCluster's pods as a watch reports them (k9s's view), with a preempted worker
flagged at once and counted against the RayCluster's desired size.

A pod deleted by Spot preemption or node loss keeps its row, marked PREEMPTED, so the user
sees which worker went; once its group runs whole again the row stays, dimmed and marked
"replaced", so the preemption stays visible after the recovery (the newest KEEP_REPLACED
only: a long run with many preemptions must not fill the table). A pod deleted the ordinary
way leaves the table.

Columns drop by priority as the table narrows: NAME, PHASE, R and AGE always; then GPU% (the
pod's GPUs busy, from Cloud Monitoring), NODE (a
short suffix; more of its end, then the whole name, once NAME is whole; always whole in
describe), TYPE, GPU, CPU, GMEM (the GPUs' memory in use). GPU% and GMEM exist only once Cloud
Monitoring has answered with GPU points.
Keys (k9s): enter or `l` logs, `d` describe, ctrl+d delete (the screen confirms first).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from ..plan.pods import KubeEvent, PodRow, PodsSummary, age_text, desired_sizes, pod_row, summarize
from ..seam import GpuMetrics

__all__ = ["PodsTable", "age_text", "layout", "tail"]

COLUMNS = ("NAME", "TYPE", "NODE", "PHASE", "GPU", "GPU%", "CPU", "GMEM", "R", "AGE")
WIDTH = {"TYPE": 6, "PHASE": 11, "GPU": 3, "GPU%": 4, "CPU": 4, "GMEM": 5, "R": 2, "AGE": 5}
NAME_MIN, NODE_SHORT, PHASE_WIDE = 13, 5, 17
# What is added, in this order, while NAME keeps NAME_MIN columns (PHASE+ only while the
# longest name still fits whole).
# GPU% first: the GPUs' use is what an operator looks at first (k9s's GPU columns, the Ray
# dashboard), so at 80 columns it takes NODE's place.
OPTIONAL = ("GPU%", "NODE", "TYPE", "GPU", "CPU", "GMEM", "NODE+", "PHASE+")
GPU_USE = ("GPU%", "GMEM")  # only with GPU points
WAITING = {"Pending", "ContainerCreating", "PodInitializing", "Terminating", "Init:0/1"}
KEEP_REPLACED = 5
REPLACED = "replaced"


def tail(text: str, width: int) -> str:
    """Keep the end (a generated pod or node suffix is what tells rows apart)."""
    return text if len(text) <= width else "…" + text[-(width - 1):]


def gib(n: float) -> str:
    """Bytes as whole GiB, as nvidia-smi's MiB would be too wide for the column."""
    return f"{n / 2**30:.0f}G"


def layout(width: int, padding: int, node_len: int, name_len: int = 0,
           gpu_use: bool = False) -> dict[str, int]:
    """Column widths for a table `width` wide: NAME takes what the others leave."""
    cols = {"NAME": NAME_MIN, "PHASE": WIDTH["PHASE"], "R": WIDTH["R"], "AGE": WIDTH["AGE"]}

    def room(trial: dict[str, int]) -> int:
        return width - sum(w for k, w in trial.items() if k != "NAME") - 2 * padding * len(trial)

    for extra in OPTIONAL:
        if extra in GPU_USE and not gpu_use:
            continue
        trial = dict(cols)
        if extra == "NODE":
            trial["NODE"] = NODE_SHORT
        elif extra == "NODE+":
            if "NODE" not in cols or node_len <= NODE_SHORT:
                continue
            # NAME (what the keys act on) stays whole first: NODE gets what is left, the
            # end of its name (every node of a pool shares the start).
            trial["NODE"] = node_len
            short = name_len - room(trial)
            if short > 0:
                trial["NODE"] = node_len - short
                if trial["NODE"] <= NODE_SHORT:
                    continue
        elif extra == "PHASE+":
            trial["PHASE"] = PHASE_WIDE
            if room(trial) < name_len:
                continue
        else:
            trial[extra] = WIDTH[extra]
        if room(trial) < NAME_MIN:
            break
        cols = trial
    cols["NAME"] = max(NAME_MIN, room(cols))
    return {k: cols[k] for k in COLUMNS if k in cols}


class PodsTable(DataTable[Text]):
    """Rows from `pod_event`s; `apply()` returns the pods it has just seen preempted."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"pods--preempted", "pods--waiting", "pods--failed", "pods--running",
                         "pods--replaced"}
    DEFAULT_CSS = """
    PodsTable > .pods--preempted { color: $error; text-style: bold; }
    PodsTable > .pods--failed { color: $error; }
    PodsTable > .pods--waiting { color: $warning; }
    PodsTable > .pods--running { color: $success; }
    PodsTable > .pods--replaced { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "pod('logs')", "logs", tooltip="The selected pod's log (follows)"),
        Binding("l", "pod('logs')", "logs", show=False),
        Binding("d", "pod('describe')", "describe", tooltip="Node, conditions, requests, Events"),
        Binding("ctrl+d", "pod('delete')", "delete pod", tooltip="Delete the pod (asks first)"),
    ]

    class Action(Message):
        """The user asked for `verb` (logs / describe / delete) on pod `name`."""

        def __init__(self, name: str, verb: str) -> None:
            super().__init__()
            self.name, self.verb = name, verb

    def __init__(self, *, now: Callable[[], float] = time.time, prefix: str = "", **kwargs: Any) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.now = now
        self.prefix = prefix          # "<cluster>-": left out of NAME (the title shows it)
        self.synced = False
        self.desired: dict[str, int] = {}   # per group, from the RayCluster ({}: not known)
        self._pods: dict[str, tuple[dict[str, Any], bool]] = {}   # name -> (object, gone)
        self._flagged: dict[str, int] = {}     # preempted pod -> when the watch showed it gone
        self._born: dict[str, int] = {}        # pod -> when the watch first showed it
        self._seq = 0                          # the order of those two (not clocks: no skew)
        self._order: list[str] = []
        self._widths: dict[str, int] = {}
        self._redraw_pending = False
        self.on_change: Callable[[], None] | None = None   # after every redraw (the counts)
        self.gpu: GpuMetrics | None = None     # Cloud Monitoring's GPU points (None: none yet)

    def on_mount(self) -> None:
        self.set_interval(1.0, self.redraw)  # ages move on
        self.redraw()

    # --- data ---

    def apply(self, event: KubeEvent) -> list[str]:
        """Fold one watch event in; the names of pods newly seen preempted. RESET (the app's,
        after a teardown deleted the cluster) forgets every pod: the next watch starts anew."""
        if event.type == "SYNCED":
            self.synced = True
            return []
        if event.type == "RESET":
            self.synced = False
            self._pods.clear()
            self._flagged.clear()
            self._born.clear()
            self._schedule_redraw()
            return []
        meta = event.obj.get("metadata") or {}
        name = meta.get("name", "")
        if not name:
            return []
        gone = event.type == "DELETED"
        self._seq += 1
        self._born.setdefault(name, self._seq)
        row = pod_row(event.obj, gone=gone, now=self.now())
        if gone and row.phase != "PREEMPTED":
            self._pods.pop(name, None)
        else:
            self._pods[name] = (event.obj, gone)
        self._schedule_redraw()
        if row.phase == "PREEMPTED" and name not in self._flagged:
            self._flagged[name] = self._seq
            return [name]
        return []

    def set_raycluster(self, raycluster: dict[str, Any] | None) -> None:
        """The RayCluster's spec gives the size each group should have ({}: none)."""
        self.desired = desired_sizes(raycluster)
        self._schedule_redraw()

    def set_gpu(self, gpu: GpuMetrics) -> None:
        """Cloud Monitoring's newest GPU points: GPU% and GMEM appear with the first pod's."""
        self.gpu = gpu if gpu.busy else None
        self._schedule_redraw()

    def gpu_cells(self, name: str) -> tuple[str, str, str]:
        """GPU%, GMEM in use and GMEM in all, as shown ("-": no point for this pod)."""
        use = self.gpu.latest(name) if self.gpu is not None else None
        if use is None:
            return "-", "-", "-"
        return f"{use.busy_pct:.0f}", gib(use.memory_used), gib(use.memory_total)

    def summary(self) -> PodsSummary:
        rows = [pod_row(obj, gone=gone, now=self.now()) for obj, gone in self._pods.values()]
        return summarize(rows, self.desired, self._flagged, self._born)

    def pod_rows(self) -> list[PodRow]:
        """Live pods (head first), then outstanding preemptions, then the newest replaced."""
        now = self.now()
        rows = [pod_row(obj, gone=gone, now=now) for obj, gone in self._pods.values()]
        done = summarize(rows, self.desired, self._flagged, self._born).replaced
        if len(done) > KEEP_REPLACED:  # the oldest go: the table stays about the cluster
            for name in sorted(done, key=lambda n: self._flagged.get(n, 0))[:len(done) - KEEP_REPLACED]:
                self._pods.pop(name, None)
        rows = [r for r in rows if r.name in self._pods]
        rank = {"head": 0, "worker": 1}
        return sorted(rows, key=lambda r: (r.name in done, rank.get(r.type, 2), r.name))

    @property
    def preempted_count(self) -> int:
        """Preempted pods whose replacement does not run yet."""
        return self.summary().outstanding

    def row_at(self, row_index: int) -> PodRow | None:
        rows = self.pod_rows()
        return rows[row_index] if 0 <= row_index < len(rows) else None

    def selected(self) -> PodRow | None:
        return self.row_at(self.cursor_row) if self.row_count else None

    def action_pod(self, verb: str) -> None:
        row = self.selected()
        if row is not None:
            self.post_message(self.Action(row.name, verb))

    # --- the pane protocol (full view, copy) ---

    def pane_text(self) -> tuple[str, list[str]] | None:
        """Every column, names and nodes whole, and the counts."""
        rows = self.pod_rows()
        if not rows:
            return None
        s = self.summary()
        head = f"{s.running}/{s.wanted} running" + (f" · {len(s.replaced)} replaced" if s.replaced else "") \
            + (f" · {s.outstanding} PREEMPTED" if s.outstanding else "")
        table = [("NAME", "TYPE", "NODE", "PHASE", "GPU", "GPU%", "GMEM", "CPU", "R", "AGE")]
        for r in rows:
            busy, used, total = self.gpu_cells(r.name)
            table.append((r.name, r.type or "-", r.node or "-", REPLACED if r.name in s.replaced else r.phase,
                          r.gpu or "-", busy, "-" if used == "-" else f"{used}/{total}", r.cpu or "-",
                          str(r.restarts), age_text(r.age_s)))
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        return "Pods", [head, ""] + ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                                     for row in table]

    # --- drawing ---

    def _columns(self) -> None:
        width = (self.size.width or 60) - (2 if self.show_vertical_scrollbar else 0)
        nodes = [len(obj.get("spec", {}).get("nodeName") or "") for obj, _ in self._pods.values()]
        names = [len(self._short(n)) for n in self._pods]
        widths = layout(width, self.cell_padding, max(nodes, default=0), max(names, default=0),
                        gpu_use=self.gpu is not None)
        if widths == self._widths and self.columns:
            return
        self._widths = widths
        self.clear(columns=True)
        self._order = []
        for label, w in widths.items():
            self.add_column(label, width=w, key=label)

    def on_resize(self) -> None:
        self.redraw()

    def _short(self, name: str) -> str:
        return name[len(self.prefix):] if self.prefix and name.startswith(self.prefix) else name

    def _cells(self, row: PodRow, replaced: frozenset[str]) -> list[Text]:
        phase = row.phase
        if row.name in replaced:
            style = phase_style = self.get_component_rich_style("pods--replaced")
            phase = REPLACED
        elif row.phase == "PREEMPTED":
            style = phase_style = self.get_component_rich_style("pods--preempted")
        else:
            style = None
            phase_style = self.get_component_rich_style(
                "pods--running" if row.phase in ("Running", "Completed") else
                "pods--waiting" if row.phase in WAITING else "pods--failed")
        name = self._short(row.name)
        w = self._widths
        node, node_w = row.node or "-", w.get("NODE", NODE_SHORT)
        if len(node) > node_w and node_w <= NODE_SHORT:   # a short column: the node's suffix
            node = node.rsplit("-", 1)[-1]
        busy, used, _ = self.gpu_cells(row.name) if self.gpu is not None else ("-", "-", "-")
        values = {"NAME": tail(name, w["NAME"]), "TYPE": row.type or "-", "GPU%": busy, "GMEM": used,
                  "NODE": tail(node, node_w),
                  "PHASE": phase if len(phase) <= w["PHASE"] else phase[:w["PHASE"] - 1] + "…",
                  "GPU": row.gpu or "-", "CPU": row.cpu or "-", "R": str(row.restarts),
                  "AGE": age_text(row.age_s)}
        return [Text(values[k], style=(phase_style if k == "PHASE" else style) or "")
                for k in w]

    def _schedule_redraw(self) -> None:
        """One redraw per 50 ms, however many events came (a replayed watch brings thousands).
        A timer of this widget's own, not call_after_refresh: that one runs on the top screen
        and is lost with it when a modal (the palette, a pod's log) closes first."""
        if not self._redraw_pending:
            self._redraw_pending = True
            self.set_timer(0.05, self.redraw)

    def redraw(self) -> None:
        self._redraw_pending = False
        if not self.is_mounted:
            return
        self._columns()
        rows = self.pod_rows()
        replaced = self.summary().replaced
        if self.on_change is not None:
            self.on_change()
        names = [r.name for r in rows]
        if names != self._order:
            cursor = self.cursor_row
            self.clear()
            for row in rows:
                self.add_row(*self._cells(row, replaced), key=row.name)
            self._order = names
            if rows:
                self.move_cursor(row=min(cursor, len(rows) - 1), animate=False)
            return
        for row in rows:
            for label, cell in zip(self._widths, self._cells(row, replaced), strict=True):
                self.update_cell(row.name, label, cell)
