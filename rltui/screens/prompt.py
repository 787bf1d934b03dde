"""A question over the screen that stays until answered: what it is about, then its buttons
(each with its key), in a box with the warning border. The checkpoint folder, unsaved edits
before a run and quitting ask this way; each prompt says what its answers are."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ..widgets.inputframe import DrawsInputNow


class Prompt(ModalScreen[Any], DrawsInputNow):
    """The box and its keys' plumbing: `text()` says the question, `buttons()` are its answers
    (each button's id maps to its answer in ANSWERS; any other, Cancel, is None), `first_button()`
    names the button focused first, `COPY_TITLE` names it for ctrl+y and the full view, and
    `action_answer` dismisses with the answer (a prompt may refuse one first and say why).
    Its box and text are `#{ID}-box` and `#{ID}-text`."""

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
    ID = "prompt"
    ANSWERS: ClassVar[dict[str, Any]] = {}

    def text(self) -> Text:
        raise NotImplementedError

    def buttons(self) -> list[Button]:
        raise NotImplementedError

    def first_button(self) -> str:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with Vertical(id=f"{self.ID}-box"):
            yield Static(self.text(), id=f"{self.ID}-text", classes="prompt-text")
            with Horizontal():
                yield from self.buttons()

    def on_mount(self) -> None:
        self.query_one(f"#{self.first_button()}", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.ANSWERS.get(event.button.id or ""))

    def action_answer(self, answer: Any) -> None:
        self.dismiss(answer)

    def pane_text(self) -> tuple[str, list[str]] | None:
        return self.COPY_TITLE, self.text().plain.splitlines()
