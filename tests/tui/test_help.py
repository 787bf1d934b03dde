"""Help: readable at 80x24 (how to close it and ctrl+q always in view), and complete: every
key a screen binds is listed."""

from __future__ import annotations

import importlib

import pytest

from rltui.app import RLTuiApp
from rltui.screens import SCREENS
from rltui.screens.help import KEYS, HelpScreen
from tests.tui.conftest import SIZE_IDS, SIZES


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_help_snapshot(snap_compare, wizard_app, size):
    app = wizard_app()

    async def run_before(pilot):
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def test_help_says_how_to_close_and_quit_at_80x24_and_closes_on_escape(wizard_app):
    app = wizard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        close = app.screen.query_one("#help-close")
        assert close.region.y >= 0 and close.region.bottom <= 24   # on screen, not scrolled away
        text = str(close.render())
        assert "Escape" in text and "ctrl+q" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


def _keys(bindings) -> set[str]:
    out = set()
    for b in bindings:
        key = b[0] if isinstance(b, tuple) else b.key
        out.update(k.strip() for k in key.split(","))
    return out


def test_every_screen_key_is_in_help():
    """One meaning per key, listed once: a binding no one can find is a binding no one uses."""
    keys = _keys(RLTuiApp.BINDINGS)
    for _mode, _title, module, cls, _key in SCREENS:
        keys |= _keys(getattr(importlib.import_module(f"rltui.screens.{module}"), cls).BINDINGS)
    words = {"question_mark": "?", "left_square_bracket": "[", "right_square_bracket": "]",
             "end": "End"}
    # Tokens of Help's key column ("enter / l", "ctrl+d (pods)", "F2 F3 ..."): a one-letter key
    # must be listed as a key, not found inside some word of the text.
    listed = {token for key_column, _ in KEYS for token in key_column.replace("/", " ").split()}
    missing = [k for k in sorted(keys)
               if not {words.get(k, k), k.upper(), k} & listed]
    assert not missing, f"keys bound but not in Help: {missing}"
