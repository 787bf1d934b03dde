"""The wizard over a real Session on the shared sandbox (not samples): what the Start screen's
preflight finds there is what the real tools say - gcloud's signed-in account (the sandbox's
service account, signed in by the real gcloud), ADC, the real gcloud and kubectl, the
sandbox's xpk first on PATH, and the codelab's APIs still off in a fresh project."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from rltui.app import RLTuiApp
from rltui.cloud.endpoints import Endpoints
from rltui.remote import RemoteSession
from rltui.session import Session
from rltui.widgets.chrome import HeaderInfo

ASSETS = Path(__file__).resolve().parents[2] / "assets"
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", [Session, RemoteSession], ids=["in-process", "worker"])
async def test_preflight_on_the_sandbox_reports_what_the_real_tools_say(kind, sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    env_path = tmp_path / "env.sh"
    # A project of its own: the shared sandbox's others may have had their APIs enabled already.
    text = (ASSETS / "sandbox.env.sh").read_text()
    env_path.write_text(re.sub(r'PROJECT_ID="[^"]*"', 'PROJECT_ID="tui-preflight-fresh"', text))
    env_path.chmod(0o600)
    session = kind(env_path, lambda: Endpoints.sandbox(sandbox))  # the wizard's is RemoteSession
    assert session.cfg is not None and session.cfg.project_id == "tui-preflight-fresh"
    app = RLTuiApp(session, header=HeaderInfo(mode="SANDBOX"))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(600):  # the checks run in a worker: gcloud takes about a second
            if app.bus.preflight.last is not None:
                break
            await asyncio.sleep(0.1)
        await pilot.pause()
        checks = {c.name: c for c in app.bus.preflight.last or []}
        assert checks["env.sh"].ok
        assert checks["gcloud auth"].ok and checks["gcloud auth"].detail.startswith("rltui-sandbox@")
        assert checks["Application Default Credentials"].ok
        assert checks["xpk on PATH"].detail == str(Path(sandbox["bin_dir"]) / "xpk")
        assert checks["gcloud on PATH"].ok and not checks["gcloud on PATH"].detail.startswith(sandbox["bin_dir"])
        assert checks["gcloud config (for xpk)"].ok
        apis = checks["APIs enabled"]
        assert not apis.ok and "lustre" in apis.detail  # a fresh project, as Google makes one
        await session.close()
