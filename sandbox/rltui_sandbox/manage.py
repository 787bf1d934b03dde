"""Start, inspect and stop the sandbox daemon: a background process that outlives the wizard.

The daemon writes `daemon.json` (its endpoints) once every endpoint answers, and
`children.json` (the PIDs it started, e.g. Ray heads) whenever that changes, so `stop` can end
everything by PID even when the daemon itself died. Standard library only: the CLI imports it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

STATUS_FILE = "daemon.json"
CHILDREN_FILE = "children.json"
LOG_FILE = "daemon.log"
START_TIMEOUT_S = 10.0
GCLOUD_CONFIG_DIR = "gcloud"  # beside the kubeconfig: <sandbox dir>/gcloud
ACCESS_TOKEN_FILE = "access_token"  # CLOUDSDK_AUTH_ACCESS_TOKEN_FILE for the real gcloud (mode 0600)
GCLOUD_KUBECONFIG = "kubeconfig-gcloud"  # KUBECONFIG for the real gcloud and kubectl
# gcloud's API name (CLOUDSDK_API_ENDPOINT_OVERRIDES_<NAME>) -> the status `rest` key
GCLOUD_APIS = ("compute", "lustre", "container", "servicenetworking", "serviceusage", "cloudresourcemanager")


class SandboxError(Exception):
    """Something the user can act on; printed as one line."""


def sandbox_dir() -> Path:
    explicit = os.environ.get("RLTUI_SANDBOX_DIR")
    if explicit:
        return Path(explicit).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state) / "rltui" / "sandbox"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Status:
    info: dict[str, Any]

    @property
    def pid(self) -> int:
        return int(self.info["pid"])


def read_status(root: Path | None = None) -> Status | None:
    """The running daemon's status, or None when none runs (a stale file is ignored)."""
    root = root or sandbox_dir()
    info = _read_json(root / STATUS_FILE)
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return None
    if not pid_alive(info["pid"]):
        return None
    return Status(info)


def _answers(info: dict[str, Any]) -> bool:
    host, _, port = str(info.get("grpc", "")).rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            pass
        with urllib.request.urlopen(f"{info['kube_api']}/version", timeout=1) as resp:
            return resp.status == 200
    except (OSError, ValueError, KeyError):
        return False


def start(speed: float = 60.0, faults: float = 0.0, seed: int = 0, profile: Path | None = None,
          root: Path | None = None, timeout: float = START_TIMEOUT_S,
          quotas: dict[str, float] | None = None, lustre_quota_gib: int | None = None,
          denied: list[str] | None = None, kuberay_version: str | None = None,
          unavailable_capacity: list[str] | None = None) -> Status:
    """Start the daemon (or return the running one) once all its endpoints answer. `quotas`:
    regional Compute Engine limits by metric; `lustre_quota_gib`: Lustre capacity per zone and
    network; `denied`: permissions the caller lacks; `kuberay_version`: the KubeRay release the
    RayOperator add-on runs (None: kuberay/versions.py DEFAULT); `unavailable_capacity`: GPU
    capacity kinds ("spot", "on-demand") whose pools stock out (world_capacity). A running daemon
    keeps its own."""
    root = root or sandbox_dir()
    running = read_status(root)
    if running:
        (root / GCLOUD_CONFIG_DIR).mkdir(exist_ok=True)
        return running
    from . import images

    try:
        images.ray_env()  # the cluster's Ray (images.py): no Ray head nor job runs without it
    except images.MissingRayEnv as exc:
        raise SandboxError(str(exc)) from None
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    # The gcloud config directory the sandbox's tools use (Endpoints.sandbox sets CLOUDSDK_CONFIG to
    # it): xpk refuses to run when it does not exist ("Failed to find gcloud credential directory").
    (root / GCLOUD_CONFIG_DIR).mkdir(exist_ok=True)
    (root / STATUS_FILE).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "rltui_sandbox.daemon", "--dir", str(root), "--speed", str(speed),
            "--faults", str(faults), "--seed", str(seed)]
    if profile:
        argv += ["--profile", str(Path(profile).resolve())]
    for metric, limit in (quotas or {}).items():
        argv += ["--quota", f"{metric}={limit}"]
    if lustre_quota_gib is not None:
        argv += ["--lustre-quota-gib", str(lustre_quota_gib)]
    for permission in denied or ():
        argv += ["--deny", permission]
    if kuberay_version is not None:
        argv += ["--kuberay-version", kuberay_version]
    for kind in unavailable_capacity or ():
        argv += ["--capacity", f"{kind}=unavailable"]
    log = open(root / LOG_FILE, "ab")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True, close_fds=True)
    finally:
        log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise SandboxError(f"the sandbox daemon exited with code {code}; see {root / LOG_FILE}")
        info = _read_json(root / STATUS_FILE)
        if isinstance(info, dict) and info.get("pid") == proc.pid and _answers(info):
            return Status(info)
        time.sleep(0.05)
    children = _children(root)  # read first: the daemon removes the file as it stops
    _terminate([proc.pid], grace=3.0)
    _sweep_sessions(children, grace=5.0)  # Ray heads it had started (a restart with saved state)
    raise SandboxError(f"the sandbox did not answer within {timeout:.0f} s; see {root / LOG_FILE}")


