"""A scrollbar drawn straight to strips, and the test both fast paths use to fall back.

Textual's ScrollBar (8.2.8, scrollbar.py) renders a `ScrollBarRender` through Rich: the bar's
segments are styled, split into lines and cropped by the console (widget.py `_Styled`,
visual.py `RichVisual.render_strips`), then each row goes through the styles cache
(_styles_cache.py `render_line`). That was a quarter of a page key's frame for the log pane's
two bars (docs/decisions/wizard-latency.md); the bar moves on every such key. `StripScrollBar`
takes the same segments from the same `render_bar` and makes the rows those steps would make,
kept until the bar changes. Anything those steps would alter (a border, padding, tint,
opacity, a hatch, a content alignment, a renderer with its own drawing) goes to Textual's
path; tests/tui/test_logpane.py compares the rows with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.color import Color as TColor
from textual.filter import LineFilter
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.widget import Widget

from .textual_compat import start_widget

_BACK = Color.parse("#555555")       # ScrollBarRender.__rich_console__'s defaults
_BAR = Color.parse("bright_magenta")


def plain_box(widget: Widget) -> bool:
    """Nothing around or over a widget's rows that the styles cache would draw: no border,
    outline, padding, hatch, tint or opacity, no border title."""
    styles = widget.styles
    return (not any(styles.gutter) and not any(edge for edge, _ in styles.outline)
            and not styles.tint.a and styles.text_opacity == 1.0 and widget.opacity == 1.0
            and (not styles.has_rule("hatch") or styles.hatch == "none")
            and widget.border_title is None
            and widget.border_subtitle is None and not widget.BLANK)


def filtered(widget: Widget, strips: list[Strip], crop: Region) -> list[Strip]:
    """Full-width rows through the app's line filters, cut to `crop`'s columns."""
    _, background = widget.background_colors
    return cut(widget, run_filters(strips, widget.get_line_filters(), background), crop)


def run_filters(strips: list[Strip], filters: Sequence[LineFilter], background: TColor,
                ) -> list[Strip]:
    for line_filter in filters:
        strips = [strip.apply_filter(line_filter, background) for strip in strips]
    return strips


def cut(widget: Widget, strips: list[Strip], crop: Region) -> list[Strip]:
    x1, x2 = crop.column_span
    if (x1, x2) == (0, widget.region.width):
        return strips
    return [strip.crop(x1, x2) for strip in strips]


class StripScrollBar(ScrollBar):
    """Textual's ScrollBar, its rows made without Rich's console or the styles cache."""

    _bar_key: tuple[Any, ...] | None = None
    _bar_rows: list[Strip]  # per instance: set with _bar_key, before the first read (key != None)

    def render_lines(self, crop: Region) -> list[Strip]:
        bar = self.render()
        if (not isinstance(bar, ScrollBarRender) or not isinstance(bar.style, Style)
                or type(bar).__rich_console__ is not ScrollBarRender.__rich_console__
                or self.styles.content_align != ("left", "top") or not plain_box(self)):
            return super().render_lines(crop)
        width, height = self.size
        base = self.visual_style.rich_style
        _, background = self.background_colors
        filters = self.get_line_filters()
        key = (width, height, bar.virtual_size, bar.window_size, bar.position, bar.vertical,
               bar.style, base, type(bar), background, *map(id, filters))
        if key != self._bar_key:  # the rows filtered once: a bar at rest costs a slice
            self._bar_key = key
            self._bar_rows = run_filters(self._rows(bar, width, height, base), filters,
                                         background)
        return cut(self, self._bar_rows[crop.y:crop.bottom], crop)

    @staticmethod
    def _rows(bar: ScrollBarRender, width: int, height: int, base: Style) -> list[Strip]:
        # ScrollBarRender.__rich_console__: the length along the bar, and its thickness
        size, thickness = (height, width) if bar.vertical else (width, height)
        style = bar.style
        assert isinstance(style, Style)
        segments = bar.render_bar(
            size=size, window_size=bar.window_size, virtual_size=bar.virtual_size,
            position=bar.position, vertical=bar.vertical, thickness=thickness,
            back_color=style.bgcolor or _BACK, bar_color=style.color or _BAR).segments
        if base:  # widget.py _Styled: the widget's style under each segment's
            segments = [Segment(text, base + seg_style) for text, seg_style, _ in segments]
        if bar.vertical:  # one segment a row (Segments(new_lines=True))
            rows = [[segment] for segment in segments]
        else:
            rows = [list(line) for line in Segment.split_lines(segments)]
        # render_bar draws exactly `size` cells along and `thickness` across: RichVisual's crop
        # to the width and cut to the height leave its rows as they are
        return [Strip(row, width) for row in rows]


def strip_scrollbar(widget: Widget, vertical: bool) -> ScrollBar:
    """Widget.vertical_scrollbar / horizontal_scrollbar's body (widget.py), with this class."""
    bar = StripScrollBar(vertical=vertical, name="vertical" if vertical else "horizontal",
                         thickness=widget.scrollbar_size_vertical if vertical
                         else widget.scrollbar_size_horizontal)
    bar.display = False
    start_widget(widget, bar)
    return bar
