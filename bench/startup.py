"""First frame: `rltui --sandbox` in tmux (120x40) over a bare Textual app with one Label.

Each run starts a fresh tmux session running the program and polls `tmux capture-pane` every
~10 ms from just before `tmux new-session` until the screen shows the word SANDBOX: for rltui
that is the header's badge (HeaderInfo(mode="SANDBOX"), painted with the Start screen), for the
bare app its one Label. The two programs alternate (bare, rltui, bare, ...) after one warm-up
run each, so a drift in the machine's speed touches both; the figure is the ratio of the
medians of 7 runs each. Lower is better; goal <= 1.3 (issue 13 item 2).

The sandbox is started (in a temp folder) before the first run: the wizard's first frame must
not wait for it, and it does not: `rltui --sandbox` builds its endpoints in a worker after the
first frame (app.py's _boot).

    .venv/bin/python bench/startup.py [--runs 7]

Measured on 2 cores: 2.36 (0.392 s vs 0.166 s) before the Session and the boot worker left the
first frame's path, 1.80 (0.300 s vs 0.167 s) after. What is left is Textual's own work for the
Start screen (CPU to the first frame, in process: bare 0.152 s, rltui 0.278 s; without the
Footer 0.254, without rltui.tcss 0.262, without both and the width classes 0.213).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rltui_sandbox import manage  # noqa: E402  (standard library only)

WIDTH, HEIGHT = 120, 40
WORD = "SANDBOX"
TIMEOUT_S = 20.0
POLL_S = 0.01
BARE_APP = f'''\
from textual.app import App, ComposeResult
from textual.widgets import Label


class Bare(App):
    def compose(self) -> ComposeResult:
        yield Label("{WORD}")


Bare().run()
'''


# A private tmux server (-L): another tmux user's sessions, sizes and teardown stay out of the
# figure; a keeper session holds it up between runs (tmux exits with its last session).
SOCKET = f"rltui-bench-startup-{os.getpid()}"


def _tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True,
                          check=check).stdout


def first_frame(argv: list[str], env: dict[str, str], cwd: str, name: str) -> float:
    """Seconds from `tmux new-session` to a capture that shows WORD; the session is killed after."""
    t0 = time.monotonic()
    # argv after the options: tmux runs it without a shell. COLUMNS/LINES from the caller's
    # environment would override the real size (as in tests/e2e/test_wizard_tmux.py).
    subprocess.run(["tmux", "-L", SOCKET, "new-session", "-d", "-s", name, "-x", str(WIDTH),
                    "-y", str(HEIGHT), *[a for k, v in env.items() for a in ("-e", f"{k}={v}")],
                    "env", "-u", "COLUMNS", "-u", "LINES", *argv], check=True, cwd=cwd)
    try:
        deadline = t0 + TIMEOUT_S
        while time.monotonic() < deadline:
            if WORD in _tmux("capture-pane", "-p", "-t", name):
                return time.monotonic() - t0
            time.sleep(POLL_S)
        raise RuntimeError(f"{argv[-1]}: {WORD} not on screen after {TIMEOUT_S:.0f} s:\n"
                           + _tmux("capture-pane", "-p", "-t", name))
    finally:
        _tmux("kill-session", "-t", name, check=False)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rltui-bench-", dir="/tmp") as tmp:
        sbx = Path(tmp) / "sbx"
        bare = Path(tmp) / "bare_app.py"
        bare.write_text(BARE_APP)
        env = {"RLTUI_SANDBOX_DIR": str(sbx), "XDG_STATE_HOME": f"{tmp}/state",
               "TERM": "xterm-256color", "COLORTERM": "truecolor", "PYTHONPATH": str(ROOT)}
        programs = {
            "bare": [sys.executable, str(bare)],
            "rltui": [sys.executable, "-m", "rltui.cli", "--sandbox", "--env",
                      str(ROOT / "assets" / "sandbox.env.sh")],
        }
        # pip compiles an installed rltui to bytecode, as it did textual for the bare app; an
        # editable checkout under PYTHONDONTWRITEBYTECODE=1 (this machine) never is, and each
        # run would compile rltui's modules again (10-20 ms, none of it rltui's own work).
        compileall.compile_dir(str(ROOT / "rltui"), quiet=1)
        manage.start(root=sbx)
        _tmux("new-session", "-d", "-s", "keeper", "-x", str(WIDTH), "-y", str(HEIGHT), "sleep", "3600")
        times: dict[str, list[float]] = {k: [] for k in programs}
        try:
            for i in range(args.runs + 1):       # run 0 is the warm-up (page cache, .pyc)
                for label, argv in programs.items():
                    s = first_frame(argv, env, tmp, f"rltui-bench-startup-{os.getpid()}-{label}-{i}")
                    if i:
                        times[label].append(s)
        finally:
            _tmux("kill-server", check=False)
            manage.stop(sbx)
    med = {k: statistics.median(v) for k, v in times.items()}
    for label, values in times.items():
        print(f"{label}: median {med[label]:.3f} s over {len(values)} runs "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    print(f"first_paint_ratio: {med['rltui'] / med['bare']:.2f} (goal <= 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
