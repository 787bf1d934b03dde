"""The footer's key hints (widgets/keybar.py): at 80 columns every screen still shows how to get
help and how to quit (Textual's Footer cut "? help" off at 80), the screen's own keys come
before the generic ones, and a click on a hint presses its key."""

from __future__ import annotations

import pytest

from rltui.screens import PAGES
from rltui.screens.help import HelpScreen
from rltui.widgets.chrome import PageBar
from rltui.widgets.keybar import KeyBar


def footer(app) -> str:
    return str(app.screen.query_one(KeyBar).render())


@pytest.mark.parametrize("width", [80, 120])
async def test_every_screen_shows_help_and_quit_whole_at_any_width(wizard_app, width):
    app = wizard_app()
    async with app.run_test(size=(width, 24)) as pilot:
        for mode, _title in PAGES:
            await app.switch_mode(mode)
            await pilot.pause()
            line = footer(app)
            assert len(line) <= width, (mode, line)
            assert line.rstrip().endswith("^p palette"), (mode, line)
            # F1 where an input has focus (Teardown's confirmation): there ? is typed
            assert ("? help" in line or "F1 help" in line) and "^q quit" in line, (mode, line)


async def test_the_screens_own_keys_come_before_full_screen_and_copy(wizard_app):
    app = wizard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.switch_mode("provision")
        await pilot.pause()
        line = footer(app)
        assert line.index("^r run / retry") < line.index("^o full screen"), line


async def test_a_click_on_a_hint_presses_its_key(wizard_app):
    app = wizard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        bar = app.screen.query_one(KeyBar)
        footer(app)   # lays the hints out
        x = next(start for start, _end, hint in bar._spans if hint.key == "question_mark")
        await pilot.click(KeyBar, offset=(x + 1, 0))
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_a_click_on_a_page_in_the_page_bar_opens_that_screen(wizard_app):
    app = wizard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        bar = app.screen.query_one(PageBar)
        x = next(start for start, _end, mode in bar.spans() if mode == "metrics")
        await pilot.click(PageBar, offset=(x + 1, 0))
        await pilot.pause()
        assert app.current_mode == "metrics"
