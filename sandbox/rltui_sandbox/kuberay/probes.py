"""The kubelet's prober for the Ray containers: readiness and liveness probes, run as a kubelet runs
them, against the REAL local Ray head.

As the kubelet does (kubernetes.io, "Configure Liveness, Readiness and Startup Probes"; kubelet
pkg/kubelet/prober/worker.go, prober.go; pkg/probe/http/http.go):
- nothing is probed for initialDelaySeconds after the container started; then one probe every
  periodSeconds, each given timeoutSeconds;
- readiness starts as Failure (the container is not Ready) and turns Success after
  successThreshold consecutive successes, Failure again after failureThreshold consecutive
  failures; liveness starts as Success and after failureThreshold consecutive failures the
  container is killed and restarted (Event Normal Killing "Container <c> failed liveness probe,
  will be restarted"; its last state terminated, exit code 137: a `bash -c` PID 1 ignores the
  SIGTERM, so the grace period ends in SIGKILL);
- every failed probe is an Event Warning Unhealthy "<Readiness|Liveness> probe failed: <output>"
  (one per distinct message here: the sandbox's recorder does not count repeats);
- httpGet succeeds on a status from 200 to 399, else "HTTP probe failed with statuscode: N"; a
  refused or timed-out request fails with Go's error text; tcpSocket succeeds on a connect;
- exec runs the command, success is exit code 0, the output is what it printed.

THE SANDBOX HAS NO CONTAINER. Every container port is mapped to the port of the local Ray head
that stands behind it (the `ray start` flags in the pod's KUBERAY_GEN_RAY_START_CMD, KubeRay's
defaults otherwise: 52365 the dashboard agent, 8265 the dashboard, 6379 the GCS, 10001 the
client server, 8080 metrics). An exec probe cannot be run in a container, so the checks KubeRay
writes, `wget [--tries 1] -T N -q -O- http://localhost:PORT/PATH | grep WORD` joined by `&&`,
are evaluated as wget and grep would be: a GET of that URL on the mapped port (wget prints
nothing on a 4xx/5xx and fails), success when the body has WORD; any other command fails, and
says so. Worker pods are emulated (no process): their probes go to their cluster's local head,
whose raylet and agent stand for theirs, and start only once that head runs, as KubeRay's
wait-gcs-ready init container holds a worker's Ray container until the GCS answers.

TIME. Delays and periods are the cloud's seconds on the sandbox's clock (real = cloud / speed,
the `speed` Clock.seconds uses) but at least MIN_PERIOD_S of real time apart, so a fast clock
does not flood the local head; thresholds count probes, as the kubelet does, so a fast clock
changes only how long they take. A probe's timeout is real seconds: the local head answers in
real time. The head's probes start once its dashboard agent listens: starting a local Ray
takes real seconds that GKE's container start does not have (headpod.py, _prestart_head).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import time
from dataclasses import dataclass
from typing import Callable

import aiohttp

from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kuberay.pods import BACKOFF_RESET_S, _condition, _meta, restart_backoff_s

MIN_PERIOD_S = 0.05
SHARE_S = MIN_PERIOD_S
AGENT_WAIT_S = 60.0
# Container port of each `ray start` flag when the pod's command does not set it (KubeRay's
# defaults: templates.py writes --dashboard-agent-listen-port and --metrics-export-port).
CONTAINER_PORTS = {"--dashboard-agent-listen-port": 52365, "--dashboard-port": 8265, "--port": 6379,
                   "--ray-client-server-port": 10001, "--metrics-export-port": 8080}
_WGET = re.compile(r"^wget\s+(?P<opts>(?:-{1,2}[A-Za-z-]+(?:[ =]\S+)?\s+)*?)"
                   r"(?P<url>http://(?:localhost|127\.0\.0\.1):(?P<port>\d+)(?P<path>/\S*)?)"
                   r"\s*\|\s*grep\s+(?P<word>\S+)$")
_NOT_RUN = ("rltui sandbox: this exec probe was not run: the sandbox has no container to exec into"
            " and evaluates only `wget ... http://localhost:PORT/PATH | grep WORD` checks")


def has_probes(container: dict) -> bool:
    return bool(container.get("readinessProbe") or container.get("livenessProbe"))


def is_ray_worker(pod: dict) -> bool:
    """A Ray worker pod (KubeRay's labels): emulated, its probes go to its cluster's head."""
    labels = _meta(pod).get("labels") or {}
    return labels.get("ray.io/node-type") == "worker" and labels.get("ray.io/is-ray-node") == "yes"


def container_ports(pod: dict) -> dict[str, int]:
    """`ray start` flag -> the container port it listens on, from the pod's generated command."""
    container = ((pod.get("spec") or {}).get("containers") or [{}])[0]
    line = next((e.get("value", "") for e in container.get("env") or []
                 if e.get("name") == "KUBERAY_GEN_RAY_START_CMD"), "")
    given = dict(re.findall(r"(--[a-z-]+)=(\d+)", line))
    return {flag: int(given.get(flag, default)) for flag, default in CONTAINER_PORTS.items()}


def port_map(pod: dict, local: dict[str, int]) -> dict[int, int]:
    """Container port -> the local Ray head's port (`local`: RayHead.ports, by flag)."""
    return {port: local[flag] for flag, port in container_ports(pod).items() if flag in local}


@dataclass
class Result:
    ok: bool
    output: str


async def _get(session: aiohttp.ClientSession | SharedGets, url: str, timeout: float) -> tuple[int, str]:
    if isinstance(session, SharedGets):
        return await session.get(url, timeout)
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False) as resp:
        return resp.status, await resp.text(errors="replace")


