"""Every private name of Textual, textual-plotext and plotext that rltui touches, and only here.

textual (8.2.8) and textual-plotext (1.0.1, with plotext 5.3.2) are pinned exactly
(pyproject.toml): each function below names the upstream file and function it reaches into at
those versions, and why rltui needs it. `PINNED` lists the same names for the canary test
(tests/unit/test_textual_compat.py), which fails with the name and its file when an upgrade
moves or reshapes one, and which keeps the rest of rltui/ off these names.

Nothing here adds work per log line: `process_line` is Textual's own function, not a wrapper.
rltui's message handlers are public `on_<message>` methods, never Textual's private
`_on_<message>` ones: Textual dispatches either name the same way, one per class along the MRO
(message_pump.py `_get_dispatch_methods`), and the test also keeps rltui's classes from
overriding or setting their Textual bases' private names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from textual.app import App
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Log

if TYPE_CHECKING:
    # textual/_path.py CSSPathType, 8.2.8, a private module's type alias, re-exported for type
    # checking only. Why: App.CSS_PATH is declared with it, and RLTuiApp's CSS_PATH (app.py) is
    # annotated to match. Could be offered upstream as exporting CSSPathType from textual.app.
    from textual._path import CSSPathType as CSSPathType
    from textual.geometry import Size
    from textual.scrollbar import ScrollBar
    from textual_plotext import PlotextPlot
    from textual_plotext.plot import Plot


class Pinned(NamedTuple):
    """One private upstream name: where it lives, and the shape rltui was written against."""

    module: str                          # the module its owner is imported from
    owner: str                           # the class that holds it ("": the module itself)
    name: str                            # the private attribute (or a private module's name)
    upstream: str                        # the file that defines it, at the pinned version
    params: tuple[str, ...] | None = None   # a method: its parameters (self/cls included)
    value: type | None = None            # an instance attribute: the type of its initial value


VERSIONS: Final = {"textual": "8.2.8", "textual-plotext": "1.0.1", "plotext": "5.3.2"}

PINNED: Final[tuple[Pinned, ...]] = (
    Pinned("textual._path", "", "CSSPathType", "textual/_path.py"),
    Pinned("textual.widgets", "Log", "_process_line", "textual/widgets/_log.py", ("cls", "line")),
    Pinned("textual.widget", "Widget", "_scroll_update", "textual/widget.py", ("self", "virtual_size")),
    Pinned("textual.widget", "Widget", "_vertical_scrollbar", "textual/widget.py", value=type(None)),
    Pinned("textual.widget", "Widget", "_horizontal_scrollbar", "textual/widget.py", value=type(None)),
    Pinned("textual.app", "App", "_start_widget", "textual/app.py", ("self", "parent", "widget")),
    Pinned("textual.app", "App", "_screen_stacks", "textual/app.py", value=dict),
    Pinned("textual.app", "App", "_css_update_count", "textual/app.py", value=int),
    Pinned("textual.screen", "Screen", "_css_update_count", "textual/screen.py", value=int),
    Pinned("textual.app", "App", "_batch_count", "textual/app.py", value=int),
    Pinned("textual.widget", "Widget", "_layout_required", "textual/widget.py", value=bool),
    Pinned("textual.widget", "Widget", "_scroll_required", "textual/widget.py", value=bool),
    Pinned("textual.widget", "Widget", "_repaint_required", "textual/widget.py", value=bool),
    Pinned("textual.screen", "Screen", "_dirty_widgets", "textual/screen.py", value=set),
    Pinned("textual.screen", "Screen", "_on_timer_update", "textual/screen.py", ("self",)),
    Pinned("textual_plotext.plot", "Plot", "_set_size", "plotext/_figure.py (_figure_class)",
           ("self", "width", "height")),
    Pinned("textual_plotext", "PlotextPlot", "_get_plotext_theme_name", "textual_plotext/plotext_plot.py",
           ("self", "app_theme_name")),
)
# The private attributes, which no other module of rltui/ may touch.
PINNED_NAMES: Final = frozenset(pinned.name for pinned in PINNED if pinned.name.startswith("_"))


# --- the log pane and the full-screen view (widgets/logpane.py, widgets/fullview.py) ---
# The log prune fix (BoundedLog repaints after a write that prunes, as Log(max_lines) stops
# repainting once it prunes at the end) could be offered upstream as a refresh in
# textual/widgets/_log.py Log._prune_max_lines when it removes lines.

# textual/widgets/_log.py Log._process_line (a classmethod), 8.2.8. Why: a line as Textual's Log
# draws it (tabs expanded, control codes swapped one for one), so BoundedLog and WrappedLines
# measure and draw what Log would. Textual's own bound function, so a call costs what it did.
process_line: Final[Callable[[str], str]] = Log._process_line


def scroll_update(widget: Widget, virtual_size: Size) -> None:
    """Refit the widget's scrollbars to a new virtual size, laying out only if one appears.

    textual/widget.py Widget._scroll_update, 8.2.8. Why: BoundedLog sets virtual_size with
    set_reactive, skipping the screen-wide layout the reactive would ask for on every write,
    and then has its scrollbars follow as Textual's own size watcher would.
    Could be offered upstream as a public ScrollView.set_virtual_size(size, layout=False)."""
    widget._scroll_update(virtual_size)


def cached_scrollbar(widget: Widget, vertical: bool,
                     make: Callable[[Widget, bool], ScrollBar]) -> ScrollBar:
    """The widget's vertical (or horizontal) scrollbar, made by `make` the first time.

    textual/widget.py Widget._vertical_scrollbar / _horizontal_scrollbar (Widget.__init__), the
    cache behind Widget.vertical_scrollbar / horizontal_scrollbar, 8.2.8. Why: BoundedLog's
    bars are StripScrollBars (widgets/stripbar.py), and Textual reads the bars from that cache
    too (Widget._get_virtual_dom), not only through the properties BoundedLog overrides."""
    if vertical:
        if widget._vertical_scrollbar is None:
            widget._vertical_scrollbar = make(widget, True)
        return widget._vertical_scrollbar
    if widget._horizontal_scrollbar is None:
        widget._horizontal_scrollbar = make(widget, False)
    return widget._horizontal_scrollbar


def start_widget(parent: Widget, widget: Widget) -> None:
    """Start `widget`'s message pump as a child of `parent`, without mounting it.

    textual/app.py App._start_widget, 8.2.8. Why: a scrollbar is not mounted but started, as
    Widget.vertical_scrollbar starts its own (widgets/stripbar.py strip_scrollbar)."""
    parent.app._start_widget(parent, widget)


# --- frames drawn on input (widgets/inputframe.py) ---

def frame_pending(screen: Screen[Any]) -> bool:
    """Whether the screen has a frame to draw that its update timer would draw now.

    textual/app.py App._batch_count; textual/widget.py Widget._layout_required,
    _scroll_required, _repaint_required; textual/screen.py Screen._dirty_widgets, 8.2.8: the
    test Screen._on_idle makes before resuming its update timer. Why: DrawsInputNow draws an
    input's frame on the next idle, not on the timer's next tick (16-33 ms later)."""
    return not screen.app._batch_count and bool(
        screen._layout_required or screen._scroll_required or screen._repaint_required
        or screen._dirty_widgets)


def draw_frame(screen: Screen[Any]) -> None:
    """Draw the screen's pending frame now: layout, scroll, dirty widgets, compositor.

    textual/screen.py Screen._on_timer_update, 8.2.8: the update timer's own callback. Why: as
    frame_pending. Could be offered upstream as Screen drawing on idle right after an input
    event (Screen._on_idle), instead of on the update timer's next slot."""
    screen._on_timer_update()


