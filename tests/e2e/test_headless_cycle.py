"""Issue 4's acceptance: up -> submit -> logs -> status -> down against a fresh sandbox.

The headless commands run as a user runs them (subprocesses of `rltui`), in a fresh state
folder, with the devrel-demos env.sh (8 Spot B200 nodes), against the session's sandbox at
speed 300. One test per phase; they share the cluster, so they run in file order.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent.parent / "data"
TOKEN = "hf_e2eSecretValue" + "Q7x" * 8  # must never leave env.sh except into the Secret
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def user(sandbox, sandbox_dir, tmp_path_factory):
    home = tmp_path_factory.mktemp("user")
    env_sh = home / "env.sh"
    env_sh.write_text((DATA / "env" / "devrel-demos.env.sh").read_text().replace(
        'HF_TOKEN=""', f'HF_TOKEN="{TOKEN}"'))
    env_sh.chmod(0o600)
    env = {**os.environ, "RLTUI_SANDBOX_DIR": str(sandbox_dir), "XDG_STATE_HOME": str(home / "state"),
           "HOME": str(home)}
    return {"env": env, "env_sh": env_sh, "home": home, "status": sandbox, "outputs": []}


def rltui(user, *args, timeout=240):
    out = subprocess.run([sys.executable, "-m", "rltui.cli", *args, "--env", str(user["env_sh"]),
                          "--sandbox"], env=user["env"], capture_output=True, text=True,
                         timeout=timeout, cwd=user["home"])
    user["outputs"].append(out.stdout + out.stderr)
    return out


def status_json(user):
    out = rltui(user, "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_up_runs_the_lustre_chain_while_xpk_still_runs(user, monkeypatch):
    """In-process, to read the runner's own event timestamps."""
    from rltui.cloud.endpoints import Endpoints
    from rltui.config import parse_config
    from rltui.envfile import EnvFile
    from rltui.plan.wiring import make_runner
    from rltui.plan.context import Context

    monkeypatch.setenv("XDG_STATE_HOME", user["env"]["XDG_STATE_HOME"])
    cfg = parse_config(EnvFile.read(user["env_sh"]).values())
    events = []

    async def run():
        ctx = Context(cfg, Endpoints.sandbox(user["status"]))
        runner = make_runner(ctx, events.append)
        try:
            return await runner.up()
        finally:
            await ctx.close()

    result = asyncio.run(run())
    assert result.ok, result.messages

    def first(step, state):
        return min(e.at for e in events if e.step == step and e.state.value == state
                   and getattr(e, "kind", "state") == "state")

    xpk_done = first("xpk_cluster", "done")
    assert first("network_ready", "done") < xpk_done
    assert first("ip_range", "done") < xpk_done
    assert first("peering", "done") < xpk_done
    assert first("lustre_instance", "running") < xpk_done, "Lustre must start before xpk ends"
    # The Kubernetes objects go in while xpk runs; nothing changes the GKE cluster until xpk
    # (its Terraform) has exited: the addons start after it (AddonsStep).
    assert first("secret", "done") < xpk_done
    assert first("addons", "running") >= xpk_done


PROJECT, REGION, CLUSTER = "team-rl-sandbox-42", "us-east1", "ray-a4-gpu-spot"