def _terminate(pids: list[int], grace: float) -> list[int]:
    """SIGTERM each PID (and its process group if it leads one), SIGKILL what outlives `grace`."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if pid_alive(p)]
    for pid in left:
        for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
    return left


def _children(root: Path) -> list[int]:
    data = _read_json(root / CHILDREN_FILE)
    return [int(p) for p in data.get("pids", [])] if isinstance(data, dict) else []


def session_members(sid: int) -> list[int]:
    """PIDs in session `sid` (a Ray head runs in a session of its own: only its processes)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry))
    return members


def _sweep_sessions(sids: list[int], grace: float) -> list[int]:
    """End every process left in these sessions: SIGTERM, then SIGKILL after `grace`."""
    ended: list[int] = []
    deadline = time.monotonic() + grace
    sent_kill = False
    while True:
        left = [p for sid in sids for p in session_members(sid)]
        if not left:
            return ended
        sig = signal.SIGKILL if time.monotonic() > deadline else signal.SIGTERM
        if sig == signal.SIGKILL and sent_kill and time.monotonic() > deadline + 5:
            return ended  # unkillable (D state): reported by the caller
        for pid in left:
            try:
                os.kill(pid, sig)
                if pid not in ended:
                    ended.append(pid)
            except ProcessLookupError:
                pass
        sent_kill = sent_kill or sig == signal.SIGKILL
        time.sleep(0.1)


def stop(root: Path | None = None, grace: float = 15.0) -> list[int]:
    """End the daemon and everything it started, by PID. Returns the PIDs that were ended."""
    root = root or sandbox_dir()
    info = _read_json(root / STATUS_FILE)
    children = _children(root)  # read first: the daemon removes the file as it stops
    daemon = [int(info["pid"])] if isinstance(info, dict) and isinstance(info.get("pid"), int) else []
    daemon = [p for p in daemon if pid_alive(p)]
    _terminate(daemon, grace)  # the daemon stops its own Ray heads first
    swept = _sweep_sessions(children, grace=5.0)
    (root / STATUS_FILE).unlink(missing_ok=True)
    (root / CHILDREN_FILE).unlink(missing_ok=True)
    left = [p for p in daemon if pid_alive(p)] + [p for sid in children for p in session_members(sid)]
    if left:
        raise SandboxError(f"could not end processes {left}; end them by hand")
    return daemon + [p for p in swept if p not in daemon]


