"""Monitor: pods from a watch beside the job's log. Snapshots of a running job with a preempted
worker and of the empty state; pilot tests of the pods table following watch events, the log
following / pausing / resuming, search, the prune fix, and a burst of output."""

from __future__ import annotations

import asyncio
import html
import resource
import time
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Input

from rltui.app import RLTuiApp
from rltui.plan.pods import KubeEvent
from rltui.screens.monitor import MonitorScreen
from rltui.seam import JobStatusUpdate
from rltui.widgets.jobstrip import JobStrip
from rltui.widgets.logpane import BoundedLog
from rltui.widgets.pods import PodsTable
from tests.tui import samples_monitor as S
from tests.tui.conftest import SIZE


async def open_monitor(app: RLTuiApp, pilot: Any) -> MonitorScreen:
    await app.switch_mode("monitor")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, MonitorScreen)
    screen.set_clock(lambda: S.NOW)
    return screen


def publish_all(app: RLTuiApp) -> None:
    for event in S.pod_events():
        app.bus.pod_event.publish(event)
    app.bus.log_lines.publish(S.log_lines())
    app.bus.job_status.publish(S.JOB_STATUS)
    app.bus.step_records.publish(list(S.step_records()))
    app.bus.checkpoints.publish(list(S.checkpoints()))
    app.bus.saves.publish(S.saves())
    app.bus.kube_events.publish(S.kube_events())


async def settle(pilot: Any) -> None:
    """Past the table's batched redraw (50 ms) and the frame after it."""
    await pilot.pause(0.1)
    await pilot.pause()


def phases(screen: MonitorScreen) -> dict[str, str]:
    return {row.name: row.phase for row in screen.query_one(PodsTable).pod_rows()}


def shown(app: App) -> str:
    """The text of the frame the terminal would show now (an SVG export, unescaped)."""
    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


# --- snapshots: empty, running with a preempted worker, after the recovery; 80x24 and 120x40 ---

SIZES = {"80x24": (80, 24), "120x40": (120, 40)}


def publish_recovery(app: RLTuiApp) -> None:
    app.bus.raycluster.publish(S.raycluster())
    for event in S.recovered_events():
        app.bus.pod_event.publish(event)
    app.bus.dashboard.publish(S.DASHBOARD)


@pytest.mark.parametrize("size", SIZES)
def test_monitor_running_with_preempted_worker(snap_compare, wizard_app, size):
    app = wizard_app(S.HEADER)

    async def run_before(pilot):
        await open_monitor(app, pilot)
        app.bus.raycluster.publish(S.raycluster())
        publish_all(app)
        await pilot.pause(0.1)
        app.clear_notifications()  # the toast is checked in a pilot test; here, the screen
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_monitor_after_the_recovery(snap_compare, wizard_app, size):
    app = wizard_app(S.HEADER)

    async def run_before(pilot):
        await open_monitor(app, pilot)
        publish_all(app)
        publish_recovery(app)
        await pilot.pause(0.1)
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_monitor_empty(snap_compare, wizard_app, size):
    app = wizard_app(S.HEADER)

    async def run_before(pilot):
        await open_monitor(app, pilot)

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


# --- pods ---

