"""Keys and screens, one modal away."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# rltui

The codelab *Scale RL with GKE and Managed Lustre*, one screen per step.

| key | does |
|---|---|
| F2 F3 F4 F7 F8 F9 F10 | Start, Configure, Provision, Job, Monitor, Metrics, Teardown |
| `[` `]` | previous / next screen (when no input has focus) |
| ctrl+p | every screen and action, by name |
| ? | this help |
| ctrl+q | quit (cloud operations go on; reopening resumes watching) |

F1, F5, F6, F11, F12 and ctrl+n/t/w are left alone: a browser-based Cloud Shell takes them.

**Start** checks your tools and project. **Configure** edits env.sh (tokens are hidden and
stay in env.sh, mode 0600, and a Kubernetes Secret). **Provision** runs the steps in
parallel where they are independent. **Job** submits the GRPO run. **Monitor** shows pods and
logs. **Metrics** shows Lustre throughput beside checkpoint times. **Teardown** deletes what
rltui created, after you type the cluster name.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "app.pop_screen", "close"), Binding("q", "app.pop_screen", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)
