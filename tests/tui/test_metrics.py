"""Metrics screen: Lustre throughput with every save on one time axis, the Lustre panel, steps."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from textual.screen import Screen

from rltui.cloud.monitoring import Point
from rltui.saves import Save
from rltui.seam import JobStatusUpdate, LustreInstance
from rltui.session import Session
from rltui.screens.metrics import TextPane, lustre_lines
from rltui.widgets.charts import (Chart, fit_labels, nice_ticks, plot_columns, rate_unit,
                                  time_ticks)

from tests.tui import samples_metrics as S
from tests.tui.conftest import SIZE

SMALL = (80, 24)


async def _show_run(app, pilot, saves=None) -> None:
    """The sample run as the app would publish it: records, the timed saves, a poll."""
    await app.switch_mode("metrics")
    await pilot.pause()
    app.bus.step_records.publish(list(S.step_records()))
    app.bus.saves.publish(S.saves() if saves is None else saves)
    app.bus.lustre.publish(S.lustre())
    app.bus.metrics.publish(S.metrics())
    app.bus.gpu.publish(S.gpu())
    await pilot.pause(1.2)  # charts coalesce updates into one redraw a second


def _text(app, selector: str) -> str:
    return "\n".join(app.screen.query_one(selector, TextPane).pane_text()[1])


@pytest.mark.parametrize("size", [SMALL, SIZE], ids=["80x24", "120x40"])
def test_metrics_run_snapshot(snap_compare, wizard_app, size):
    app = wizard_app()

    async def run_before(pilot) -> None:
        await _show_run(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [SMALL, SIZE], ids=["80x24", "120x40"])
def test_metrics_empty_snapshot(snap_compare, wizard_app, size):
    app = wizard_app()

    async def run_before(pilot) -> None:
        await app.switch_mode("metrics")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def test_saves_sit_above_their_write_spikes(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await _show_run(app, pilot)
        spec = app.screen.query_one("#write-chart", Chart).drawn_spec
        assert [s.label for s in spec.spans] == ["ckpt 6", "ckpt 12", "ckpt 18"]
        (series,) = spec.series
        points = list(zip(series.xs, series.ys, strict=True))
        idle = max(y for x, y in points if all(not s.x0 - 60 <= x <= s.x1 + 60 for s in spec.spans))
        for span in spec.spans:  # each save has its spike under it: GB/s, against idle MB/s
            assert max(y for x, y in points if span.x0 <= x <= span.x1) > 30 * idle
        saves = _text(app, "#saves-pane")
        assert "241.3 s" in saves and "6.16 GB/s" in saves and "~" not in saves
        # Each save's start as a clock time.
        start6 = time.strftime("%H:%M:%S", time.gmtime(S.saves()[0].started))
        assert f"   6  {start6}" in saves


@pytest.mark.parametrize("size", [SMALL, SIZE], ids=["80x24", "120x40"])
async def test_every_save_has_a_marker_and_labels_never_overlap(wizard_app, size):
    """Ten saves 170 s apart on a 30-minute axis: too close for ten 'ckpt N' labels."""
    app = wizard_app()
    async with app.run_test(size=size) as pilot:
        saves = S.many_saves()
        await _show_run(app, pilot, saves)
        chart = app.screen.query_one("#write-chart", Chart)
        spec = chart.drawn_spec
        assert len(spec.spans) == len(saves)  # a marker for every save
        cols = plot_columns(chart.content_size.width, spec.yticks)
        per_col = (spec.xlim[1] - spec.xlim[0]) / cols
        placed = []
        for save, span in zip(saves, spec.spans, strict=True):
            assert span.x0 == pytest.approx(save.started - S.AT)
            assert span.x1 - span.x0 >= per_col - 1e-9  # at least a column wide
            assert span.color == ("warning-darken-2" if save.estimated else "warning")
            assert span.dashed == save.estimated
            if span.label:
                assert span.label.lstrip("~").removeprefix("ckpt ") == str(save.step)
                center = ((span.x0 + span.x1) / 2 - spec.xlim[0]) / per_col
                placed.append((center - len(span.label) / 2, center + len(span.label) / 2))
        placed.sort()
        assert all(b[0] - a[1] >= 1 for a, b in zip(placed, placed[1:]))
        assert spec.spans[-1].label  # the newest save is always named
        listed = _text(app, "#saves-pane")
        assert listed.count("~") == 5 + 1  # five estimated rows and the legend


async def test_a_running_save_reaches_now_and_says_saving(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        running = [*S.saves(), Save(20, S.AT - 50, None)]
        await _show_run(app, pilot, running)
        spec = app.screen.query_one("#write-chart", Chart).drawn_spec
        assert spec.spans[-1].x0 == pytest.approx(-50) and spec.spans[-1].x1 >= 0
        assert "saving…" in _text(app, "#saves-pane")


async def test_at_80x24_one_chart_shows_tall_enough_and_v_picks_the_next(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SMALL) as pilot:
        await _show_run(app, pilot)
        screen = app.screen
        shown = [c.id for c in screen.query(Chart) if c.display]
        assert shown == ["write-chart"]
        assert screen.query_one("#write-chart").content_size.height >= 7
        for pane in ("#write-chart", "#saves-pane", "#lustre-pane"):
            assert screen.query_one(pane).size.width >= 30
        for expected in ("gpu-chart", "read-chart", "reward-chart", "step-time-chart", "write-chart"):
            await pilot.press("v")
            await pilot.pause()
            assert [c.id for c in screen.query(Chart) if c.display] == [expected]
        await pilot.press("v")
        await pilot.pause(1.1)
        assert screen.query_one("#read-chart", Chart).drawn_spec.series  # drawn once shown


async def test_at_120x40_all_seven_panes_show(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await _show_run(app, pilot)
        assert all(c.display for c in app.screen.query(Chart))
        assert app.screen.query_one("#lustre-pane").display


async def test_lustre_panel_shows_state_ip_mount_capacity_and_tier(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await _show_run(app, pilot)
        text = _text(app, "#lustre-pane")
        for part in ("rl-demo-gpu-lustre ACTIVE", "IP       10.90.0.2",
                     "mount    10.90.0.2@tcp:/lustre", "1000 MBps per TiB",
                     "max      8.79 GB/s", "capacity 9,000 GiB", "2,851 of 9,000 GiB (31.7%)"):
            assert part in text
        app.bus.lustre.publish(LustreInstance("rl-demo-gpu-lustre", found=False))
        await pilot.pause()
        assert "no instance rl-demo-gpu-lustre" in _text(app, "#lustre-pane")


def test_lustre_lines_while_creating_and_on_the_dynamic_tier():
    creating = replace(S.lustre(), state="CREATING", mount_point="", throughput=0)
    text = "\n".join(lustre_lines(creating, None, 40))
    assert "CREATING" in text and "(not yet)" in text and "Dynamic" in text


async def test_burst_of_polls_redraws_at_most_once_a_second(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        await pilot.pause()
        chart = app.screen.query_one("#write-chart", Chart)
        base = S.metrics()
        started = time.monotonic()
        for i in range(30):
            write = tuple(Point(p.t, p.value * (i + 1)) for p in base.write)
            app.bus.metrics.publish(replace(base, write=write))
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


async def test_data_published_on_another_screen_is_there_on_return(wizard_app):
    app = wizard_app()
    app.add_mode("elsewhere", Screen)
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        await pilot.pause()
        await app.switch_mode("elsewhere")
        await pilot.pause()
        app.bus.step_records.publish(list(S.step_records()))
        app.bus.saves.publish(S.saves())
        app.bus.metrics.publish(S.metrics())
        await pilot.pause()
        await app.switch_mode("metrics")
        await pilot.pause(1.1)
        screen = app.screen
        assert screen.query_one("#reward-chart", Chart).drawn_spec.series
        assert len(screen.query_one("#write-chart", Chart).drawn_spec.spans) == 3
        assert "2,851 of 9,000 GiB" in _text(app, "#lustre-pane")


async def test_ask_again_without_a_session_says_so(wizard_app):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        await pilot.pause()
        await pilot.press("ctrl+u")
        await pilot.pause()
        assert any("nothing to poll" in n.message for n in app._notifications)


def test_rate_units_keep_the_peak_between_1_and_999():
    assert rate_unit(8.37e9) == (1e9, "GB/s")
    assert rate_unit(3.2e8) == (1e6, "MB/s")
    assert rate_unit(221.0) == (1.0, "B/s")       # was shown as 0.000221 MB/s
    assert rate_unit(4.2e4) == (1e3, "KB/s")
    assert rate_unit(0.0) == (1.0, "B/s")
    for peak in (1.0, 999.0, 1e3, 5e5, 2e7, 9.99e11, 3e12):
        scale, _ = rate_unit(peak)
        assert 1 <= peak / scale < 1000


def test_ticks():
    assert [label for _, label in nice_ticks(8.37)] == ["0", "2.5", "5", "7.5", "10"]
    per, ticks = time_ticks(1800)
    assert per == 60 and ticks[0] == (-30, "-30 min") and ticks[-1] == (0, "now")
    per, ticks = time_ticks(90)
    assert per == 1 and ticks[0][1].endswith(" s")


def test_labels_shorten_then_thin_out_newest_first():
    alts = [("ckpt 2", "2"), ("ckpt 4", "4"), ("ckpt 6", "6")]
    assert fit_labels([5, 20, 35], alts, 40) == ["ckpt 2", "ckpt 4", "ckpt 6"]
    assert fit_labels([5, 9, 13], alts, 40) == ["2", "4", "6"]
    assert fit_labels([5, 6, 7], alts, 40) == ["2", "", "6"]
    assert fit_labels([5, 5.5, 6], alts, 40) == ["", "", "6"]


async def test_the_session_reads_the_instance_the_lustre_panel_shows(tmp_path):
    """Session.lustre_instance over google-cloud-lustre against the sandbox's Lustre service:
    absent, then the created instance's state, mount point, capacity and tier."""
    import re
    from pathlib import Path

    import grpc

    from rltui.cloud.endpoints import Endpoints
    from rltui.cloud.lustre import LustreAdapter
    from rltui_sandbox.grpc_lustre import add_lustre_services
    from rltui_sandbox.profile import Clock, LatencyProfile
    from rltui_sandbox.services import CODELAB_APIS
    from rltui_sandbox.world import World
    from rltui.session import Session

    speed = 6000.0  # a 12-minute create takes 0.12 s
    world = World(tmp_path / "cloud", Clock(LatencyProfile.load(), speed=speed, seed=1),
                  enabled_services=CODELAB_APIS)
    server = grpc.aio.server()
    add_lustre_services(server, world)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    endpoints = Endpoints(label="SANDBOX", grpc_target=f"127.0.0.1:{port}", time_scale=1 / speed)
    env_path = tmp_path / "env.sh"
    text = (Path(__file__).resolve().parents[2] / "assets" / "sandbox.env.sh").read_text()
    env_path.write_text(re.sub(r'PROJECT_ID="[^"]*"', 'PROJECT_ID="metrics-lustre-panel"', text))
    env_path.chmod(0o600)
    session = Session(env_path, lambda: endpoints)
    try:
        assert await session.lustre_instance() == LustreInstance("rl-demo-gpu-lustre", found=False)
        adapter = LustreAdapter(endpoints, "metrics-lustre-panel", "us-east1-b")
        await adapter.create("rl-demo-gpu-lustre", capacity_gib=9000, throughput=1000,
                             network="default")
        await adapter.wait_active("rl-demo-gpu-lustre", expected_s=0.12)
        inst = await session.lustre_instance()
        assert inst.found and inst.state == "ACTIVE"
        assert inst.mount_point == f"{inst.ip}@tcp:/lustre" and inst.ip
        assert (inst.capacity_gib, inst.throughput) == (9000, 1000)
        assert inst.network.endswith("/global/networks/default")
        assert f"[dim]mount[/]    {inst.ip}@tcp:/lustre" in lustre_lines(inst, None, 36)
    finally:
        await session.close()
        await server.stop(None)
        world.close()


