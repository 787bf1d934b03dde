"""The pane protocol: ctrl+o opens the focused pane full-screen (lines wrap, escape or q
closes), ctrl+y copies it (OSC 52, `app.clipboard`) and says what was copied and the
fallback; both are in the footer and the palette. Snapshots of the job log full-screen at
80x24 and 120x40."""

from __future__ import annotations

import base64
import html
from typing import Any

import pytest
from textual.app import App
from textual.widgets import Input

from rltui.app import RLTuiApp
from rltui.screens.monitor import MonitorScreen
from rltui.widgets.fullview import FullView, WrappedLines
from rltui.widgets.logpane import BoundedLog
from tests.tui import samples_monitor as S

LONG = ("(MegatronPolicyWorker[rank=0] pid=2210, ip=10.8.0.11) saving checkpoint at iteration 4"
        " to /lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1/tmp_step_4/policy/weights"
        " and the optimizer state beside it TAIL-OF-THE-LONG-LINE")


def lines(count: int = 300) -> list[str]:
    out = [f"line {i:04d} ▶ Training policy..." for i in range(count)]
    out[-2] = LONG
    return out


def shown(app: App) -> str:
    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


async def monitor_with_log(app: RLTuiApp, pilot: Any, log_lines: list[str]) -> MonitorScreen:
    await app.switch_mode("monitor")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, MonitorScreen)
    screen.set_clock(lambda: S.NOW)
    app.bus.log_lines.publish(log_lines)
    await pilot.pause()
    screen.query_one(BoundedLog).focus()
    return screen


def palette_command(app: App, title: str) -> Any:
    """The callback of the palette's entry with this title (typing into the palette is
    tested once: each key runs a fuzzy search over every command)."""
    (found,) = [c.callback for c in app.get_system_commands(app.screen) if c.title == title]
    return found


def toasts(app: App) -> list[str]:
    return [n.message for n in app._notifications]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_ctrl_o_opens_the_log_full_screen_wrapped_at_its_newest_line(wizard_app, size):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=size) as pilot:
        screen = await monitor_with_log(app, pilot, lines())
        assert "TAIL-OF-THE-LONG-LINE" not in shown(app)  # cut at the pane's edge
        if size[0] >= 120:   # the footer names both; at 80 the log's own keys go first
            assert "full screen" in shown(app) and "copy" in shown(app)
        await pilot.press("ctrl+o")
        await pilot.pause()
        view = app.screen
        assert isinstance(view, FullView)
        text = shown(app)
        assert "TAIL-OF-THE-LONG-LINE" in text  # wrapped, whole
        assert "line 0299" in text and "line 0000" not in text  # opened at the newest line
        assert "Job log" in text and "300 lines" in text and "esc" in text  # how to close
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("ctrl+o")
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert app.screen is screen


