"""The job log under load (issue 12): a 20,000 lines/s feed into the real app, while the user
opens and closes modals and pages up. The pane must keep showing the newest line after a
modal, every PageUp must move the view, and End must resume following."""

from __future__ import annotations

import asyncio
import html
from typing import Any

import pytest
from textual import events
from textual.app import App
from textual.widgets import Log
from textual.scrollbar import ScrollTo, ScrollUp

from rltui.app import RLTuiApp
from rltui.screens.monitor import MonitorScreen
from rltui.joblog import terminal_line as clean
from rltui.widgets.logpane import BoundedLog
from rltui.widgets.stripbar import StripScrollBar, plain_box
from tests.tui import samples_monitor as S
from tests.tui.conftest import SIZE

RATE = 20_000       # lines a second, as in the tmux run
TICK = 0.05         # the feed's timer: 1,000 lines a batch

# What NeMo-RL v0.4.0 prints during a step (tests/tui/samples_monitor.py), each line numbered
# so the newest can be recognised on screen.
TEMPLATES = [line for line in S.log_lines() if line.strip()]


def nemo_line(i: int) -> str:
    frames, _, last = TEMPLATES[i % len(TEMPLATES)].rpartition("\r")  # a progress bar's frames
    return f"{frames}{_}#{i:07d} {last}"


class Feed:
    """Publishes on the app's `log_lines` topic from a timer, as the app's flush does."""

    def __init__(self, app: RLTuiApp, rate: int = RATE, tick: float = TICK) -> None:
        self.app, self.per_tick, self.tick = app, int(rate * tick), tick
        self.sent = 0
        self.timer: Any = None

    def start(self) -> None:
        self.timer = self.app.set_interval(self.tick, self.publish)

    def batch(self) -> list[str]:
        lines = [nemo_line(i) for i in range(self.sent, self.sent + self.per_tick)]
        self.sent += self.per_tick
        return lines

    def publish(self) -> None:
        self.app.bus.log_lines.publish(self.batch())

    def stop(self) -> None:
        self.timer.stop()

    @property
    def newest(self) -> str:
        return nemo_line(self.sent - 1)


def shown(app: App) -> str:
    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


def on_screen(app: App, line: str) -> bool:
    """The line's start is drawn (a long line is cut at the pane's edge)."""
    return clean(line).split(" ", 1)[0] in shown(app)


def send_key(app: App, key: str) -> None:
    """A key as the terminal sends it, without `pilot.press`'s wait for an idle loop (which a
    20k lines/s feed never leaves: each press would take ~1 s)."""
    event = events.Key(key, None)
    event.set_sender(app)
    app._driver.send_message(event)


async def open_monitor(app: RLTuiApp, pilot: Any) -> MonitorScreen:
    await app.switch_mode("monitor")
    await pilot.pause()
    assert isinstance(app.screen, MonitorScreen)
    return app.screen


async def settle(pilot: Any, log: BoundedLog, newest: str, timeout: float = 3.0) -> None:
    """Give the pane a few frames to write what was published (bounded, not a fixed sleep)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end and not (log.lines and log.lines[-1] == clean(newest)):
        await pilot.pause(0.05)
    await pilot.pause()


async def until(check: Any, timeout: float = 2.0) -> bool:
    """Wait for a condition in small steps (a pilot pause waits for an idle loop, which a
    20k lines/s feed never leaves)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        if loop.time() > end:
            return False
        await asyncio.sleep(0.005)
    return True


async def press_as_a_batch_lands(app: RLTuiApp, log: BoundedLog, feed: Feed, key: str) -> None:
    """The key, and a batch written while its scroll is still in flight: the write lands
    before the scroll's first frame (the race the issue measured as ~1 PageUp in 4 lost)."""
    before = log.scroll_y
    send_key(app, key)
    animator = app.animator
    await until(lambda: animator.is_being_animated(log, "scroll_y") or log.scroll_y != before,
                timeout=1.0)
    log.push([clean(line) for line in feed.batch()])  # the pane's own write, now
    await until(lambda: log.scroll_y != before and not animator.is_being_animated(log, "scroll_y"),
                timeout=1.0)