def test_after_up_xpk_state_label_and_lustre_port_are_as_google_has_them(user):
    """xpk's state in 1.16.0's layout; the cluster labelled rltui's; the Lustre instance and
    the CSI driver agree about the legacy port (both off: nodes are >= 1.33.2-gke.4655000)."""
    import grpc
    from google.cloud import container_v1, lustre_v1
    from google.cloud.container_v1.services.cluster_manager.transports import (
        ClusterManagerGrpcTransport)
    from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcTransport

    from rltui.plan import xpkstate

    xpk_dir = Path(user["env"]["XDG_STATE_HOME"]) / "rltui" / "xpk" / PROJECT / CLUSTER
    assert xpkstate.has_state(xpk_dir, PROJECT, REGION, CLUSTER)
    assert (xpk_dir / "xpkclusters" / "gcluster-out").is_dir()
    assert not (xpk_dir / "xpkclusters" / CLUSTER).exists()
    channel = grpc.insecure_channel(user["status"]["grpc"])
    gke = container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(channel=channel))
    cluster = gke.get_cluster(name=f"projects/{PROJECT}/locations/{REGION}/clusters/{CLUSTER}")
    assert cluster.resource_labels["managed-by"] == "rltui"
    lustre = lustre_v1.LustreClient(transport=LustreGrpcTransport(channel=channel))
    inst = lustre.get_instance(
        name=f"projects/{PROJECT}/locations/us-east1-b/instances/rl-demo-gpu-lustre")
    csi = cluster.addons_config.lustre_csi_driver_config
    assert csi.enabled
    assert inst.gke_support_enabled is False and csi.enable_legacy_lustre_port is False


