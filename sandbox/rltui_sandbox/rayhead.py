"""A real local Ray head: the sandbox's stand-in for the RayCluster's head service.

Started as `ray start --head --block` in its own session, with a free port for every port Ray
would otherwise take from a fixed default, so a developer's sandbox and a test session can run
side by side. Stopped by signalling its PID and then its own session: never `ray stop`, which
kills every Ray on the machine.

The head is the cluster's Ray, so it runs the image's Ray, not rltui's: by default the `ray` of the
sandbox's Ray environment (images.py: Ray 2.46.0, as nvcr.io/nvidia/nemo-rl:v0.4.0 pins it), or the
`ray` executable a caller names.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from rltui_sandbox import images

# Ray puts unix sockets under <temp_dir>/session_<date>_<time>_<usec>_<pid>/sockets/...,
# and a socket path must stay under 107 bytes.
MAX_TEMP_DIR_CHARS = 40
OBJECT_STORE_BYTES = 78643200  # 75 MiB, the smallest Ray accepts.

# `ray start` flags whose defaults are fixed ports (6379, 8265, 52365, 10001) or that we pin
# anyway so nothing of this head is left to chance.
_PORT_FLAGS = (
    "--port",
    "--dashboard-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--metrics-export-port",
    "--node-manager-port",
    "--object-manager-port",
    "--runtime-env-agent-port",
    "--ray-client-server-port",
)


def free_ports(n: int) -> list[int]:
    """`n` distinct ports the OS considers free now (all held open together while picking)."""
    with ExitStack() as stack:
        ports = []
        for _ in range(n):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


def ray_executable(image: str | None = None) -> Path:
    """The `ray` CLI of the environment that runs `image` (default: the sandbox's Ray environment);
    images.MissingRayEnv, one line naming `make ray-env`, when it is not installed."""
    return (images.ray_env() if image is None else images.for_image(image)).ray


def _proc_table() -> dict[int, tuple[str, int, int, int, int]]:
    """pid -> (state, ppid, pgrp, session, starttime) for every process in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state ppid pgrp session ... starttime (20th).
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry)] = (fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    return table


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) PIDs whose session or process group is `sid`."""
    return [pid for pid, (state, _, pgrp, session, _) in _proc_table().items()
            if state != "Z" and sid in (pgrp, session)]


def descendants(pid: int) -> dict[int, int]:
    """Live descendants of `pid` (pid -> starttime), also those that left its session: Ray runs
    each job's entrypoint and the entrypoint's watchdog in sessions of their own."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for child, (_, ppid, _, _, _) in table.items():
        children.setdefault(ppid, []).append(child)
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        if table[child][0] != "Z":
            found[child] = table[child][4]
        todo.extend(children.get(child, []))
    return found


class RayHead:
    """One `ray start --head --block` process and the ports it was given."""

    def __init__(self, proc: subprocess.Popen[bytes], ports: dict[str, int], temp_dir: Path,
                 owns_temp_dir: bool, log_path: Path) -> None:
        self._proc = proc
        self.pid: int = proc.pid
        self.ports = ports
        self.gcs_address = f"127.0.0.1:{ports['--port']}"
        self.dashboard_url = f"http://127.0.0.1:{ports['--dashboard-port']}"
        self.temp_dir = temp_dir
        self.log_path = log_path
        self._owns_temp_dir = owns_temp_dir

    @classmethod
    def start(cls, temp_dir: Path | None, env: dict[str, str], num_cpus: int = 1,
              ray: Path | None = None) -> "RayHead":
        """Launch the head with `ray` (default: ray_executable()); `env` is laid over this process's
        environment (e.g. PATH, NEMO_RL_DIR)."""
        ray = ray_executable() if ray is None else ray
        owns = temp_dir is None
        if temp_dir is None:
            temp_dir = Path(tempfile.mkdtemp(prefix="rlray", dir="/tmp"))
        temp_dir = Path(temp_dir).absolute()
        if len(str(temp_dir)) > MAX_TEMP_DIR_CHARS:
            raise ValueError(
                f"Ray temp dir {temp_dir} is longer than {MAX_TEMP_DIR_CHARS} characters: "
                "Ray's unix socket paths under it would exceed the OS limit"
            )
        temp_dir.mkdir(parents=True, exist_ok=True)
        ports = dict(zip(_PORT_FLAGS, free_ports(len(_PORT_FLAGS))))
        argv = [str(ray), "start", "--head", "--block",
                "--node-ip-address", "127.0.0.1", "--dashboard-host", "127.0.0.1",
                "--num-cpus", str(num_cpus), "--object-store-memory", str(OBJECT_STORE_BYTES),
                "--include-log-monitor", "false", "--disable-usage-stats",
                "--temp-dir", str(temp_dir),
                # 0/0: each worker binds a port the OS picks, never the shared 10002-19999 range.
                "--min-worker-port", "0", "--max-worker-port", "0"]
        for flag, port in ports.items():
            argv += [flag, str(port)]
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
        child_env.update(env)
        # The environment's bin first, so a job's `python` is the image's: the nemo-rl image puts
        # /opt/nemo_rl_venv/bin first on PATH (NVIDIA-NeMo/RL v0.4.0 docker/Dockerfile line 103).
        child_env["PATH"] = os.pathsep.join(p for p in (str(Path(ray).parent), child_env.get("PATH")) if p)
        child_env.update({
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "2",
        })
        log_path = temp_dir / "ray-start.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(argv, env=child_env, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        return cls(proc, ports, temp_dir, owns, log_path)

    def _leftovers(self, started: dict[int, int]) -> list[int]:
        """Still-running processes of this head; a recorded PID counts only with its start time."""
        table = _proc_table()
        left = set(session_members(self.pid))
        left.update(pid for pid, start in started.items()
                    if pid in table and table[pid][4] == start and table[pid][0] != "Z")
        left.discard(os.getpid())
        return sorted(left)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def wait_ready(self, timeout: float = 30) -> None:
        """Return once the dashboard's /api/version answers; raise if the head dies or is late."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise RuntimeError(f"ray head exited with {self._proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.dashboard_url + "/api/version", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"ray dashboard at {self.dashboard_url} not up after {timeout}s")
            time.sleep(0.2)

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM to the head's PID; whatever is left of its session and of the processes it had
        started (job entrypoints included) then gets SIGTERM, then SIGKILL."""
        started = descendants(self.pid) if self.alive() else {}
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            left = self._leftovers(started)
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + 2
            while self._leftovers(started) and time.monotonic() < end:
                time.sleep(0.05)
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        if self._owns_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
