"""Start: mode badge, preflight checks (a pass, or the fix), and resuming an existing deployment."""

from __future__ import annotations

import pytest

import io
from typing import Any

from rich.console import Console
from textual.screen import Screen
from textual.widgets import Button, Static

from rltui.app import RLTuiApp
from rltui.screens.start import StartScreen, deployment
from rltui.widgets.chrome import HeaderInfo
from tests.tui.conftest import HEADER, SIZE, SIZE_IDS, SIZES
from tests.tui.samples_start import CHECKS, CONFIG, NOTHING, RESOURCES


class RecordingApp(RLTuiApp):
    """The real app; the workers that need a session are recorded instead of run."""

    # Textual reads relative CSS paths beside the module defining the class: keep the app's.
    CSS_PATH = RLTuiApp.CSS_PATH  # absolute: a subclass here finds the one stylesheet
    # Monitor is another screen's business: a plain screen stands in for it here.
    MODES = {**RLTuiApp.MODES, "monitor": Screen}

    def __init__(self, header: HeaderInfo = HEADER) -> None:
        super().__init__(session=None, header=header)
        self.asked: list[str] = []

    def run_preflight(self) -> None:  # type: ignore[override]
        self.asked.append("run_preflight")

    def refresh_inventory(self) -> None:  # type: ignore[override]
        self.asked.append("refresh_inventory")

    def watch_pods(self) -> None:  # type: ignore[override]
        self.asked.append("watch_pods")

    def follow_logs(self) -> None:  # type: ignore[override]
        self.asked.append("follow_logs")


def text_of(screen: Screen, selector: str) -> str:
    """What a Static shows, as plain text (its content may be a rich Table or Group)."""
    console = Console(width=118, record=True, file=io.StringIO())
    console.print(screen.query_one(selector, Static).content)
    return console.export_text()


async def publish(pilot: Any, app: RLTuiApp, checks: Any = None, inventory: Any = None) -> None:
    app.bus.config.publish(CONFIG)
    if checks is not None:
        app.bus.preflight.publish(checks)
    if inventory is not None:
        app.bus.inventory.publish(inventory)
    await pilot.pause()
    await pilot.pause()


# --- snapshots ---

@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_checks_and_a_deployment_to_resume(snap_compare, wizard_app, size):
    app = wizard_app()

    async def run_before(pilot):
        await publish(pilot, app, CHECKS, RESOURCES)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_real_project_with_nothing_deployed(snap_compare, wizard_app, size):
    app = wizard_app(HeaderInfo(mode="Google Cloud", project="team-rl-prod-7",
                                cluster="ray-a4-gpu-spot", clock="12:04"))

    async def run_before(pilot):
        await publish(pilot, app, CHECKS[:2], NOTHING)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


# --- pilot ---

async def test_failed_check_shows_its_fix_and_the_count():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert "Waiting for the checks" in text_of(screen, "#start-checks")
        await publish(pilot, app, CHECKS)
        checks = text_of(screen, "#start-checks")
        assert "fix: pip install xpk" in checks
        assert "fix: gcloud auth application-default login" in checks
        assert "fix:" not in checks.split("kubectl on PATH")[1].split("APIs enabled")[0]
        assert "4 of 7 pass" in text_of(screen, "#start-checks-title")


async def test_resume_appears_only_with_a_deployment_and_starts_watching():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, StartScreen)
        await publish(pilot, app, CHECKS, NOTHING)
        assert not screen.query_one("#start-resume", Button).display
        assert "Nothing deployed yet" in text_of(screen, "#start-deployment")
        await pilot.press("w")  # not offered: does nothing
        assert app.current_mode == "start" and app.asked == []
        assert "Start: resume watching" not in {c.title for c in screen.system_commands()}

        await publish(pilot, app, inventory=RESOURCES)
        assert screen.query_one("#start-resume", Button).display
        assert "Resume watching (w)" in text_of(screen, "#start-deployment")
        assert "Start: resume watching" in {c.title for c in screen.system_commands()}
        await pilot.press("w")
        await pilot.pause()
        assert app.current_mode == "monitor"
        assert app.asked == ["watch_pods", "follow_logs"]