def sandbox_env(user):
    """`eval "$(rltui sandbox env)"`: what a user types to point the real gcloud at the sandbox."""
    out = subprocess.run([sys.executable, "-m", "rltui.cli", "sandbox", "env"], env=user["env"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    env = dict(user["env"])
    for line in out.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = shlex.split(value)[0]
    return env


def gcloud(env, *args):
    return subprocess.run(["gcloud", *args, f"--project={PROJECT}"], env=env, capture_output=True,
                          text=True, timeout=60)


def test_after_up_the_real_gcloud_shows_what_the_codelab_shows(user):
    env = sandbox_env(user)
    missing = gcloud(env, "compute", "addresses", "describe", "nope", "--global")
    assert missing.returncode == 1
    assert [line for line in missing.stderr.splitlines() if line.strip()][-2:] == [
        "ERROR: (gcloud.compute.addresses.describe) Could not fetch resource:",
        f" - The resource 'projects/{PROJECT}/global/addresses/nope' was not found"], missing.stderr
    state = gcloud(env, "lustre", "instances", "describe", "rl-demo-gpu-lustre", "--location=us-east1-b",
                   "--format=value(state)")
    assert state.stdout.strip() == "ACTIVE", state.stderr
    csi = gcloud(env, "container", "clusters", "describe", CLUSTER, f"--location={REGION}",
                 "--format=value(addonsConfig.lustreCsiDriverConfig.enabled)")
    assert csi.stdout.strip() == "True", csi.stderr
    peerings = gcloud(env, "services", "vpc-peerings", "list", f"--network={CLUSTER}-net-0", "--format=json")
    assert [c["peering"] for c in json.loads(peerings.stdout)] == ["servicenetworking-googleapis-com"], \
        peerings.stderr


def test_up_twice_creates_nothing_twice(user):
    before = status_json(user)
    kube = ["kubectl", "--kubeconfig", user["status"]["kubeconfig"]]
    uid = subprocess.run([*kube, "get", "raycluster", "ray-a4-gpu-spot", "-o",
                          "jsonpath={.metadata.uid}"], capture_output=True, text=True).stdout
    out = rltui(user, "up", "--yes")
    assert out.returncode == 0, out.stdout + out.stderr
    created = re.findall(r"^\s+\S+\s+(.+?)\s{2,}done\b", out.stdout, re.MULTILINE)
    # Only the local connection steps and the Secret (re-applied, unchanged) run again.
    assert set(created) <= {"Cluster credentials", "Secret (HF_TOKEN, WANDB_API_KEY)",
                            "Ray dashboard reachable"}, created
    assert "existed" in out.stdout
    # No local URL that dies with `up`: the port-forward it would point at was up's own.
    assert "http://" not in out.stdout and "kubectl port-forward service/" in out.stdout, out.stdout
    assert status_json(user)["resources"] == before["resources"]
    assert subprocess.run([*kube, "get", "raycluster", "ray-a4-gpu-spot", "-o",
                           "jsonpath={.metadata.uid}"], capture_output=True, text=True).stdout == uid
    lustre = gcloud(sandbox_env(user), "lustre", "instances", "list", "--location=-", "--format=value(name)")
    assert lustre.stdout.split() and len(lustre.stdout.split()) == 1, lustre.stdout


def test_the_wizard_reopened_shows_what_exists_as_done_without_a_key(user, monkeypatch):
    """Issue 12: reopened after `up` (or a quit mid-provision), Provision shows every step the
    cloud already has as done (its own probes), within 10 s and without ctrl+r."""
    import time as _time

    from rltui.app import RLTuiApp
    from rltui.cloud.endpoints import Endpoints
    from rltui.plan.step import StepState
    from rltui.session import Session
    from rltui.widgets.steps import StepsView

    monkeypatch.setenv("XDG_STATE_HOME", user["env"]["XDG_STATE_HOME"])
    monkeypatch.setenv("HOME", user["env"]["HOME"])
    session = Session(user["env_sh"], lambda: Endpoints.sandbox(user["status"]))

    async def run() -> dict[str, str]:
        app = RLTuiApp(session)
        async with app.run_test(size=(120, 40)) as pilot:
            await app.switch_mode("provision")
            t0 = _time.monotonic()
            states: dict[str, str] = {}
            while _time.monotonic() - t0 < 10:
                await pilot.pause(0.2)
                states = {v.name: v.state.value for v in app.screen.query_one(StepsView).views}
                if states and all(s == StepState.EXISTED.value for s in states.values()):
                    print(f"every step shown as existing {_time.monotonic() - t0:.2f} s after"
                          " Provision opened")
                    break
            await session.close()
            return states

    states = asyncio.run(run())
    assert len(states) == 13 and set(states.values()) == {"existed"}, {k: v for k, v in states.items() if v != "existed"}


def test_submit_then_logs_follow_shows_every_step_once_and_succeeds(user):
    out = rltui(user, "submit")
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip().splitlines()[-1]
    assert job_id.startswith("rltui-")
    logs = rltui(user, "logs", "--follow")
    assert logs.returncode == 0, logs.stderr[-2000:]
    lines = logs.stdout.rstrip("\n").splitlines()
    assert lines[-1] == "SUCCEEDED"
    steps = re.findall(r"=+ Step (\d+)/(\d+) =+", logs.stdout)
    assert [int(s) for s, _ in steps] == list(range(1, 21)), "each step exactly once, in order"
    assert "Step 20/20" in logs.stdout
    user["follow_out"] = logs.stdout
    user["first_job"] = job_id


def test_logs_without_follow_ends_with_the_jobs_status(user):
    """README: `rltui logs` gives the job's lines, "final status last"; as `--follow` does, the
    status alone on the last line (from the supervisor's record of the run, or Ray's job API)."""
    out = rltui(user, "logs")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[-1] == "SUCCEEDED" and lines[-2] != ""
    assert [int(s) for s, _ in re.findall(r"=+ Step (\d+)/(\d+) =+", out.stdout)] == list(range(1, 21))
    body = out.stdout[: -len("SUCCEEDED\n")]
    assert user["follow_out"].startswith(body), "the same log --follow gave"


def test_a_second_run_is_listed_and_compared_beside_the_first(user):
    """Issue 14: two sandbox runs in `rltui runs` (no env.sh, no sandbox needed to read them)
    and `rltui runs compare A B` with both side by side, step by step. A new submit gets a
    checkpoint folder of its own (--new-folder: the first one's holds step_20), so the second run
    trains its 20 steps again. This one is
    `submit --follow`: the id first, then the log as `logs --follow` gives it, the status last."""
    out = rltui(user, "submit", "--new-folder", "--follow")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.rstrip("\n").splitlines()
    first, second = user["first_job"], lines[0]
    assert second.startswith("rltui-") and second != first and lines[-1] == "SUCCEEDED", lines[-3:]
    assert [int(s) for s, _ in re.findall(r"=+ Step (\d+)/(\d+) =+", out.stdout)] == list(range(1, 21))

    def runs(*args):
        return subprocess.run([sys.executable, "-m", "rltui.cli", "runs", *args], env=user["env"],
                              capture_output=True, text=True, timeout=60, cwd=user["home"])
    listed = json.loads(runs("--json").stdout)
    assert sorted(r["id"] for r in listed) == sorted([first, second])
    assert all((r["status"], r["steps"]) == ("SUCCEEDED", 20) for r in listed), listed
    compare = runs("compare", first, second)
    assert compare.returncode == 0, compare.stderr
    text = compare.stdout
    assert f"A  {first}" in text and f"B  {second}" in text
    rows = re.findall(r"^\s*(\d+)\s+(-?\d\.\d{4})\s+(-?\d\.\d{4})\s", text, re.MULTILINE)
    assert [int(step) for step, _a, _b in rows] == list(range(1, 21)), text


def test_a_program_outside_rltui_sees_what_google_would_show(user, tmp_path):
    """Official clients and the status JSON only: the four APIs on, the cluster's networks,
    the documented Lustre metrics (one series per target, a non-zero summed write rate after
    the job), and a PV whose source cannot be patched."""
    status_file = tmp_path / "status.json"
    status_file.write_text(json.dumps(user["status"]))
    out = subprocess.run([sys.executable, str(Path(__file__).parent / "outside_after_job.py"),
                          str(status_file), PROJECT, "us-east1-b", "rl-demo-gpu-lustre", CLUSTER,
                          "rl-demo-gpu-lustre-pv"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all checks passed" in out.stdout


def test_status_lists_the_cluster_lustre_and_raycluster_and_the_job(user):
    data = status_json(user)
    states = {(r["kind"], r["name"]): r["state"] for r in data["resources"]}
    assert states[("GKE cluster", "ray-a4-gpu-spot")] == "running"
    assert states[("Lustre instance", "rl-demo-gpu-lustre")] == "active"
    assert states[("RayCluster", "ray-a4-gpu-spot")] == "ready"
    assert all({"kind", "name", "state", "owned"} <= set(r) for r in data["resources"])
    assert data["job"]["status"] == "SUCCEEDED"
    assert (data["job"]["step"], data["job"]["total_steps"]) == (20, 20)
    # The cost meter (issue 14): the cluster's 64 Spot B200 slices alone are over $300/h at the
    # sandbox catalog's 4.9542 $/h; the total since creation grows with the resources' age.
    cost = data["cost"]
    assert cost["per_hour"] > 64 * 4.9 and cost["since_created"] > 0, cost
    assert cost["currency"] == "USD" and cost["as_of"] and cost["estimate"] is True
    assert list((user["home"] / "state").rglob("cache/prices-sandbox-*.json"))
    assert "cost (estimate): $" in rltui(user, "status").stdout


def test_the_wizard_opened_90_s_after_the_job_dates_its_saves_within_the_run(user, monkeypatch):
    """Saves read from a finished job's log are dated from Ray's own times for the job and the
    steps' timers (rltui/saves.py), not from when the wizard read them: every save on Monitor
    lies within the job's run."""
    import time as _time

    from rltui.app import RLTuiApp
    from rltui.cloud.endpoints import Endpoints
    from rltui.session import Session
    from rltui.widgets.checkpoints import CheckpointsList
    from rltui.saves import Save

    monkeypatch.setenv("XDG_STATE_HOME", user["env"]["XDG_STATE_HOME"])
    monkeypatch.setenv("HOME", user["env"]["HOME"])
    session = Session(user["env_sh"], lambda: Endpoints.sandbox(user["status"]))

    async def run() -> tuple[float, float, list[Save], list[str]]:
        info = await session.job_info()
        assert info is not None and info.end_time_ms, info
        start, end = info.start_time_ms / 1000, info.end_time_ms / 1000
        await asyncio.sleep(max(0.0, end + 90 - _time.time()))
        app = RLTuiApp(session)
        async with app.run_test(size=(120, 40)) as pilot:
            await app.switch_mode("monitor")
            saves: list[Save] = []
            for _ in range(100):
                await pilot.pause(0.2)
                shown = app.screen.query_one(CheckpointsList)
                saves = [s for s in shown.checkpoints if isinstance(s, Save)]
                if len(saves) >= 2 and not any(s.seconds is None for s in saves):
                    break
            rows = shown.lines()
            await session.close()
        return start, end, saves, rows

    start, end, saves, rows = asyncio.run(run())
    assert len(saves) >= 2, rows   # the codelab's save_period 10, of 20 steps
    late = [(s.step, s.started, s.seconds) for s in saves
            if not (start <= s.started and s.started + (s.seconds or 0) <= end + 1)]
    assert not late, (start, end, late, rows)
    assert all(s.estimated for s in saves), rows
    assert all(re.match(r"\d+\s+~\d\d:\d\d:\d\d", row) for row in rows[1:1 + len(saves)]), rows


def test_down_deletes_everything_and_leaves_nothing(user):
    out = rltui(user, "down", "--yes")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "leak scan: nothing of rltui's left" in out.stdout
    data = status_json(user)
    assert [r for r in data["resources"] if r["state"] != "absent"] == []
    assert data["job"] is None
    assert data["cost"]["per_hour"] == 0 and data["cost"]["since_created"] == 0
    # The deleted cluster's jobs are kept aside (runs/), not shown as the current job.
    assert list((user["home"] / "state").rglob("runs/jobs-*.json"))
    # Its run's summary stays: `rltui runs` lists it, ended, with every step (rltui/runs.py).
    runs = subprocess.run([sys.executable, "-m", "rltui.cli", "runs", "--json"], env=user["env"],
                          capture_output=True, text=True, timeout=60, cwd=user["home"])
    listed = json.loads(runs.stdout)
    assert len(listed) == 2 and all((run["status"], run["steps"], run["attempts"]) == ("SUCCEEDED", 20, 1)
                                    for run in listed), listed
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    networks = compute_v1.NetworksClient(credentials=AnonymousCredentials(), client_options={
        "api_endpoint": user["status"]["compute"]}).list(project=PROJECT)
    assert not [n.name for n in networks if n.name.startswith(CLUSTER)]
    # `xpk cluster delete` ran once Lustre and the peering's range were gone, while the
    # cluster still existed: the cluster went during xpk's delete, never before it through
    # the GKE API (the sandbox's record of this down: its last operation of each kind).
    ops = json.loads(Path(user["status"]["record"]).read_text(encoding="utf-8"))["operations"]
    last = {op["kind"]: op for op in ops}
    lustre, xpk = last["lustre.delete"], last["xpk.delete"]
    address = [op for op in ops if op["kind"] == "compute.addresses.delete"
               and "/global/addresses/" in op["target"]][-1]     # the range, not a NAT IP
    assert xpk["start_ref_s"] >= max(lustre["end_ref_s"], address["end_ref_s"])
    assert xpk["error"] is None
    deletes = [op for op in ops if op["kind"] == "gke.delete_cluster"
               and op["start_ref_s"] >= lustre["start_ref_s"]]
    assert deletes and all(op["start_ref_s"] >= xpk["start_ref_s"] for op in deletes), deletes


def test_the_token_never_left_env_sh_except_into_the_secret(user):
    """Not in any command's output, nor in anything rltui wrote (job folder, progress, logs)."""
    for text in user["outputs"]:
        assert TOKEN not in text
    written = [p for p in (user["home"] / "state").rglob("*") if p.is_file()]
    assert any(p.name == "run_nemo_rl.sh" for p in written)
    for path in written:
        assert TOKEN.encode() not in path.read_bytes(), path
