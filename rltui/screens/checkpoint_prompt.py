"""Asked before a submit whose checkpoint folder already holds checkpoints on the Lustre volume:
resume from the newest step, or start a new run in a fresh folder. Escape cancels the submit.

NeMo-RL resumes from the newest step_N in its checkpoint folder by itself
(nemo_rl/utils/checkpoint.py `get_latest_checkpoint_path`, v0.4.0), so a submit into such a
folder is a resume whether or not it was meant as one: the wizard asks, as `rltui submit`
asks for --resume or --new-folder (plan/jobs.py FolderChoice holds what was found).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Button

from .prompt import Prompt

if TYPE_CHECKING:
    from ..plan.jobs import FolderChoice

RESUME, NEW = "resume", "new"


class CheckpointPrompt(Prompt):
    """Resume (r) or New folder (n); Escape (or Cancel) submits nothing. Dismissed with
    "resume", "new" or None. Resume is off when the newest step already reaches MAX_STEPS."""

    COPY_TITLE = "checkpoint folder"
    ID = "checkpoint"
    ANSWERS: ClassVar[dict[str, Any]] = {"checkpoint-resume": RESUME, "checkpoint-new": NEW}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "answer(None)", "cancel"),
        Binding("r", "answer('resume')", "resume", show=False),
        Binding("n", "answer('new')", "new folder", show=False)]

    def __init__(self, found: FolderChoice) -> None:
        super().__init__()
        self.found = found

    def text(self) -> Text:
        f = self.found
        out = Text.assemble((f.folder, "bold"), " already holds ",
                            (f"{f.count} checkpoint{'s' if f.count != 1 else ''}", "bold"),
                            " on the Lustre volume, the newest ", (f"step_{f.newest}", "bold"), ".\n")
        out.append("NeMo-RL resumes from the newest step_N in its folder: start a new run elsewhere,"
                   " or continue this one?\n\n")
        if f.finished:
            out.append(f"Resume is off: MAX_STEPS is {f.max_steps}, so that run is finished"
                       " (raise MAX_STEPS above to train further).\n", style="yellow")
        out.append("New folder: ").append(f.fresh, style="bold")
        out.append("\n\nr: resume · n: new folder · Escape: submit nothing", style="dim")
        return out

    def buttons(self) -> list[Button]:
        return [Button(f"Resume from step {self.found.newest}  r", id="checkpoint-resume",
                       variant="primary", compact=True, disabled=self.found.finished),
                Button("New folder  n", id="checkpoint-new", compact=True),
                Button("Cancel  Esc", id="checkpoint-cancel", compact=True)]

    def first_button(self) -> str:
        return "checkpoint-new" if self.found.finished else "checkpoint-resume"

    def action_answer(self, answer: str | None) -> None:
        if answer == RESUME and self.found.finished:
            self.notify(f"that run is finished (MAX_STEPS {self.found.max_steps}): raise MAX_STEPS"
                        " to resume it", title="Not resumed", severity="warning")
            return
        self.dismiss(answer)
