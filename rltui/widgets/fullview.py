"""Any pane full-screen (ctrl+o), where long lines wrap, and copying a pane (ctrl+y).

The pane protocol: a widget that can be opened full-screen or copied defines
`pane_text() -> tuple[str, list[str]] | None` (a title and its lines; None: nothing to show
yet), and may set `PANE_AT_END = True` to open scrolled to its newest line (a log).
`WizardScreen` (screens/base.py) finds the focused widget's nearest such ancestor.

Copying uses `App.copy_to_clipboard`, which writes OSC 52 (`ESC ] 52 ; c ; <base64> BEL`,
textual 8.2.8 app.py) and keeps the text in `app.clipboard`. A terminal that ignores OSC 52
(macOS Terminal, per that method's docstring; tmux unless `set-clipboard` lets it through)
copies nothing, and no reply says so: the notification names the fallback, selecting the
wrapped text here with the terminal's own selection. While an app reports the mouse, most
terminals select with shift held (iTerm2: Option), a terminal feature Textual does not
control (Textual's maintainer in Textualize/rich-cli#53). Textual's own selection works
too: drag, then ctrl+c (Screen's `copy_text`, also OSC 52).

The view is a read-only `TextArea` (soft wrap, its own scrolling and selection): it keeps a
10,000-line log responsive, where one wrapped `Static` would lay out every line at once.
"""

from __future__ import annotations

from typing import Protocol

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, TextArea

SELECT_HINT = "select with the mouse (hold shift; Option in iTerm2)"


class Pane(Protocol):
    def pane_text(self) -> tuple[str, list[str]] | None: ...


def copy_lines(app: App, title: str, lines: list[str], *, in_full_view: bool = False) -> None:
    """Put the lines on the clipboard (OSC 52) and say what was copied and the fallback."""
    app.copy_to_clipboard("\n".join(lines))
    where = (SELECT_HINT if in_full_view
             else f"open it full-screen (ctrl+o) and {SELECT_HINT}")
    app.notify(f"copied {len(lines):,} line{'s' if len(lines) != 1 else ''} of {title} (OSC 52);"
               f" if your terminal ignores OSC 52, {where}", title="Copied", timeout=8)


class FullView(ModalScreen[None]):
    """One pane over the whole terminal: wrapped, scrollable, selectable, copyable."""

    DEFAULT_CSS = """
    FullView { background: $background; }
    FullView > #fullview-title {
        height: 1; padding: 0 1; background: $panel; color: $text; text-style: bold;
    }
    FullView > #fullview-text { height: 1fr; border: none; padding: 0 1; }
    FullView > #fullview-text:focus { border: none; }
    """
    BINDINGS = [
        Binding("escape", "close", "close"),
        Binding("q", "close", "close", show=False),
        # priority: TextArea binds ctrl+y to redo, home and end to the line's ends
        Binding("ctrl+y", "copy", "copy", priority=True),
        Binding("home,ctrl+home", "top", "first line", show=False, priority=True),
        Binding("end,ctrl+end", "bottom", "last line", show=False, priority=True),
    ]

    def __init__(self, title: str, lines: list[str], *, at_end: bool = False) -> None:
        super().__init__()
        self.pane_title = title
        self.lines = lines
        self.at_end = at_end

    def compose(self) -> ComposeResult:
        count = f"{len(self.lines):,} line{'s' if len(self.lines) != 1 else ''}"
        bar = Text.assemble((self.pane_title, "bold"), (f"  {count}, wrapped  ", "dim"),
                            ("esc", "bold"), (" or ", "dim"), ("q", "bold"), (" close · ", "dim"),
                            ("ctrl+y", "bold"), (" copy", "dim"))
        yield Static(bar, id="fullview-title")
        yield TextArea("\n".join(self.lines), read_only=True, soft_wrap=True,
                       show_line_numbers=False, show_cursor=False, id="fullview-text")
        yield Footer()

    @property
    def text_area(self) -> TextArea:
        return self.query_one("#fullview-text", TextArea)

    def on_mount(self) -> None:
        self.text_area.focus()
        if self.at_end:
            self.action_bottom()

    def action_top(self) -> None:
        area = self.text_area
        area.move_cursor((0, 0))
        area.scroll_home(animate=False)

    def action_bottom(self) -> None:
        area = self.text_area
        area.move_cursor((max(0, len(self.lines) - 1), 0))
        self.call_after_refresh(area.scroll_end, animate=False)  # once the wrap is laid out

    def action_close(self) -> None:
        self.dismiss(None)

    def action_copy(self) -> None:
        copy_lines(self.app, self.pane_title, self.lines, in_full_view=True)
