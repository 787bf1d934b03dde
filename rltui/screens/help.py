"""Keys and screens, one modal away. Its first line says how to close it and how to quit,
so neither scrolls out of sight at 80x24."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..widgets.inputframe import DrawsInputNow
from .base import stylesheet

CLOSE = "Help · Escape (or q) closes · ctrl+q quits rltui · ↑ ↓ PgUp PgDn scroll"

# One meaning per key, on every screen (tests/tui/test_help.py checks each binding is here).
KEYS = [
    ("F2 F3 F4 F7 F8 F9 F10", "Start, Configure, Provision, Job, Monitor, Metrics, Teardown"),
    ("[ ]", "previous / next screen (when no input has focus)"),
    ("ctrl+p", "every screen and action, by name"),
    ("? / F1", "this help (F1 too, where an input has focus)"),
    ("ctrl+q", "quit: cloud operations go on; reopening resumes watching"),
    ("ctrl+s", "save the form (Configure: env.sh, mode 0600; Job: the parameters)"),
    ("ctrl+l", "Configure: reload env.sh from disk (asks before dropping unsaved edits)"),
    ("ctrl+r", "Provision: run, or retry after a failure (every run re-probes and continues)"),
    ("ctrl+k", "Provision: skip the selected step and what needs it"),
    ("ctrl+g", "Job: submit the GRPO job"),
    ("ctrl+u", "ask the cloud again (Start, Teardown, Metrics)"),
    ("ctrl+d", "delete: Teardown, everything (after typing the cluster name)"),
    ("ctrl+f", "search the job log (enter: older match, ↓ newer, esc closes)"),
    ("ctrl+e / End", "follow the job log again"),
    ("ctrl+o", "open the focused pane full-screen (lines wrap; Escape closes)"),
    ("ctrl+y", "copy: the equivalent command on Provision, else the focused pane (OSC 52)"),
    ("enter / l", "pods table: the pod's logs"),
    ("d", "pods table: describe the pod (conditions, events)"),
    ("ctrl+d (pods)", "Monitor: delete the selected pod, after y in the confirmation (n keeps it)"),
    ("v", "Metrics, below 100x32: the next chart (write, read, reward, step time)"),
    ("p", "Metrics: overlay the previous run's reward curve (`rltui runs`); p again hides it"),
    ("tab", "the next pane (ctrl+o and ctrl+y act on the focused one)"),
    ("c / w", "Start: go to Configure / resume watching an existing deployment"),
]

INTRO = "The codelab Scale RL with GKE and Managed Lustre, one screen per step."
OUTRO = """\
F1, F5, F6, F11, F12 and ctrl+n/t/w are left alone: a browser-based Cloud Shell takes them.

Start checks your tools and project. Configure edits env.sh (tokens are hidden and stay in
env.sh, mode 0600, and a Kubernetes Secret). Provision runs the steps in parallel where they
are independent. Job submits the GRPO run. Monitor shows pods and logs. Metrics shows Lustre
throughput beside checkpoint times. Teardown deletes what rltui created, after you type the
cluster name."""
HELP = "\n".join([INTRO, *(f"{k}  {v}" for k, v in KEYS), OUTRO])   # the text, for searching


def help_body() -> Group:
    table = Table(box=None, show_header=False, expand=True, padding=(0, 1, 0, 0))
    table.add_column(no_wrap=True, width=21)
    table.add_column(ratio=1)
    for key, does in KEYS:
        table.add_row(Text(key.replace("`", ""), style="bold"), does)
    return Group(Text(INTRO, style="italic"), Text(""), table, Text(""), Text(OUTRO))


class HelpScreen(ModalScreen[None], DrawsInputNow):
    CSS_PATH = stylesheet(__file__)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "close"), Binding("q", "app.pop_screen", "close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help"):
            yield Static(CLOSE, id="help-close")
            with VerticalScroll(id="help-scroll"):
                yield Static(help_body(), id="help-body")

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()   # the arrow keys scroll at once