async def test_the_checkpoints_list_shows_each_saves_clock_time(wizard_app):
    """Monitor's list takes the timed saves from the app's `saves` topic by itself."""
    from rltui.widgets.checkpoints import CheckpointsList

    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("monitor")
        await pilot.pause()
        app.bus.saves.publish(S.many_saves(4))
        await pilot.pause()
        title, lines = app.screen.query_one(CheckpointsList).pane_text()
        rows = {line.split()[0]: line for line in lines[1:-1]}
        for save in S.many_saves(4):
            when = time.strftime("%H:%M:%S", time.gmtime(save.started))
            assert f"{'~' if save.estimated else ' '}{when}" in rows[str(save.step)]
            assert "40.0" in rows[str(save.step)]
        assert lines[-1].startswith("~ estimated")


class _LogOnlySession:
    """Just what the app's follow_logs asks of a Session: the log, in two deliveries."""

    def __init__(self, chunks: list[str], gap_s: float) -> None:
        self.chunks, self.gap_s = chunks, gap_s

    def last_job_id(self) -> str:
        return "raysubmit_test"

    def last_job_supervised(self) -> bool:
        return False

    async def close(self) -> None:
        return None

    async def follow_logs(self, on_text, job_id=None) -> str:
        import asyncio

        for chunk in self.chunks:
            on_text(chunk)
            await asyncio.sleep(self.gap_s)
        return "SUCCEEDED"

    follow_parsed = Session.follow_parsed   # the parse over follow_logs, as the Session does it
    follow_job = Session.follow_job         # and its JobFeed, as the cloud worker runs it


