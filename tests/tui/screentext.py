"""The text a terminal would show now, line by line: what the user reads, for assertions on
wording and on cut text (an SVG export splits lines into runs; this keeps each row whole)."""

from __future__ import annotations

import io

from rich.console import Console
from textual.app import App


def screen_lines(app: App) -> list[str]:
    """Each row of the current frame (modals over their screen included), as plain text."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False).splitlines()


def screen_text(app: App) -> str:
    return "\n".join(screen_lines(app))


def region_text(app: App, widget) -> str:
    """What the screen shows inside `widget`'s region (one cell a character: plain text)."""
    region = widget.region
    rows = screen_lines(app)[region.y:region.bottom]
    return "\n".join(row[region.x:region.right] for row in rows)
