"""Monitor: the pods (watch), the job's log, the job strip, checkpoints, recent Events.

Two layouts on one grid, picked by width: below 120 columns the pods sit over the strip,
checkpoints and events in a 47-column pane beside the log (so at 80x24 the log keeps 32
columns and every row; checkpoints show the newest two and events what room is left, both
whole in their full view); from 120 columns the pods span the screen on top (whole node names,
GPU and CPU) over the side pane and the log. The Ray dashboard's address is under the pods.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Static

from ..joblog import CheckpointEvent, TrainingStep
from ..plan.pods import KubeEvent
from ..seam import JobStatusUpdate
from ..widgets.checkpoints import CheckpointsList
from ..widgets.chrome import HeaderInfo
from ..widgets.jobstrip import JobStrip
from ..widgets.logpane import JobLogPane
from ..widgets.poddetail import ConfirmDeletePod, PodDescribeView, PodLogView
from ..widgets.pods import PodsTable, age_text, tail
from .base import WizardScreen, stylesheet

RECENT_EVENTS = 20
NO_WATCH = "no watch: waits for the RayCluster"
NO_DASHBOARD = "once the RayCluster is up"
WIDE = 120   # from this width the pods span the screen


def _when(event: dict[str, Any]) -> float | None:
    meta = event.get("metadata") or {}
    for stamp in (event.get("lastTimestamp"), event.get("eventTime"),
                  event.get("firstTimestamp"), meta.get("creationTimestamp")):
        if stamp:
            try:
                return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


class RecentEvents(Widget, can_focus=True):
    """Kubernetes Events, newest first: age, reason, object, message (warnings stand out)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"events--warning", "events--dim"}
    DEFAULT_CSS = """
    RecentEvents { height: auto; }
    RecentEvents > .events--warning { color: $warning; text-style: bold; }
    RecentEvents > .events--dim { color: $text-muted; }
    """

    def __init__(self, now: Callable[[], float] = time.time, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.now = now
        self.prefix = ""   # "<cluster>-": left out of object names, as in the pods table
        self.events: list[dict[str, Any]] = []

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)  # ages move on, as the pods table's do

    def _tick(self) -> None:
        if self.events:  # drawn again against the clock; the API is not asked again
            self.refresh()

    def set_events(self, events: list[dict[str, Any]]) -> None:
        dated = sorted(events, key=lambda e: _when(e) or 0.0, reverse=True)
        self.events = dated[:RECENT_EVENTS]
        self.refresh(layout=True)

    def pane_text(self) -> tuple[str, list[str]] | None:
        """Every event whole: age, type, reason, kind/name, message."""
        if not self.events:
            return None
        now, lines = self.now(), []
        for ev in self.events:
            when, obj = _when(ev), ev.get("involvedObject") or {}
            age = age_text(max(0.0, now - when)) if when else "?"
            lines.append(f"{age:>5}  {ev.get('type', '')}  {ev.get('reason', '')}  "
                         f"{(obj.get('kind') or '').lower()}/{obj.get('name', '')}")
            lines.append("       " + " ".join(str(ev.get("message", "")).split()))
        return "Recent events", lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
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
    CSS_PATH = stylesheet(__file__)
    MODE = "monitor"
    TITLE = "Monitor"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+f", "search", "search log", tooltip="Search the job log (enter: older match)"),
        Binding("ctrl+e", "follow", "follow log", tooltip="Back to the newest lines and keep following"),
        # Enter anywhere on Monitor (not typed into the search box): the selected pod's log.
        Binding("enter", "pod_logs", "pod logs", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.now: Callable[[], float] = time.time
        self._arranged = False

    def compose_body(self) -> ComposeResult:
        with Grid(id="monitor-body"):
            with Vertical(id="pods-pane"):
                with Horizontal(id="pods-bar", classes="bar"):
                    yield Static("Pods", classes="bar-title")
                    yield Static(Text(NO_WATCH, style="dim"), id="pods-state", classes="bar-state")
                yield PodsTable(now=lambda: self.now(), id="pods")
                with Horizontal(id="dashboard-bar", classes="bar"):
                    yield Static("Ray dashboard", classes="bar-title")
                    yield Static(Text(NO_DASHBOARD, style="dim"), id="dashboard")
            yield JobLogPane(id="log-pane")
            with Vertical(id="monitor-side"):
                yield JobStrip(id="job-strip")
                yield Static("Checkpoints", classes="bar-title")
                with VerticalScroll(id="checkpoints-box"):
                    yield CheckpointsList(id="checkpoints")
                yield Static("Recent events", classes="bar-title")
                with VerticalScroll(id="events-box", can_focus=False):
                    yield RecentEvents(now=lambda: self.now(), id="events")

    def on_mount(self) -> None:
        self._set_prefix(self.wizard.header_info)
        self.query_one(PodsTable).on_change = self._show_pods_state
        bus = self.wizard.bus  # each topic replays what came before this screen existed
        bus.dashboard.subscribe(self, self._on_dashboard)
        bus.raycluster.subscribe(self, self._on_raycluster)  # after: {} clears the address
        bus.pod_event.subscribe(self, self._on_pod_event)
        bus.log_lines.subscribe(self, self._on_log_lines)
        bus.job_status.subscribe(self, self._on_job_status)
        bus.step_records.subscribe(self, self._on_step_records)
        bus.checkpoints.subscribe(self, self._on_checkpoints)
        bus.kube_events.subscribe(self, self._on_kube_events)
        bus.gpu.subscribe(self, self.query_one(PodsTable).set_gpu)
        self._arrange(self.app.size.width)
        self.query_one("#job-log").focus()

    def on_resize(self, event: Resize) -> None:
        self._arrange(self.app.size.width)

    def on_screen_resume(self) -> None:
        # A terminal resized while another mode was shown sends this screen no Resize.
        self._arrange(self.app.size.width)

    def _arrange(self, width: int) -> None:
        """Narrow: [pods | log] over [side | log]; wide: pods across, then [side | log]. The
        grid fills its cells in child order, so the side pane moves before or after the log."""
        body = self.query_one("#monitor-body")
        wide = width >= WIDE
        if self._arranged and body.has_class("-wide") == wide:
            return
        self._arranged = True
        body.set_class(wide, "-wide")
        side, log = self.query_one("#monitor-side"), self.query_one("#log-pane")
        if wide:
            body.move_child(side, before=log)
        else:
            body.move_child(log, before=side)

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

    def _on_raycluster(self, raycluster: dict[str, Any]) -> None:
        self.query_one(PodsTable).set_raycluster(raycluster)
        if not raycluster:  # deleted (or none yet): no dashboard behind the address
            self.query_one("#dashboard", Static).update(Text(NO_DASHBOARD, style="dim"))

    def _on_dashboard(self, url: str) -> None:
        self.query_one("#dashboard", Static).update(Text(url, style="bold"))

    def _on_pod_event(self, event: KubeEvent) -> None:
        table = self.query_one(PodsTable)
        for name in table.apply(event):
            node = (event.obj.get("spec") or {}).get("nodeName") or "its node"
            self.wizard.notify(
                f"{name} on {node}: KubeRay starts a replacement; the job's supervisor resubmits"
                " it from the newest checkpoint once the cluster is whole (a job submitted with"
                " --no-recover: resubmit it on the Job screen)",
                title="Worker preempted", severity="error", timeout=15)

    def _show_pods_state(self) -> None:
        """Counts against the RayCluster's desired size: "9/9 running · 1 replaced"."""
        table = self.query_one(PodsTable)
        state = Text()
        if not table.pod_rows() and not table.synced:
            state.append(NO_WATCH, style="dim")
        else:
            s = table.summary()
            state.append("watch · ", style="dim").append(f"{s.running}/{s.wanted} running")
            if s.replaced:
                state.append(f" · {len(s.replaced)} replaced", style="dim")
            if s.outstanding:
                state.append(f"  {s.outstanding} PREEMPTED", style="bold reverse")
        self.query_one("#pods-state", Static).update(state)

    def _on_log_lines(self, lines: list[str]) -> None:
        self.query_one(JobLogPane).write_lines(lines)

    def _on_job_status(self, status: JobStatusUpdate) -> None:
        if status.reset:   # a new job, or none after teardown
            self.query_one(JobLogPane).reset()
        self.query_one(JobStrip).set_status(status)

    def _on_step_records(self, records: list[TrainingStep]) -> None:
        self.query_one(JobStrip).add_records(records)

    def _on_checkpoints(self, events: list[CheckpointEvent]) -> None:
        self.query_one(CheckpointsList).add(events)

    def _on_kube_events(self, events: list[dict[str, Any]]) -> None:
        self.query_one(RecentEvents).set_events(events)

    # --- pod actions (the pods table's k9s keys, and the palette) ---

    def on_pods_table_action(self, message: PodsTable.Action) -> None:
        message.stop()
        self.pod_action(message.verb, message.name)

    def pod_action(self, verb: str, name: str | None = None) -> None:
        """logs / describe / delete for `name` (default: the table's selected pod). The app's
        workers do the calls; their errors reach its one worker-error handler."""
        table = self.query_one(PodsTable)
        row = next((r for r in table.pod_rows() if r.name == name), None) if name else table.selected()
        if row is None:
            self.wizard.notify("no pod selected: the table fills once the watch runs", title="Pods")
            return
        if verb == "logs":
            view = PodLogView(row.name, on_close=self.wizard.stop_pod_log)
            self.wizard.push_screen(view)
            self.wizard.follow_pod_log(row.name, view.write, view.end)
        elif verb == "describe":
            described = PodDescribeView(row.name, now=lambda: self.now())
            self.wizard.push_screen(described)
            self.wizard.describe_pod(row.name, described.show, described.failed)
        elif verb == "delete":
            def confirmed(yes: bool | None) -> None:
                if yes:
                    self.wizard.delete_pod(row.name)
            self.wizard.push_screen(ConfirmDeletePod(row.name, row.type), confirmed)

    # --- actions (also in the command palette) ---

    def system_commands(self) -> Iterable[SystemCommand]:
        yield SystemCommand("Monitor: search the log", "Find a line; enter: older match (ctrl+f)",
                            self.search_log)
        yield SystemCommand("Monitor: back to the newest lines", "Follow the log again (ctrl+e)",
                            self.follow_log)
        for verb, title, help in (
                ("logs", "logs of the selected pod", "Its container log, following (enter or l)"),
                ("describe", "describe the selected pod", "Node, conditions, requests, Events (d)"),
                ("delete", "delete the selected pod", "After a confirmation; KubeRay recreates it (ctrl+d)")):
            yield SystemCommand(f"Monitor: {title}", help, lambda verb=verb: self.pod_action(verb))

    def action_pod_logs(self) -> None:
        self.pod_action("logs")

    def search_log(self) -> None:
        self.action_search()

    def follow_log(self) -> None:
        self.action_follow()

    def action_search(self) -> None:
        self.query_one(JobLogPane).search()

    def action_follow(self) -> None:
        self.query_one(JobLogPane).follow()
