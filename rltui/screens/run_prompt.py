"""Asked before a Provision run while Configure holds unsaved edits: a run provisions what
env.sh holds, so running then used the old values without a word. Save and run (only while
the form is valid; otherwise it names what to fix), run the saved env.sh, or cancel.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Button

from .prompt import Prompt

SAVE_AND_RUN, RUN_SAVED = "save", "saved"


class RunWithUnsavedEdits(Prompt):
    """Save and run (s), run the saved env.sh (r), or cancel (Escape). Dismissed with
    "save", "saved" or None. Save and run is off while a field has a problem."""

    COPY_TITLE = "run with unsaved edits"
    ID = "run-prompt"
    ANSWERS: ClassVar[dict[str, Any]] = {"run-save": SAVE_AND_RUN, "run-saved": RUN_SAVED}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "answer(None)", "cancel"),
        Binding("s", "answer('save')", "save and run", show=False),
        Binding("r", "answer('saved')", "run the saved env.sh", show=False)]

    def __init__(self, edits: list[str], problems: list[str]) -> None:
        super().__init__()
        self.edits = edits          # the Configure fields that differ from env.sh
        self.problems = problems    # the fields whose values would not save

    def _why_not_saved(self) -> str:
        count = len(self.problems)
        return (f"{count} problem{'s' if count != 1 else ''} on Configure "
                f"({', '.join(self.problems)}): fix {'them' if count != 1 else 'it'} there (F3)")

    def text(self) -> Text:
        count = len(self.edits)
        out = Text.assemble((f"{count} unsaved change{'s' if count != 1 else ''} on Configure", "bold"),
                            f" ({', '.join(self.edits)}).\n",
                            "A run provisions what env.sh holds, not what the form shows.\n\n")
        if self.problems:
            out.append(f"Save and run is off: {self._why_not_saved()}.\n", style="yellow")
        out.append("Run the saved env.sh: the edits stay on Configure, unsaved.\n")
        out.append("\ns: save and run · r: run the saved env.sh · Escape: cancel", style="dim")
        return out

    def buttons(self) -> list[Button]:
        return [Button("Save and run  s", id="run-save", variant="primary", compact=True,
                       disabled=bool(self.problems)),
                Button("Run saved env.sh  r", id="run-saved", compact=True),
                Button("Cancel  Esc", id="run-cancel", compact=True)]

    def first_button(self) -> str:
        # Cancel first while saving is off: running the old values is not the default.
        return "run-cancel" if self.problems else "run-save"

    def action_answer(self, answer: str | None) -> None:
        if answer == SAVE_AND_RUN and self.problems:
            self.notify(f"Not saved: {self._why_not_saved()}", title="Save and run",
                        severity="warning")
            return
        self.dismiss(answer)
