"""A question over the screen that stays until answered: what it is about, then its buttons
(each with its key), in a box with the warning border. The checkpoint folder, unsaved edits
before a run and quitting ask this way; each prompt says what its answers are."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.screen import ModalScreen

from ..widgets.inputframe import DrawsInputNow


class Prompt(ModalScreen[Any], DrawsInputNow):
    """The box and its keys' plumbing: `text()` says the question, `COPY_TITLE` names it for
    ctrl+y and the full view, `action_answer` dismisses with the answer (a prompt may refuse
    one first and say why)."""

    DEFAULT_CSS = """
    Prompt { align: center middle; background: $background 60%; }
    Prompt > Vertical {
        width: 100%; max-width: 76; height: auto; border: round $warning; background: $surface;
        padding: 0 1;
    }
    Prompt .prompt-text { height: auto; margin: 0 0 1 0; }
    Prompt Horizontal { height: auto; }
    Prompt Button { margin: 0 2 0 0; }
    """
    COPY_TITLE = "question"

    def text(self) -> Text:
        raise NotImplementedError

    def action_answer(self, answer: Any) -> None:
        self.dismiss(answer)

    def pane_text(self) -> tuple[str, list[str]] | None:
        return self.COPY_TITLE, self.text().plain.splitlines()
