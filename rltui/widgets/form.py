"""A validated form field: label, input (or a choice), the message under it, a hint beside it.

Textual only draws a red border when an Input's validators fail; the user also needs to read
why. A `FormField` shows the message itself and stays a plain view: the form decides what
is valid (e.g. with `rltui.config.check_field`) and sets `message`. Used by Configure (env.sh)
and the Job screen's parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Input, Label, Select, Static


class FormField(Widget):
    """One variable of a form. Its id is `field-NAME`; `value` is always a string."""

    DEFAULT_CSS = """
    FormField {
        height: auto;
        width: 1fr;
        padding: 0 0 0 1;
    }
    FormField > .field-row { height: auto; }
    FormField .field-label { width: 20; height: 1; }
    FormField Input, FormField Select { width: 36; }
    FormField .field-hint { width: 1fr; height: auto; padding: 0 0 0 2; color: $text-muted; }
    FormField .field-message { display: none; height: auto; padding: 0 0 0 20; color: $error; }
    FormField.-invalid { border-left: outer $error; padding: 0; }
    FormField.-invalid .field-message { display: block; }
    /* On the field, not the Input: an Input re-marks itself valid when it has no validators. */
    FormField.-invalid Input, FormField.-invalid SelectCurrent { background-tint: $error 20%; }
    /* A class, not :focus-within: see `_follow_focus`. */
    FormField.-focused .field-label { color: $accent; text-style: bold; }
    """

    class Changed(Message):
        """The value changed (typed, chosen, or set by the form)."""

        def __init__(self, field: FormField, value: str) -> None:
            super().__init__()
            self.field, self.value = field, value

        @property
        def control(self) -> FormField:
            return self.field

    message: reactive[str] = reactive("", init=False)
    hint: reactive[str | Text] = reactive("", init=False)

    def __init__(self, name: str, value: str = "", *, label: str | None = None,
                 hint: str | Text = "", choices: Sequence[tuple[str, str]] | None = None,
                 password: bool = False, placeholder: str = "", restrict: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=f"field-{name}", classes=classes)
        self.field_name = name
        self._label = label if label is not None else name
        self._choices = list(choices) if choices is not None else None
        self._initial = value
        self._password, self._placeholder, self._restrict = password, placeholder, restrict
        self.set_reactive(FormField.hint, hint)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="field-row"):
            yield Label(self._label, classes="field-label")
            if self._choices is not None:
                options = self._options(self._initial)
                yield Select(options, value=self._initial or options[0][1], allow_blank=False,
                             compact=True, id=f"select-{self.field_name}")
            else:
                yield Input(self._initial, placeholder=self._placeholder, password=self._password,
                            restrict=self._restrict, compact=True, id=f"input-{self.field_name}")
            yield Static(self._text(self.hint), classes="field-hint")
        yield Static(self._message_text(self.message), classes="field-message")

    def _options(self, value: str) -> list[tuple[str, str]]:
        assert self._choices is not None
        options = list(self._choices)
        if value and value not in {v for _t, v in options}:
            options.append((f"{value} (unknown)", value))  # keep a bad value visible, and flagged
        return options

    @staticmethod
    def _text(value: str | Text) -> Text:
        return value if isinstance(value, Text) else Text(value)

    # --- value ---

    @property
    def value(self) -> str:
        if self._choices is not None:
            selected = self.query_one(Select).value
            return "" if selected is Select.NULL else str(selected)
        return self.query_one(Input).value

    @value.setter
    def value(self, value: str) -> None:
        if self._choices is not None:
            if not value:  # a choice always holds one: "" keeps the current one
                return
            select = self.query_one(Select)
            if value not in {v for _t, v in self._choices}:
                select.set_options(self._options(value))
            select.value = value
        else:
            self.query_one(Input).value = value

    @property
    def valid(self) -> bool:
        return not self.message

    def set_placeholder(self, text: str) -> None:
        if self._choices is None:
            self.query_one(Input).placeholder = text

    def focus_input(self) -> None:
        self.query_one(Select if self._choices is not None else Input).focus()

    # --- rendering ---

    def watch_message(self, message: str) -> None:
        self.set_class(bool(message), "-invalid")
        # query(): a no-op until composed; compose() draws the message set before that
        for static in self.query(".field-message").results(Static):
            static.update(self._message_text(message))

    @staticmethod
    def _message_text(message: str) -> Text:
        return Text(f"✗ {message}" if message else "")

    def watch_hint(self, hint: str | Text) -> None:
        for static in self.query(".field-hint").results(Static):
            static.update(self._text(hint))

    # --- focus: the label of the field being edited stands out, and only that one ---

    def on_descendant_focus(self, _event: events.DescendantFocus) -> None:
        self._follow_focus()

    def on_descendant_blur(self, _event: events.DescendantBlur) -> None:
        self._follow_focus()

    def _follow_focus(self) -> None:
        """Mark the field while focus is within it. The rule `FormField:focus-within
        .field-label` left labels lit after focus had gone: on a focus change Textual restyles
        only the subtree of an ancestor of the focused or blurred widget whose own rules use
        :focus-within (Screen._update_focus_styles, textual 8.2); the label is beside the
        Input, not below it, so it kept whatever style it got while its field had focus (an
        edit restyles the field). A class change restyles the field and all it holds."""
        self.set_class(self.has_focus_within, "-focused")

    # --- events: one Changed per edit, whatever the control ---

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Changed(self, event.value))

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        value = "" if event.value is Select.NULL else str(event.value)
        self.post_message(self.Changed(self, value))

