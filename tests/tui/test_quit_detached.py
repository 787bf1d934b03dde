"""The wizard and a detached xpk (cloud/detached.py) it did not start: on start it resumes that
operation on the Provision screen and says it re-attached; ctrl+q asks in a modal that stays
until answered, ctrl+q there quits, and quitting leaves the process running.

A real Session on the shared sandbox, a project of its own; the "xpk" is a real process named
xpk with xpk's argv that only sleeps (the step re-attaches to it by PID; it never asks the cloud).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from rltui.app import RLTuiApp
from rltui.cloud.detached import Detached, is_live
from rltui.cloud.endpoints import Endpoints
from rltui.plan.folders import xpk_subdir
from rltui.statedir import state_root
from rltui.screens.quit_prompt import QuitPrompt
from rltui.session import Session
from rltui.widgets.chrome import HeaderInfo

ASSETS = Path(__file__).resolve().parents[2] / "assets"
PROJECT, CLUSTER = "tui-detached-quit", "ray-a4-gpu-spot"
pytestmark = pytest.mark.slow


def sleeping_xpk(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "xpk"
    path.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(120)\n")
    path.chmod(0o755)
    return path


async def wait_until(check, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.1)):
        if check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("not reached in time")


async def test_the_wizard_resumes_a_detached_create_and_quits_only_on_the_second_ctrl_q(
        sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    env_path = tmp_path / "env.sh"
    text = (ASSETS / "sandbox.env.sh").read_text()
    env_path.write_text(re.sub(r'PROJECT_ID="[^"]*"', f'PROJECT_ID="{PROJECT}"', text))
    env_path.chmod(0o600)
    xpk = Detached(state_root() / xpk_subdir(PROJECT, CLUSTER), "xpk")
    rec, started = xpk.start([str(sleeping_xpk(tmp_path / "bin")), "cluster", "create",
                              f"--project={PROJECT}", f"--cluster={CLUSTER}"], "create", os.environ)
    assert started
    session = Session(env_path, lambda: Endpoints.sandbox(sandbox))
    app = RLTuiApp(session, header=HeaderInfo(mode="SANDBOX"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(lambda: any("re-attached to xpk cluster create" in n.message
                                         for n in app._notifications))
            assert app.current_mode == "provision"
            note = f"re-attaching to xpk cluster create (PID {rec.pid}, running since"
            await wait_until(lambda: any(note in (getattr(e, "message", "") or "")
                                         for e in app.bus.run_event.history), timeout=60)
            await pilot.press("ctrl+q")
            await pilot.pause()
            assert isinstance(app.screen, QuitPrompt), "the first ctrl+q only asks"
            asked = " ".join(app.screen.text().plain.split())
            assert f"xpk cluster create (PID {rec.pid}" in asked and \
                "keeps running in the background" in asked, asked
            assert app.is_running
            await pilot.press("ctrl+q")
            await pilot.pause()
        assert not app.is_running
        assert is_live(rec), "quitting never stops xpk"
    finally:
        await session.close()
        if is_live(rec):
            os.killpg(rec.pid, signal.SIGKILL)


@pytest.mark.skipif(__import__("shutil").which("tmux") is None, reason="tmux is not installed")
def test_in_a_real_terminal_quitting_with_xpk_running_prints_no_traceback(sandbox, sandbox_dir,
                                                                        tmp_path):
    import subprocess
    import time

    project = "tui-detached-tmux"
    state = tmp_path / "state"
    env_path = tmp_path / "env.sh"
    env_path.write_text(re.sub(r'PROJECT_ID="[^"]*"', f'PROJECT_ID="{project}"',
                               (ASSETS / "sandbox.env.sh").read_text()))
    env_path.chmod(0o600)
    xpk = Detached(state / "rltui" / xpk_subdir(project, CLUSTER), "xpk")
    rec, _ = xpk.start([str(sleeping_xpk(tmp_path / "bin")), "cluster", "create",
                        f"--project={project}", f"--cluster={CLUSTER}"], "create", os.environ)
    name = f"rltui-quit-{os.getpid()}"
    env = {"RLTUI_SANDBOX_DIR": str(sandbox_dir), "XDG_STATE_HOME": str(state),
           "TERM": "xterm-256color"}

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout

    def screen_with(*words: str, timeout: float = 30.0) -> str:
        deadline, text = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            text = tmux("capture-pane", "-p", "-S", "-200", "-t", name)
            if all(w in text for w in words):
                return text
            time.sleep(0.2)
        raise AssertionError(f"{words} not on screen:\n{text}")

    tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40",
         *[a for k, v in env.items() for a in ("-e", f"{k}={v}")],
         "env", "-u", "COLUMNS", "-u", "LINES",
         sys.executable, "-m", "rltui.cli", "--sandbox", "--env", str(env_path))
    try:
        tmux("set-option", "-t", name, "remain-on-exit", "on")  # the pane stays to be read
        screen_with("re-attached to xpk")
        screen_with("re-attaching to xpk cluster create", timeout=60)
        tmux("send-keys", "-t", name, "C-q")
        screen_with("Quit rltui?", "q or ctrl+q: quit")   # the modal, its keys shown
        tmux("send-keys", "-t", name, "C-q")
        deadline = time.monotonic() + 15
        while tmux("display-message", "-p", "-t", name, "#{pane_dead}").strip() != "1":
            assert time.monotonic() < deadline, "the wizard did not quit"
            time.sleep(0.2)
        after = tmux("capture-pane", "-p", "-S", "-200", "-t", name)
        assert "Traceback" not in after, after
        assert is_live(rec), "quitting never stops xpk"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        if is_live(rec):
            os.killpg(rec.pid, signal.SIGKILL)
