"""Teardown: what exists, typed confirmation of the cluster name, one key to delete, progress
per deletion, then the leak scan (a fresh inventory) says whether anything of rltui's is left.

While `down` runs the inventory is asked again every POLL_S seconds (never two at once), so
its rows move as the cloud reports them (a Lustre instance ACTIVE, then DELETING, then gone);
the deletions and their log move above it, and the confirmation row hides until the end.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Log, Static

from ..plan.runner import RunEvent, RunResult
from ..plan.view import fmt_s
from ..seam import Notice
from ..session import ConfigState
from ..widgets.chrome import HeaderInfo, stops_text
from ..widgets.inventory import InventoryView, left_behind
from ..widgets.steps import StepsView, from_event, short_title
from .base import WizardScreen, stylesheet

FLUSH_S = 0.1       # log lines reach the pane in batches
LOG_MAX = 2000      # the log restarts from its newest LOG_KEEP lines past this
LOG_KEEP = 500


def leak_scan_text(resources: list[Any], project: str = "") -> tuple[str, bool]:
    """The final word after a teardown: (text, clean). What is not rltui's was left alone on
    purpose: it does not make the scan dirty, but the scan does not say nothing is left."""
    left = left_behind(resources)
    where = f" in {project}" if project else ""
    if not left:
        foreign = [r for r in resources if r.present and not r.owned and not r.leak]
        if foreign:
            return (f"leak scan: rltui's own are gone{where}; {len(foreign)} not rltui's still"
                    " there, left alone (see the table: each row says whose)", True)
        return f"leak scan: nothing of rltui's left{where}", True
    names = ", ".join(f"{'LEAK ' if r.leak else ''}{r.kind} {r.name} ({r.state})" for r in left)
    return f"left behind (still billed): {names}", False


class TeardownScreen(WizardScreen):
    CSS_PATH = stylesheet(__file__)
    MODE = "teardown"
    TITLE = "Teardown"
    AUTO_FOCUS = "#confirm"

    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: the confirmation Input has focus and binds ctrl+d itself (delete right)
        Binding("ctrl+d", "delete_all", "delete all", priority=True),
        Binding("ctrl+u", "refresh", "ask again", priority=True),
    ]
    POLL_S: ClassVar[float] = 5.0    # the inventory's period while deleting

    def __init__(self) -> None:
        super().__init__()
        self.cluster = ""
        self.project = ""
        self.phase = "idle"              # "idle", "deleting", "done"
        self._scan_due = False           # the next inventory is the leak scan
        self._finished = ""              # the run's summary, once the scan has come
        self._pending: list[str] = []    # log lines not yet in the pane

    def compose_body(self) -> ComposeResult:
        # The body scrolls (a key can scroll it when focused); the confirmation stays below it,
        # always in view, even at 80x24.
        with VerticalScroll(id="teardown-body"):
            with Vertical(id="inventory-section"):
                yield Static("What exists now", id="inventory-title", classes="section-title")
                yield InventoryView(id="inventory")
                yield Static("", id="inventory-summary")
            with Vertical(id="progress-section"):
                yield Static("", id="run-summary")    # the final word first: seen at 80x24
                yield Static("", id="leak-scan")
                yield StepsView(id="deletions", title="Deletions", down=True,
                                empty="nothing deleted yet: type the cluster name, then ctrl+d")
                yield Log(id="teardown-log")
        with Vertical(id="confirm-section"):
            yield Static("", id="confirm-label")
            with Horizontal(id="confirm-row"):
                yield Input(placeholder="cluster name", id="confirm")
                yield Button("Delete all (ctrl+d)", id="delete", variant="error", disabled=True)
                yield Button("Ask again (ctrl+u)", id="refresh")
            # The offer to keep the checkpoints: Lustre's ExportData before its delete (plan/export.py).
            with Horizontal(id="export-row"):
                yield Input(placeholder="gs://BUCKET/PREFIX", id="export-to")
                yield Static("first export the checkpoints there (empty: do not)", id="export-hint")

    def on_mount(self) -> None:
        bus = self.wizard.bus
        bus.header.subscribe(self, self._on_header)
        bus.config.subscribe(self, self._on_config)
        bus.inventory.subscribe(self, self._on_inventory)
        bus.cost.subscribe(self, self._on_cost)
        bus.teardown_event.subscribe(self, self._on_teardown_event)
        bus.run_result.subscribe(self, self._on_run_result)
        bus.notice.subscribe(self, self._on_notice)
        self._on_header(self.wizard.header_info)
        self.set_interval(FLUSH_S, self._flush)
        self.set_interval(self.POLL_S, self._poll)
        self.query_one("#teardown-log", Log).display = False
        self.query_one("#leak-scan", Static).display = False

    # --- the name to type ---

    def _on_header(self, info: HeaderInfo) -> None:
        self.project = info.project or self.project
        if info.cluster and not self.cluster:
            self._set_cluster(info.cluster)
        elif not self.cluster:
            self._set_cluster("")

    def _on_config(self, state: ConfigState) -> None:
        self.project = state.values.get("PROJECT_ID", self.project)
        self._set_cluster(state.values.get("CLUSTER_NAME", "") or self.cluster)

    def _set_cluster(self, name: str) -> None:
        self.cluster = name
        label = self.query_one("#confirm-label", Static)
        if name:
            label.update(Text.assemble("Type the cluster name ", (name, "bold"),
                                       " to delete all that rltui made for it:"))
        else:
            label.update("No cluster name yet: set CLUSTER_NAME on the Configure screen (F3).")
        self._refresh_actions()

    @property
    def confirmed(self) -> bool:
        return bool(self.cluster) and self.query_one("#confirm", Input).value == self.cluster

    def on_input_changed(self, event: Input.Changed) -> None:
        self._refresh_actions()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.confirmed:
            self.action_delete_all()

    def _export_to(self) -> tuple[bool, str | None]:
        """(usable, where the checkpoints go first: None for nowhere); a bad address is said."""
        text = self.query_one("#export-to", Input).value.strip()
        if not text:
            return True, None
        from ..plan.export import destination
        from ..plan.jobs import Refused

        try:
            return True, destination(text, "export to")
        except Refused as exc:
            self.notify(str(exc), title="Teardown", severity="error")
            self.query_one("#export-to", Input).focus()
            return False, None

    # --- data in ---

    def _on_inventory(self, resources: list[Any]) -> None:
        table = self.query_one(InventoryView)
        table.set_resources(resources)
        table.display = True
        self._draw_summary(resources)
        if self._scan_due:
            self._scan_due = False
            text, clean = leak_scan_text(resources, self.project)
            scan = self.query_one("#leak-scan", Static)
            scan.update(text)
            scan.display = True
            scan.set_class(clean, "clean")
            scan.set_class(not clean, "dirty")
            # What was left alone on purpose, and how to delete it by hand (as `down` prints).
            self._pending += [f"not rltui's, left alone: {r.kind} {r.name}; to delete it by hand:"
                              f" {r.hand_delete}" for r in resources
                              if r.present and not r.owned and not r.leak
                              and getattr(r, "hand_delete", "")]
            if self._finished:
                self.query_one("#run-summary", Static).update(self._finished)

    def _on_cost(self, _estimate: Any) -> None:
        """The cost meter came after the inventory it priced: the summary's figure is redrawn."""
        if self.wizard.bus.inventory.last is not None:
            self._draw_summary(self.wizard.bus.inventory.last)

    def _draw_summary(self, resources: list[Any]) -> list[Any]:
        """The inventory's one-line summary (with what deleting stops costing); the leaks."""
        present = [r for r in resources if r.present]
        ours = left_behind(resources)
        leaks = [r for r in ours if r.leak]
        foreign = [r for r in present if not r.owned and not r.leak]
        parts = [f"{len(ours)} of rltui's exist"] if ours else []
        if leaks:
            parts.append(f"{len(leaks)} leak(s): made by rltui for another env.sh, not deleted "
                         "by this teardown")
        if foreign:
            parts.append(f"{len(foreign)} not rltui's: left alone")
        parts += [t for t in (stops_text(self.wizard.header_info.cost),) if t]  # the cost meter
        if self.phase == "deleting":
            parts.append(f"asked again every {self.POLL_S:g} s while deleting")
        summary = self.query_one("#inventory-summary", Static)
        summary.update(" · ".join(parts))
        summary.set_class(bool(leaks), "leak")
        return leaks

    def _on_teardown_event(self, event: RunEvent | str) -> None:
        if self.phase != "deleting":
            self._start_phase()
        if isinstance(event, str):
            self._pending.append(event)
        elif event.kind == "line":
            if event.line is not None:
                self._pending.append(f"[{short_title(event.title)}] {event.line}")
        else:
            self.query_one("#deletions", StepsView).update_step(from_event(event))

    def _flush(self) -> None:
        """Lines reach the log in batches; past LOG_MAX it restarts from the newest LOG_KEEP."""
        if not self._pending:
            return
        log = self.query_one("#teardown-log", Log)
        batch, self._pending = self._pending, []
        if log.line_count + len(batch) > LOG_MAX:
            batch = [*log.lines, *batch][-LOG_KEEP:]
            log.clear()
        log.write_lines(batch)

    def _on_run_result(self, result: RunResult) -> None:
        if result.mode != "down":
            return
        self.phase, self._scan_due = "done", True
        summary = self.query_one("#run-summary", Static)
        self._finished = ""
        if result.ok:
            self._finished = f"teardown finished in {fmt_s(result.elapsed_s)}"
            summary.update(f"{self._finished}; leak scan…")
        else:
            failed = "; ".join(f"{n}: {result.messages.get(n, '')}" for n in result.failed)
            summary.update(f"teardown FAILED: {failed or 'see the steps above'}. "
                           "Type the name again and ctrl+d retries what is left.")
        summary.set_class(not result.ok, "dirty")
        self.query_one("#confirm", Input).value = ""
        self.query_one("#confirm-section").display = True
        self._refresh_actions()

    def _on_notice(self, notice: Notice) -> None:
        """The teardown worker raised: no result will come, so stop showing "deleting"."""
        if notice.severity == "error" and notice.group == "teardown":
            self.phase = "done"
            summary = self.query_one("#run-summary", Static)
            summary.update(f"teardown stopped: {notice.message.splitlines()[0][:300]}")
            summary.set_class(True, "dirty")
            self.query_one("#inventory-summary", Static).update(
                "ask again (ctrl+u) to see what exists now")
            self.query_one("#confirm-section").display = True
            self._refresh_actions()

    def _start_phase(self) -> None:
        self.phase = "deleting"
        self.query_one("#leak-scan", Static).update("")
        self.query_one("#leak-scan", Static).display = False
        self.query_one("#run-summary", Static).update("deleting… (quitting rltui does not stop it)")
        self.query_one("#run-summary", Static).set_class(False, "dirty")
        self.query_one("#teardown-log", Log).display = True
        # Progress first; the inventory follows the cloud below it (polled); nothing to type.
        body = self.query_one("#teardown-body")
        body.move_child(self.query_one("#progress-section"), before=0)
        self.query_one("#confirm-section").display = False
        self.query_one("#inventory-summary", Static).update(
            f"asked again every {self.POLL_S:g} s while deleting")
        self.query_one("#inventory-summary", Static).set_class(False, "leak")
        self._refresh_actions()
        body.focus()
        body.scroll_home(animate=False)

    def _poll(self) -> None:
        """While deleting: ask the cloud again, unless the last ask has not answered yet."""
        if self.phase != "deleting":
            return
        if any(w.group == "inventory" and not w.is_finished for w in self.app.workers):
            return
        self.wizard.refresh_inventory()

    def pane_text(self) -> tuple[str, list[str]] | None:
        """ctrl+o / ctrl+y (the pane protocol, screens/base.py): the deletions with their whole
        words, the teardown's log, then what exists now."""
        lines = [f"{v.title}: {v.state.value}" + (f" ({v.message})" if v.message else "")
                 for v in self.query_one("#deletions", StepsView).views]
        log = self.query_one("#teardown-log", Log)
        if log.line_count:
            lines += ["", *log.lines]
        inventory = self.query_one(InventoryView).pane_text()
        if inventory is not None:
            lines += ["", f"{inventory[0]}:", *inventory[1]]
        return ("Teardown", lines) if lines else None

    # --- actions ---

    def _refresh_actions(self) -> None:
        deleting = self.phase == "deleting"
        self.query_one("#delete", Button).disabled = deleting or not self.confirmed
        self.query_one("#confirm", Input).disabled = deleting or not self.cluster
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "delete_all" and (self.phase == "deleting" or not self.confirmed):
            return None   # greyed in the footer until the exact name is typed
        return True

    def action_delete_all(self) -> None:
        """Delete what rltui created (jobs stopped first); only after the typed confirmation."""
        if self.phase == "deleting":
            return
        if not self.confirmed:
            self.notify("type the cluster name first", title="Teardown", severity="warning")
            self.query_one("#confirm", Input).focus()
            return
        usable, export_to = self._export_to()
        if not usable:
            return
        self.query_one("#deletions", StepsView).set_steps([])
        self.query_one("#teardown-log", Log).clear()
        self._pending = []
        self._start_phase()
        if export_to:   # the export runs and is waited for before the Lustre delete
            self.wizard.start_teardown(export_to=export_to)
        else:
            self.wizard.start_teardown()

    def action_refresh(self) -> None:
        """Ask the cloud again what exists."""
        self.wizard.refresh_inventory()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "delete":
            self.action_delete_all()
        elif event.button.id == "refresh":
            self.action_refresh()
