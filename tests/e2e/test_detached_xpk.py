"""A killed rltui does not take xpk with it, and never starts it twice (Cloud Shell drops
sessions while `xpk cluster create` runs for most of an hour).

A fresh sandbox daemon of its own (its record counts only this module's calls) at speed 150,
where xpk's create takes ~10 s; `rltui` runs as the user runs it, a subprocess with the
devrel-demos env.sh (2 nodes) in a fresh state folder. Two phases in file order:
1. `up --yes`, SIGKILL it while xpk runs: xpk lives on; `down --yes` stops it by PID and
   leaves nothing.
2. `up --yes`, SIGKILL it while xpk runs: xpk lives on; the rerun says it re-attached to that
   PID, ends 0, and xpk ran once: one `xpk.create` (a gcluster deploy) in the sandbox's record,
   and two `gcloud container get-server-config` (container:locations.getServerConfig), which
   only an xpk create asks; rltui is killed only after those, so a second xpk would show.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rltui.cloud.detached import Detached, is_live

DATA = Path(__file__).parent.parent / "data"
PROJECT, CLUSTER = "team-rl-sandbox-42", "ray-a4-gpu-spot"
SPEED = 150.0
SERVER_CONFIG = "container:locations.getServerConfig"  # twice per `xpk cluster create`
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    from rltui_sandbox import manage

    home = tmp_path_factory.mktemp("detached")
    root = Path(tmp_path_factory.mktemp("sbxd"))
    env_sh = home / "env.sh"
    env_sh.write_text((DATA / "env" / "devrel-demos.env.sh").read_text().replace(
        'NUM_NODES="8"', 'NUM_NODES="2"'))
    env_sh.chmod(0o600)
    state = home / "state"
    env = {**os.environ, "RLTUI_SANDBOX_DIR": str(root), "XDG_STATE_HOME": str(state),
           "HOME": str(home)}
    status = manage.start(speed=SPEED, root=root)
    xpk = Detached(state / "rltui" / "xpk" / PROJECT / CLUSTER, "xpk")
    try:
        yield {"env": env, "env_sh": env_sh, "home": home, "status": status.info, "xpk": xpk}
    finally:
        left = xpk.live()
        if left is not None:       # a failed test must not leave xpk running
            os.killpg(left.pid, signal.SIGKILL)
        manage.stop(root)


def argv(user, *args):
    return [sys.executable, "-m", "rltui.cli", *args, "--env", str(user["env_sh"]), "--sandbox"]


def rltui(user, *args, timeout=120):
    return subprocess.run(argv(user, *args), env=user["env"], capture_output=True, text=True,
                          timeout=timeout, cwd=user["home"])


def _record(user) -> dict:
    """The daemon's GET /_sandbox/record (the file is written at most twice a second)."""
    with urllib.request.urlopen(f"{user['status']['kube_api']}/_sandbox/record", timeout=10) as r:
        return dict(json.loads(r.read()))


def server_configs(user) -> int:
    return int(_record(user)["calls"].get(SERVER_CONFIG, 0))


def xpk_creates(user) -> int:
    """gcluster deploys the sandbox ran (sandbox/rltui_sandbox/control.py records each)."""
    return sum(op["kind"] == "xpk.create" for op in _record(user)["operations"])


def up_then_sigkill_while_xpk_runs(user):
    """Start `rltui up --yes`, SIGKILL it once its xpk has asked the cloud (the sandbox's record
    counts xpk's get-server-config); return xpk's record."""
    asked = server_configs(user) + 2
    up = subprocess.Popen(argv(user, "up", "--yes"), env=user["env"], cwd=user["home"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while (rec := user["xpk"].live()) is None or server_configs(user) < asked:
            assert up.poll() is None, "rltui up ended before xpk ran"
            assert time.monotonic() < deadline, "xpk never started"
            time.sleep(0.1)
    finally:
        up.kill()
        up.wait()
    assert is_live(rec), "xpk died with rltui"
    return rec


def test_down_during_a_detached_create_stops_it_by_pid_and_leaves_nothing(user):
    rec = up_then_sigkill_while_xpk_runs(user)
    status = json.loads(rltui(user, "status", "--json").stdout)
    assert status["background"] == {"tool": "xpk", "verb": "create", "pid": rec.pid,
                                    "started_at": rec.started_at, "log": rec.log}
    out = rltui(user, "down", "--yes")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"stopping xpk cluster create (PID {rec.pid}, running since" in out.stdout
    assert not is_live(rec)
    assert "leak scan: nothing of rltui's left" in out.stdout
    after = json.loads(rltui(user, "status", "--json").stdout)
    assert [r for r in after["resources"] if r["state"] != "absent"] == []
    assert after["background"] is None
    assert "Traceback" not in out.stderr


def test_up_killed_while_xpk_runs_is_resumed_by_the_next_up_without_a_second_xpk(user):
    before, deploys = server_configs(user), xpk_creates(user)
    rec = up_then_sigkill_while_xpk_runs(user)
    out = rltui(user, "up", "--yes")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"re-attaching to xpk cluster create (PID {rec.pid}, running since" in out.stdout
    assert f"its log is {rec.log}" in out.stdout
    assert "is ready and its dashboard answers" in out.stdout
    assert not is_live(rec), "it finished by itself"
    assert user["xpk"].read() == rec, "no other xpk was started"
    assert server_configs(user) - before == 2, "exactly one `xpk cluster create` asked the cloud"
    assert xpk_creates(user) - deploys == 1, "one xpk create in the sandbox's record"
    status = json.loads(rltui(user, "status", "--json").stdout)
    states = {(r["kind"], r["name"]): r["state"] for r in status["resources"]}
    assert states[("GKE cluster", CLUSTER)] == "running"
    assert states[("RayCluster", CLUSTER)] == "ready"
    assert status["background"] is None