def tool_env(info: Mapping[str, Any]) -> dict[str, str]:
    """The environment that points the REAL gcloud (and kubectl, through the kubeconfig
    `gcloud container clusters get-credentials` writes) at this sandbox without touching the
    user's own gcloud or kube config: the endpoint overrides (SOURCES.md#real-gcloud-offline:
    COMPUTE takes `/compute/v1/`, STORAGE `/storage/v1/`, the others the host root), any token from a file,
    a private CLOUDSDK_CONFIG and KUBECONFIG, no prompts, no update check or usage reporting
    (both would reach Google). When the daemon runs its proxy (status key `proxy`), gcloud is sent
    through it (CLOUDSDK_PROXY_*) trusting the sandbox CA (CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE):
    that is how `gcloud services vpc-peerings`, for which SDK 528 has no override, reaches the
    sandbox's Service Networking; the overridden APIs then travel through the proxy as well
    (gcloud ignores NO_PROXY), which forwards them to their ports unchanged. The daemon stores
    this as status key `tool_env`; rltui runs xpk, gcloud and kubectl with it
    (Endpoints.sandbox), and `rltui sandbox env` prints it."""
    rest = info.get("rest")
    if not isinstance(rest, dict):
        raise SandboxError("this sandbox predates the REST APIs for gcloud: restart it "
                           "(rltui sandbox stop && rltui sandbox start)")
    root = Path(info["gcloud_config"]).parent
    token_file = Path(info.get("access_token_file") or root / ACCESS_TOKEN_FILE)
    env = {f"CLOUDSDK_API_ENDPOINT_OVERRIDES_{api.upper()}": str(rest[api]) for api in GCLOUD_APIS}
    if rest.get("storage"):
        # gcloud's storage client takes the override with its version path, as its generated
        # client's BASE_URL has it (rest_storage.py); `rest.storage` is the host root.
        env["CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE"] = str(rest["storage"]) + "storage/v1/"
    env.update({
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token_file),
        "CLOUDSDK_CONFIG": str(info["gcloud_config"]),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "1",
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "1",
        "KUBECONFIG": str(info.get("gcloud_kubeconfig") or root / GCLOUD_KUBECONFIG),
    })
    if info.get("proxy"):
        address, _, port = str(info["proxy"]).rpartition(":")
        env.update({"CLOUDSDK_PROXY_TYPE": "http", "CLOUDSDK_PROXY_ADDRESS": address,
                    "CLOUDSDK_PROXY_PORT": port,
                    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": str(info["kube_ca"])})
    return env


def gcloud_env(status: Status) -> dict[str, str]:
    """The daemon's `tool_env` (see tool_env)."""
    stored = status.info.get("tool_env")
    return dict(stored) if isinstance(stored, dict) else tool_env(status.info)


TOOLS_DIR = "tools"      # <sandbox dir>/tools: what `rltui sandbox env` puts first on PATH
TOOLS_ENV = "RLTUI_SANDBOX_TOOLS"   # names that folder in the user's shell


def shell_tools(status: Status) -> tuple[Path, list[str]]:
    """The folder holding exactly the two commands the codelab runs that are not on a plain
    machine: `xpk` (the sandbox's fake xpk 1.16.0, which itself needs only the real gcloud and
    kubectl from the user's PATH) and `ray` (the Ray CLI beside this Python, i.e. the user's own
    `pip install "ray[default]"`, as the codelab tells Cloud Shell users). Links, remade on
    every call, so the folder follows a restarted daemon and a reinstalled Ray. Returns the
    folder and what is missing, one line each."""
    root = Path(status.info.get("bin_dir") or Path(status.info["gcloud_config"]).parent / "bin")
    folder = root.parent / TOOLS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {"xpk": root / "xpk", "ray": Path(sys.executable).parent / "ray"}
    missing = []
    for name, target in wanted.items():
        link = folder / name
        if not target.exists():
            link.unlink(missing_ok=True)
            missing.append(f"{name}: not found at {target}" + (
                " (pip install \"ray[default]\" into rltui's environment)" if name == "ray" else
                " (restart the sandbox: rltui sandbox stop && rltui sandbox start)"))
            continue
        tmp = folder / f".{name}.tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, link)
    return folder, missing


def env_lines(status: Status, tools: Path | None = None) -> list[str]:
    """`export NAME=value` lines (shell-quoted) for `eval "$(rltui sandbox env)"`; with `tools`
    (shell_tools' folder) a last line puts it first on PATH, the PATH of the shell that evals it
    kept after it ("$PATH" expands then, so it stays outside the quoting). That line first
    exports the folder as RLTUI_SANDBOX_TOOLS: a reader taking each line as one NAME=value
    (KEY=VALUE parsers) reads that, never a PATH with "$PATH" unexpanded in it."""
    import shlex

    lines = [f"export {name}={shlex.quote(value)}" for name, value in gcloud_env(status).items()]
    if tools is not None:
        quoted = shlex.quote(str(tools))
        lines.append(f'export {TOOLS_ENV}={quoted} PATH={quoted}:"$PATH"')
    return lines


def _fault(status: Status, path: str, body: dict[str, Any], what: str, timeout: float) -> dict[str, Any]:
    """POST a fault command to the daemon's control API; its JSON answer, else SandboxError with
    the daemon's own message."""
    req = urllib.request.Request(f"{status.info['kube_api']}{path}", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return dict(json.loads(resp.read() or b"{}"))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        try:
            detail = json.loads(detail).get("message", detail)
        except ValueError:
            pass
        raise SandboxError(detail.strip() or f"{what} failed: HTTP {exc.code}") from None
    except OSError as exc:
        raise SandboxError(f"the sandbox did not answer: {exc}") from None


def preempt(status: Status, node: str | None = None, head: bool = False, hard: bool = False) -> str:
    """Take a GPU node away like a Spot preemption (`head`: the Ray head pod's; `hard`: without
    a graceful shutdown); returns what happened, in one line."""
    result = _fault(status, "/_sandbox/preempt", {**({"head": True} if head else {"node": node}), "hard": hard},
                    "preempt", 10)
    pods = ", ".join(result.get("pods", [])) or "no pod"
    if result.get("mode") == "hard":
        return (f"preempted node {result.get('node')} without a shutdown ({pods}): Ray lost it now, Kubernetes"
                f" sees it NotReady in about {result.get('not_ready_in_s', '?')} s; it comes back in about"
                f" {result.get('returns_in_s', '?')} s")
    return f"preempted node {result.get('node')} ({pods}): its pods were shut down; it comes back in about" \
           f" {result.get('returns_in_s', '?')} s"


def stall(status: Status, job: str | None = None) -> str:
    """Freeze the driver of the one RUNNING job (or `job`) with SIGSTOP, touching no pod
    (kuberay/stall.py); returns what happened, in one line."""
    result = _fault(status, "/_sandbox/stall", {"job": job} if job else {}, "stall", 30)
    return str(result.get("message") or f"froze the driver of job {result.get('job')} (pid {result.get('pid')})")
