"""The wizard's cloud work in its worker process (rltui/remote.py, rltui/cloudworker.py), on the
shared sandbox: the wizard's own process never loads a cloud client, a worker that dies fails
the calls waiting on it with where its log is and the next action starts a new one, and what
crosses back is rltui's own values and errors."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rltui.cloud.endpoints import Endpoints
from rltui.config import ConfigError
from rltui.remote import RemoteSession, WorkerGone

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"
HEAVY = ("google", "grpc", "kubernetes", "ray", "numpy", "aiohttp")
pytestmark = pytest.mark.slow


def _env(tmp_path: Path, project: str) -> Path:
    env_path = tmp_path / "env.sh"
    text = (ASSETS / "sandbox.env.sh").read_text()
    env_path.write_text(re.sub(r'PROJECT_ID="[^"]*"', f'PROJECT_ID="{project}"', text))
    env_path.chmod(0o600)
    return env_path


WIZARD = """
import asyncio, json, os, sys
from pathlib import Path
from rltui import cli
from rltui.app import RLTuiApp
from rltui.cloud.endpoints import Endpoints
from rltui.remote import RemoteSession
from rltui.widgets.chrome import HeaderInfo

status = json.loads(sys.argv[2])

def session():  # what `rltui --sandbox` builds (cli.cmd_wizard)
    return RemoteSession(Path(sys.argv[1]), lambda: Endpoints.sandbox(status))

async def main():
    app = RLTuiApp(cli._DeferredSession(session), header=HeaderInfo(mode="SANDBOX"))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(600):
            if app.bus.preflight.last is not None and app.bus.inventory.last is not None:
                break
            await asyncio.sleep(0.1)
        await pilot.pause()
        pid = app.session.link.pid
        checks = {c.name: c.ok for c in app.bus.preflight.last or []}
        kinds = sorted({r.kind for r in app.bus.inventory.last or []})
    print(json.dumps({"worker": pid, "gcloud": checks.get("gcloud auth"), "kinds": kinds,
                      "loaded": sorted({m.split(".")[0] for m in sys.modules} & set(%r))}))

asyncio.run(main())
""" % (HEAVY,)


def test_the_wizards_process_loads_no_cloud_client_while_its_worker_asks_the_sandbox(sandbox, tmp_path):
    env_path = _env(tmp_path, "tui-worker-modules")
    out = subprocess.run([sys.executable, "-c", WIZARD, str(env_path), json.dumps(sandbox)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["gcloud"] is True               # the preflight ran: in the worker
    assert seen["kinds"], seen                  # so did the inventory (absent things too)
    assert seen["loaded"] == [], f"the wizard's own process loaded {seen['loaded']}"
    # Quitting ended the worker too.
    deadline = time.monotonic() + 10
    while Path(f"/proc/{seen['worker']}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{seen['worker']}").exists(), "the worker outlived the wizard"


async def test_a_worker_that_dies_fails_its_waiting_calls_and_the_next_call_starts_another(
        sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    session = RemoteSession(_env(tmp_path, "tui-worker-crash"), lambda: Endpoints.sandbox(sandbox))
    try:
        assert {c.name for c in await session.preflight()} >= {"env.sh", "gcloud auth"}
        first = session.link.pid
        assert first is not None
        waiting = asyncio.ensure_future(session.preflight())   # gcloud: about a second
        await asyncio.sleep(0.3)
        os.kill(first, signal.SIGKILL)
        with pytest.raises(WorkerGone) as gone:
            await asyncio.wait_for(waiting, 30)
        assert "exit code -9" in str(gone.value)
        assert str(tmp_path / "state" / "rltui" / "cloudworker.log") in str(gone.value)
        checks = await session.preflight()                      # a new worker answers
        assert session.link.pid not in (None, first)
        assert any(c.name == "gcloud auth" and c.ok for c in checks)
    finally:
        await session.close()


async def test_a_bad_env_sh_comes_back_as_the_config_error_naming_each_field(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    env_path = _env(tmp_path, "tui-worker-config")
    session = RemoteSession(env_path, lambda: Endpoints.sandbox(sandbox))
    try:
        assert session.cfg is not None
        await session.inventory()                                # valid: answered
        # Saved with two bad values: the worker reads env.sh again before the next call.
        session.save_env({"REGION": "not a region!", "NUM_NODES": "zero"})
        assert session.cfg is None
        with pytest.raises(ConfigError) as bad:
            await session.inventory()
        fields = {p.field for p in bad.value.problems}
        assert {"REGION", "NUM_NODES"} <= fields, bad.value.problems
    finally:
        await session.close()


async def test_a_call_while_the_wizard_closes_starts_no_second_worker(sandbox, tmp_path, monkeypatch):
    """Quitting while a screen still polls: the poll's next call fails (WorkerGone) instead of
    starting a worker that nothing would close; close() returns (it waited for ever on one)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    session = RemoteSession(_env(tmp_path, "tui-worker-close"), lambda: Endpoints.sandbox(sandbox))
    await session.preflight()
    first = session.link.pid

    async def poll() -> None:   # a screen's poll loop, as the Metrics screen's
        while True:
            try:
                await session.inventory()
            except WorkerGone:
                return
            await asyncio.sleep(0.05)

    polling = asyncio.ensure_future(poll())
    await asyncio.sleep(0.5)
    await asyncio.wait_for(session.close(), 30)
    await asyncio.wait_for(polling, 30)
    assert session.link.pid == first, "no second worker"
    with pytest.raises(WorkerGone):
        await session.inventory()
