"""Start: where rltui points (SANDBOX or a real project), preflight checks, and what exists.

Each failed check says how to fix it. When the cloud already holds a deployment (a
RayCluster, a GKE cluster or a Lustre instance from an earlier run), the screen offers to
resume watching it: quitting rltui never stops cloud operations.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Static

from ..widgets.chrome import HeaderInfo, plan_cost_text
from .base import WizardScreen, env_path_text, stylesheet

if TYPE_CHECKING:  # types only: the session (pydantic, the plan) loads after the first frame
    from ..session import Check, ConfigState

DEPLOYMENT_KINDS = ("RayCluster", "GKE cluster", "Lustre instance")
STALE_S = 15.0   # shown again after this long: check again


def deployment(resources: Sequence[Any]) -> list[Any]:
    """The resources that mean an earlier run left something to watch (leaks aside)."""
    return [r for r in resources if r.present and not r.leak and r.kind in DEPLOYMENT_KINDS]


class StartScreen(WizardScreen):
    CSS_PATH = stylesheet(__file__)
    MODE = "start"
    TITLE = "Start"

    # No input on this screen: plain letters are safe here. ctrl+u asks the cloud again, as on
    # every screen that shows its state.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+u", "recheck", "check again"),
        Binding("c", "configure", "configure"),
        Binding("w", "resume", "resume watching"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._checks: list[Check] | None = None
        self._checking = False
        self._resources: list[Any] | None = None
        self._intro = Text()
        self._env_line: Text | None = None
        self._checked_at = time.monotonic()

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="start-body"):
            with Horizontal(id="start-top"):
                yield Static(id="start-badge")
                yield Static(id="start-where")
            yield Static(id="start-checks-title", classes="section-title")
            yield Static(id="start-checks")
            yield Static(id="start-deployment-title", classes="section-title")
            yield Static(id="start-deployment")
        with Horizontal(id="start-actions"):
            yield Button("Check again  ctrl+u", id="start-recheck", action="screen.recheck", compact=True)
            yield Button("Resume watching  w", id="start-resume", action="screen.resume",
                         compact=True, variant="success")
            yield Button("Next: Configure  c", id="start-configure", action="screen.configure",
                         compact=True, variant="primary")

    def on_mount(self) -> None:
        bus = self.wizard.bus
        # Each replays what was published before this screen mounted (ReplaySignal).
        bus.header.subscribe(self, self._on_header)
        bus.config.subscribe(self, self._on_config)
        bus.preflight.subscribe(self, self._on_preflight)
        bus.inventory.subscribe(self, self._on_inventory)
        self._on_header(self.wizard.header_info)
        self._draw_checks()
        self._draw_deployment()

    def system_commands(self) -> Iterable[SystemCommand]:
        """This screen's actions for the command palette."""
        yield SystemCommand("Start: check again", "Re-run the preflight checks and look for a"
                            " deployment (ctrl+u)", self.action_recheck)
        if self._resumable():
            yield SystemCommand("Start: resume watching", "Follow the existing deployment's pods"
                                " and job logs on Monitor (w)", self.action_resume)

    def on_screen_resume(self) -> None:
        # Shown again after a while: the checks and what exists may have changed (a run enabled
        # the APIs, a teardown deleted the cluster), so ask again.
        if self.wizard.session is not None and time.monotonic() - self._checked_at > STALE_S:
            self.action_recheck()

    # --- what arrives ---

    def _on_header(self, info: HeaderInfo) -> None:
        sandbox = info.mode == "SANDBOX"
        badge = self.query_one("#start-badge", Static)
        badge.update(Text(info.mode.upper(), justify="center"))
        badge.set_class(sandbox, "-sandbox")
        badge.set_class(not sandbox, "-real")
        if sandbox:
            self._intro = Text("A local emulated project: ", style="bold").append(
                "fake Google APIs and Kubernetes, a fake xpk, the real gcloud, a real local Ray head and a"
                " small real GRPO job. Nothing is billed.")
        else:
            self._intro = Text("Real Google Cloud project ", style="bold").append(
                info.project or "(not set)", style="bold").append(
                ": Provision creates billed resources (Spot B200 nodes, a Managed Lustre"
                " instance). Teardown deletes them.")
        if note := plan_cost_text(info.cost):  # before `up`: the cost meter's whole plan
            self._intro.append(f" {'On Google Cloud this plan would be' if sandbox else 'This plan:'} {note}.")
        self._draw_where()

    def _on_config(self, state: ConfigState) -> None:
        line = env_path_text(state.env_path)
        if state.load_error:
            line.append(f"  ✗ not read: {state.load_error}", style="bold red")
        elif state.problems:
            n = len(state.problems)
            line.append(f"  ✗ {n} problem{'s' if n != 1 else ''}: fix on Configure (F3)",
                        style="bold red")
        else:
            line.append("  ✓ valid", style="bold green")
        self._env_line = line
        self._draw_where()

    def _draw_where(self) -> None:
        env_line = self._env_line or Text("env.sh  not read yet", style="dim")
        self.query_one("#start-where", Static).update(Text("\n").join([self._intro, env_line]))

    def _on_preflight(self, checks: list[Check]) -> None:
        self._checks, self._checking = list(checks), False
        self._checked_at = time.monotonic()
        self._draw_checks()

    def _on_inventory(self, resources: list[Any]) -> None:
        self._resources = list(resources)
        self._draw_deployment()
        self.refresh_bindings()

    # --- drawing ---

    def _draw_checks(self) -> None:
        title = Text("Preflight")
        body: Any
        if self._checks is None:
            body = Text("Waiting for the checks… (ctrl+u runs them again)", style="dim")
        else:
            passed = sum(c.ok is True for c in self._checks)
            failed = sum(c.ok is False for c in self._checks)
            title.append(f"  {passed} of {len(self._checks)} pass", style="bold red" if failed else "bold")
            unknown = len(self._checks) - passed - failed
            if unknown:
                title.append(f", {unknown} unknown", style="yellow")
            body = checks_table(self._checks)
        if self._checking:
            title.append("  checking…", style="dim")
        self.query_one("#start-checks-title", Static).update(title)
        self.query_one("#start-checks", Static).update(body)

    def _draw_deployment(self) -> None:
        title = self.query_one("#start-deployment-title", Static)
        body = self.query_one("#start-deployment", Static)
        self.query_one("#start-resume").display = self._resumable()
        if self._resources is None:
            title.update(Text("Deployment"))
            body.update(Text("Looking for what an earlier run left…", style="dim"))
            return
        present = [r for r in self._resources if r.present or r.leak]
        found = deployment(self._resources)
        if not found:
            title.update(Text("Deployment"))
            text = Text("Nothing deployed yet", style="bold")
            text.append(": check env.sh on Configure, then create everything on Provision.")
            if present:
                text.append(f" ({_count(len(present), 'other resource')}: see Teardown.)",
                            style="dim")
            body.update(text)
            return
        title.update(Text("Deployment found").append(f"  {_count(len(present), 'resource')}",
                                                     style="bold"))
        # The parts of xpk's blueprint that are rltui's are counted, not listed (Teardown lists
        # every one); a leak or one that is not rltui's keeps its row.
        parts = [r for r in present if getattr(r, "part_of", "") and r.owned and not r.leak
                 and r.kind != "VPC network"]
        table = resources_table([r for r in present if r not in parts])
        if parts:
            table.add_row(Text(""), Text("xpk's blueprint"), Text(f"{len(parts)} more"), Text(""),
                          Text("routers, NAT, NAT IPs, firewall rules, subnetworks: see"
                               " Teardown", style="dim"))
        kinds = {r.kind for r in found}
        if "RayCluster" in kinds:
            hint = Text("Resume watching (w): Monitor follows the pods and the job's logs.",
                        style="bold")
        else:
            hint = Text("Partly provisioned: Provision (F4) resumes the plan where it stopped;"
                        " w watches what exists.", style="bold")
        body.update(Group(table, hint))

    # --- actions ---

    def _resumable(self) -> bool:
        return bool(self._resources and deployment(self._resources))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "resume":
            return self._resumable()
        return True

    def action_recheck(self) -> None:
        self._checking = True
        self._draw_checks()
        self.wizard.run_preflight()
        self.wizard.refresh_inventory()

    def action_configure(self) -> None:
        self.wizard.switch_mode("configure")

    def action_resume(self) -> None:
        if not self._resources:
            return
        kinds = {r.kind for r in deployment(self._resources)}
        self.wizard.switch_mode("monitor")
        if kinds & {"RayCluster", "GKE cluster"}:
            self.wizard.watch_pods()
        if "RayCluster" in kinds:
            self.wizard.follow_logs()


