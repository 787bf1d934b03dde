"""The pods table's actions as modals: a pod's log (follows while open), its describe (node,
conditions, requests, container states, Events), and the confirmation before deleting it.

Each modal only shows what it is given: the app's workers fetch (read_namespaced_pod_log,
the pod and its Events, the delete) and feed them in. Escape closes every one; each has
`pane_text()` for copying (the pane protocol).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, RichLog, Static

from ..plan.pods import describe_lines
from ..words import count
from .inputframe import DrawsInputNow

LOG_KEEP = 5000      # lines a pod's log view keeps (the oldest go)
FLUSH_S = 0.1        # batched writes: a chatty pod must not cost a repaint per chunk
ANSWER_WITHIN_S = 15.0   # describe's two short requests: no answer by then is none (app.py says so)
RETRY_HINT = "Escape, then d: ask again"

MODAL_CSS = """
{cls} {{ align: center middle; background: $background 60%; }}
{cls} > Vertical {{
    width: 100%; max-width: 140; height: 100%; max-height: 50;
    border: round $accent; background: $surface; padding: 0 1;
}}
{cls} .modal-title {{ height: 1; color: $accent; text-style: bold; }}
{cls} .modal-hint {{ height: 1; color: $text-muted; }}
"""


class PodLogView(ModalScreen[None], DrawsInputNow):
    """The tail of a pod's container log, then what it writes while this is open; lines wrap."""

    DEFAULT_CSS = MODAL_CSS.format(cls="PodLogView") + """
    PodLogView RichLog { height: 1fr; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "close"), Binding("q", "dismiss", "close", show=False),
        Binding("end", "follow", "follow", show=False)]

    def __init__(self, pod: str, on_close: Callable[[], Any] | None = None) -> None:
        super().__init__()
        self.pod = pod
        self.on_close = on_close
        self.lines: list[str] = []      # whole lines received (the newest LOG_KEEP)
        self._partial = ""
        self._pending: list[str] = []
        self.ended = ""   # why the stream closed ("" while it is open)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text.assemble(("Logs  ", "bold"), self.pod), classes="modal-title")
            yield Static("asking the API for the log…", id="pod-log-state", classes="modal-hint")
            yield RichLog(wrap=True, max_lines=LOG_KEEP, markup=False, highlight=False,
                          id="pod-log")
            yield Static("following · Escape closes · End: newest lines", classes="modal-hint")

    def on_mount(self) -> None:
        self.set_interval(FLUSH_S, self._flush)

    def write(self, text: str) -> None:
        """Text from the log stream (whole lines are shown; a partial one waits)."""
        from ..joblog import terminal_line

        parts = (self._partial + text).split("\n")
        self._partial = parts.pop()
        self._pending.extend(terminal_line(p) for p in parts)

    def end(self, error: str = "") -> None:
        """The stream closed: the container ended (""), or the API refused (its words)."""
        from ..joblog import terminal_line

        if self._partial:
            self._pending.append(terminal_line(self._partial))
            self._partial = ""
        self.ended = error or "the container ended: no more output"

    def _flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self.lines = (self.lines + batch)[-LOG_KEEP:]
            log = self.query_one(RichLog)
            for line in batch:
                log.write(Text(line))
        state = f"{count(len(self.lines), 'line')} · " + (self.ended or "following")
        self.query_one("#pod-log-state", Static).update(state)

    def action_follow(self) -> None:
        self.query_one(RichLog).scroll_end(animate=False)

    def pane_text(self) -> tuple[str, list[str]] | None:
        return (f"logs {self.pod}", list(self.lines)) if self.lines else None

    def on_unmount(self) -> None:
        if self.on_close is not None:
            self.on_close()


class PodDescribeView(ModalScreen[None], DrawsInputNow):
    """`kubectl describe pod` for one pod: what the API answered, with its Events, or why
    there is no answer (an error, or none within ANSWER_WITHIN_S) and how to ask again."""

    DEFAULT_CSS = MODAL_CSS.format(cls="PodDescribeView") + """
    PodDescribeView VerticalScroll { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "close"), Binding("q", "dismiss", "close", show=False)]

    def __init__(self, pod: str, now: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.pod = pod
        self.now = now
        self.lines: list[str] = []
        self.error = ""   # why no answer is shown ("" while asking, or once answered)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text.assemble(("Describe  ", "bold"), self.pod), classes="modal-title")
            with VerticalScroll():
                yield Static(self._content(), id="pod-describe")
            yield Static("Escape closes", classes="modal-hint")

    def on_mount(self) -> None:
        self._draw()  # an answer that came between compose and mount

    def _content(self) -> Text:
        if self.lines:
            return Text("\n".join(self.lines))
        if self.error:
            return Text.assemble((f"describe failed: {self.error}", "bold red"), "\n\n",
                                 (RETRY_HINT, "dim"))
        return Text("asking the API…")

    def _draw(self) -> None:
        # The answer can come before this modal mounted (a fast API, a busy wizard): compose
        # and on_mount draw what came, so no is_mounted check may drop it.
        for static in self.query("#pod-describe").results(Static):
            static.update(self._content())

    def show(self, pod: dict[str, Any] | None, events: list[dict[str, Any]]) -> None:
        """The pod as the API returned it (None: it no longer exists) and its Events."""
        if pod is None:
            lines = describe_lines({"metadata": {"name": self.pod}}, events, now=self.now())
            self.lines = [f"pod {self.pod} no longer exists (deleted or preempted)", "",
                          *lines[lines.index("Events:"):]]
        else:
            self.lines = describe_lines(pod, events, now=self.now())
        self.error = ""
        self._draw()

    def failed(self, error: str) -> None:
        """The API refused (its words) or did not answer: said here, with how to ask again."""
        if not self.lines:
            self.error = error
            self._draw()

    def pane_text(self) -> tuple[str, list[str]] | None:
        if self.lines:
            return f"describe {self.pod}", list(self.lines)
        return (f"describe {self.pod}", [f"describe failed: {self.error}", RETRY_HINT]) \
            if self.error else None


class ConfirmDeletePod(ModalScreen[bool], DrawsInputNow):
    """Delete this pod? Names it and what happens next; Cancel is the default."""

    DEFAULT_CSS = """
    ConfirmDeletePod { align: center middle; background: $background 60%; }
    ConfirmDeletePod > Vertical {
        width: 100%; max-width: 72; height: auto; border: round $error; background: $surface;
        padding: 0 1;
    }
    ConfirmDeletePod #confirm-text { height: auto; margin: 0 0 1 0; }
    ConfirmDeletePod Horizontal { height: 3; align-horizontal: right; }
    ConfirmDeletePod Button { margin: 0 0 0 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(False)", "cancel"), Binding("n", "dismiss(False)", "cancel", show=False),
        Binding("y", "dismiss(True)", "delete", show=False)]

    def __init__(self, pod: str, node_type: str = "") -> None:
        super().__init__()
        self.pod = pod
        self.node_type = node_type

    def text(self) -> Text:
        out = Text.assemble(("Delete pod ", "bold"), (self.pod, "bold"), ("?\n\n", "bold"))
        out.append("KubeRay creates a replacement pod at once (the RayCluster still wants it).")
        if self.node_type == "head":
            out.append(" Deleting the head ends every running Ray job and the dashboard"
                       " reconnects to the new head.")
        else:
            out.append(" For a running job, losing a worker is what a preemption looks like:"
                       " its supervisor resubmits it from the newest checkpoint once the cluster"
                       " is whole (a job submitted with --no-recover fails).")
        out.append("\n\ny: delete · n or Escape: keep it", style="dim")
        return out

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.text(), id="confirm-text")
            with Horizontal():
                yield Button("Keep it", id="keep")
                yield Button("Delete", id="delete", variant="error")

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "delete")

    def pane_text(self) -> tuple[str, list[str]] | None:
        return "delete pod", self.text().plain.splitlines()
