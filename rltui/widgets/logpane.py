"""The job's log: bounded, written in batches, following until the user scrolls up, searchable.

Textual 8's `Log(max_lines=N)` stops repainting once it prunes while scrolled to the end
(the scroll position no longer changes, so nothing asks for a repaint): `BoundedLog`
repaints after every prune. While the user reads older lines nothing is written (pruning
would move the text under them): new lines wait in a bounded queue until they follow again.

Two races a 20k lines/s burst exposed, and what closes them:
- A flush scheduled with `call_after_refresh` is an `InvokeLater` that Textual forwards to
  `app.screen`, the *active* screen (textual 8.2.8 message_pump.py `_on_invoke_later`); with
  the command palette open that is the palette, whose callback list is dropped when it is
  dismissed. The pane now schedules with `call_next`, which queues on the pane's own message
  pump, so a modal opening or closing cannot lose it.
- Textual's scroll keys animate (`scroll_to(animate=True)`); a write landing before the first
  frame called `scroll_end`, whose `_scroll_to` force-stops the animation (widget.py), and the
  move was lost. Every user scroll towards older lines (Up, PageUp, Home, the wheel, a click
  or drag on the scrollbar) now pauses following *before* it scrolls; `watch_scroll_y` only
  resumes following when the reader reaches the end again.
Long lines scroll sideways (left/right, shift+wheel, the horizontal scrollbar); writes scroll
the y axis only, so the reader's x position stays.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import filterfalse
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.cache import LRUCache
from textual.containers import Horizontal, Vertical
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar, ScrollTo, ScrollUp
from textual.selection import Selection
from textual.strip import Strip
from textual.widgets import Input, Static

from ..joblog import terminal_lines
from ..words import count
from .stripbar import filtered, plain_box, strip_scrollbar
from .textual_compat import cached_scrollbar, process_line, scroll_update

MAX_LINES = 10_000
# Strips by line text: six screens of rows. Each Strip holds its own caches (textual
# strip.py): 1024 of them were ~25,000 objects that every full collection scanned.
STRIP_CACHE = 256


def _widest(lines: list[str], floor: int = 0) -> int:
    """The cells of the widest line, or `floor` if none is wider: `len` for ASCII lines
    without tabs (one cell a character; Log._process_line swaps control codes one for one),
    `cell_len` for the others, and only where it could beat the widest (a character is at
    most two cells wide). The lines are sorted out by C-level filters: End after a paused
    burst writes 10,000 lines at once, and Python passes over them were most of its time
    (docs/decisions/wizard-latency.md)."""
    joined = "".join(lines)
    if joined.isascii() and "\t" not in joined:
        return max(floor, max(map(len, lines)))
    if "\t" in joined:
        odd = [line for line in lines if not line.isascii() or "\t" in line]
        best = max(floor, max((len(line) for line in lines if line.isascii() and "\t" not in line),
                              default=0))
    else:  # the longest first: the rest cannot beat the widest once 2 cells each cannot
        odd = sorted(filterfalse(str.isascii, lines), key=len, reverse=True)
        best = max(floor, max(map(len, filter(str.isascii, lines)), default=0))
    for line in odd:
        if "\t" in line or 2 * len(line) > best:
            best = max(best, cell_len(process_line(line)))
        elif "\t" not in joined:
            break
    return best


def clean_lines(lines: list[str]) -> list[str]:
    """What a terminal shows of each line (joblog.terminal_lines), blank ones as " " (a row of
    the pane). The cloud worker's updates are clean already (rltui/jobfeed.py): a batch with no
    escape or carriage return goes through as it is."""
    return [line or " " for line in terminal_lines(lines)]


class BoundedLog(ScrollView, can_focus=True):
    """The job's lines: at most `max_lines`, following until the reader scrolls up.

    A line-API widget (Textual's own `Log`, textual/widgets/_log.py, is the model: a
    ScrollView whose `render_line` draws one row) that does less per line: lines go into a
    bounded deque (no per-line split, no width thread), the width is taken from `len` for a
    batch of ASCII lines (one cell each) and from `cell_len` only for the others, and rows
    are drawn only when visible, from strips cached by the line's text (Log's cache holds a
    strip only while a selection exists, so it rebuilt every visible strip each frame). A
    write asks for one repaint, which Textual coalesces to one a frame.
    """

    ALLOW_SELECT = True
    COMPONENT_CLASSES: ClassVar[set[str]] = {"log--match", "log--current"}
    DEFAULT_CSS = """
    BoundedLog {
        background: $surface;
        color: $text;
        overflow: scroll;
        &:focus { background-tint: $foreground 5%; }
    }
    BoundedLog > .log--match { background: $warning 40%; }
    BoundedLog > .log--current { background: $accent; color: $text; text-style: bold; }
    """

    def __init__(self, max_lines: int = MAX_LINES, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self._lines: deque[str] = deque(maxlen=max_lines)
        self._width = 0
        self._strips: LRUCache[str, Strip] = LRUCache(STRIP_CACHE)
        self._style: Style | None = None
        self.following = True
        # Told at once when following starts or stops, so the pane's bar changes in the same
        # frame as the scroll (a posted message drew it one frame later).
        self.on_follow: Callable[[], None] = lambda: None
        self.pending: deque[str] = deque(maxlen=max_lines)
        self._pending_width = 0    # the widest line queued since the last follow
        self.unseen = 0            # lines that arrived while paused (the queue keeps the newest)
        self.query_text = ""
        self.current: int | None = None   # the line of the current search match
        self._writing = False

    @property
    def lines(self) -> Sequence[str]:
        return self._lines

    @property
    def line_count(self) -> int:
        return len(self._lines)

    # --- writing ---

    def push(self, lines: list[str]) -> None:
        """Write a batch now when following, else queue it."""
        if not lines:
            return
        if not self.following:
            self.pending.extend(lines)
            self.unseen += len(lines)
            # measured now, off the End key's path (the width only grows, as when written)
            self._pending_width = _widest(lines, self._pending_width)
            return
        self._write(lines)

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> None:
        """Append lines (each one row); to the end when `scroll_end` or following."""
        self._write(list(lines), scroll_end=scroll_end)

    def _write(self, lines: list[str], scroll_end: bool | None = None, width: int = -1) -> None:
        """`width`: the lines' widest, when known (the queue's, measured as it filled)."""
        if not lines:
            return
        removed = len(self._lines) + len(lines) - self.max_lines
        if removed > 0 and self.current is not None:
            self.current = self.current - removed if self.current >= removed else None
        self._lines.extend(lines)
        self._width = _widest(lines, self._width) if width < 0 else max(self._width, width)
        self._resize(Size(self._width, len(self._lines)))
        self._writing = True
        try:
            if self.following if scroll_end is None else scroll_end:
                self.scroll_end(animate=False, immediate=True, x_axis=False)
        finally:
            self._writing = False
        self.refresh()  # the rows under the view moved even when the scroll did not

    def _resize(self, size: Size) -> None:
        """A new virtual size without laying out the screen: Widget.virtual_size is a reactive
        with layout=True (textual widget.py), so each growing write laid out every widget of
        Monitor, the keys waiting behind it (docs/decisions/wizard-latency.md). The pane's own
        region does not change; its scrollbars do (`_scroll_update`, which lays out only when one appears)."""
        if size != self.virtual_size:
            self.set_reactive(BoundedLog.virtual_size, size)
            scroll_update(self, size)

    def clear(self) -> None:
        self._lines.clear()
        self._width = 0
        self._strips.clear()
        self.current = None
        self._resize(Size(0, 0))
        self.refresh()

    # --- drawing ---

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._style = None

    @property
    def _line_style(self) -> Style:
        """`rich_style` walks every ancestor's styles; a frame asks it once per row. Kept until
        a style changes (a theme, a class): notify_style_update."""
        if self._style is None:
            self._style = self.rich_style
        return self._style

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(self._lines)), "\n"

    def render_lines(self, crop: Region) -> list[Strip]:
        """The rows as render_line draws them, through the app's line filters, cut to `crop`:
        what Textual's styles cache makes of them (textual _styles_cache.py: a row of the
        region's width, filtered, cropped) when the pane has no border, outline, padding,
        hatch, tint or opacity; with any of those it is asked. Its per-row work for them was a
        visible part of a key's frame (a page back draws every row;
        docs/decisions/wizard-latency.md)."""
        if not plain_box(self):
            return super().render_lines(crop)
        return filtered(self, self._rows(crop.line_range), crop)

    # Textual's own bars, drawn without Rich's console (widgets/stripbar.py): a page key moves
    # the vertical one, which redrew every row of it through Rich.
    @property
    def vertical_scrollbar(self) -> ScrollBar:
        return cached_scrollbar(self, True, strip_scrollbar)

    @property
    def horizontal_scrollbar(self) -> ScrollBar:
        return cached_scrollbar(self, False, strip_scrollbar)

    def render_line(self, y: int) -> Strip:
        return self._rows(range(y, y + 1))[0]

    def _rows(self, ys: range) -> list[Strip]:
        """Content rows `ys`, each as Textual draws a row of text: the row's segments with the
        offsets a selection reads (Strip.apply_offsets' meta, x advancing by each segment's
        length). The widget's geometry is asked once a frame, not once a row."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        rich_style = self._line_style
        lines = self._lines
        plain = not self.query_text and self.text_selection is None
        from_meta = Style.from_meta
        out = []
        for index in range(scroll_y + ys.start, scroll_y + ys.stop):
            if index >= len(lines):
                out.append(Strip.blank(width, rich_style))
                continue
            raw = lines[index]
            if plain and raw and raw.isprintable() and (raw.isascii() or cell_len(raw) == len(raw)):
                # Most log rows: one style, one cell a character. The segments crop_extend and
                # apply_offsets make of the rendered Text, built at once: a row not seen yet
                # cost a Rich render (a page back in a burst redrew every row).
                visible = raw[scroll_x:scroll_x + width]
                segments = []
                x = scroll_x
                for text in (visible, " " * (width - len(visible))):
                    if text:
                        offset = from_meta({"offset": (x, index)})
                        segments.append(Segment(text, rich_style + offset if rich_style
                                                else offset))
                        x += len(text)
                out.append(Strip(segments, width))
            else:
                strip = self._line_strip(index, rich_style)
                out.append(strip.crop_extend(scroll_x, scroll_x + width, rich_style)
                           .apply_offsets(scroll_x, index))
        return out

    def _line_strip(self, y: int, rich_style: Style) -> Strip:
        raw = self._lines[y]
        selection = self.text_selection
        plain = not self.query_text and selection is None
        if plain and (cached := self._strips.get(raw)) is not None:
            return cached
        line = process_line(raw)
        text = Text(line, no_wrap=True)
        text.stylize(rich_style)
        if selection is not None:
            if (span := selection.get_span(y)) is not None:
                start, end = span
                text.stylize(self.screen.get_component_rich_style("screen--selection"),
                             start, len(text) if end == -1 else end)
        elif self.query_text:
            if y == self.current:
                text.stylize(self.get_component_rich_style("log--current"))
            else:
                text.highlight_words([self.query_text], self.get_component_rich_style(
                    "log--match"), case_sensitive=False)
        strip = Strip(text.render(self.app.console), cell_len(line))
        if plain:
            self._strips[raw] = strip
        return strip

    # --- following ---

    def follow(self) -> None:
        """Back to the end: write what waited, then keep following."""
        changed = not self.following
        self.following = True
        if self.pending:
            queued, self.pending = list(self.pending), deque(maxlen=self.pending.maxlen)
            self._write(queued, width=self._pending_width)
        self._pending_width = 0
        self.unseen = 0
        self.scroll_end(animate=False, immediate=True, x_axis=False)
        if changed:
            self.on_follow()

    def pause(self) -> None:
        if self.following:
            self.following = False
            self.on_follow()

    def action_scroll_end(self) -> None:  # the End key
        self.follow()

    # The user's moves towards older lines pause first, so no write can undo them. The keys
    # move at once (Textual animates them at 50 lines/s: 0.7 s for a page, as `less` never does).

    def _reading_up(self) -> None:
        if self.max_scroll_y > 0 and self.scroll_y > 0:
            self.pause()

    def action_scroll_up(self) -> None:
        self._reading_up()
        self.scroll_up(animate=False)

    def action_page_up(self) -> None:
        self._reading_up()
        self.scroll_page_up(animate=False)

    def action_scroll_home(self) -> None:
        self._reading_up()
        self.scroll_home(animate=False, x_axis=self.scroll_y == 0)

    def action_scroll_down(self) -> None:
        self.scroll_down(animate=False)

    def action_page_down(self) -> None:
        self.scroll_page_down(animate=False)

    def action_scroll_left(self) -> None:
        self.scroll_left(animate=False)

    def action_scroll_right(self) -> None:
        self.scroll_right(animate=False)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        if not (event.ctrl or event.shift):  # with a modifier the wheel scrolls sideways
            self._reading_up()
        # Widget._on_mouse_scroll_up (next in the MRO) scrolls.

    def on_scroll_up(self, _message: ScrollUp) -> None:  # a click above the scrollbar's thumb
        self._reading_up()

    def on_scroll_to(self, message: ScrollTo) -> None:  # the scrollbar's thumb dragged
        if message.y is not None and message.y < self.max_scroll_y:
            self._reading_up()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._writing:
            return
        at_end = round(new_value) >= self.max_scroll_y
        if new_value < old_value and not at_end:
            self.pause()  # a path not covered above (a selection dragged past the top)
        elif at_end and not self.following and self.current is None:
            self.follow()

    # --- search ---

    def find(self, query: str, *, older: bool = True) -> int | None:
        """The next line holding `query` (case-insensitive) from the current match, wrapping."""
        self.query_text = query
        needle = query.lower()
        lines, n = self._lines, len(self._lines)
        if not needle or not n:
            self.current = None
            self.refresh()
            return None
        start = self.current if self.current is not None else (n if older else -1)
        step = -1 if older else 1
        for i in range(1, n + 1):
            y = (start + step * i) % n
            if needle in lines[y].lower():
                self.current = y
                self.pause()
                self.scroll_to(y=max(0, y - self.size.height // 2), animate=False, immediate=True)
                self.refresh()
                return y
        self.current = None
        self.refresh()
        return None

    def count(self, query: str) -> int:
        needle = query.lower()
        return sum(needle in line.lower() for line in self._lines) if needle else 0

    def clear_search(self) -> None:
        self.query_text, self.current = "", None
        self.refresh()


class JobLogPane(Vertical):
    """Title with the follow state, the log, and a search box (ctrl+f) under it."""

    DEFAULT_CSS = """
    JobLogPane { height: 1fr; }
    JobLogPane > #log-bar { height: 1; }
    JobLogPane > #log-bar > #log-title { width: auto; padding: 0 2 0 0; color: $accent; text-style: bold; }
    JobLogPane > #log-bar > #log-state { width: 1fr; text-align: right; }
    JobLogPane > BoundedLog { height: 1fr; }
    JobLogPane > #log-search.hidden { display: none; }
    """

    def __init__(self, max_lines: int = MAX_LINES, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._max_lines = max_lines
        self.received = 0
        self.matches = 0
        self._incoming: list[str] = []
        self._flush_pending = False
        self._state_shown: Text | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="log-bar"):
            yield Static("Job log", id="log-title")
            yield Static("waiting for the job's output", id="log-state")
        log = BoundedLog(self._max_lines, id="job-log")
        log.on_follow = self._show_state
        yield log
        yield Input(placeholder="search: enter older · down newer · esc close",
                    id="log-search", classes="hidden")

    @property
    def log_widget(self) -> BoundedLog:
        return self.query_one(BoundedLog)

    PANE_AT_END = True  # full-screen opens at the newest line

    def pane_text(self) -> tuple[str, list[str]] | None:
        """The pane protocol (widgets/fullview.py): the lines it holds, the queued ones too
        while paused, at most `max_lines`."""
        log = self.log_widget
        lines = [line if line != " " else "" for line in (*log.lines, *log.pending)]
        lines = lines[-self._max_lines:]
        if not lines:
            return None
        return "Job log", lines

    def pane_line(self) -> tuple[int, int] | None:
        """Where full-screen opens (the pane protocol): the search's current match, else the
        top line while paused, as (index in pane_text's lines, its row in the pane); None
        while following (the newest line)."""
        log = self.log_widget
        top = int(log.scroll_y)
        index = log.current if log.current is not None else None if log.following else top
        if index is None:
            return None
        dropped = max(0, len(log.lines) + len(log.pending) - self._max_lines)
        return (index - dropped, max(0, index - top)) if index >= dropped else None

    def write_lines(self, lines: list[str]) -> None:
        """A batch from the app's `log_lines` signal; batches within one frame are written once."""
        self.received += len(lines)
        self._incoming.extend(lines)
        if len(self._incoming) > 2 * self._max_lines:  # a replay: only the newest can show
            del self._incoming[: len(self._incoming) - self._max_lines]
        if not self._flush_pending:  # on this pane's own queue: see the module's docstring
            self._flush_pending = True
            self.call_next(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        batch, self._incoming = self._incoming[-self._max_lines:], []
        self.log_widget.push(clean_lines(batch))  # blank lines as " " (pane_text undoes it)
        self._show_state()

    def follow(self) -> None:
        self.log_widget.follow()
        self._show_state()

    def reset(self) -> None:
        """A new job, or none after teardown: the old job's lines leave the pane."""
        self._incoming = []
        self.received = 0
        log = self.log_widget
        log.clear()
        log.pending.clear()
        log.unseen = 0
        log.clear_search()
        log.follow()
        self._show_state()

    def open_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.remove_class("hidden")
        box.focus()

    def close_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.add_class("hidden")
        self.log_widget.clear_search()
        self.log_widget.focus()
        self._show_state()

    def search(self) -> None:
        """Open the search box; when it is open with a query, go to the next older match."""
        box = self.query_one("#log-search", Input)
        if box.has_focus and box.value:
            self.find(box.value, older=True)
        else:
            self.open_search()

    def find(self, query: str, *, older: bool = True) -> int | None:
        found = self.log_widget.find(query, older=older)
        self.matches = self.log_widget.count(query)
        self._show_state()
        return found

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "log-search":
            event.stop()
            self.log_widget.current = None
            self.find(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "log-search":
            event.stop()
            self.find(event.value, older=True)

    def on_key(self, event: events.Key) -> None:
        box = self.query_one("#log-search", Input)
        if not box.has_focus:
            return
        if event.key == "escape":
            event.stop()
            self.close_search()
        elif event.key in ("up", "down"):
            event.stop()
            self.find(box.value, older=event.key == "up")

    def on_resize(self) -> None:
        self._show_state()

    def _show_state(self) -> None:
        """The bar's right side: the longest wording that fits beside the title (an 80-column
        terminal leaves it about 24 cells), the shortest one cut if none does."""
        state = self.query_one("#log-state", Static)
        title = self.query_one("#log-title", Static).outer_size.width  # laid out with the pane
        room = self.size.width - title if self.size.width and title else 10**6
        variants = self._state_variants()
        text = next((t for t in variants if t.cell_len <= room), variants[-1])
        if text != self._state_shown:  # unchanged while following: no repaint each flush
            self._state_shown = text
            state.update(text, layout=False)  # one row, 1fr wide: its size never changes

    def _state_variants(self) -> list[Text]:
        log = self.log_widget
        if not self.received:
            parts = [[("waiting for the job's output", "dim")], [("waiting for output", "dim")],
                     [("waiting", "dim")]]
        elif log.following:
            parts = [[("following", "bold")]]
        elif log.unseen:
            new, hint = f"paused — {log.unseen:,} new", ("  end: follow", "dim")
            lines = f"paused — {count(log.unseen, 'new line')}"
            parts = [[(lines, "bold reverse"), hint], [(new, "bold reverse"), hint],
                     [(new, "bold reverse")], [("paused", "bold reverse")]]
        else:
            parts = [[("paused", "bold reverse"), ("  end: follow", "dim")],
                     [("paused", "bold reverse")]]
        if log.query_text:
            where = f"line {log.current + 1}" if log.current is not None else "no match"
            matches = self.matches
            found = (f"{count(matches, 'match', 'matches')} · {where}  ", "bold")
            parts = [[found, *variant] for variant in parts]
        return [Text.assemble(*variant) for variant in parts]