async def test_follow_logs_stamps_each_save_where_its_line_arrives(wizard_app):
    """The app's follower: a live `Saving checkpoint` line is the save's moment (time.time()
    at arrival), its step's `checkpointing` timer its duration; published on `saves`."""
    step = ("========================= Step 2/2 =========================\n"
            "▶ Training policy...\nSaving checkpoint for step 2...\n")
    timing = ("⏱️  Timing:\n  • Total step time: 61.00s\n  • checkpointing: 0.40s (0.7%)\n"
              "  • generation: 20.00s (33.0%)\n\n")
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")  # before the session: the screen starts no polls
        app.session = _LogOnlySession([step, timing], gap_s=0.6)
        before = time.time()
        app.follow_logs()
        await pilot.pause(1.6)
        (save,) = app.bus.saves.last
        assert before <= save.started <= before + 0.5 and not save.estimated
        assert save.seconds == 0.4 and save.step == 2
        assert app.screen.saves() == [save]


class _FinishedJobSession(_LogOnlySession):
    """The job is over when the wizard reads it: RayJobs.follow over Ray's job API answering
    as for a finished job (its JobDetails with start_time/end_time in ms, then its whole log)."""

    def __init__(self) -> None:
        super().__init__([], 0.0)

    async def follow_logs(self, on_text, job_id=None) -> str:
        from rltui.cloud.rayjobs import RayJobs

        start, end = S.job_times()
        details = {"submission_id": S.JOB_ID, "status": "SUCCEEDED", "entrypoint": "bash x.sh",
                   "start_time": int(start * 1000), "end_time": int(end * 1000)}

        class FinishedJobApi:
            async def call(self, method, path, **_):
                if path == f"/api/jobs/{S.JOB_ID}":
                    return 200, details
                assert path == f"/api/jobs/{S.JOB_ID}/logs", path
                return 200, {"logs": S.job_log()}

        jobs = RayJobs("http://ray.invalid")
        jobs._rest = FinishedJobApi()
        return await jobs.follow(S.JOB_ID, on_text)


