"""The wizard in a real terminal (tmux 120x40), from Configure to Teardown, against the sandbox.

Keys go in with send-keys, the screen comes back with capture-pane; every capture is checked
for the token. Shares the session's sandbox with the headless cycle (which ends with nothing
left), so it runs after it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.headless_user import saves_on_volume

DATA = Path(__file__).parent.parent / "data"
TOKEN = "hf_tmuxSecretValue" + "Z9k" * 8
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


class Terminal:
    def __init__(self, name: str) -> None:
        self.name = name
        self.screens: list[str] = []

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)

    def screen(self) -> str:
        text = self.tmux("capture-pane", "-p", "-t", self.name)
        self.screens.append(text)
        assert TOKEN not in text, "the token reached the screen"
        return text

    def wait_for(self, *words: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if all(w in text for w in words):
                return text
            time.sleep(0.2)
        raise AssertionError(f"{words} not on screen after {timeout:.0f} s:\n{text}")

    def alive(self) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", self.name],
                              capture_output=True).returncode == 0


@pytest.fixture
def terminal(sandbox, sandbox_dir, tmp_path):
    yield from _terminal(sandbox, sandbox_dir, tmp_path, 120, 40)


@pytest.fixture
def small_terminal(sandbox, sandbox_dir, tmp_path):
    yield from _terminal(sandbox, sandbox_dir, tmp_path, 80, 24)


def _terminal(sandbox, sandbox_dir, tmp_path, width, height):
    env_sh = tmp_path / "env.sh"
    env_sh.write_text((DATA / "env" / "devrel-demos.env.sh").read_text().replace(
        'HF_TOKEN=""', f'HF_TOKEN="{TOKEN}"').replace('NUM_NODES="8"', 'NUM_NODES="2"'))
    env_sh.chmod(0o600)
    name = f"rltui-e2e-{os.getpid()}-{width}"
    env = {"RLTUI_SANDBOX_DIR": str(sandbox_dir), "XDG_STATE_HOME": str(tmp_path / "state"),
           "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    # argv after the options: tmux runs it without a shell.
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
                    *[a for k, v in env.items() for a in ("-e", f"{k}={v}")],
                    # COLUMNS/LINES from pytest's environment would override the real size.
                    "env", "-u", "COLUMNS", "-u", "LINES",
                    sys.executable, "-m", "rltui.cli", "--sandbox", "--env", str(env_sh)],
                   check=True, cwd=tmp_path)
    # A shared tmux server may size windows after its clients: pin this one to its size.
    subprocess.run(["tmux", "set-option", "-t", name, "window-size", "manual"], check=True)
    subprocess.run(["tmux", "resize-window", "-t", name, "-x", str(width), "-y", str(height)],
                   check=True)
    term = Terminal(name)
    term.env_sh, term.sandbox, term.sandbox_dir = env_sh, sandbox, sandbox_dir
    yield term
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_configure_to_teardown_in_a_real_terminal(terminal):
    t0 = time.monotonic()
    terminal.wait_for("SANDBOX", "Start", timeout=15)
    first_paint = time.monotonic() - t0
    print(f"first screen with the SANDBOX badge after {first_paint:.2f} s")

    terminal.keys("F3")
    # The form fills once env.sh's state arrives: wait for the values, not only the labels.
    text = terminal.wait_for("PROJECT_ID", "CLUSTER_NAME", "LUSTRE_INSTANCE_ID",
                             "team-rl-sandbox-42", "ray-a4-gpu-spot-net-0")
    assert len(text.splitlines()[0]) >= 110, "the terminal is 120 columns wide"

    terminal.keys("F4")
    terminal.wait_for("xpk cluster create")
    terminal.keys("C-r")
    terminal.wait_for("everything is ready", timeout=120)

    terminal.keys("F7")
    terminal.wait_for("run_nemo_rl.sh")
    before = saves_on_volume(terminal.sandbox_dir)
    terminal.keys("C-p")
    terminal.type("Job: submit")
    time.sleep(0.5)
    terminal.keys("Enter")
    terminal.wait_for("submitted", timeout=30)  # the command ran on the Job screen
    terminal.keys("F8")
    # Preempted once the first save is on the volume (read there: the screen's lags on a loaded
    # machine once let the 20-step job end first); the pod log below is read while it recovers.
    deadline = time.monotonic() + 120
    while not saves_on_volume(terminal.sandbox_dir) - before:
        assert time.monotonic() < deadline, "no save on the volume within 120 s"
        time.sleep(0.1)
    out = subprocess.run([sys.executable, "-m", "rltui.cli", "sandbox", "preempt"], capture_output=True,
                         text=True, env={**os.environ, "RLTUI_SANDBOX_DIR": str(terminal.sandbox_dir)})
    assert out.returncode == 0, out.stderr
    # The lost pod's row is marked PREEMPTED, then "replaced" once its replacement runs: at the
    # sandbox's speed that can come before a capture.
    deadline = time.monotonic() + 30
    while not re.search(r"worker-\w+ .* (PREEMPTED|replaced) ", terminal.screen()):
        assert time.monotonic() < deadline, f"no preempted worker on screen:\n{terminal.screens[-1]}"
        time.sleep(0.2)
    # k9s: Enter opens the selected pod's log (the head's: the real local Ray head's output).
    terminal.keys("Enter")
    text = terminal.wait_for("Logs ", "Escape closes", timeout=30)
    assert "head" in text
    terminal.keys("Escape")
    terminal.wait_for("Job log", timeout=10)
    # As on GKE the preempted node's actors fail the attempt; the supervisor resubmits it.
    terminal.wait_for("resumed from step", timeout=120)
    terminal.wait_for("SUCCEEDED", timeout=120)

    # Every save is marked on the write chart: the chart's own text (ctrl+o) lists one marker
    # per save, as many as the saves list counts.
    terminal.keys("F9")
    text = terminal.wait_for("Checkpoint saves", " saved ", timeout=60)
    saved = int(re.search(r"(\d+) saved", text).group(1))
    assert saved >= 2, text
    timed = re.findall(r"│\s+\d+\s+~?\d\d:\d\d:\d\d\s+[\d.]+ s", text)
    assert timed and not re.search(r"│\s+\d+\s+\?\s", text), text   # each save has its time
    # The chart's first points come with the first Cloud Monitoring answer (its title then
    # names the peak): full screen shows what is drawn, so wait for it to be drawn.
    terminal.wait_for("Lustre write throughput (", "peak ", timeout=30)
    terminal.keys("C-o")
    text = terminal.wait_for("marker ", timeout=15)
    markers = [line for line in text.splitlines() if "marker " in line]
    assert len(markers) == saved, text
    terminal.keys("Escape")

    terminal.keys("F10")
    terminal.wait_for("What exists now", "RayCluster", timeout=60)
    terminal.type("ray-a4-gpu-spot")
    terminal.wait_for("▊  ray-a4-gpu-spot")  # the Input holds the name before ctrl+d
    time.sleep(0.3)
    terminal.keys("C-d")
    text = terminal.wait_for("leak scan: nothing of rltui's left", timeout=180)
    # The deleted cluster's job leaves the header.
    header = text.splitlines()[0]
    assert " job " not in header and "SUCCEEDED" not in header, header

    terminal.keys("C-q")
    deadline = time.monotonic() + 10
    while terminal.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not terminal.alive(), "ctrl+q quits"


# What each screen must show at 80x24 (a plain terminal, a split Cloud Shell pane), before
# anything is provisioned: its title row, and words only a readable layout keeps on screen.
# The Job screen stacks its panes there: the inputs whole first (the model's whole name), the
# preview's tabs below them.
SMALL = [("F2", ["Preflight"]), ("F3", ["PROJECT_ID", "CLUSTER_NAME", "] next"]),
         ("F4", ["Steps", "xpk cluster create", "equivalent command"]),
         ("F7", ["MAX_STEPS", "Qwen/Qwen2.5-72B-Instruct", "CHECKPOINT_DIR"]),
         ("F8", ["Pods", "Job log"]), ("F9", ["Lustre write throughput"]),
         ("F10", ["What exists now"])]


def test_every_screen_and_help_read_at_80x24(small_terminal):
    term = small_terminal
    term.wait_for("SANDBOX", "Start", timeout=15)
    for key, words in SMALL:
        term.keys(key)
        text = term.wait_for(*words, timeout=30)
        lines = text.splitlines()
        assert len(lines) <= 24 and all(len(line) <= 80 for line in lines), text
        assert "^q" in lines[-1] or "quit" in lines[-1], f"{key}: the footer is cut:\n{text}"
    term.keys("F2")   # Teardown's input has the focus: it would take the "?"
    term.wait_for("Preflight", timeout=10)
    term.keys("?")
    text = term.wait_for("Escape", "ctrl+q", timeout=10)
    assert "closes" in text and all(len(line) <= 80 for line in text.splitlines())
    term.keys("Escape")
    term.wait_for("Preflight", timeout=10)
