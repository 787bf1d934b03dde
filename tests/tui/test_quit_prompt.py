"""ctrl+q with something to lose asks in a modal that stays until answered (a toast vanished
before it was read): what keeps running in the background, which forms hold unsaved edits,
and the keys. q or ctrl+q there quits (ctrl+q twice still quits at once), s or Escape stays.
Without anything to lose ctrl+q quits at once (tests/tui/test_configure.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from rltui.app import RLTuiApp
from tests.tui.conftest import HEADER, SIZE_IDS, SIZES
from tests.tui.samples_configure import codelab_state
from tests.tui.test_configure import open_configure, type_into

XPK = "xpk cluster create (PID 4242, running since 12:01)"


class Backgrounded:
    """A session whose detached xpk still runs (plan/background.py); nothing else is asked."""

    def background(self) -> Any:
        return SimpleNamespace(described=XPK)

    async def close(self) -> None:
        pass


async def edited_with_xpk(app: RLTuiApp, pilot: Any) -> None:
    screen = await open_configure(app, pilot, codelab_state())
    await type_into(pilot, screen, "NUM_NODES", "16")
    app.session = Backgrounded()  # after start-up: the stub has nothing for the boot to ask


def asking(app: RLTuiApp) -> bool:
    return type(app.screen).__name__ == "QuitPrompt"  # rltui/screens/quit_prompt.py


def prompt_text(app: RLTuiApp) -> str:
    assert asking(app), (app.screen, [n.message for n in app._notifications])
    return app.screen.text().plain


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_quit_question_stays_until_answered_and_ctrl_q_there_quits(size):
    app = RLTuiApp(session=None, header=HEADER)
    async with app.run_test(size=size) as pilot:
        await edited_with_xpk(app, pilot)
        await pilot.press("ctrl+q")
        await pilot.pause()
        text = prompt_text(app)
        assert "unsaved edits on Configure" in text and "ctrl+s there saves them" in text
        assert f"{XPK} keeps running in the background" in text
        assert "q or ctrl+q: quit" in text and "s or Escape: stay" in text
        box = app.screen.query_one("#quit-box")
        assert box.region.right <= size[0] and box.region.bottom <= size[1]  # whole at 80x24
        await pilot.pause(0.5)
        assert asking(app) and app.is_running  # no timeout answers it
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running


async def test_escape_or_s_stays_and_q_quits():
    app = RLTuiApp(session=None, header=HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        await edited_with_xpk(app, pilot)
        configure = app.screen
        for stay in ("escape", "s"):
            await pilot.press("ctrl+q")
            await pilot.pause()
            assert asking(app)
            await pilot.press(stay)
            await pilot.pause()
            assert app.screen is configure and app.is_running, stay
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
