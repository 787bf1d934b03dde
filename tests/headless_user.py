"""A user of the headless commands, as a shell runs them: `rltui ...` subprocesses with the
devrel-demos env.sh in a home and state folder of their own, against a running sandbox, on a
project of their own (any project ID works there). The recovery e2e and the chaos matrix use it.

Also the outside views the checks need, none of them rltui: kubectl on the sandbox's kubeconfig,
and the sandbox's own record of every operation it ran.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

DATA = Path(__file__).parent / "data"
CLUSTER, REGION, ZONE = "ray-a4-gpu-spot", "us-east1", "us-east1-b"
SAVE_PERIOD = 2  # CHECKPOINT_PERIOD's default (rltui/config.py): at most this many steps lost


@dataclass
class User:
    home: Path
    project: str
    sandbox_dir: Path
    status: dict[str, Any]
    outputs: list[str] = field(default_factory=list)
    _tool_env: dict[str, str] = field(default_factory=dict)

    @property
    def env_sh(self) -> Path:
        return self.home / "env.sh"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "RLTUI_SANDBOX_DIR": str(self.sandbox_dir),
                "XDG_STATE_HOME": str(self.home / "state"), "HOME": str(self.home)}

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "rltui.cli", *args, "--env", str(self.env_sh), "--sandbox"]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(self.argv(*args), env=self.env, capture_output=True, text=True,
                             timeout=timeout, cwd=self.home)
        self.outputs.append(out.stdout + out.stderr)
        return out

    def start(self, *args: str) -> subprocess.Popen[str]:
        """A command left running (its output into a file of the home), to be killed."""
        log = open(self.home / f"{args[0]}-{time.monotonic_ns()}.log", "w")  # noqa: SIM115
        return subprocess.Popen(self.argv(*args), env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                text=True, cwd=self.home)

    def status_json(self) -> dict[str, Any]:
        out = self.run("status", "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        return dict(json.loads(out.stdout))

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """kubectl on this project's cluster, with the credentials get-credentials wrote."""
        return subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig(), *args], env=self.tool_env(),
                              capture_output=True, text=True, timeout=60)

    def tool_env(self) -> dict[str, str]:
        """`eval "$(rltui sandbox env)"`: the real gcloud, its auth plugin and kubectl on the sandbox."""
        if not self._tool_env:
            exports = subprocess.run([sys.executable, "-m", "rltui.cli", "sandbox", "env"], env=self.env,
                                     capture_output=True, text=True, timeout=60)
            assert exports.returncode == 0, exports.stderr
            env = dict(self.env)
            for line in exports.stdout.splitlines():
                name, _, value = line.removeprefix("export ").partition("=")
                env[name] = shlex.split(value)[0] if value else ""
            env["KUBECONFIG"] = str(self.home / "kubeconfig")
            self._tool_env = env
        return self._tool_env

    def kubeconfig(self) -> str:
        path = self.home / "kubeconfig"
        if not path.exists():
            got = subprocess.run(["gcloud", "container", "clusters", "get-credentials", CLUSTER,
                                  f"--region={REGION}", f"--project={self.project}"], env=self.tool_env(),
                                 capture_output=True, text=True, timeout=120)
            assert got.returncode == 0, got.stderr
        return str(path)


def make_user(home: Path, project: str, sandbox_dir: Path, status: dict[str, Any]) -> User:
    home.mkdir(parents=True, exist_ok=True)
    env_sh = home / "env.sh"
    env_sh.write_text((DATA / "env" / "devrel-demos.env.sh").read_text().replace(
        'PROJECT_ID="', f'PROJECT_ID="{project}" # was: "', 1))
    env_sh.chmod(0o600)
    return User(home, project, sandbox_dir, status)


# The API methods that change something (a call counter's name containing one of these).
WRITES = (".insert", ".create", "Create", ".delete", "Delete", ".enable", "Enable", ".update", "Update",
          "addPeering", "connections.create", "setLabels", "SetLabels")


def writes(rec: dict[str, Any]) -> dict[str, int]:
    """The record's call counters of methods that change something."""
    return {k: v for k, v in rec["calls"].items() if any(w in k for w in WRITES)}


@contextmanager
def private_sandbox(root: Path, **start: Any) -> Iterator[dict[str, Any]]:
    """A sandbox daemon of a test module's own (rltui_sandbox.manage.start's options), its
    status while it runs; stopped after."""
    from rltui_sandbox import manage

    status = manage.start(root=root, **start)
    try:
        yield dict(status.info)
    finally:
        manage.stop(root)


def record(status: dict[str, Any]) -> dict[str, Any]:
    """The sandbox's record (sandbox/rltui_sandbox/record.py): its operations and API call counts."""
    with urllib.request.urlopen(status["kube_api"].rstrip("/") + "/_sandbox/record", timeout=30) as resp:
        return dict(json.loads(resp.read()))


def operations(status: dict[str, Any], kind: str, project: str) -> list[dict[str, Any]]:
    return [op for op in record(status)["operations"]
            if op["kind"] == kind and f"projects/{project}/" in op["target"]]


def run_state(user: User, job_id: str) -> dict[str, Any] | None:
    """The supervisor's record of a run, read with kubectl (not rltui)."""
    name = "rltui-run-" + job_id.removeprefix("rltui-")
    out = user.kubectl("get", "configmap", name, "-o", "jsonpath={.data.state\\.json}")
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return dict(json.loads(out.stdout))