# --- the app's modes (app.py) ---

def screen_stacks(app: App[Any]) -> Mapping[str, list[Screen[Any]]]:
    """Each mode's screen stack, only for the modes built so far (no screen is built here).

    textual/app.py App._screen_stacks, 8.2.8. Why: the app asks whether any mode's screen is
    built yet (the first one skips a CSS parse) and whether a mode's screen is built (a quit
    over unsaved forms); App.get_screen_stack(mode) gives one mode's, raising for a mode not
    built, and nothing public lists the modes built."""
    return app._screen_stacks


def mark_css_current(screen: Screen[Any]) -> None:
    """Mark the screen's CSS as up to date with its app's, so mounting it does not refresh it.

    textual/app.py App._css_update_count, textual/screen.py Screen._css_update_count (compared
    in App._init_mode), 8.2.8. Why: for the first screen, App._init_mode would parse every
    stylesheet a second time, though the app's start-up already has one CSS refresh pending
    for the same frame."""
    screen._css_update_count = screen.app._css_update_count


# --- charts (widgets/charts.py) ---

def set_plot_size(plt: Plot, width: int, height: int) -> None:
    """Set the plotext figure's size after plotsize, as textual-plotext's render does.

    plotext/_figure.py _figure_class._set_size (plotext 5.3.2), typed by textual_plotext's
    plotext/_figure.pyi, 1.0.1. Why: Chart builds its own plot in place of PlotextPlot.render,
    and plotsize alone does not resize a plot (textual-plotext issue 5)."""
    plt._set_size(width, height)


def plotext_theme_name(plot: PlotextPlot, app_theme: str) -> str:
    """The plotext theme PlotextPlot registered for the app's theme (or its own `theme`).

    textual_plotext/plotext_plot.py PlotextPlot._get_plotext_theme_name, 1.0.1. Why: Chart
    builds its own plot in place of PlotextPlot.render, with the theme render would use."""
    return plot._get_plotext_theme_name(app_theme)