async def test_partial_deployment_watches_pods_without_logs():
    app = RecordingApp()
    partial = [r for r in RESOURCES if r.kind not in ("RayCluster", "PersistentVolumeClaim")]
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await publish(pilot, app, CHECKS, partial)
        assert "Partly provisioned" in text_of(screen, "#start-deployment")
        await pilot.click("#start-resume")
        await pilot.pause()
        assert app.current_mode == "monitor"
        assert app.asked == ["watch_pods"]


async def test_recheck_asks_again_and_shows_it_is_checking():
    app = RecordingApp()
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await publish(pilot, app, CHECKS)
        await pilot.press("ctrl+u")
        assert app.asked == ["run_preflight", "refresh_inventory"]
        assert "checking…" in text_of(screen, "#start-checks-title")
        await publish(pilot, app, [c.__class__(c.name, True, c.detail) for c in CHECKS])
        title = text_of(screen, "#start-checks-title")
        assert "7 of 7 pass" in title and "checking" not in title


async def test_badge_and_env_sh():
    app = RecordingApp(HeaderInfo(mode="Google Cloud", project="team-rl-prod-7", clock="12:04"))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await publish(pilot, app)
        assert text_of(screen, "#start-badge").strip() == "GOOGLE CLOUD"
        assert screen.query_one("#start-badge").has_class("-real")
        where = text_of(screen, "#start-where")
        assert "team-rl-prod-7" in where and "billed" in where
        assert "/home/user/rl-demo/env.sh" in where and "✓ valid" in where
        await pilot.press("c")
        assert app.current_mode == "configure"


def test_leaks_are_no_deployment():
    leak_only = [r for r in RESOURCES if r.leak] + NOTHING
    assert deployment(leak_only) == []
    kinds = [r.kind for r in deployment(RESOURCES)]
    assert kinds == ["GKE cluster", "Lustre instance", "RayCluster"]


# --- env.sh named once: the default path is "env.sh" itself -------------------------------------

@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_env_sh_is_named_once_on_start_and_configure(size):
    from dataclasses import replace

    from tests.tui.samples_configure import codelab_state
    from tests.tui.screentext import screen_lines

    app = RecordingApp()
    async with app.run_test(size=size) as pilot:
        app.bus.config.publish(replace(CONFIG, env_path="env.sh"))   # `rltui` run beside it
        await pilot.pause()
        await pilot.pause()
        lines = [line for line in screen_lines(app) if "env.sh" in line]
        assert any("env.sh  ✓ valid" in line for line in lines), lines
        assert all(line.count("env.sh") == 1 for line in lines), lines
        await app.switch_mode("configure")
        await pilot.pause()
        app.bus.config.publish(replace(codelab_state(), env_path="env.sh"))
        await pilot.pause()
        await pilot.pause()
        lines = [line for line in screen_lines(app) if "env.sh" in line and "^s" not in line]
        assert lines and all(line.count("env.sh") == 1 for line in lines), lines


async def test_the_preflight_row_of_env_sh_names_its_folder_not_the_name_again(monkeypatch, tmp_path):
    from pathlib import Path

    from rltui.config import Problem
    from rltui.plan import preflight as pf

    class Endpoints:   # what preflight() asks of the endpoints without a context
        def subprocess_env(self) -> dict[str, str]:
            return {"PATH": ""}

        def xpk_gcloud_dir(self, env: dict[str, str]) -> Path:
            return tmp_path

    async def no_auth(endpoints: Any) -> list:
        return []

    monkeypatch.setattr(pf, "auth_checks", no_auth)
    monkeypatch.chdir(tmp_path)
    checks = await pf.preflight(Path("env.sh"), object(), [], Endpoints(), None)  # type: ignore[arg-type]
    assert checks[0].name == "env.sh" and checks[0].detail == f"valid, in {tmp_path}"
    one = await pf.preflight(Path("env.sh"), None, [Problem("ZONE", "bad")], Endpoints(), None)  # type: ignore[arg-type]
    assert one[0].detail == "1 problem"
