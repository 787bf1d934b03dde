"""Monitor's Recent events: their ages move on with the clock, as the pods' AGE does, without
the events being asked for again (no new list is published here)."""

from __future__ import annotations

import pytest

from rltui.screens.monitor import RecentEvents
from rltui.widgets.pods import PodsTable
from tests.tui import samples_monitor as S
from tests.tui.conftest import SIZE_IDS, SIZES
from tests.tui.test_monitor import open_monitor, settle


def screen_lines(app) -> list[str]:
    """The rows the terminal shows now (what each widget last drew, not drawn again here)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_event_ages_tick_like_the_pods_ages(wizard_app, size):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=size) as pilot:
        screen = await open_monitor(app, pilot)
        clock = [S.NOW]
        screen.set_clock(lambda: clock[0])
        for event in S.pod_events():
            app.bus.pod_event.publish(event)
        app.bus.kube_events.publish(S.kube_events())
        await settle(pilot)
        events = screen.query_one(RecentEvents)
        events_text = lambda: "\n".join(  # noqa: E731 - what the terminal shows of the pane
            line for line in screen_lines(app) if "TriggeredScaleUp" in line)
        assert "20s TriggeredScaleUp" in events_text()
        pods_before = [str(c) for c in screen.query_one(PodsTable).get_row_at(0)]

        clock[0] += 90  # a minute and a half later, and no new events
        await pilot.pause(1.2)  # past a one-second tick
        await pilot.pause()
        assert [str(c) for c in screen.query_one(PodsTable).get_row_at(0)] != pods_before
        assert "110s TriggeredScaleUp" in events_text(), events_text()  # kubectl's age: 20 s + 90 s
        assert events.events and len(app.bus.kube_events.history) == 1