async def test_a_finished_jobs_saves_read_later_sit_in_its_run_over_their_spikes(wizard_app):
    """Opened long after the job ended: each save row is `step  ~HH:MM:SS` within the job's
    run (dated back from Ray's end_time by the step timers, not from the read), its peak write
    the spike under it, its marker over that spike; the same times on Monitor's list."""
    import re

    from rltui.screens.metrics import fmt_rate, peak_write
    from rltui.widgets.checkpoints import CheckpointsList

    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("metrics")
        app.session = _FinishedJobSession()
        app.follow_logs()
        for _ in range(50):
            await pilot.pause(0.1)
            if len(app.bus.saves.last or []) == len(S.SAVES):
                break
        app.bus.metrics.publish(S.metrics())
        await pilot.pause(1.2)
        start, end = S.job_times()
        truth = {s.step: s for s in S.saves()}
        for save in app.screen.saves():
            assert save.estimated and start <= save.started and save.ended <= end, save
            assert 0 <= save.started - truth[save.step].started <= S.TEARDOWN_S + 0.2
        rows = _text(app, "#saves-pane")
        clock = lambda t: time.strftime("%H:%M:%S", time.gmtime(t))  # noqa: E731
        for step, want in truth.items():
            row = re.search(rf"^ *{step} +~(\d\d:\d\d:\d\d) .*$", rows, re.MULTILINE)
            assert row, rows
            assert clock(want.started) <= row.group(1) <= clock(want.started + S.TEARDOWN_S + 1)
            assert clock(start) <= row.group(1) <= clock(end)
            assert row.group(0).endswith(fmt_rate(peak_write(S.metrics(), want))), row.group(0)
        assert "6.16 GB/s" in rows
        spec = app.screen.query_one("#write-chart", Chart).drawn_spec
        assert [s.label for s in spec.spans] == ["~ckpt 6", "~ckpt 12", "~ckpt 18"]
        (series,) = spec.series
        points = list(zip(series.xs, series.ys, strict=True))
        idle = max(y for x, y in points if all(not s.x0 - 60 <= x <= s.x1 + 60 for s in spec.spans))
        for span in spec.spans:
            assert max(y for x, y in points if span.x0 <= x <= span.x1) > 30 * idle
        await app.switch_mode("monitor")
        await pilot.pause()
        _, lines = app.screen.query_one(CheckpointsList).pane_text()
        for save in app.bus.saves.last:
            assert any(line.startswith(f"{save.step:<6} ~{clock(save.started)}") for line in lines), lines


