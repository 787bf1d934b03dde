"""Any pane full-screen (ctrl+o), where long lines wrap, and copying a pane (ctrl+y).

The pane protocol: a widget that can be opened full-screen or copied defines
`pane_text() -> tuple[str, list[str]] | None` (a title and its lines; None: nothing to show
yet), and may set `PANE_AT_END = True` to open scrolled to its newest line (a log).
`WizardScreen` (screens/base.py) finds the focused widget's nearest such ancestor. A pane
may also say where to open, `pane_line() -> (line, row) | None`: that line (a search match,
marked) on that row of the view, as the pane showed it.

Copying uses `App.copy_to_clipboard`, which writes OSC 52 (`ESC ] 52 ; c ; <base64> BEL`,
textual 8.2.8 app.py) and keeps the text in `app.clipboard`. Terminals cap an escape
sequence's size and drop a longer one whole (kitty's maintainer in kovidgoyal/kitty#2017;
Termux near 7 KB, termux-app#5324): like gemini-cli (google-gemini/gemini-cli#13471) a copy
keeps the sequence within 100,000 bytes, whole lines, the newest for a log (`PANE_AT_END`)
else the first, and the notification says how many were left out. A terminal that ignores OSC 52
(macOS Terminal, per that method's docstring; tmux unless `set-clipboard` lets it through)
copies nothing, and no reply says so: the notification names the fallback, selecting the
wrapped text here with the terminal's own selection. While an app reports the mouse, most
terminals select with shift held (iTerm2: Option), a terminal feature Textual does not
control (Textual's maintainer in Textualize/rich-cli#53). Textual's own selection works
too: drag, then ctrl+c (Screen's `copy_text`, also OSC 52).

The view, `WrappedLines`, wraps at the column like `less` (not at words) and lazily: a line's
rows are its cell width over the view's width, so laying out 10,000 lines costs one
`cell_len` each, and only the rows on screen are rendered. (A read-only `TextArea` word-wraps
every line up front: 1.2-1.7 s for a 10,000-line log on a loaded 2-core box, with the burst
stalled meanwhile.) Its strips carry selection offsets as `Log` does, so Textual's own
mouse selection and ctrl+c work on the source lines.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Any, ClassVar, Protocol

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip
from textual.widgets import Static

from .inputframe import DrawsInputNow
from .keybar import KeyBar
from .textual_compat import process_line

SELECT_HINT = "select with the mouse (hold shift; Option in iTerm2)"
OSC52_MAX_SEQUENCE = 100_000                                 # bytes, ESC ] 52 ; c ; ... BEL
OSC52_MAX_TEXT = (OSC52_MAX_SEQUENCE - len("\x1b]52;c;\a")) * 3 // 4   # before base64


def fitting(lines: list[str], *, keep_end: bool, limit: int = OSC52_MAX_TEXT) -> list[str]:
    """As many whole lines as fit in `limit` UTF-8 bytes joined by newlines, from the end
    (a log's newest) or from the start."""
    order = reversed(lines) if keep_end else iter(lines)
    kept: list[str] = []
    size = -1
    for line in order:
        size += len(line.encode("utf-8")) + 1
        if size > limit:
            break
        kept.append(line)
    return kept[::-1] if keep_end else kept


class Pane(Protocol):
    def pane_text(self) -> tuple[str, list[str]] | None: ...


def copy_lines(app: App[Any], title: str, lines: list[str], *, keep_end: bool = False,
               in_full_view: bool = False) -> None:
    """Put the lines on the clipboard (OSC 52) and say what was copied and the fallback."""
    kept = fitting(lines, keep_end=keep_end)
    app.copy_to_clipboard("\n".join(kept))
    if len(kept) == len(lines):
        what = f"{len(lines):,} line{'s' if len(lines) != 1 else ''}"
    else:  # a longer OSC 52 sequence is dropped whole by many terminals
        what = f"the {'newest' if keep_end else 'first'} {len(kept):,} of {len(lines):,} lines"
    where = (SELECT_HINT if in_full_view
             else f"open it full-screen (ctrl+o) and {SELECT_HINT}")
    app.notify(f"copied {what} of {title} (OSC 52); if your terminal ignores OSC 52, {where}",
               title="Copied", timeout=8)


class WrappedLines(ScrollView, can_focus=True):
    """Lines wrapped at the view's width, laid out lazily; scroll keys, wheel, selection."""

    ALLOW_SELECT = True
    COMPONENT_CLASSES: ClassVar[set[str]] = {"wrapped--current"}
    DEFAULT_CSS = """
    WrappedLines { overflow-x: hidden; overflow-y: scroll; background: $surface; }
    WrappedLines > .wrapped--current { background: $accent; color: $text; text-style: bold; }
    """

    def __init__(self, lines: list[str], *, at_end: bool = False,
                 at_line: tuple[int, int] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.at_end = at_end                # first shown at the last line
        self.at_line = at_line              # or at this (line, row in view), the line marked
        self.lines = [process_line(line) for line in lines]  # tabs, control codes
        self._cells = [cell_len(line) for line in self.lines]
        self._wrap_width = 0
        self._starts: list[int] = [0]       # the first row of each line
        self._strips: LRUCache[int, Strip] = LRUCache(1024)

    @property
    def rows(self) -> int:
        return self.virtual_size.height

    def _lay_out(self) -> None:
        """Rows per line for the current width; the line at the top stays at the top."""
        width = self.scrollable_content_region.width
        if width <= 0 or width == self._wrap_width:
            return
        first = not self._wrap_width
        top_line = 0 if first else self.line_at(round(self.scroll_y))
        self._wrap_width = width
        heights = [max(1, -(-cells // width)) for cells in self._cells]
        self._starts = [0, *accumulate(heights)]
        self.virtual_size = Size(width, self._starts[-1] if self.lines else 0)
        if first and self.at_line is not None and self.lines:
            line, row = self.at_line
            line = max(0, min(line, len(self.lines) - 1))
            top = self._starts[line] - min(row, max(0, self.scrollable_content_region.height - 1))
            self.scroll_to(y=max(0, top), animate=False, immediate=True)
        elif first and self.at_end:
            self.scroll_end(animate=False, immediate=True)
        else:
            self.scroll_to(y=self._starts[top_line], animate=False, immediate=True)
        self.refresh()

    def on_mount(self) -> None:
        self._lay_out()

    def on_resize(self, _event: events.Resize) -> None:
        self._lay_out()

    def line_at(self, row: int) -> int:
        """The source line drawn on this (virtual) row."""
        return max(0, min(len(self.lines) - 1, bisect_right(self._starts, row) - 1))

    def scroll_to_line(self, index: int) -> None:
        self.scroll_to(y=self._starts[max(0, min(index, len(self.lines)))], animate=False,
                       immediate=True)

    def _line_strip(self, index: int) -> Strip:
        selection = self.text_selection
        if selection is None and index in self._strips:
            return self._strips[index]
        line = self.lines[index]
        text = Text(line, no_wrap=True)
        text.stylize(self.rich_style)
        if self.at_line is not None and index == self.at_line[0]:
            text.stylize(self.get_component_rich_style("wrapped--current"))
        if selection is not None and (span := selection.get_span(index)) is not None:
            start, end = span
            text.stylize(self.screen.get_component_rich_style("screen--selection"), start,
                         len(line) if end == -1 else end)
        strip = Strip(text.render(self.app.console), self._cells[index])
        if selection is None:
            self._strips[index] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        width = self._wrap_width or self.size.width
        row = round(self.scroll_y) + y
        if not self.lines or row >= self.rows:
            return Strip.blank(self.size.width, self.rich_style)
        index = self.line_at(row)
        start = (row - self._starts[index]) * width
        strip = self._line_strip(index).crop_extend(start, start + width, self.rich_style)
        return strip.apply_offsets(start, index)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(self.lines)), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self._strips.clear()
        self.refresh()


class FullView(ModalScreen[None], DrawsInputNow):
    """One pane over the whole terminal: wrapped, scrollable, selectable, copyable."""

    DEFAULT_CSS = """
    FullView { background: $background; }
    FullView > #fullview-title {
        height: 1; padding: 0 1; background: $panel; color: $text; text-style: bold;
    }
    FullView > #fullview-text { height: 1fr; padding: 0 0 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "close"),
        Binding("q", "close", "close", show=False),
        Binding("ctrl+y", "copy", "copy", priority=True),
        Binding("home,ctrl+home,g", "top", "first line", show=False),
        Binding("end,ctrl+end,G", "bottom", "last line", show=False),
    ]

    def __init__(self, title: str, lines: list[str], *, at_end: bool = False,
                 at_line: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.pane_title = title
        self.lines = lines
        self.at_end = at_end
        self.at_line = at_line

    def compose(self) -> ComposeResult:
        count = f"{len(self.lines):,} line{'s' if len(self.lines) != 1 else ''}"
        bar = Text.assemble((self.pane_title, "bold"), (f"  {count}, wrapped  ", "dim"),
                            ("esc", "bold"), (" or ", "dim"), ("q", "bold"), (" close · ", "dim"),
                            ("ctrl+y", "bold"), (" copy", "dim"))
        yield Static(bar, id="fullview-title")
        yield WrappedLines(self.lines, at_end=self.at_end, at_line=self.at_line,
                           id="fullview-text")
        yield KeyBar()

    @property
    def view(self) -> WrappedLines:
        return self.query_one(WrappedLines)

    def on_mount(self) -> None:
        self.view.focus()

    def action_top(self) -> None:
        self.view.scroll_to_line(0)

    def action_bottom(self) -> None:
        self.view.scroll_to_line(len(self.lines))  # past the last row: the view stops at its end

    def action_close(self) -> None:
        self.dismiss(None)

    def action_copy(self) -> None:
        copy_lines(self.app, self.pane_title, self.lines, keep_end=self.at_end,
                   in_full_view=True)