def wait_for(what: str, check: Any, timeout_s: float, every_s: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(every_s)


def supervisor_runs_on_the_system_pool(user: User, job_id: str, within_s: float = 60.0) -> None:
    """The run's supervisor Deployment is Available, its pod on a node with the system pool's taint."""
    name = "rltui-supervisor-" + job_id.removeprefix("rltui-")

    def available() -> bool:
        out = user.kubectl("get", "deployment", name, "-o",
                           "jsonpath={.status.conditions[?(@.type=='Available')].status}")
        return out.returncode == 0 and out.stdout.strip() == "True"
    wait_for(f"the supervisor {name} to be Available", available, within_s)
    pods = json.loads(user.kubectl("get", "pods", "-l", f"rltui/run={job_id.removeprefix('rltui-')}",
                                   "-o", "json").stdout)["items"]
    node = json.loads(user.kubectl("get", "node", pods[0]["spec"]["nodeName"], "-o", "json").stdout)
    assert "components.gke.io/gke-managed-components" in {t["key"] for t in node["spec"].get("taints") or []}


def saves_on_volume(sandbox_dir: Path, project: str = "*") -> set[Path]:
    """The demo job's complete saves (step_N folders: tmp_step_N is renamed once written) on the
    sandbox's Lustre stand-ins, of one project or all."""
    return {p for root in sandbox_dir.glob(f"*/lustre/{project}") for p in root.rglob("step_*") if p.is_dir()}


def saved_on_volume(user: User) -> set[Path]:
    return saves_on_volume(user.sandbox_dir, user.project)


def preempted_run_recovers(user: User, *, hard: bool = False, submit: tuple[str, ...] = ()) -> None:
    """On a ready RayCluster: submit (with `submit` flags); `rltui sandbox preempt` at step 5 or later (`hard`:
    without a shutdown, as `rltui sandbox preempt --hard`); then only `status`: SUCCEEDED with
    two attempts, the second resuming from the newest save."""
    saved_before = saved_on_volume(user)
    sub = user.run("submit", *submit)
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip().splitlines()[-1]
    assert "supervisor" in sub.stderr
    # From here on no rltui command but `status`: kubectl reads the supervisor's record.
    # Step 5 starts right after step 4's save: watched on the volume, not through the
    # supervisor's record, whose lags on a loaded machine once added up to more than the steps
    # the run had left, so the preemption came after the run's end.
    wait_for("step 4's save on the volume", lambda: any(int(p.name[5:]) >= 4 for p in
                                                         saved_on_volume(user) - saved_before), 180, every_s=0.1)
    # The sandbox's default: a GPU node with a Ray worker but not the head, as Spot takes them.
    pre = subprocess.run([sys.executable, "-m", "rltui.cli", "sandbox", "preempt", *(["--hard"] if hard else [])],
                         env=user.env, capture_output=True, text=True, timeout=60)
    assert pre.returncode == 0, pre.stdout + pre.stderr
    print(f"preempted at step {(run_state(user, job_id) or {}).get('step')}")  # shown with -s
    supervisor_runs_on_the_system_pool(user, job_id)
    try:
        recovering = wait_for("RECOVERING", lambda: (run_state(user, job_id) or {}).get("status") == "RECOVERING"
                              or len((run_state(user, job_id) or {}).get("attempts", [])) > 1, 240)
    except AssertionError:
        pods = user.kubectl("get", "pods", "-o", "wide").stdout
        logs = user.kubectl("logs", "-l", "app.kubernetes.io/name=rltui-supervisor", "--tail", "40").stdout
        raise AssertionError(f"not RECOVERING: {json.dumps(run_state(user, job_id))[-1500:]}\n{pods}\n{logs}") from None
    assert recovering
    final = wait_for("the run to end", lambda: (s := run_state(user, job_id)) and s.get("status") in
                     ("SUCCEEDED", "FAILED", "STOPPED") and s, 600, every_s=1.0)
    assert final["status"] == "SUCCEEDED", json.dumps(final, indent=1)[-3000:]
    data = user.status_json()
    job = data["job"]
    assert job["status"] == "SUCCEEDED" and (job["step"], job["total_steps"]) == (20, 20), job
    assert len(job["attempts"]) == 2, json.dumps(final, indent=1)[-4000:]
    first, second = job["attempts"]
    print(f"recovery: {job.get('recovery')}; lost {first['lost_steps']} steps; first step of attempt 2:"
          f" {second['first_step']}; recover_s {second['recover_s']}")
    assert first["id"] == job_id and second["id"] == job["id"] != job_id
    assert second["first_step"] > 1 and second["resumed_from_step"] >= 1
    assert second["first_step"] == second["resumed_from_step"] + 1
    assert first["lost_steps"] <= SAVE_PERIOD, first
    assert first["last_step"] >= 5, first   # the preemption came at step 5 or later
    assert "preempted: pod " in second["reason"], second
    # Each attempt's id works with `logs --job`; `logs --follow` shows the run once, marked.
    logs = user.run("logs", "--follow")
    assert logs.returncode == 0, logs.stderr[-2000:]
    assert logs.stdout.rstrip("\n").splitlines()[-1] == "SUCCEEDED"
    assert logs.stdout.count("──── attempt 2 (") == 1
    after = logs.stdout.split("──── attempt 2 (", 1)[1]
    assert f"Step {second['first_step']}/20" in after and "Step 20/20" in after, after[-2000:]
    attempt2 = user.run("logs", "--job", second["id"])
    assert attempt2.returncode == 0 and f"Step {second['first_step']}/20" in attempt2.stdout
    assert "Step 1/20" not in attempt2.stdout
