"""Monitor: the pods (watch) beside the job's log, the job strip, checkpoints, recent Events."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Callable, Iterable

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Static

from ..plan.pods import KubeEvent
from ..joblog import CheckpointEvent, TrainingStep
from ..widgets.checkpoints import CheckpointsList
from ..widgets.chrome import HeaderInfo
from ..widgets.jobstrip import JobStrip
from ..widgets.logpane import JobLogPane
from ..widgets.pods import PodsTable, age_text, tail
from .base import WizardScreen

RECENT_EVENTS = 20
NO_WATCH = "no watch yet: it starts when the RayCluster is up"


def _when(event: dict) -> float | None:
    meta = event.get("metadata") or {}
    for stamp in (event.get("lastTimestamp"), event.get("eventTime"),
                  event.get("firstTimestamp"), meta.get("creationTimestamp")):
        if stamp:
            try:
                return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


class RecentEvents(Widget):
    """Kubernetes Events, newest first: age, reason, object, message (warnings stand out)."""

    COMPONENT_CLASSES = {"events--warning", "events--dim"}
    DEFAULT_CSS = """
    RecentEvents { height: auto; }
    RecentEvents > .events--warning { color: $warning; text-style: bold; }
    RecentEvents > .events--dim { color: $text-muted; }
    """

    def __init__(self, now: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.now = now
        self.prefix = ""   # "<cluster>-": left out of object names, as in the pods table
        self.events: list[dict] = []

    def set_events(self, events: list[dict]) -> None:
        dated = sorted(events, key=lambda e: _when(e) or 0.0, reverse=True)
        self.events = dated[:RECENT_EVENTS]
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width: int) -> int:
        return max(1, 2 * len(self.events))

    def render(self) -> Text:
        dim = self.get_component_rich_style("events--dim")
        if not self.events:
            return Text("no events yet", style=dim)
        now, width = self.now(), self.size.width
        lines: list[Text] = []
        for ev in self.events:
            when = _when(ev)
            obj = ev.get("involvedObject") or {}
            warn = ev.get("type") == "Warning"
            head = Text(f"{age_text(max(0.0, now - when)) if when else '?':>5} ", style=dim)
            head.append(str(ev.get("reason", "")),
                        style=self.get_component_rich_style("events--warning") if warn else "bold")
            name = str(obj.get("name", ""))
            if self.prefix and name.startswith(self.prefix):
                name = name[len(self.prefix):]
            room = max(8, width - head.cell_len - 2)
            head.append("  " + tail(f"{(obj.get('kind') or '').lower()}/{name}", room), style=dim)
            body = Text("      " + " ".join(str(ev.get("message", "")).split()))
            for line in (head, body):
                line.truncate(width, overflow="ellipsis")
                lines.append(line)
        return Text("\n").join(lines)


class MonitorScreen(WizardScreen):
    MODE = "monitor"
    TITLE = "Monitor"
    BINDINGS = [
        Binding("ctrl+f", "search", "search log", tooltip="Search the job log (enter: older match)"),
        Binding("ctrl+e", "follow", "follow log", tooltip="Back to the newest lines and keep following"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.now: Callable[[], float] = time.time
        self._state_pending = False

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="monitor-body"):
            with Vertical(id="monitor-left"):
                with Horizontal(id="pods-bar", classes="bar"):
                    yield Static("Pods", classes="bar-title")
                    yield Static(Text(NO_WATCH, style="dim"), id="pods-state", classes="bar-state")
                yield PodsTable(now=lambda: self.now(), id="pods")
                yield Static("", id="pod-detail")
                yield JobStrip(id="job-strip")
                yield Static("Checkpoints", classes="bar-title")
                with VerticalScroll(id="checkpoints-box"):
                    yield CheckpointsList(id="checkpoints")
                yield Static("Recent events", classes="bar-title")
                with VerticalScroll(id="events-box"):
                    yield RecentEvents(now=lambda: self.now(), id="events")
            yield JobLogPane(id="log-pane")

    def on_mount(self) -> None:
        self._set_prefix(self.wizard.header_info)
        bus = self.wizard.bus  # each topic replays what came before this screen existed
        bus.pod_event.subscribe(self, self._on_pod_event)
        bus.log_lines.subscribe(self, self._on_log_lines)
        bus.job_status.subscribe(self, self._on_job_status)
        bus.step_record.subscribe(self, self._on_step_record)
        bus.checkpoint.subscribe(self, self._on_checkpoint)
        bus.kube_events.subscribe(self, self._on_kube_events)
        self.query_one("#job-log").focus()

    def set_clock(self, now: Callable[[], float]) -> None:
        """Ages are relative to this clock (tests fix it)."""
        self.now = now
        self.query_one(PodsTable).redraw()
        self.query_one(RecentEvents).refresh()

    # --- signals ---

    def _header(self, info: HeaderInfo) -> None:
        super()._header(info)
        if self.is_mounted:
            self._set_prefix(info)

    def _set_prefix(self, info: HeaderInfo) -> None:
        prefix = f"{info.cluster}-" if info.cluster else ""
        self.query_one(PodsTable).prefix = self.query_one(RecentEvents).prefix = prefix

    def _on_pod_event(self, event: KubeEvent) -> None:
        table = self.query_one(PodsTable)
        for name in table.apply(event):
            node = (event.obj.get("spec") or {}).get("nodeName") or "its node"
            self.wizard.notify(
                f"{name} on {node}: KubeRay starts a replacement; the job's supervisor resubmits"
                " it from the newest checkpoint once the cluster is whole (a job submitted with"
                " --no-recover: resubmit it on the Job screen)",
                title="Worker preempted", severity="error", timeout=15)
        if not self._state_pending:  # once per frame: a replayed watch brings thousands
            self._state_pending = True
            self.call_after_refresh(self._show_pods_state)

    def _show_pods_state(self) -> None:
        self._state_pending = False
        table = self.query_one(PodsTable)
        rows = table.pod_rows()
        state = Text()
        if not rows and not table.synced:
            state.append(NO_WATCH, style="dim")
        else:
            live = sum(r.phase == "Running" for r in rows)
            state.append("watch · ", style="dim").append(f"{live}/{len(rows)} running")
            gone = table.preempted_count
            if gone:
                state.append(f"  {gone} PREEMPTED", style="bold reverse")
        self.query_one("#pods-state", Static).update(state)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = self.query_one(PodsTable).row_at(event.cursor_row)
        detail = self.query_one("#pod-detail", Static)
        if row is None:
            detail.update("")
            return
        detail.update(Text.assemble(("pod  ", "dim"), (row.name, "bold"), ("\nnode ", "dim"),
                                    row.node or "(not scheduled)"))

    def _on_log_lines(self, lines: list[str]) -> None:
        self.query_one(JobLogPane).write_lines(lines)

    def _on_job_status(self, status: dict[str, Any]) -> None:
        self.query_one(JobStrip).set_status(status)

    def _on_step_record(self, record: TrainingStep) -> None:
        self.query_one(JobStrip).add_record(record)

    def _on_checkpoint(self, event: CheckpointEvent) -> None:
        self.query_one(CheckpointsList).add(event)

    def _on_kube_events(self, events: list[dict]) -> None:
        self.query_one(RecentEvents).set_events(events)

    # --- actions (also in the command palette) ---

    def system_commands(self) -> Iterable[SystemCommand]:
        yield SystemCommand("Monitor: search the log", "Find a line; enter: older match (ctrl+f)",
                            self.search_log)
        yield SystemCommand("Monitor: back to the newest lines", "Follow the log again (ctrl+e)",
                            self.follow_log)

    def search_log(self) -> None:
        self.action_search()

    def follow_log(self) -> None:
        self.action_follow()

    def action_search(self) -> None:
        self.query_one(JobLogPane).search()

    def action_follow(self) -> None:
        self.query_one(JobLogPane).follow()
