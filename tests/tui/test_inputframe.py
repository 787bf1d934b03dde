"""A key's frame is drawn once the app has taken the key in, not on Textual's next frame tick
(rltui/widgets/inputframe.py); output nobody asked for keeps the tick's cap.

Textual's screen timer is slowed to one tick a second here, so that "drawn on the tick" and
"drawn now" are a second apart, not 16 ms: the frames are counted where Textual hands them to
the terminal (App._display), which a headless app still calls."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
import textual.screen
from textual.screen import Screen

import rltui.screens
import rltui.widgets
from rltui.app import RLTuiApp
from rltui.widgets.inputframe import DrawsInputNow
from rltui.widgets.logpane import BoundedLog
from tests.tui import samples_monitor as S
from tests.tui.conftest import SIZE
from tests.tui.test_logpane import open_monitor, send_key, until

TICK_S = 1.0


@pytest.fixture
def slow_ticks(monkeypatch):
    monkeypatch.setattr(textual.screen, "UPDATE_PERIOD", TICK_S)  # read when a timer is made


def count_frames(app: RLTuiApp, monkeypatch: Any) -> list[float]:
    frames: list[float] = []
    display = app._display

    def counted(screen: Screen, renderable: Any) -> None:
        if renderable is not None:
            frames.append(time.monotonic())
        display(screen, renderable)

    monkeypatch.setattr(app, "_display", counted)
    return frames


@asynccontextmanager
async def monitor_counting_frames(wizard_app: Any, monkeypatch: Any
                                  ) -> AsyncIterator[tuple[RLTuiApp, BoundedLog, list[float]]]:
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        yield app, screen.query_one(BoundedLog), count_frames(app, monkeypatch)


async def a_tick_just_drew(log: BoundedLog, frames: list[float]) -> None:
    """New lines, drawn by the timer on one of its slots: the next slot is then a whole tick
    away. A frame alone does not say that: a timer resumed after a long pause draws at once,
    off its phase, and its next slot may be any fraction of a tick later (textual timer.py
    `Timer._run`). Two frames a tick apart do: the second waited for its slot."""
    previous = None  # our last frame: the next push lands right after it
    for _ in range(5):
        before = len(frames)
        log.push([f"line {len(log.lines) + i}" for i in range(50)])
        assert await until(lambda: len(frames) > before, timeout=3 * TICK_S)
        if previous is not None and frames[-1] - previous >= 0.9 * TICK_S:
            return
        previous = frames[-1]
    raise AssertionError(f"no two frames a tick apart: {frames}")


async def test_a_key_is_drawn_without_waiting_for_the_frame_tick(wizard_app, slow_ticks,
                                                                 monkeypatch):
    async with monitor_counting_frames(wizard_app, monkeypatch) as (app, log, frames):
        log.focus()
        for key, following in (("pageup", False), ("end", True)):
            await a_tick_just_drew(log, frames)
            sent, before = time.monotonic(), len(frames)
            send_key(app, key)
            assert await until(lambda f=following: log.following is f)
            assert await until(lambda: len(frames) > before, timeout=TICK_S / 3), \
                f"{key}: no frame within {TICK_S / 3:.2f} s (it waited for the tick)"
            assert frames[before] - sent < TICK_S / 3


async def test_output_nobody_asked_for_still_waits_for_the_tick(wizard_app, slow_ticks,
                                                                monkeypatch):
    async with monitor_counting_frames(wizard_app, monkeypatch) as (app, log, frames):
        await a_tick_just_drew(log, frames)
        await asyncio.sleep(0.2)  # past the last input's window
        before = len(frames)
        log.push(["one more line"])
        await asyncio.sleep(TICK_S / 3)
        assert len(frames) == before  # on the timer's next slot, a second or two away
        assert await until(lambda: len(frames) > before, timeout=3 * TICK_S)


def test_every_rltui_screen_draws_its_input_at_once():
    """Every screen class in rltui's screen and widget packages, a new module's too."""
    modules = [importlib.import_module(f"{package.__name__}.{info.name}")
               for package in (rltui.screens, rltui.widgets)
               for info in pkgutil.iter_modules(package.__path__)]
    screens = [cls for m in modules for _, cls in inspect.getmembers(m, inspect.isclass)
               if issubclass(cls, Screen) and cls.__module__ == m.__name__
               and cls is not DrawsInputNow]
    assert len(screens) >= 12
    assert [c.__name__ for c in screens if not issubclass(c, DrawsInputNow)] == []
    # and the mixin keeps Textual's rules: a modal whose CSS chain skipped ModalScreen would
    # lose its see-through background (Textual follows a class's first base only)
    for cls in screens:
        textual_bases = {c for c in cls.__mro__ if c.__module__ == "textual.screen"}
        assert textual_bases <= set(cls._css_bases(cls)), cls.__name__