class SharedGets:
    """GETs of one local URL started within SHARE_S of each other share one request.

    Emulated workers have no process: their probes all reach their cluster's one local head
    (module docstring), so each worker's GET of a URL at a moment would get the same answer as
    its neighbour's. Eight workers' readiness and liveness probes at a speed-300 clock's
    MIN_PERIOD_S sent ~320 GETs a second to the head's agent, each a new connection (as the
    exec probes' wget, a new process each time, makes; the request here keeps that): the agent
    and this daemon spent half a core of the machine on them. Each caller keeps its own
    timeout; the request keeps the first caller's. No kubelet source does this: a real node's
    kubelet probes its own container. It is the emulation's economy, the answer unchanged."""

    def __init__(self) -> None:
        self._recent: dict[str, tuple[float, asyncio.Future[tuple[int, str]]]] = {}

    async def get(self, url: str, timeout: float) -> tuple[int, str]:
        now = time.monotonic()
        hit = self._recent.get(url)
        if hit is None or now - hit[0] > SHARE_S:
            request = asyncio.ensure_future(self._fetch(url, timeout))
            request.add_done_callback(lambda r: r.cancelled() or r.exception())
            hit = self._recent[url] = (now, request)
        return await asyncio.wait_for(asyncio.shield(hit[1]), timeout)

    @staticmethod
    async def _fetch(url: str, timeout: float) -> tuple[int, str]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
            return await _get(session, url, timeout)