async def test_the_log_keeps_following_a_burst_after_the_palette_and_help_close(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        feed = Feed(app)
        feed.start()
        await asyncio.sleep(0.3)
        for _ in range(3):
            for key in ("ctrl+p", "question_mark"):
                send_key(app, key)
                assert await until(lambda: app.screen is not screen)
                await asyncio.sleep(0.1)  # batches arrive while the modal is up
                send_key(app, "escape")
                assert await until(lambda: app.screen is screen)
                await asyncio.sleep(0.1)
        feed.stop()
        await settle(pilot, log, feed.newest)
        assert log.following
        assert log.lines[-1] == clean(feed.newest), f"stuck at {log.lines[-1]!r} of {feed.sent:,}"
        assert on_screen(app, feed.newest)
        assert feed.sent >= 0.5 * RATE  # the feed really ran at the rate, for > 0.5 s


async def test_every_pageup_during_a_burst_moves_the_view_and_end_resumes(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        log.focus()
        feed = Feed(app)
        for _ in range(10):  # the pane holds 10,000 lines: pages to go up through
            feed.publish()
        await settle(pilot, log, feed.newest)
        assert log.following and log.line_count == 10_000
        feed.start()
        await asyncio.sleep(0.2)
        positions = [log.scroll_y]
        for _ in range(10):
            await press_as_a_batch_lands(app, log, feed, "pageup")
            positions.append(log.scroll_y)
            assert not log.following, f"press {len(positions) - 1} lost: {positions}"
            await asyncio.sleep(0.06)  # and at least one batch from the feed between presses
        assert all(b < a for a, b in zip(positions, positions[1:])), positions
        page = log.scrollable_content_region.height
        assert positions[0] - positions[-1] == 10 * page  # each press: one whole page
        held = log.lines[-1]
        await asyncio.sleep(0.2)
        assert log.lines[-1] == held and log.scroll_y == positions[-1]  # nothing moved under us

        send_key(app, "end")
        assert await until(lambda: log.following)
        await asyncio.sleep(0.2)
        feed.stop()
        await settle(pilot, log, feed.newest)
        assert log.lines[-1] == clean(feed.newest) and log.scroll_y == log.max_scroll_y
        assert on_screen(app, feed.newest)


def wheel_up(log: BoundedLog) -> events.MouseScrollUp:
    return events.MouseScrollUp(log, 10, 5, 0, -1, 0, False, False, False)


async def test_the_wheel_and_the_scrollbar_pause_a_burst_before_they_scroll(wizard_app):
    """What the driver sends for the wheel, and the vertical scrollbar for a click above its
    thumb (ScrollUp) or a drag (ScrollTo), each with a write landing at once behind it."""
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        feed = Feed(app)
        for _ in range(10):
            feed.publish()
        await settle(pilot, log, feed.newest)
        feed.start()
        for name, make in (("wheel", lambda: wheel_up(log)),
                           ("scrollbar click", ScrollUp),
                           ("thumb drag", lambda: ScrollTo(y=log.scroll_y - 500, animate=True))):
            await asyncio.sleep(0.1)
            assert log.following and log.scroll_y == log.max_scroll_y
            before = log.scroll_y
            log.post_message(make())
            await until(lambda: log.scroll_y != before or not log.following, timeout=1.0)
            log.push([clean(line) for line in feed.batch()])
            await until(lambda: log.scroll_y < before
                        and not app.animator.is_being_animated(log, "scroll_y"), timeout=1.0)
            assert not log.following and log.scroll_y < before, name
            send_key(app, "end")
            assert await until(lambda: log.following and log.scroll_y == log.max_scroll_y), name
        feed.stop()


async def test_long_lines_scroll_sideways_and_writes_keep_the_column(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        log.focus()
        feed = Feed(app)
        feed.start()
        await until(lambda: log.virtual_size.width > log.scrollable_content_region.width)
        assert log.show_horizontal_scrollbar  # the checkpoint path is ~150 columns
        for _ in range(12):
            send_key(app, "right")
            await asyncio.sleep(0.02)
        assert await until(lambda: log.scroll_x == 12)
        await asyncio.sleep(0.3)  # six batches written while following
        assert log.scroll_x == 12 and log.following
        feed.stop()
        await settle(pilot, log, feed.newest)
        newest = log.lines[-1]
        assert newest[12:30] in shown(app) and newest[:12] not in shown(app)
        send_key(app, "left")
        assert await until(lambda: log.scroll_x == 11)


async def test_a_monitor_opened_after_a_long_burst_replays_only_the_newest_lines(wizard_app):
    """The log topic keeps lines, not batches (issue 13: 2,000 batches of a burst held all of
    a million lines): a Monitor built later gets the newest 10,000 and ends on the last one."""
    from rltui.app import LOG_REPLAY_LINES

    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        feed = Feed(app, tick=1.0)  # 20,000-line batches, published by hand
        for _ in range(3):
            feed.publish()
        history = app.bus.log_lines.history
        assert sum(map(len, history)) <= LOG_REPLAY_LINES
        assert history[-1][-1] == feed.newest
        await open_monitor(app, pilot)
        log = app.screen.query_one(BoundedLog)
        await settle(pilot, log, feed.newest)
        assert log.lines[-1] == clean(feed.newest)
        assert log.following
        assert not any(clean(nemo_line(0)) == line for line in log.lines)  # the first burst left


async def test_a_plain_row_is_drawn_as_the_rendered_line_would_be(wizard_app):
    """BoundedLog.render_line builds a plain row's segments itself (no Rich render): the same
    segments, styles and offsets as the rendered, cropped and extended line, at every sideways
    position; a row with a tab, a wide or a combining character still goes through Rich."""
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        lines = [nemo_line(i) for i in range(40)] + ["x" * 200, "", "tab\there", "wide 数字 line",
                                                     "  • generation: 20.00s", "▶ Training policy...",
                                                     "📊 Using log directory", "e\u0301 combined"]
        log.write_lines(lines, scroll_end=False)
        await pilot.pause()
        width, style = log.size.width, log._line_style
        checked: set[str] = set()
        for scroll_x, scroll_y in ((x, y) for x in (0, 7, 150, 199, 250) for y in (0, log.max_scroll_y)):
            log.scroll_to(x=scroll_x, y=scroll_y, animate=False, immediate=True)
            await pilot.pause()
            x, top = log.scroll_offset
            for y in range(log.size.height):
                index = top + y
                if index >= len(log.lines):
                    break
                drawn = log.render_line(y)
                rendered = log._line_strip(index, style).crop_extend(x, x + width, style) \
                    .apply_offsets(x, index)
                assert list(drawn) == list(rendered), (scroll_x, log.lines[index])
                checked.add(log.lines[index][:4])
        assert {"x" * 4, "", "tab\t", "wide", "  • ", "▶ Tr", "📊 Us", "e\u0301 c"} <= checked


@pytest.mark.parametrize("no_color", [False, True])
async def test_the_pane_draws_its_rows_as_textuals_styles_cache_would(wizard_app, monkeypatch,
                                                                      no_color):
    """BoundedLog.render_lines skips the styles cache's per-row work when the pane has nothing
    it would add: the same strips for every crop the compositor asks, focused or not, with a
    search's highlights, scrolled sideways, through the app's line filters (NO_COLOR adds
    one); with padding the styles cache draws them."""
    from textual.geometry import Region

    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    app = wizard_app(S.HEADER)
    assert app.no_color == no_color
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        log.write_lines([nemo_line(i) for i in range(60)] + ["x" * 200, "wide 数字 line"],
                        scroll_end=False)
        await pilot.pause()

        def same_as_styles_cache(label: str) -> None:
            width, height = log.region.size
            for crop in (Region(0, 0, width, height), Region(3, 2, width - 10, 5),
                         Region(0, height - 1, width, 1)):
                log._styles_cache.clear()
                want = log._styles_cache.render_widget(log, crop)
                got = log.render_lines(crop)
                assert [(list(s), s.cell_length) for s in got] == \
                    [(list(s), s.cell_length) for s in want], (label, crop)

        assert plain_box(log)
        same_as_styles_cache("top")
        log.focus()
        log.scroll_to(x=9, y=log.max_scroll_y, animate=False, immediate=True)
        await pilot.pause()
        same_as_styles_cache("focused, scrolled")
        log.query_text = "step"
        log.refresh()
        same_as_styles_cache("a search")
        log.styles.padding = (0, 1)
        await pilot.pause()
        assert not plain_box(log)
        same_as_styles_cache("padded")


@pytest.mark.parametrize("no_color", [False, True])
async def test_the_pane_draws_its_scrollbars_as_textuals_scrollbar_would(wizard_app, monkeypatch,
                                                                         no_color):
    """StripScrollBar makes the rows Textual's ScrollBar makes through Rich and the styles
    cache (widgets/stripbar.py): both bars, at the top, the middle and the end, hovered and
    grabbed, the pane focused, through the app's line filters, for whole and partial crops;
    with a tint Textual's path draws them."""
    from textual.geometry import Offset, Region

    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        log.write_lines([nemo_line(i) for i in range(300)] + ["x" * 300], scroll_end=False)
        await pilot.pause()
        bars = [log.vertical_scrollbar, log.horizontal_scrollbar]
        assert all(isinstance(bar, StripScrollBar) and bar.display for bar in bars)

        def same_as_textual(label: str) -> None:
            for bar in bars:
                width, height = bar.region.size
                for crop in (Region(0, 0, width, height), Region(0, 1, width, height // 2),
                             Region(0, 0, 1, 1)):
                    bar.refresh()  # Textual's path renders again: no cached visual or rows
                    want = bar._styles_cache.render_widget(bar, crop)
                    got = bar.render_lines(crop)
                    assert [(list(s), s.cell_length) for s in got] == \
                        [(list(s), s.cell_length) for s in want], (label, bar.vertical, crop)

        same_as_textual("top")
        for y, x in ((log.max_scroll_y // 2, 7), (log.max_scroll_y, log.max_scroll_x)):
            log.scroll_to(x=x, y=y, animate=False, immediate=True)
            await pilot.pause()
            same_as_textual(f"at {x},{y}")
        log.focus()
        await pilot.pause()
        same_as_textual("focused")
        for bar in bars:
            bar.mouse_over = True
        same_as_textual("hovered")
        for bar in bars:
            bar.mouse_over, bar.grabbed = False, Offset(0, 0)
        same_as_textual("grabbed")
        for bar in bars:
            bar.grabbed = None
            bar.styles.tint = "red 40%"
        await pilot.pause()
        assert not any(plain_box(bar) for bar in bars)
        same_as_textual("tinted")


async def test_lines_queued_while_paused_widen_the_pane_when_it_follows_again(wizard_app):
    """The queue's widest line is measured as lines wait (off the End key's path): after End
    the sideways scroll reaches the end of the longest line that waited, wide ones too."""
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        log.push([nemo_line(i) for i in range(100)])
        await pilot.pause()
        narrow = log.virtual_size.width
        log.pause()
        log.push(["x" * 250, "short"])
        log.push(["数字" * 75])  # 150 characters, 300 cells
        await pilot.pause()
        assert log.virtual_size.width == narrow  # nothing written while paused
        log.follow()
        await pilot.pause()
        assert log.virtual_size.width == 300
        log.scroll_to(x=log.max_scroll_x, animate=False, immediate=True)
        await pilot.pause()
        assert log.scroll_x + log.scrollable_content_region.width == 300


def test_the_pane_is_as_wide_as_its_widest_line_in_cells():
    """The sideways scroll ends at the widest line's last cell: a tab expands, a wide character
    takes two cells, a combining one none; batches without such lines are measured as well."""
    from rich.cells import cell_len

    from rltui.widgets.logpane import _widest

    def cells(line: str) -> int:
        return cell_len(Log._process_line(line))

    batches = [
        ["plain", "x" * 80],
        ["wide 数字数字数字数字数字数字数字数字数字数字", "x" * 30],
        ["e\u0301" * 50, "y" * 40],      # 100 characters, 50 cells
        ["tab\there", "\t\t\tx"],
        ["📊 Using log directory", "•" * 10, "\t数字"],
        [" "],
    ]
    for batch in batches:
        assert _widest(batch) == max(map(cells, batch)), batch
        assert _widest(batch, floor=500) == 500
