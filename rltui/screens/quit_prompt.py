"""Asked on ctrl+q while quitting would leave something behind: a detached xpk that keeps
running (quitting never stops it; reopening resumes watching it) or forms with unsaved edits.

A modal, not a toast: a timed notice vanished before it was read, and the ctrl+q after it
asked again. It stays until answered; ctrl+q there quits (the app's binding), so pressing it
twice still quits at once.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Button

from .prompt import Prompt


class QuitPrompt(Prompt):
    """Quit (q, ctrl+q) or stay (s, Escape, and the button focused first: the safe answer)."""

    COPY_TITLE = "quit"
    ID = "quit"
    ANSWERS: ClassVar[dict[str, Any]] = {"quit-yes": True, "quit-stay": False}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,s", "answer(False)", "stay"),
        Binding("q", "answer(True)", "quit")]

    def __init__(self, unsaved: list[str], background: str = "") -> None:
        super().__init__()
        self.unsaved = unsaved          # the form screens' titles ("Configure", "Job")
        self.background = background    # what keeps running, e.g. "xpk cluster create (PID …)"

    def text(self) -> Text:
        out = Text("Quit rltui?\n\n", style="bold")
        if self.unsaved:
            out.append(f"• unsaved edits on {' and '.join(self.unsaved)}", style="bold")
            out.append(" (ctrl+s there saves them): quitting drops them\n")
        if self.background:
            out.append(f"• {self.background} keeps running in the background", style="bold")
            out.append(": reopening rltui resumes watching it\n")
        out.append("\nq or ctrl+q: quit · s or Escape: stay", style="dim")
        return out

    def buttons(self) -> list[Button]:
        return [Button("Stay  s / Esc", id="quit-stay", variant="primary", compact=True),
                Button("Quit  q / ctrl+q", id="quit-yes", variant="error", compact=True)]

    def first_button(self) -> str:
        return "quit-stay"