def checks_table(checks: Sequence[Check]) -> Table:
    """One row per check: ✓, ✗ or ? (unknown: what it needs cannot be read yet, e.g. its API is
    off), its name, what was found, and the fix when it did not pass."""
    table = Table(box=None, show_header=False, expand=True, padding=(0, 1))
    table.add_column(width=1, no_wrap=True)
    table.add_column(max_width=34)   # as wide as the longest name, so 80 columns keep the fix
    table.add_column(ratio=1)
    for check in checks:
        icon = (Text("✓", style="bold green") if check.ok else Text("✗", style="bold red")
                if check.ok is False else Text("?", style="bold yellow"))
        text = Text(check.detail, style="dim" if check.ok else "")
        if not check.ok and check.fix:
            text.append("\n" if check.detail else "").append("fix: ", style="bold yellow")
            text.append(check.fix, style="yellow")
        table.add_row(icon, Text(check.name, style="bold"), text)
    return table


def resources_table(resources: Sequence[Any]) -> Table:
    table = Table(box=None, show_header=False, expand=True, padding=(0, 1))
    # The name stays whole (it is what Teardown asks to type); the note wraps.
    table.add_column(width=1, no_wrap=True)
    table.add_column(max_width=22, no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(max_width=10, no_wrap=True)
    table.add_column(ratio=1, min_width=12)
    for r in resources:
        note = Text(r.detail, style="dim")
        if r.leak:
            note = Text("another run's: see Teardown", style="yellow")
        elif not r.owned:
            note.append(("  " if r.detail else "") + "not made by rltui", style="yellow")
        icon = Text("!", style="bold yellow") if r.leak else Text("●", style="green")
        table.add_row(icon, Text(r.kind), Text(r.name, style="bold"), Text(r.state), note)
    return table


def _count(n: int, noun: str) -> str:
    return f"{n} {noun} exists" if n == 1 else f"{n} {noun}s exist"
