"""Provision: the step graph, two things running together, the selected step's output, and
run / retry / skip asking the app."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

import pytest

from rltui.plan.runner import Runner
from rltui.plan.step import StepState as S
from rltui.plan.step import PermanentError, Probe, Step, StepOutput
from rltui.plan.view import PlanView, plan_view
from rltui.screens.provision import critical_path_text
from rltui.widgets.steps import StepsView
from textual.widgets import Button, Log, Static

from tests.tui.conftest import SIZE, SIZE_IDS, SIZES
from tests.tui.samples_provision import (TITLES, XPK_LINES, lustre_line, plan_failed, plan_idle,
                                plan_mid_run, xpk_line)


@pytest.fixture
def frozen_clock(monkeypatch):
    """Snapshots must not depend on when a one-second tick lands."""
    monkeypatch.setattr(StepsView, "TICK_S", 3600.0)


async def _open(app, pilot, plan=None):
    await app.switch_mode("provision")
    await pilot.pause()
    if plan is not None:
        app.bus.plan.publish(plan)
        await pilot.pause()
    return app.screen


def _rows(screen) -> str:
    return screen.query_one(StepsView).render().plain


def _log(screen) -> list[str]:
    return list(screen.query_one("#output", Log).lines)


def _record(app, name: str) -> list:
    calls: list = []
    setattr(app, name, lambda *a, **kw: calls.append((a, kw)))
    return calls


# --- snapshots -----------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_provision_mid_run(snap_compare, wizard_app, frozen_clock, size):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, plan_mid_run())
        for i in (6, 7, 8):
            app.bus.run_event.publish(xpk_line(f"[XPK] Node pool a4-highgpu-8g: {i}/8 nodes"))
        log = app.screen.query_one("#output")
        for _ in range(50):   # the pane flushes every 0.1 s: wait for it, however loaded
            await pilot.pause(0.1)
            if log.line_count >= 3:
                break
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_provision_failed_step(snap_compare, wizard_app, frozen_clock, size):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot, plan_failed())

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_provision_before_any_plan(snap_compare, wizard_app, frozen_clock, size):
    app = wizard_app()

    async def run_before(pilot):
        await _open(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


# --- the step list -------------------------------------------------------------------------

async def test_two_steps_run_together_and_waiting_steps_say_for_what(wizard_app, frozen_clock):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        rows = _rows(await _open(app, pilot, plan_mid_run())).splitlines()
        xpk = next(r for r in rows if "xpk cluster create" in r)
        lustre = next(r for r in rows if "Lustre instance" in r)
        assert "70%" in xpk and "17:30 / 25:00" in xpk
        assert "60%" in lustre and "7:12 / 12:00" in lustre
        assert "waits: xpk cluster create" in next(r for r in rows if "Addons" in r)
        # long titles in a wait message are shortened so the row still fits
        assert "waits: Addons, PV / PVC, Secret" in next(r for r in rows if "RayCluster" in r)
        assert "ready in about 20 min" in str(app.screen.query_one("#critical-path", Static).content)
        assert "xpk cluster create → Addons → RayCluster ready" in str(
            app.screen.query_one("#critical-path", Static).content)


async def test_reported_progress_wins_over_elapsed(wizard_app, frozen_clock):
    plan = plan_mid_run()
    steps = tuple(replace(v, progress=0.25) if v.name == "lustre_instance" else v
                  for v in plan.steps)
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        rows = _rows(await _open(app, pilot, replace(plan, steps=steps))).splitlines()
        assert "25%" in next(r for r in rows if "Lustre instance" in r)


async def test_overrun_bar_stops_at_99_percent(wizard_app, frozen_clock):
    plan = plan_mid_run()
    steps = tuple(replace(v, elapsed_s=2000.0) if v.name == "xpk_cluster" else v
                  for v in plan.steps)
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        rows = _rows(await _open(app, pilot, replace(plan, steps=steps))).splitlines()
        xpk = next(r for r in rows if "xpk cluster create" in r)
        assert "99%" in xpk and "33:20 / 25:00" in xpk


async def test_elapsed_of_running_steps_ticks_without_new_data(wizard_app, monkeypatch):
    monkeypatch.setattr(StepsView, "TICK_S", 0.1)
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, plan_mid_run())
        await asyncio.sleep(1.3)
        await pilot.pause()
        rows = _rows(screen).splitlines()
        xpk = next(r for r in rows if "xpk cluster create" in r)
        minutes, seconds = re.search(r"(\d+):(\d\d) / 25:00", xpk).groups()
        # It was 17:30 when published: it has moved on by itself (how far depends on load).
        assert 17 * 60 + 30 < int(minutes) * 60 + int(seconds) < 17 * 60 + 40, xpk
        assert "0:58 / 1:00" in next(r for r in rows if "Enable APIs" in r)  # done: frozen


def test_critical_path_text_is_honest():
    assert critical_path_text(plan_idle(), TITLES).startswith("a run takes about 38 min")
    assert "once this run ends, retry (ctrl+r)" in critical_path_text(plan_failed(), TITLES)
    done = PlanView(plan_idle().steps, (), 0.0, False)
    assert critical_path_text(done, TITLES) == "everything is ready"
    # after a teardown the runner's plan holds deletions: no "ready" claim
    torn = PlanView(tuple(replace(v, state=S.DESTROYED) for v in plan_idle().steps), (), 0.0, False)
    assert critical_path_text(torn, TITLES).startswith("the last run was a teardown")
    # while running, the ETA counts down locally between plan updates
    assert "ready in about 16 min" in critical_path_text(plan_mid_run(), TITLES, 240.0)


# --- the output pane -----------------------------------------------------------------------

async def test_run_event_lines_reach_the_selected_steps_output(wizard_app, frozen_clock):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, plan_mid_run())
        assert screen.query_one(StepsView).selected == "xpk_cluster"   # follows the run
        assert _log(screen) == list(XPK_LINES)
        app.bus.run_event.publish(xpk_line("[XPK] Node pool a4-highgpu-8g: 6/8 nodes"))
        app.bus.run_event.publish(lustre_line("lustre: state CREATING (not for this pane)"))
        await pilot.pause(0.3)
        assert _log(screen)[-1] == "[XPK] Node pool a4-highgpu-8g: 6/8 nodes"
        assert not any("lustre:" in line for line in _log(screen))
        assert "xpk cluster create --num-nodes=8" in str(screen.query_one("#command", Static).content)

        # select the Lustre step: its own lines (kept from events), its own command
        steps = screen.query_one(StepsView)
        steps.focus()
        for _ in range(5):   # xpk -> addons -> network -> ip range -> peering -> lustre
            await pilot.press("down")
        await pilot.pause(0.2)
        assert steps.selected == "lustre_instance"
        assert _log(screen) == ["lustre: state CREATING (not for this pane)"]
        assert "gcloud lustre instances create" in str(screen.query_one("#command", Static).content)

        # back to xpk: the line that arrived while it was not selected is there
        await pilot.press("up", "up", "up", "up", "up")
        await pilot.pause(0.2)
        assert _log(screen)[-1] == "[XPK] Node pool a4-highgpu-8g: 6/8 nodes"
        assert len(_log(screen)) == len(XPK_LINES) + 1


async def test_a_user_choice_stops_the_selection_following_the_run(wizard_app, frozen_clock):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, plan_mid_run())
        steps = screen.query_one(StepsView)
        await pilot.click(StepsView, offset=(5, 1))   # the first row: Enable APIs
        await pilot.pause()
        assert steps.selected == "enable_apis"
        app.bus.plan.publish(plan_failed())
        await pilot.pause()
        assert steps.selected == "enable_apis"


async def test_a_failed_step_is_selected_with_its_message(wizard_app, frozen_clock):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, plan_failed())
        assert screen.query_one(StepsView).selected == "ip_range"
        title = str(screen.query_one("#output-title", Static).content)
        assert "IP range" in title and "QUOTA_EXCEEDED" in title
        assert "QUOTA_EXCEEDED" in _log(screen)[-1]


# --- run, retry, skip ----------------------------------------------------------------------

async def test_run_and_skip_ask_the_app(wizard_app, frozen_clock):
    app = wizard_app()
    calls = _record(app, "start_provision")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, plan_idle())
        assert str(screen.query_one("#run", Button).label) == "Run (ctrl+r)"
        await pilot.press("ctrl+r")
        assert calls == [((), {})]
        screen.query_one(StepsView).select("lustre_instance", by_user=True)
        await pilot.pause()
        await pilot.press("ctrl+k")
        assert calls[-1] == ((), {"skip": frozenset({"lustre_instance"})})


async def test_no_second_run_while_one_is_going(wizard_app, frozen_clock):
    app = wizard_app()
    calls = _record(app, "start_provision")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, plan_mid_run())
        assert screen.query_one("#run", Button).disabled
        await pilot.press("ctrl+r", "ctrl+k")
        await pilot.click("#run")
        assert calls == []   # a second run would cancel the one in progress


async def test_retry_after_a_failure(wizard_app, frozen_clock):
    finished = replace(plan_failed(), running=False)
    app = wizard_app()
    calls = _record(app, "start_provision")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, finished)
        button = screen.query_one("#run", Button)
        assert str(button.label) == "Retry (ctrl+r)" and not button.disabled
        await pilot.click("#run")
        assert calls == [((), {})]
        assert "retry (ctrl+r)" in str(screen.query_one("#critical-path", Static).content)


async def test_a_new_run_clears_the_old_output(wizard_app, frozen_clock):
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, plan_mid_run())
        assert _log(screen)
        restarted = plan_mid_run()
        steps = tuple(replace(v, lines=()) for v in restarted.steps)
        app.bus.plan.publish(replace(restarted, steps=steps))
        await pilot.pause()
        assert _log(screen) == []


async def test_the_pane_stays_bounded(wizard_app, frozen_clock):
    from rltui.screens.provision import LINES_KEPT, LOG_REBUILD_AT

    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, plan_mid_run())
        for i in range(LOG_REBUILD_AT + 10):
            app.bus.run_event.publish(xpk_line(f"line {i}"))
        await pilot.pause(0.4)
        lines = _log(screen)
        assert len(lines) <= LOG_REBUILD_AT
        assert lines[-1] == f"line {LOG_REBUILD_AT + 9}"
        assert len(lines) >= LINES_KEPT


# --- the real runner drives the screen -----------------------------------------------------

class _Made(Step):
    """A step whose object appears when applied: a stand-in for a cloud resource."""

    def __init__(self, name: str, title: str, needs: tuple[str, ...] = (), *,
                 expected_s: float = 0.3, fail: bool = False) -> None:
        self.name, self.title, self.needs, self.expected_s = name, title, needs, expected_s
        self.fail, self.made = fail, False

    def command(self) -> str:
        return f"make {self.name}"

    async def probe(self, ctx) -> Probe:
        return Probe(exists=self.made)

    async def apply(self, ctx, out: StepOutput) -> None:
        for i in range(3):
            out.line(f"{self.name}: line {i}")
            out.progress((i + 1) / 3)
            await asyncio.sleep(0.05)
        if self.fail:
            raise PermanentError(f"{self.title}: quota exceeded")
        self.made = True

    async def destroy(self, ctx, out: StepOutput) -> None:
        out.line(f"deleting {self.name}")
        self.made = False


async def test_a_real_runner_drives_the_screen(wizard_app, frozen_clock):
    steps = [_Made("net", "Network"), _Made("cluster", "Cluster", ("net",)),
             _Made("lustre", "Lustre", ("net",), fail=True),
             _Made("ray", "RayCluster", ("cluster", "lustre"))]
    app = wizard_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot)

        def listener(event) -> None:   # what RLTuiApp._on_run_event does with a session
            app.bus.run_event.publish(event)
            if event.kind != "line":
                app.bus.plan.publish(plan_view(runner))

        runner = Runner(steps, None, listener=listener)
        app.bus.plan.publish(plan_view(runner))
        result = await runner.up()
        app.bus.run_result.publish(result)
        await pilot.pause(0.3)
        rows = _rows(screen).splitlines()
        assert "✔ Network" in next(r for r in rows if "Network" in r)
        assert "✘ Lustre" in next(r for r in rows if r[3:].startswith("Lustre"))
        assert "blocked: Lustre failed" in next(r for r in rows if "RayCluster" in r)
        # the selection followed the run to the failure: its output and its message
        assert screen.query_one(StepsView).selected == "lustre"
        # The output pane follows the selection a frame or more later (a loaded machine: more).
        for _ in range(50):
            if _log(screen) == ["lustre: line 0", "lustre: line 1", "lustre: line 2"]:
                break
            await pilot.pause(0.1)
        assert _log(screen) == ["lustre: line 0", "lustre: line 1", "lustre: line 2"]
        assert "quota exceeded" in str(screen.query_one("#output-title", Static).content)
        assert str(screen.query_one("#run", Button).label) == "Retry (ctrl+r)"

        # teardown through the same runner: one row per deletion
        await app.switch_mode("teardown")
        await pilot.pause()
        runner.listener = app.bus.teardown_event.publish
        down = await runner.down()
        app.bus.run_result.publish(down)
        await pilot.pause(0.3)
        rows = app.screen.query_one("#deletions", StepsView).render().plain.splitlines()
        assert "deleted" in next(r for r in rows if r[3:].startswith("Network"))
        assert "deleted" in next(r for r in rows if r[3:].startswith("Cluster"))
        assert "[Network] deleting net" in app.screen.query_one("#teardown-log", Log).lines


async def test_ctrl_y_copies_the_equivalent_command_and_ctrl_o_shows_output_and_command(
        wizard_app, frozen_clock):
    from rltui.widgets.fullview import FullView

    app = wizard_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot, plan_mid_run())
        app.bus.run_event.publish(xpk_line("[XPK] Node pool a4-highgpu-8g: 8/8 nodes"))
        await pilot.pause(0.3)
        view = screen.query_one(StepsView).view(screen.query_one(StepsView).selected)
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert app.clipboard == view.command and "xpk cluster create" in app.clipboard
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert isinstance(app.screen, FullView)
        shown = "\n".join(app.screen.query_one("WrappedLines").lines)
        assert "8/8 nodes" in shown and view.command.splitlines()[0] in shown
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


# --- what a probe's answer reads like: no class names; the whole message in the detail -------

PEERING_ERROR = ("list peerings: the service networking API answered 403 PERMISSION_DENIED on "
                 "project team-rl-sandbox-42: enable servicenetworking.googleapis.com, then "
                 "check again (ctrl+u)")
XPK_DETAIL = ("RUNNING, not labelled yet: rltui labels the cluster on the next run (ctrl+r) "
              "once xpk's node pools are all RUNNING")


class _Answers(_Made):
    """A step whose probe answers with `detail` (exists, not ready) or fails with `error`."""

    def __init__(self, name: str, title: str, *, detail: str = "",
                 error: Exception | None = None) -> None:
        super().__init__(name, title)
        self.detail, self.error = detail, error

    async def probe(self, ctx) -> Probe:
        if self.error is not None:
            raise self.error
        return Probe(exists=True, ready=False, detail=self.detail)


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_probe_answers_read_without_class_names_and_whole_in_the_detail(
        wizard_app, frozen_clock, size):
    from rltui.cloud.errors import CloudError
    from tests.tui.screentext import region_text, screen_text

    steps = [_Answers("xpk", "xpk cluster create", detail=XPK_DETAIL),
             _Answers("peering", "VPC peering",
                      error=CloudError(PEERING_ERROR, transient=False, code="PermissionDenied"))]
    runner = Runner(steps, None)
    await runner.probe_all()
    app = wizard_app()
    async with app.run_test(size=size) as pilot:
        screen = await _open(app, pilot, plan_view(runner))
        for name, whole in (("xpk", f"exists, not ready yet: {XPK_DETAIL}"),
                            ("peering", f"not known yet: {PEERING_ERROR}")):
            screen.query_one(StepsView).select(name, by_user=True)
            await pilot.pause()
            text = screen_text(app)
            assert "CloudError" not in text and "Error:" not in text, text
            detail = region_text(app, screen.query_one("#output-title"))
            assert _words(whole) in _words(detail), text   # the row shortens; the detail does not
        # A run going: the running step's note is cut under its row, whole in the detail.
        plan = plan_view(runner)
        note = f"exists, not ready yet: {XPK_DETAIL}"
        running = tuple(replace(v, state=S.RUNNING, message=note, elapsed_s=3.0)
                        if v.name == "xpk" else v for v in plan.steps)
        app.bus.plan.publish(replace(plan, steps=running, running=True))
        screen.query_one(StepsView).select("xpk", by_user=True)
        await pilot.pause()
        detail = region_text(app, screen.query_one("#output-title"))
        assert _words(note) in _words(detail), screen_text(app)