async def test_a_new_job_or_a_teardown_clears_the_saves(wizard_app):
    from rltui.widgets.checkpoints import CheckpointsList

    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.switch_mode("monitor")
        await _show_run(app, pilot)
        app.reset_job(None)
        await pilot.pause(1.2)
        assert app.screen.saves() == [] and "No checkpoint saved yet." in _text(app, "#saves-pane")
        assert app.screen.query_one("#write-chart", Chart).drawn_spec.spans == ()
        await app.switch_mode("monitor")
        await pilot.pause()
        assert app.screen.query_one(CheckpointsList).pane_text() is None


# --- the previous run's reward under this one's (p; rltui/runs.py's summaries) -------------------

def _previous_run(run_id: str = "rltui-20251001-090000-prevrn"):
    """An earlier run's summary where `down` leaves it (written as plan/jobs.py writes one)."""
    from rltui import runs
    from rltui.plan.folders import run_dir

    summary = runs.RunSummary(run_id, "team-rl-sandbox-42", "ray-a4-gpu-spot", 1_759_309_200.0,
                              status="SUCCEEDED",
                              steps=[runs.StepSummary(s, 0.05 + 0.01 * s, 50.0) for s in range(1, 21)])
    runs.write(run_dir("team-rl-sandbox-42", "ray-a4-gpu-spot"), summary)
    return summary


def _previous_series(app):
    from rltui.screens.metrics import PREVIOUS_COLOR

    spec = app.screen.query_one("#reward-chart", Chart).spec
    return [s for s in spec.series if s.color == PREVIOUS_COLOR]


@pytest.mark.parametrize("size", [SIZE], ids=["120x40"])
def test_metrics_previous_run_snapshot(snap_compare, wizard_app, size):
    _previous_run()
    app = wizard_app()

    async def run_before(pilot) -> None:
        await _show_run(app, pilot)
        await pilot.press("p")
        await pilot.pause(1.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def test_p_overlays_the_previous_runs_reward_and_p_again_hides_it(wizard_app):
    previous = _previous_run()
    app = wizard_app()
    async with app.run_test(size=SMALL) as pilot:
        await _show_run(app, pilot)
        assert _previous_series(app) == []
        await pilot.press("p")
        await pilot.pause()
        chart = app.screen.query_one("#reward-chart", Chart)
        assert chart.display   # at 80x24 the key shows the chart it changed
        [under] = _previous_series(app)
        assert list(zip(under.xs, under.ys)) == [(float(s.step), s.reward) for s in previous.steps]
        assert len(chart.spec.series) == 2 and "previous run 10-01 09:00" in str(chart.border_title)
        await pilot.press("p")
        await pilot.pause()
        assert _previous_series(app) == [] and "previous" not in str(chart.border_title)


async def test_the_followed_job_is_never_its_own_previous_run_and_none_recorded_says_so(wizard_app):
    _previous_run("rltui-20251201-100000-currnt")
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        await _show_run(app, pilot)
        app.bus.job_status.publish(JobStatusUpdate("rltui-20251201-100000-currnt", "RUNNING"))
        await pilot.press("p")
        await pilot.pause()
        assert _previous_series(app) == []
        assert any("No earlier run" in n.message for n in app._notifications)
