"""Without Application Default Credentials, real-mode commands say how to sign in: one line,
exit 2, no traceback (before, `rltui status` printed an asyncio traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV_SH = Path(__file__).resolve().parents[2] / "assets" / "sandbox.env.sh"


@pytest.mark.parametrize("command", [["status"], ["down", "--yes"]])
def test_no_adc_is_one_line_and_exit_2(tmp_path, command):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GOOGLE_", "CLOUDSDK_", "RLTUI_SANDBOX"))}
    env.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
               XDG_STATE_HOME=str(tmp_path / "state"),
               # google.auth would otherwise ask the GCE metadata server (not on loopback).
               NO_GCE_CHECK="True")
    res = subprocess.run([sys.executable, "-m", "rltui.cli", *command, "--env", str(ENV_SH)],
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "gcloud auth application-default login" in lines[0], res.stderr
    assert "Traceback" not in res.stderr + res.stdout