async def run_probe(probe: dict, container: dict, ports: dict[int, int], pod_ip: str,
                    session: aiohttp.ClientSession | SharedGets) -> Result:
    """One run of a Probe (the Kubernetes object) against the local ports behind the container's."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    if "httpGet" in probe:
        action = probe["httpGet"]
        port = _port(action.get("port"), container)
        path = action.get("path") or "/"
        shown = f'Get "http://{pod_ip}:{port}{path}"'
        if port not in ports:
            return Result(False, f"{shown}: dial tcp {pod_ip}:{port}: connect: connection refused")
        try:
            status, body = await _get(session, f"http://127.0.0.1:{ports[port]}{path}", timeout)
        except asyncio.TimeoutError:
            return Result(False, f"{shown}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)")
        except aiohttp.ClientError:
            return Result(False, f"{shown}: dial tcp {pod_ip}:{port}: connect: connection refused")
        if 200 <= status < 400:
            return Result(True, body)
        return Result(False, f"HTTP probe failed with statuscode: {status}")
    if "tcpSocket" in probe:
        port = _port(probe["tcpSocket"].get("port"), container)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", ports[port]), timeout)
            writer.close()
            return Result(True, "")
        except (KeyError, OSError, asyncio.TimeoutError):
            return Result(False, f"dial tcp {pod_ip}:{port}: connect: connection refused")
    if "exec" in probe:
        return await _exec(list(probe["exec"].get("command") or []), ports, timeout, session)
    return Result(False, "rltui sandbox: a probe without a handler")


def _port(value: object, container: dict) -> int:
    if isinstance(value, str) and not value.isdigit():  # a named container port
        return next((int(p["containerPort"]) for p in container.get("ports") or [] if p.get("name") == value), -1)
    return int(str(value))


async def _exec(command: list[str], ports: dict[int, int], timeout: float,
                session: aiohttp.ClientSession | SharedGets) -> Result:
    if len(command) != 3 or command[0].rsplit("/", 1)[-1] not in ("bash", "sh") or command[1] != "-c":
        return Result(False, _NOT_RUN)
    checks = [_WGET.match(part.strip()) for part in command[2].split(" && ")]
    if not all(checks):
        return Result(False, _NOT_RUN)
    deadline = time.monotonic() + timeout
    printed = []
    for m in checks:
        assert m is not None
        opts = shlex.split(m["opts"])
        wget_timeout = float(opts[opts.index("-T") + 1]) if "-T" in opts[:-1] else 900.0
        left = deadline - time.monotonic()
        port = int(m["port"])
        try:
            if port not in ports:
                raise aiohttp.ClientConnectionError
            status, body = await _get(session, f"http://127.0.0.1:{ports[port]}{m['path'] or '/'}",
                                      max(0.0, min(wget_timeout, left)))
        except asyncio.TimeoutError:
            if time.monotonic() >= deadline:
                return Result(False, f"command {shlex.join(command)!r} timed out")
            status, body = 0, ""
        except aiohttp.ClientError:
            status, body = 0, ""
        found = [line for line in body.splitlines() if m["word"] in line] if 200 <= status < 300 else []
        if not found:  # wget failed or printed no match: grep exits 1 and `&&` stops
            return Result(False, "\n".join(printed))
        printed += found
    return Result(True, "\n".join(printed))


class _Worker:
    """One probe of one container, counting as pkg/kubelet/prober/worker.go does."""

    def __init__(self, kind: str, probe: dict) -> None:
        self.kind, self.probe = kind, probe
        self.ok = kind == "Liveness"   # readiness starts as Failure, liveness as Success
        self.last: bool | None = None
        self.run = 0

    def record(self, ok: bool) -> bool:
        """Count one result; True when the cached result changed."""
        self.run = self.run + 1 if ok == self.last else 1
        self.last = ok
        threshold = int(self.probe.get("successThreshold") or 1) if ok else int(self.probe.get("failureThreshold") or 3)
        if self.run < threshold or ok == self.ok:
            return False
        self.ok = ok
        return True


class Probes:
    """KubeRayController's prober: probes of a running Ray container (head or emulated worker)."""

    def _real(self, cloud_s: float) -> float:
        return max(cloud_s / self.clock.speed, MIN_PERIOD_S)

    def _shared_gets(self) -> SharedGets:
        gets: SharedGets | None = getattr(self, "_gets", None)
        if gets is None:
            gets = self._gets = SharedGets()
        return gets

    async def _probe_container(self, uid: str, ns: str, name: str, restarts: int,
                               ports: Callable[[], dict[int, int] | None],
                               alive: Callable[[], bool]) -> bool:
        """Probe the pod's first container (started with `restarts`) while `alive()`; keep its
        Ready as the readiness probe says. True once liveness failed (the kubelet kills it)."""
        pod = await self._pod(uid, ns, name)
        container = pod["spec"]["containers"][0]
        workers = [_Worker(kind, container[key]) for kind, key in (("Readiness", "readinessProbe"),
                                                                  ("Liveness", "livenessProbe"))
                   if container.get(key)]
        ready_probe = next((w for w in workers if w.kind == "Readiness"), None)
        start = time.monotonic()
        due = {w.kind: start + self._real(float(w.probe.get("initialDelaySeconds") or 0)) for w in workers}
        session = self._shared_gets()
        while alive():
            worker = min(workers, key=lambda w: due[w.kind])
            await asyncio.sleep(max(0.0, due[worker.kind] - time.monotonic()))
            if not alive():
                break
            pod = self._pod_view(uid, ns, name)
            if _restart_count(pod) != restarts:
                return False  # restarted meanwhile (e.g. its raylet lost the GCS): a new container
            result = await run_probe(worker.probe, container, ports() or {},
                                     (pod.get("status") or {}).get("podIP", ""), session)
            due[worker.kind] = time.monotonic() + self._real(float(worker.probe.get("periodSeconds") or 10))
            node = pod["spec"].get("nodeName")
            if not result.ok:
                await self._event(pod, "Warning", "Unhealthy", f"{worker.kind} probe failed: {result.output}",
                                  "kubelet", node)
            worker.record(result.ok)
            if worker.kind == "Liveness" and not worker.ok:
                await self._event(pod, "Normal", "Killing", f"Container {container['name']} failed liveness"
                                  " probe, will be restarted", "kubelet", node)
                return True
            ready = ready_probe.ok if ready_probe is not None else True
            if (_condition(pod, "Ready").get("status") == "True") != ready:
                await self._mark_running(uid, ns, name, ready=ready, restarts=restarts)
        return False

    async def _agent_listening(self, port: int, alive: Callable[[], bool]) -> None:
        """Until something listens on the local `port` (the head's dashboard agent), or it is late."""
        deadline = time.monotonic() + AGENT_WAIT_S
        while alive() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                return
            await asyncio.sleep(0.1)

    def _cluster_head_ports(self, pod: dict) -> dict[int, int] | None:
        """The worker's container ports mapped to its cluster's running local head, or None."""
        owner = next((r.get("uid") for r in _meta(pod).get("ownerReferences") or [] if r.get("kind") == "RayCluster"),
                     None)
        for head_uid, (ns, _cluster, head_owner) in list(self._head_clusters.items()):
            head = self._heads.get(head_uid)
            if ns == _meta(pod)["namespace"] and head_owner == owner and head is not None and head.alive():
                return port_map(pod, head.ports)
        return None

    async def _supervise_worker(self, uid: str, ns: str, name: str) -> None:
        """An emulated worker's Ray container with probes: Running, Ready as its readiness probe
        says once its cluster's head runs (wait-gcs-ready), restarted when liveness fails, after
        the kubelet's back-off (pods.py restart_backoff_s)."""
        failures = 0  # in a row
        while True:
            pod = await self._pod(uid, ns, name)
            restarts = _restart_count(pod)
            if pod["spec"]["containers"][0].get("readinessProbe") and _condition(pod, "Ready").get("status") == "True":
                await self._mark_running(uid, ns, name, ready=False, restarts=restarts)  # a new prober: Failure
            while (ports := self._cluster_head_ports(pod)) is None:
                await self._until_change(self._changed, 1.0)
                pod = await self._pod(uid, ns, name)
            # Its raylet and agent start once the GCS answers; here: once the head's agent listens.
            await self._agent_listening(ports.get(container_ports(pod)["--dashboard-agent-listen-port"], 0),
                                        lambda: self._cluster_head_ports(pod) is not None)
            started = time.time()
            if await self._probe_container(uid, ns, name, restarts, lambda: self._cluster_head_ports(pod),
                                           lambda: True):
                failures = 1 if time.time() - started > BACKOFF_RESET_S else failures + 1
                await self._kill_for_liveness(uid, ns, name, restart_backoff_s(failures))
            # else restarted by someone else (its raylet lost the GCS): probe the new container

    async def _kill_for_liveness(self, uid: str, ns: str, name: str, backoff_s: float) -> None:
        """The kubelet's restart of a worker container its liveness probe failed."""
        pod = await self._pod(uid, ns, name)
        first = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]
        started = ((first.get("state") or {}).get("running") or {}).get("startedAt")
        last = {"terminated": {"exitCode": 137, "reason": "Error", **({"startedAt": started} if started else {}),
                               "finishedAt": _now()}}
        with contextlib.suppress(KubeError):
            await self.store.append_log(ns, name, "rltui sandbox: the container failed its liveness probe and"
                                                  " was killed\n")
        await asyncio.sleep(backoff_s)
        await self._mark_running(uid, ns, name, ready=False, restarts=_restart_count(pod) + 1, last_state=last)


def _restart_count(pod: dict) -> int:
    return int((((pod.get("status") or {}).get("containerStatuses") or [{}])[0]).get("restartCount", 0))


def _now() -> str:
    from rltui_sandbox.kube.store import now

    return now()