async def test_pods_follow_the_watch_and_flag_a_preempted_worker(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        scheduled = S.worker(0, age_s=65)
        name = scheduled["metadata"]["name"]
        pending = S.pod(name, "worker", None, phase="Pending", age_s=5)  # not on a node yet
        app.bus.pod_event.publish(KubeEvent("ADDED", S.head()))
        app.bus.pod_event.publish(KubeEvent("ADDED", pending))
        app.bus.pod_event.publish(KubeEvent("SYNCED", {"count": 2}))
        await settle(pilot)
        assert phases(screen) == {S.head()["metadata"]["name"]: "Running", name: "Pending"}

        app.bus.pod_event.publish(KubeEvent("MODIFIED", scheduled))
        await settle(pilot)
        assert phases(screen)[name] == "Running"
        table = screen.query_one(PodsTable)
        assert [str(c) for c in table.get_row(name)] == [
            "gpu-worker-group-worker-2b9xk", "worker", S.node(0), "Running", "8", "100", "0", "65s"]

        # Deleted the ordinary way (Terminating first): the row goes.
        other = S.worker(1, deleting=True)
        app.bus.pod_event.publish(KubeEvent("ADDED", S.worker(1)))
        app.bus.pod_event.publish(KubeEvent("DELETED", other))
        await settle(pilot)
        assert other["metadata"]["name"] not in phases(screen)
        assert not app._notifications

        # Deleted without ever terminating (pod GC after a Spot preemption): flagged, kept.
        app.bus.pod_event.publish(KubeEvent("DELETED", scheduled))
        app.bus.pod_event.publish(KubeEvent("DELETED", scheduled))  # a relist repeats it
        await settle(pilot)
        assert phases(screen)[name] == "PREEMPTED"
        notes = list(app._notifications)
        assert len(notes) == 1 and notes[0].severity == "error"
        assert name in notes[0].message and notes[0].title == "Worker preempted"
        assert "1 PREEMPTED" in str(screen.query_one("#pods-state").render())


async def test_a_monitor_opened_late_shows_what_came_before(wizard_app):
    """Modes are built on first visit: the bus replays the watch, the log and the steps."""
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(300):  # a long watch: the same pods modified over and over
            for event in S.pod_events()[:9]:
                app.bus.pod_event.publish(KubeEvent("MODIFIED", event.obj))
        publish_all(app)
        for start in range(0, 30_000, 2000):
            app.bus.log_lines.publish(numbered(start, 2000))
        t0 = time.perf_counter()
        screen = await open_monitor(app, pilot)
        await settle(pilot)
        opened_s = time.perf_counter() - t0
        assert phases(screen)[S.PREEMPTED] == "PREEMPTED" and len(phases(screen)) == 9
        log = screen.query_one(BoundedLog)
        assert log.line_count == 10_000 and log.lines[-1] == "line 029999"
        assert screen.query_one(JobStrip).summary()["step"] == (5, 20)
        # A guard against a replay that walks every event ever published, not a speed figure
        # (2-3 s alone here; two xdist workers on two cores double it): bench/log_pane.py measures.
        assert opened_s < 10.0, f"opening took {opened_s:.1f} s"


async def test_pod_ages_move_with_the_clock(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        app.bus.pod_event.publish(KubeEvent("ADDED", S.worker(2, age_s=100)))
        await settle(pilot)
        name = S.worker(2)["metadata"]["name"]
        table = screen.query_one(PodsTable)
        assert str(table.get_row(name)[-1]) == "100s"
        screen.set_clock(lambda: S.NOW + 3 * 3600)
        await settle(pilot)
        assert str(table.get_row(name)[-1]) == "3h1m"


# --- the log pane ---

def numbered(start: int, count: int) -> list[str]:
    return [f"line {i:06d}" for i in range(start, start + count)]


async def test_log_follows_pauses_when_scrolled_up_and_resumes_at_the_end(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        app.bus.log_lines.publish(numbered(0, 300))
        await pilot.pause()
        assert log.following and log.scroll_y == log.max_scroll_y > 0
        assert "line 000299" in shown(app)

        log.focus()
        await pilot.press("pageup")
        await pilot.pause()
        assert not log.following
        top = log.scroll_y
        app.bus.log_lines.publish(numbered(300, 40))
        await pilot.pause()
        assert log.line_count == 300 and log.scroll_y == top  # nothing moves under the reader
        state = str(screen.query_one("#log-state").render())
        assert "paused — 40 new lines" in state

        await pilot.press("end")
        await pilot.pause()
        assert log.following and log.line_count == 340 and log.scroll_y == log.max_scroll_y
        assert "line 000339" in shown(app)
        app.bus.log_lines.publish(numbered(340, 5))
        await pilot.pause()
        assert "line 000344" in shown(app)


@pytest.mark.parametrize("size, waiting, paused", [
    ("80x24", "waiting for output", "paused — 40 new"),
    ("120x40", "waiting for the job's output", "paused — 40 new lines  end: follow"),
])
async def test_the_log_bar_says_its_state_in_full_in_the_room_it_has(wizard_app, size, waiting,
                                                                      paused):
    """The bar's right side takes the longest wording that fits beside "Job log": at 80
    columns "waiting for the job's output" was cut to "waiting for the job's"."""
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZES[size]) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        bar = screen.query_one("#log-bar")

        def says() -> str:
            row = app.screen._compositor.render_strips()[bar.region.y]
            return "".join(seg.text for seg in row).strip()

        assert says().endswith(waiting)
        app.bus.log_lines.publish(numbered(0, 300))
        await pilot.pause()
        assert says().endswith("following")
        log.focus()
        await pilot.press("pageup")
        app.bus.log_lines.publish(numbered(300, 40))
        await pilot.pause()
        assert says().endswith(paused)


async def test_log_cleans_colour_codes_and_progress_bars_and_keeps_blank_lines(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        app.bus.log_lines.publish(["\x1b[36m(raylet)\x1b[0m hello", "", "0%\r50%\r100% done\r"])
        await pilot.pause()
        assert list(screen.query_one(BoundedLog).lines) == ["(raylet) hello", " ", "100% done"]


async def test_search_finds_a_line_and_steps_to_older_matches(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        lines = numbered(0, 500)
        lines[120] = "Saving checkpoint for step 2..."
        lines[410] = "Saving checkpoint for step 4..."
        app.bus.log_lines.publish(lines)
        await pilot.pause()
        log = screen.query_one(BoundedLog)

        await pilot.press("ctrl+f")
        box = screen.query_one("#log-search", Input)
        assert box.display and box.has_focus
        await pilot.press(*"checkpoint")
        await pilot.pause()
        assert log.current == 410 and not log.following  # the newest match first
        assert log.scroll_y <= 410 < log.scroll_y + log.size.height
        assert "2 matches" in str(screen.query_one("#log-state").render())

        await pilot.press("enter")
        await pilot.pause()
        assert log.current == 120 and log.scroll_y <= 120 < log.scroll_y + log.size.height
        await pilot.press("ctrl+f")  # ctrl+f again: the next older match, wrapping
        assert log.current == 410
        await pilot.press("down")
        assert log.current == 120

        await pilot.press("escape")
        await pilot.pause()
        assert not box.display and log.has_focus and log.current is None
        await pilot.press("ctrl+e")  # follow again
        assert log.following and log.scroll_y == log.max_scroll_y


class PruneApp(App):
    def compose(self) -> ComposeResult:
        yield BoundedLog(max_lines=50)


async def test_the_prune_fix_keeps_repainting_past_max_lines():
    """Textual's Log stops repainting once it prunes while at the end (auto-scroll finds
    nothing to scroll, so nothing asks for a frame): the screen must move on, by either path."""
    app = PruneApp()
    async with app.run_test(size=(60, 10)) as pilot:
        log = app.query_one(BoundedLog)
        for start in range(0, 400, 20):
            if start % 40:
                log.push(numbered(start, 20))            # the pane's path
            else:
                log.write_lines(numbered(start, 20), scroll_end=True)  # Log's auto-scroll path
            await pilot.pause()
            assert f"line {start + 19:06d}" in shown(app), f"frozen after {start + 20} lines"
        assert log.line_count == 50 and log.lines[0] == "line 000350"


async def test_job_strip_shows_status_step_reward_change_and_step_time(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        publish_all(app)
        await pilot.pause()
        s = screen.query_one(JobStrip).summary()
        assert s["status"] == "RUNNING" and s["step"] == (5, 20)
        assert s["reward"] == 0.298 and round(s["reward_delta"], 3) == 0.047
        assert s["step_time_s"] == 396.41
        text = str(screen.query_one(JobStrip).render())
        assert "step 5/20" in text and "reward 0.298 (+0.047)" in text and "396.4 s/step" in text


async def test_a_burst_of_output_stays_bounded_and_the_keys_answer(wizard_app):
    """20k lines/s for 2.5 s: the pane keeps 10k lines, shows the newest, and F7 still works."""
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        log = screen.query_one(BoundedLog)
        lag: list[float] = []
        sent = 0
        for tick in range(25):  # the app's 0.1 s flush: 2,000 lines a batch
            t0 = time.perf_counter()
            app.bus.log_lines.publish(numbered(sent, 2000))
            sent += 2000
            await asyncio.sleep(0.1)
            lag.append(time.perf_counter() - t0 - 0.1)
        await pilot.pause()
        assert log.line_count == 10_000 and log.lines[-1] == f"line {sent - 1:06d}"
        assert f"line {sent - 1:06d}" in shown(app)
        # A frozen loop, not a speed figure (bench territory): generous on a noisy 2-core box.
        assert max(lag) < 3.0, f"the loop stalled {max(lag):.2f} s"
        await pilot.press("f7")
        assert app.current_mode == "job"
        print(f"burst: max loop lag {max(lag) * 1000:.0f} ms, "
              f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


async def test_the_palette_reaches_search_and_follow(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_monitor(app, pilot)
        app.bus.log_lines.publish(numbered(0, 300))
        await pilot.pause()
        await pilot.press("ctrl+p", *"search log", "enter")
        await pilot.pause()
        assert screen.query_one("#log-search", Input).has_focus
        await pilot.press(*"000100", "escape")
        log = screen.query_one(BoundedLog)
        assert not log.following
        await pilot.press("ctrl+p", *"newest", "enter")
        await pilot.pause()
        assert log.following and log.scroll_y == log.max_scroll_y


async def test_the_strip_shows_the_newest_recovery_whole_at_80x24_and_120x40(wizard_app):
    """The supervisor's word on a recovery is readable whole beside steps, reward and s/step,
    also where the strip is 43 columns wide (80x24)."""
    for size, line in (((80, 24), "preempted at 9, resumed from 8 in 3:10"),
                       ((120, 40), "preempted at step 9, resumed from step 8 in 3:10")):
        app = wizard_app(S.HEADER)
        async with app.run_test(size=size) as pilot:
            await open_monitor(app, pilot)
            publish_all(app)
            app.bus.job_status.publish(JobStatusUpdate(S.JOB_ID, "RUNNING",
                                                       recovery="preempted at step 9, resumed from step 8 in 3:10"))
            await pilot.pause()
            await pilot.pause()
            strip = app.screen.query_one(JobStrip)
            rows = strip.render().split("\n")
            assert "s/step" in rows[0].plain, rows[0].plain
            where = next(r.plain for r in rows if line in r.plain)
            assert where.index(line) + len(line) <= strip.size.width, (size, strip.size.width, where)