async def test_home_and_end_go_to_the_first_and_last_line(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        await monitor_with_log(app, pilot, lines())
        await pilot.press("ctrl+o")
        await pilot.pause()
        await pilot.press("home")
        await pilot.pause()
        assert "line 0000" in shown(app) and "line 0299" not in shown(app)
        await pilot.press("end")
        await pilot.pause()
        assert "line 0000" not in shown(app) and "line 0299" in shown(app)


async def test_ctrl_y_copies_the_log_and_names_the_fallback(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await monitor_with_log(app, pilot, lines() + ["", "after a blank line"])
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert app.clipboard == "\n".join(lines() + ["", "after a blank line"])
        (said,) = toasts(app)
        assert "copied 302 lines of Job log (OSC 52)" in said and "ctrl+o" in said
        assert app.screen is screen

        app.clear_notifications()
        await pilot.press("ctrl+f")  # from the search box the pane is still the log's
        assert isinstance(app.focused, Input)
        app.copy_to_clipboard("")
        await pilot.press("ctrl+y")
        assert app.clipboard.endswith("after a blank line")


async def test_ctrl_y_in_the_full_view_copies_and_names_the_mouse_fallback(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        await monitor_with_log(app, pilot, lines(20))
        await pilot.press("ctrl+o")
        await pilot.pause()
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert app.clipboard == "\n".join(lines(20))
        (said,) = toasts(app)
        assert "copied 20 lines" in said and "ctrl+o" not in said and "shift" in said


async def test_the_palette_opens_and_copies_the_focused_pane(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await monitor_with_log(app, pilot, lines(50))
        await pilot.press("ctrl+p", *"pane full", "enter")
        await pilot.pause()
        assert isinstance(app.screen, FullView)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        palette_command(app, "Copy the focused pane")()
        await pilot.pause()
        assert app.clipboard == "\n".join(lines(50))


async def test_without_a_pane_or_lines_it_says_so_and_opens_nothing(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await monitor_with_log(app, pilot, [])
        await pilot.press("ctrl+o")  # the log has focus but nothing in it
        await pilot.pause()
        assert app.screen is screen and "nothing to show yet" in toasts(app)[-1]

        screen.set_focus(None)  # no pane has focus: the keys leave the footer and do nothing
        await pilot.pause()
        assert "full screen" not in shown(app) and "ctrl+y" not in shown(app)
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert app.clipboard == "" and len(toasts(app)) == 1
        palette_command(app, "Copy the focused pane")()  # the palette's entry says why
        await pilot.pause()
        assert app.screen is screen and "no text to open" in toasts(app)[-1]
        assert app.clipboard == ""

        screen.query_one(BoundedLog).focus()
        await pilot.pause()
        assert "full screen" in shown(app)


def full_view_snapshot(snap_compare, wizard_app, size: tuple[int, int]) -> bool:
    app = wizard_app(S.HEADER)

    async def run_before(pilot):
        await monitor_with_log(app, pilot, S.log_lines() + [LONG])
        await pilot.press("ctrl+o")
        await pilot.pause()

    return snap_compare(app, terminal_size=size, run_before=run_before)


def test_full_view_80x24(snap_compare, wizard_app):
    assert full_view_snapshot(snap_compare, wizard_app, (80, 24))


def test_full_view_120x40(snap_compare, wizard_app):
    assert full_view_snapshot(snap_compare, wizard_app, (120, 40))


async def test_a_copy_too_long_for_osc_52_keeps_the_newest_lines_and_says_so(wizard_app):
    """10,000 log lines are ~1 MB: past what terminals take in one OSC 52 sequence."""
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        log_lines = [f"{i:05d} {LONG}" for i in range(10_000)]
        await monitor_with_log(app, pilot, log_lines)
        await pilot.press("ctrl+y")
        await pilot.pause()
        copied = app.clipboard.split("\n")
        assert copied[-1] == log_lines[-1] and copied == log_lines[-len(copied):]
        sequence = len("\x1b]52;c;\a") + len(base64.b64encode(app.clipboard.encode()))
        assert 95_000 < sequence <= 100_000
        (said,) = toasts(app)
        assert f"copied the newest {len(copied):,} of 10,000 lines of Job log" in said


async def test_a_mouse_selection_across_wrapped_rows_copies_the_source_lines(wizard_app):
    """Textual's own selection (drag, then ctrl+c): the text comes back as the pane's lines,
    with no break where a line wrapped."""
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(40, 12)) as pilot:
        source = [f"{i:02d} " + "abcdefghij" * 6 for i in range(5)]  # 63 columns: 2 rows each
        await app.push_screen(FullView("t", source))
        await pilot.pause()
        view = app.screen.query_one(WrappedLines)
        assert view.rows == 10
        left = view.content_region.x - view.region.x
        await pilot.mouse_down(view, offset=(left + 3, 0))     # line 0, column 3
        await pilot.hover(view, offset=(left + 5, 3))          # line 1, its second row
        await pilot.mouse_up(view, offset=(left + 5, 3))
        await pilot.pause()
        await pilot.press("ctrl+c")
        first, second = app.clipboard.split("\n")
        assert first == source[0][3:]                         # whole, though it wrapped
        assert second == source[1][: view._wrap_width + 6]  # to the cell under the pointer


async def test_a_resize_wraps_again_and_keeps_the_top_line(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.push_screen(FullView("t", [f"{i:03d} {LONG}" for i in range(100)]))
        await pilot.pause()
        view = app.screen.query_one(WrappedLines)
        view.scroll_to_line(40)
        wide = view.rows
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert view.rows > wide and view.line_at(round(view.scroll_y)) == 40
        assert "040 (MegatronPolicyWorker" in shown(app) and "TAIL-OF-THE-LONG-LINE" in shown(app)
