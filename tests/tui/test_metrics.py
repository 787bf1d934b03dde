"""Metrics screen: Lustre throughput with the saves on one time axis, capacity, steps."""

from __future__ import annotations

import time
from dataclasses import replace

from textual.screen import Screen
from textual.widgets import Static

from rltui.cloud.monitoring import Point
from rltui.widgets.charts import Chart, nice_ticks, rate_unit, time_ticks

from tests.tui import samples_metrics as S
from tests.tui.conftest import SIZE


async def _show_run(app, pilot) -> None:
    """The sample run as the app would publish it: records, saves on arrival, a poll."""
    await app.switch_mode("metrics")
    await pilot.pause()
    screen = app.screen
    for record in S.step_records():
        app.bus.step_record.publish(record)
    for arrived, event in S.checkpoints():
        screen.clock = lambda arrived=arrived: arrived
        app.bus.checkpoint.publish(event)
        await pilot.pause()  # the callback runs on the screen's queue: stamp before the next
    app.bus.metrics.publish(S.metrics())
    await pilot.pause(1.2)  # charts coalesce updates into one redraw a second


def test_metrics_run_snapshot(snap_compare, wizard_app):
    app = wizard_app()

    async def run_before(pilot) -> None:
        await _show_run(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_metrics_empty_snapshot(snap_compare, wizard_app):
    app = wizard_app()

    async def run_before(pilot) -> None:
        await app.switch_mode("metrics")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


async def test_saves_sit_above_their_write_spikes(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await _show_run(app, pilot)
        spec = app.screen.query_one("#write-chart", Chart).drawn_spec
        assert [s.label for s in spec.spans] == ["ckpt 6", "ckpt 12", "ckpt 18"]
        (series,) = spec.series
        points = list(zip(series.xs, series.ys))
        idle = max(y for x, y in points if all(not s.x0 - 60 <= x <= s.x1 + 60 for s in spec.spans))
        for span in spec.spans:  # each save has its spike under it: GB/s, against idle MB/s
            assert max(y for x, y in points if span.x0 <= x <= span.x1) > 30 * idle
        saves = str(app.screen.query_one("#saves", Static).render())
        assert "241.3 s" in saves and "6.16 GB/s" in saves and "?" not in saves


async def test_burst_of_polls_redraws_at_most_once_a_second(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        await pilot.pause()
        chart = app.screen.query_one("#write-chart", Chart)
        base = S.metrics()
        started = time.monotonic()
        for i in range(30):
            write = [Point(p.t, p.value * (i + 1)) for p in base["write"]]
            app.bus.metrics.publish({**base, "write": write})
            await pilot.pause(0.02)
        burst_s = time.monotonic() - started
        await pilot.pause(1.2)
        gaps = [b - a for a, b in zip(chart.build_times, chart.build_times[1:])]
        print(f"\n30 polls in {burst_s:.2f} s -> {chart.builds} redraws, gaps {gaps}")
        assert chart.builds <= 2 + int(burst_s)
        assert all(gap >= 0.95 for gap in gaps)
        # The last poll is on screen (30x the sample's 8.37 GB/s peak).
        assert chart.drawn_spec.yticks[-1][1] == "300"
        assert "peak 251 GB/s" in str(chart.border_title)


async def test_redraw_time_at_60_and_7200_points(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        await pilot.pause()
        chart = app.screen.query_one("#write-chart", Chart)
        width = chart.content_size.width
        timings = {}
        for n, shift in ((60, 0.0), (7200, 0.0), (7200, 1.0)):  # the best of two at 7,200
            builds = chart.builds
            app.bus.metrics.publish(S.dense_metrics(n, shift))
            await pilot.pause(1.1)
            assert chart.builds == builds + 1
            assert chart.drawn_spec.points <= 2 * width
            timings[n] = min(timings.get(n, 1.0), chart.build_seconds)
        print(f"\nredraw at 60 points {timings[60] * 1000:.1f} ms, "
              f"7200 points {timings[7200] * 1000:.1f} ms (width {width})")
        assert timings[7200] < 0.1  # undownsampled: about 110-140 ms


async def test_saves_from_old_log_lines_get_no_marker(wizard_app):
    """Following a finished job replays every save at once: their times are unknown."""
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        await pilot.pause()
        screen = app.screen
        screen.clock = lambda: S.AT - 10
        for _arrived, event in S.checkpoints():
            app.bus.checkpoint.publish(event)
        app.bus.metrics.publish(S.metrics())
        await pilot.pause()
        chart = screen.query_one("#write-chart", Chart)
        assert chart.spec.spans == ()
        saves = str(screen.query_one("#saves", Static).render())
        assert saves.count("?") == 4 and "time unknown" in saves
        # A live save later on gets its marker.
        screen.clock = lambda: S.AT + 400
        app.bus.checkpoint.publish(replace(S.checkpoints()[0][1], step=24, seconds=150.0))
        await pilot.pause()
        assert [s.label for s in chart.spec.spans] == ["ckpt 24"]


async def test_data_published_on_another_screen_is_there_on_return(wizard_app):
    app = wizard_app()
    app.add_mode("elsewhere", Screen)
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        await pilot.pause()
        await app.switch_mode("elsewhere")
        await pilot.pause()
        for record in S.step_records():
            app.bus.step_record.publish(record)
        app.bus.metrics.publish(S.metrics())
        await pilot.pause()
        await app.switch_mode("metrics")
        await pilot.pause(1.1)
        screen = app.screen
        assert screen.query_one("#reward-chart", Chart).drawn_spec.series
        assert "2,851 GiB" in str(screen.query_one("#capacity", Static).render())


async def test_refresh_without_a_session_says_so(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert any("nothing to poll" in n.message for n in app._notifications)


def test_units_and_ticks():
    assert rate_unit(8.37e9) == (1e9, "GB/s")
    assert rate_unit(3.2e8) == (1e6, "MB/s")
    assert [label for _, label in nice_ticks(8.37)] == ["0", "2.5", "5", "7.5", "10"]
    per, ticks = time_ticks(1800)
    assert per == 60 and ticks[0] == (-30, "-30 min") and ticks[-1] == (0, "now")
    per, ticks = time_ticks(90)
    assert per == 1 and ticks[0][1].endswith(" s")
