"""ctrl+o after a search (ctrl+f) in the job log opens the full view at the match, marked,
on the row the pane showed it, not at the newest line; while paused without a search, at the
line the pane showed at its top. Read from the rendered screen at 80x24 and 120x40."""

from __future__ import annotations

import pytest

from rltui.widgets.fullview import FullView, WrappedLines
from rltui.widgets.logpane import BoundedLog
from tests.tui.screentext import region_text
from tests.tui.test_fullview import lines, monitor_with_log


def rows_of(app) -> list[str]:
    return region_text(app, app.screen.query_one(WrappedLines)).splitlines()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_full_view_after_a_search_opens_at_the_match(wizard_app, size):
    app = wizard_app()
    async with app.run_test(size=size) as pilot:
        screen = await monitor_with_log(app, pilot, lines())
        await pilot.press("ctrl+f", *"line 0123", "enter")
        await pilot.pause()
        log = screen.query_one(BoundedLog)
        assert log.current == 123
        row = 123 - int(log.scroll_y)     # where the pane shows the match
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert isinstance(app.screen, FullView)
        shown = rows_of(app)
        assert "line 0123" in shown[row], shown   # the same line, on the same row
        assert not any("line 0299" in r for r in shown), shown   # not the end
        view = app.screen.query_one(WrappedLines)
        style = view._line_strip(123)._segments[0].style   # marked as the pane marks it
        assert style is not None and style.bold


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_full_view_while_paused_opens_at_the_panes_top_line(wizard_app, size):
    app = wizard_app()
    async with app.run_test(size=size) as pilot:
        screen = await monitor_with_log(app, pilot, lines())
        await pilot.press("home")
        await pilot.pause()
        log = screen.query_one(BoundedLog)
        assert not log.following and int(log.scroll_y) == 0
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert rows_of(app)[0].strip().startswith("line 0000"), rows_of(app)
