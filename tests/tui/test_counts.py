"""Counts on screen agree with their number ("1 line", "2 lines"): the pod log's state line,
the job log's "paused — N new line(s)" and search matches, read from the rendered screen at
80x24 and 120x40."""

from __future__ import annotations

import pytest
from textual.app import App

from rltui.app import RLTuiApp
from rltui.widgets.logpane import BoundedLog
from rltui.widgets.poddetail import PodLogView
from rltui.words import count
from tests.tui import samples_monitor as S
from tests.tui.conftest import SIZE_IDS, SIZES
from tests.tui.screentext import screen_text


def test_count_agrees_with_its_number():
    assert [count(n, "line") for n in (0, 1, 2, 10_000)] == [
        "0 lines", "1 line", "2 lines", "10,000 lines"]
    assert count(1, "match", "matches") == "1 match" and count(3, "match", "matches") == "3 matches"


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_a_pod_log_of_one_line_says_1_line(size):
    app = App()
    async with app.run_test(size=size) as pilot:
        view = PodLogView("ray-a4-gpu-spot-head-x7k2q")
        await app.push_screen(view)
        view.write("the only line\n")
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "1 line · following" in text and "1 lines" not in text, text
        view.write("a second line\n")
        await pilot.pause(0.3)
        assert "2 lines · following" in screen_text(app)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_job_log_paused_with_one_new_line_says_1_new_line(size):
    app = RLTuiApp(session=None, header=S.HEADER)
    async with app.run_test(size=size) as pilot:
        await app.switch_mode("monitor")
        await pilot.pause()
        app.bus.log_lines.publish([f"line {i}" for i in range(200)])
        await pilot.pause(0.2)
        log = app.screen.query_one(BoundedLog)
        log.focus()
        await pilot.press("pageup")
        assert not log.following
        app.bus.log_lines.publish(["one more"])
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "1 new lines" not in text, text
        if size == (120, 40):   # at 80 columns the pane's bar says "paused — 1 new"
            assert "paused — 1 new line  end: follow" in text, text
