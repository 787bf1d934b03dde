"""A key's or a click's frame is drawn as soon as the screen has taken it in, not on Textual's
next frame tick.

Textual (8.2.8, screen.py `_on_idle`, `_update_timer`; timer.py `Timer._run`) draws a screen
from a timer at 1/TEXTUAL_FPS (60 by default). After each frame the timer sleeps until the next
slot of its own phase, one to two intervals away (its `skip` branch), and a change waits for it
even when the loop is idle: up to two frame intervals added to a key that lands just after a
frame, which during a log burst is most keys (bench/log_pane.py; docs/decisions/wizard-latency.md).

So for INPUT_WINDOW_S after an input event the screen draws on its next idle, as the timer's
own callback would (`_on_timer_update`: layout, scroll, dirty widgets, compositor), at most
once per MIN_GAP_S. Output at other times (log bursts, polls, a moving mouse) keeps the
timer's cap. The app stamps `input_at` (RLTuiApp.on_event); textual is pinned exactly, as
these are Textual's private names.
"""

from __future__ import annotations

import time
from typing import Any

from textual import events
from textual.screen import Screen

from .textual_compat import draw_frame, frame_pending

INPUT_WINDOW_S = 0.1      # a frame this soon after an input is the input's own
MIN_GAP_S = 1 / 240       # a cap on those frames, for inputs that arrive in a stream

# What a user waits on. Not mouse moves: hover frames keep the timer's cap.
INPUT_EVENTS = (events.Key, events.MouseDown, events.MouseUp, events.MouseScrollDown,
                events.MouseScrollUp, events.MouseScrollLeft, events.MouseScrollRight,
                events.Paste)


class DrawsInputNow(Screen[Any]):
    """The base of WizardScreen, and a second base of each modal: `class X(ModalScreen[T],
    DrawsInputNow)`, in that order, as Textual's CSS (dom.py `_css_bases`) follows only a
    class's first base: put first, it would drop ModalScreen's rules."""

    _input_frame_at = 0.0

    async def on_idle(self, event: events.Idle) -> None:
        # Textual calls each class's handler in MRO order: this one, then Screen's, which
        # starts the timer for whatever is still dirty (nothing, once this drew).
        now = time.monotonic()
        app = self.app
        if (now - getattr(app, "input_at", float("-inf")) < INPUT_WINDOW_S
                and now - self._input_frame_at >= MIN_GAP_S
                and self.is_current and frame_pending(self)):
            self._input_frame_at = now
            draw_frame(self)
