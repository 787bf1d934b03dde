"""rltui's job supervisor: runs ON the cluster, so training recovers from a Spot preemption with no
rltui process anywhere.

It runs as `python /opt/rltui/supervisor.py` in a `rayproject/ray:<rayVersion>` container on xpk's
non-Spot CPU pool (a Deployment that `rltui submit` makes; code from the ConfigMap
rltui-supervisor-code). So it is written for that image: Python 3.9 or newer, the standard library
and Ray's job client only (the image has no kubernetes client: the API is called over HTTPS with
the pod's ServiceAccount token, as client-go's in-cluster config does: the token and ca.crt under
/var/run/secrets/kubernetes.io/serviceaccount, the API at $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT).

What it reads (all from its environment):
  RLTUI_RUN_CONFIGMAP        the run's ConfigMap: spec.json (rltui submit wrote it), state.json (this
                             program writes it: the attempts), job.<name> (the job's working dir)
  RAY_ADDRESS                the Ray head service's dashboard, http://<cluster>-head-svc...:8265
  POD_NAMESPACE              (the Downward API) default "default"
  RLTUI_SERVICE_ACCOUNT_DIR  where the token, ca.crt live (the in-cluster path by default; the
                             sandbox's kubelet points it at its own folder)
  RLTUI_POLL_S               seconds between looks (default: spec.json's poll_s, else 10)

The loop, one look per poll (the run's ConfigMap read with a GET each time: it is the state
this program writes), every decision from a structured answer:
- the latest attempt's Ray job (GET /api/jobs/<id>: a 404 means this Ray head does not know it);
- the RayCluster's pods (label ray.io/cluster; PodWatch: one LIST, then the wait between looks
  is a WATCH resumed from the last resourceVersion): an attempt FAILED while a pod it started with
  is gone, was created after the job started, restarted, or is not Running and Ready, is a lost node
  (a preemption: NeMo-RL's actors died with it). Then it waits until the RayCluster is whole again
  (1 head + every worker group's replicas Running and Ready, the job API answering) and submits
  the same job again; NeMo-RL resumes from the newest step_N in its checkpoint_dir by itself.
  A lost head takes Ray's job table with it: the attempt is then unknown to the new head, which
  the pods (the head's pod replaced) explain.
- a FAILED attempt with every pod as it was is the job's own failure (a Python error): reported,
  never retried. STOPPED (someone stopped it) is final. After `max_attempts` it gives up.
The steps come from the driver's own log lines, as NeMo-RL v0.4.0 prints them
(nemo_rl/algorithms/grpo.py): `===== Step s/S =====` starts a step and `Saving checkpoint for step
s...` starts a save, which is complete once the driver goes on to the next step (the save is
synchronous) or says `Max number of steps has been reached`.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import signal
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

log = logging.getLogger("rltui-supervisor")

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
STATE_KEY, SPEC_KEY, FILE_PREFIX = "state.json", "spec.json", "job."
FINAL = ("SUCCEEDED", "FAILED", "STOPPED")
RAY_ACTIVE = ("PENDING", "RUNNING")
CLUSTER_LABEL = "ray.io/cluster"
# A driver line has no Ray prefix; worker lines start with "(ActorName pid=...)".
STEP_LINE = re.compile(r"^\s*=+ Step (\d+)/(\d+) =+\s*$")
SAVE_LINE = re.compile(r"^Saving checkpoint for step (\d+)\.\.\.")
END_LINE = re.compile(r"^(Max number of steps|Timeout) has been reached, stopping training early")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Trouble(Exception):
    """Something did not answer as it should this time (network, 5xx): look again next poll."""


def fetch_json(req: urllib.request.Request, what: str, tls: ssl.SSLContext | None = None) -> dict[str, Any] | None:
    """The answer's JSON object, None for a 404 (absent, as the API says it), else Trouble."""
    try:
        with urllib.request.urlopen(req, context=tls, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise Trouble(f"{what}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise Trouble(f"{what}: {exc}") from None
    try:
        return dict(json.loads(raw)) if raw.strip() else {}
    except ValueError as exc:
        raise Trouble(f"{what}: not JSON ({exc})") from None


# ---- the Kubernetes API, as an in-cluster client -------------------------------------------------


class Kube:
    def __init__(self, env: dict[str, str]) -> None:
        self.sa_dir = Path(env.get("RLTUI_SERVICE_ACCOUNT_DIR") or SA_DIR)
        host = env.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
        host = f"[{host}]" if ":" in host else host  # an IPv6 address (client-go does the same)
        self.base = f"https://{host}:{env.get('KUBERNETES_SERVICE_PORT', '443')}"
        self.ns = env.get("POD_NAMESPACE") or self._file("namespace", "default")
        self.tls = ssl.create_default_context(cafile=str(self.sa_dir / "ca.crt"))
        self.pod_watch: PodWatch | None = None

    def _file(self, name: str, default: str) -> str:
        try:
            return (self.sa_dir / name).read_text().strip() or default
        except OSError:
            return default

    def _request(self, method: str, path: str, body: Any = None,
                 content_type: str = "application/json") -> urllib.request.Request:
        """The token is read per request: kubelet rotates it."""
        headers = {"Authorization": f"Bearer {self._file('token', '')}", "Accept": "application/json"}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), content_type
        return urllib.request.Request(self.base + path, data=data, method=method, headers=headers)

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json") -> dict[str, Any] | None:
        """The object, or None for 404."""
        return fetch_json(self._request(method, path, body, content_type), f"{method} {path}", self.tls)

    def stream(self, path: str, timeout: float) -> Any:
        """An open streaming GET (a watch), read line by line; `timeout` bounds each read."""
        try:
            return urllib.request.urlopen(self._request("GET", path), context=self.tls, timeout=timeout)
        except urllib.error.HTTPError as exc:
            raise Trouble(f"GET {path}: HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise Trouble(f"GET {path}: {exc}") from None

    def configmap(self, name: str) -> dict[str, Any] | None:
        return self.request("GET", f"/api/v1/namespaces/{self.ns}/configmaps/{name}")

    def save_state(self, name: str, state: dict[str, Any]) -> None:
        patch = {"data": {STATE_KEY: json.dumps(state, sort_keys=True)}}
        if self.request("PATCH", f"/api/v1/namespaces/{self.ns}/configmaps/{name}", patch,
                        "application/merge-patch+json") is None:
            raise Trouble(f"configmap {name} is gone")

    def raycluster(self, name: str) -> dict[str, Any] | None:
        return self.request("GET", f"/apis/ray.io/v1/namespaces/{self.ns}/rayclusters/{name}")

    def ray_pods(self, cluster: str) -> list[dict[str, Any]]:
        """The RayCluster's pods as of the end of the last follow() (one LIST the first time)."""
        selector = f"{CLUSTER_LABEL}={cluster}"
        if self.pod_watch is None or self.pod_watch.selector != selector:
            self.pod_watch = PodWatch(self, selector)
        return self.pod_watch.items()

    def follow(self, seconds: float) -> None:
        """The wait between two looks: spent watching the pods (or asleep before the first look)."""
        if self.pod_watch is None:
            time.sleep(seconds)
        else:
            self.pod_watch.follow(seconds)


class PodWatch:
    """The pods of one label selector, kept as client-go's reflector keeps them
    (k8s.io/client-go/tools/cache/reflector.go: ListAndWatch lists once, then watch() watches
    from LastSyncResourceVersion with timeoutSeconds and AllowWatchBookmarks, starts a new watch
    from the last resourceVersion when one ends, and lists again only when the watch says its
    resourceVersion expired). The API side is Kubernetes' "Efficient detection of changes"
    (kubernetes.io/docs/reference/using-api/api-concepts/): a watch streams one JSON event per
    line (ADDED, MODIFIED, DELETED; BOOKMARK carries only a newer resourceVersion, "Watch
    bookmarks"); a client resumes from the last resourceVersion it saw; one the server's history
    no longer holds is answered with an ERROR event whose Status has code 410 (Gone), after which
    the client must "clear its local cache, perform a new get or list operation, and start the
    watch from the resourceVersion that was returned".

    Single-threaded: the supervisor's wait between two looks IS the watch (follow), so the pods a
    look reads are as fresh as the LIST it used to make at that moment. Any other failure of a
    watch (no connection, a stream broken mid-way, another ERROR, a "very short watch" that ends
    within a second with no event, which the reflector's handleAnyWatch also treats as an error)
    lists again before the pods are used, so a decision is never made from a cache that missed
    events. (The reflector retries a refused connection's watch from the same resourceVersion
    instead; listing is simpler here and costs one LIST per failure, none while all is well.)"""

    def __init__(self, kube: Kube, selector: str) -> None:
        self.kube, self.selector = kube, selector
        self.pods: dict[str, dict[str, Any]] = {}  # by uid
        self.rv = ""
        self.synced = False  # False: list before the pods are used or watched

    def _path(self, **query: str) -> str:
        return f"/api/v1/namespaces/{self.kube.ns}/pods?" + urllib.parse.urlencode(
            {"labelSelector": self.selector, **query})

    def items(self) -> list[dict[str, Any]]:
        if not self.synced:
            self.relist()
        return list(self.pods.values())

    def relist(self) -> None:
        found = self.kube.request("GET", self._path()) or {}
        self.pods = {p["metadata"]["uid"]: p for p in found.get("items") or []}
        self.rv = str((found.get("metadata") or {}).get("resourceVersion") or "")
        self.synced = True

    def follow(self, seconds: float) -> None:
        """Apply the pods' events for about `seconds`: watches from the last resourceVersion, each
        ended by the server at timeoutSeconds (whole seconds, as the API takes it: so at least
        one of a second, and the wait is rounded to whole seconds); never raises."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                if not self.synced:
                    self.relist()
                self._watch(max(1, round(deadline - time.monotonic())))
            except Trouble as exc:
                self.synced = False
                log.info("pods: %s", exc)
                time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))  # a back-off
            if deadline - time.monotonic() < 0.5:
                return

    def _watch(self, seconds: int) -> None:
        path = self._path(watch="1", resourceVersion=self.rv, allowWatchBookmarks="true",
                          timeoutSeconds=str(seconds))
        start, events = time.monotonic(), 0
        # A read that waits past the server's own end of the stream is a dead connection.
        with self.kube.stream(path, timeout=seconds + 30) as resp:
            try:
                for line in resp:
                    if not line.strip():
                        continue
                    events += 1
                    if not self._event(json.loads(line)):
                        return
            except (OSError, ValueError, http.client.HTTPException) as exc:
                raise Trouble(f"pods watch: {exc}") from None
        if events == 0 and time.monotonic() - start < 1:  # the reflector's "very short watch"
            raise Trouble("very short watch: it ended within a second with no event")

    def _event(self, event: dict[str, Any]) -> bool:
        """Apply one event; False when the watch must end and the pods be listed again."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            self.synced = False
            log.info("pods watch: %s (code %s): listing again", obj.get("reason"), obj.get("code"))
            return False
        meta = obj.get("metadata") or {}
        self.rv = str(meta.get("resourceVersion") or self.rv)
        if kind in ("ADDED", "MODIFIED"):
            self.pods[meta["uid"]] = obj
        elif kind == "DELETED":
            self.pods.pop(meta.get("uid", ""), None)
        return True  # BOOKMARK: the resourceVersion only


# ---- Ray's job API ---------------------------------------------------------------------------------


class Ray:
    """Reads over Ray's job REST API (a missing job is a 404); submits with Ray's own job client,
    which packages and uploads the working dir as `ray job submit` does."""

    def __init__(self, address: str) -> None:
        self.address = address.rstrip("/")

    def _get(self, path: str) -> dict[str, Any] | None:
        return fetch_json(urllib.request.Request(self.address + path), f"Ray job API {path}")

    def answers(self) -> bool:
        try:
            return self._get("/api/version") is not None
        except Trouble:
            return False

    def job(self, job_id: str) -> dict[str, Any] | None:
        return self._get(f"/api/jobs/{urllib.parse.quote(job_id)}")

    def logs(self, job_id: str) -> str:
        got = self._get(f"/api/jobs/{urllib.parse.quote(job_id)}/logs")
        return str((got or {}).get("logs") or "")

    def submit(self, job_id: str, spec: dict[str, Any], files: dict[str, str]) -> None:
        from ray.job_submission import JobSubmissionClient  # in the image; slow to import: here

        with tempfile.TemporaryDirectory(prefix="rltui-job-") as folder:
            for name, text in files.items():
                path = Path(folder) / name
                path.write_text(text)
                if name.endswith(".sh"):
                    path.chmod(0o700)
            runtime_env = dict(spec.get("runtime_env") or {}, working_dir=folder)
            try:
                client = JobSubmissionClient(self.address)
                existing = {j.submission_id for j in client.list_jobs()}
                if job_id in existing:
                    return  # a submit whose answer was lost: it is there already
                client.submit_job(entrypoint=spec["entrypoint"], runtime_env=runtime_env,
                                  submission_id=job_id, metadata=dict(spec.get("metadata") or {}))
            except Exception as exc:  # noqa: BLE001 - Ray's client raises RuntimeError, requests' errors
                raise Trouble(f"submit {job_id}: {exc}") from None


# ---- what the pods say -------------------------------------------------------------------------------


def _stamp(text: str) -> float:
    """RFC 3339 seconds (creationTimestamp) as epoch seconds."""
    import calendar

    try:
        return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))
    except (TypeError, ValueError):
        return 0.0


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def _restarts(pod: dict[str, Any]) -> int:
    return sum(int(c.get("restartCount") or 0)
               for c in (pod.get("status") or {}).get("containerStatuses") or [])


def _is_head(pod: dict[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("labels") or {}).get("ray.io/node-type") == "head"


def pod_snapshot(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["uid"]: {"name": p["metadata"]["name"], "node": (p.get("spec") or {}).get("nodeName", ""),
                                   "restarts": _restarts(p), "head": _is_head(p)} for p in pods}


def lost_node(before: dict[str, dict[str, Any]], pods: list[dict[str, Any]], job_started: float) -> str | None:
    """Why the job's nodes are not what it started on, or None when they are."""
    now = {p["metadata"]["uid"]: p for p in pods}
    # The head first: losing it loses the job table too, whatever else went with its node.
    for uid, was in sorted(before.items(), key=lambda kv: (not kv[1].get("head"), kv[1]["name"])):
        if uid not in now:
            what = "the Ray head's pod" if was.get("head") else "pod"
            return f"{what} {was['name']} on node {was['node'] or '?'} was lost"
    for pod in sorted(pods, key=lambda p: (not _is_head(p), p["metadata"]["name"])):
        meta = pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName") or "?"
        if job_started and _stamp(meta.get("creationTimestamp", "")) > job_started + 1:
            return f"pod {meta['name']} was recreated on node {node} after the job started"
        earlier = before.get(meta["uid"])
        if earlier is not None and _restarts(pod) > earlier["restarts"]:
            return f"pod {meta['name']} on node {node} restarted"
        if not _ready(pod):
            return f"pod {meta['name']} on node {node} is not running"
    return None


def desired_pods(rc: dict[str, Any]) -> int:
    spec = rc.get("spec") or {}
    total = 1  # the head
    for group in spec.get("workerGroupSpecs") or []:
        if group.get("suspend"):
            continue
        replicas = group.get("replicas", group.get("minReplicas", 0)) or 0
        total += int(replicas) * int(group.get("numOfHosts") or 1)
    return total


# ---- the log: steps and saves ---------------------------------------------------------------------------


class Progress:
    """The driver's steps and completed saves, from its log text fed in any chunking."""

    def __init__(self) -> None:
        self.seen = 0  # characters of the log already read
        self.partial = ""
        self.first_step: int | None = None
        self.step: int | None = None
        self.total: int | None = None
        self.saving: int | None = None
        self.saved: int | None = None
        self.ended = False

    def feed(self, whole_log: str) -> None:
        if len(whole_log) < self.seen:  # a different log (a new head): read it again
            self.seen, self.partial = 0, ""
        text = self.partial + whole_log[self.seen:]
        self.seen = len(whole_log)
        lines = text.split("\n")
        self.partial = lines.pop()
        for raw in lines:
            self.line(ANSI.sub("", raw).rstrip("\r"))

    def line(self, line: str) -> None:
        m = STEP_LINE.match(line)
        if m:
            step = int(m.group(1))
            if self.saving is not None and step > self.saving:
                self.saved, self.saving = self.saving, None
            self.step, self.total = step, int(m.group(2))
            if self.first_step is None:
                self.first_step = step
            return
        m = SAVE_LINE.match(line)
        if m:
            self.saving = int(m.group(1))
        elif END_LINE.match(line):
            self.ended = True
            if self.saving is not None:
                self.saved, self.saving = self.saving, None


# ---- the supervisor ---------------------------------------------------------------------------------


class Supervisor:
    def __init__(self, kube: Kube, ray: Ray, configmap: str, clock: Any = time.time) -> None:
        self.kube, self.ray, self.configmap, self.clock = kube, ray, configmap, clock
        self.progress: dict[str, Progress] = {}
        self.files: dict[str, str] = {}
        self.poll_s = 10.0
        self.last_saved_state = ""

    def load(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
        cm = self.kube.configmap(self.configmap)
        if cm is None:
            raise SystemExit(f"rltui-supervisor: configmap {self.configmap} is gone: nothing to supervise")
        data = cm.get("data") or {}
        spec = json.loads(data[SPEC_KEY])
        state = json.loads(data.get(STATE_KEY) or "{}")
        files = {k[len(FILE_PREFIX):]: v for k, v in data.items() if k.startswith(FILE_PREFIX)}
        return spec, state, files

    def save(self, state: dict[str, Any]) -> None:
        text = json.dumps(state, sort_keys=True)
        if text != self.last_saved_state:
            state["updated_at"] = round(self.clock(), 3)
            self.kube.save_state(self.configmap, state)
            self.last_saved_state = json.dumps(state, sort_keys=True)

    def tick(self) -> str:
        """One look; returns the run's status."""
        spec, state, self.files = self.load()
        self.poll_s = float(spec.get("poll_s") or self.poll_s)
        state.setdefault("status", "RUNNING")
        attempts = state.setdefault("attempts", [])
        if state["status"] in FINAL:
            self.kube.pod_watch = None  # no decision left to make from the pods: wait asleep
            return str(state["status"])
        if not attempts:
            raise SystemExit("rltui-supervisor: the run has no attempt to supervise")
        if state["status"] == "RECOVERING":
            self._recover(spec, state)
        else:
            self._watch(spec, state)
        self.save(state)
        return str(state["status"])

    def _track(self, state: dict[str, Any], attempt: dict[str, Any]) -> None:
        progress = self.progress.setdefault(attempt["id"], Progress())
        progress.feed(self.ray.logs(attempt["id"]))
        if progress.first_step is not None and attempt.get("first_step") is None:
            attempt["first_step"] = progress.first_step
            if state.get("failed_at"):
                attempt["recover_s"] = round(self.clock() - state.pop("failed_at"), 1)
        if progress.step is not None:
            attempt["last_step"] = progress.step
            state["step"], state["total_steps"] = progress.step, progress.total
        if progress.saved is not None and progress.saved > int(state.get("saved_step") or 0):
            state["saved_step"] = progress.saved

    def _watch(self, spec: dict[str, Any], state: dict[str, Any]) -> None:
        attempt = state["attempts"][-1]
        pods = self.kube.ray_pods(spec["raycluster"])
        if "pods" not in attempt:
            attempt["pods"] = pod_snapshot(pods)
        started = float(attempt.get("started_at") or 0)
        try:
            job = self.ray.job(attempt["id"])
        except Trouble:
            lost = lost_node(attempt["pods"], pods, started)
            if not lost:
                raise
            # The job API does not answer because the head is gone: the job went with it.
            self._failed(spec, state, attempt, f"preempted: {lost}", lost=True)
            return
        if job is None:
            # This head does not know the attempt: a lost head (its pod replaced) took the job
            # table with it; else its submit has not landed yet (rltui submits, then makes us;
            # an attempt of ours whose submit we did not see through is submitted again).
            lost = lost_node(attempt["pods"], pods, started)
            if lost:
                self._failed(spec, state, attempt, f"preempted: {lost}", lost=True)
            elif attempt.get("by") == "supervisor":
                self.ray.submit(attempt["id"], spec, self.files)
            elif self.clock() - started > float(spec.get("submit_grace_s", 180)):
                self._failed(spec, state, attempt, f"Ray does not know job {attempt['id']}", lost=False)
            return
        if job.get("start_time"):
            attempt["started_at"] = float(job["start_time"]) / 1000.0
        try:
            self._track(state, attempt)
        except Trouble as exc:
            log.info("logs of %s: %s", attempt["id"], exc)
        status = str(job.get("status") or "")
        if status in RAY_ACTIVE:
            state["status"], attempt["status"] = "RUNNING", status
            return
        attempt["status"], attempt["ended_at"] = status, round(self.clock(), 3)
        if status == "SUCCEEDED":
            state["status"], state["message"] = "SUCCEEDED", ""
        elif status == "STOPPED":
            state["status"], state["message"] = "STOPPED", "the job was stopped; not resubmitted"
        else:
            lost = lost_node(attempt["pods"], pods, float(attempt.get("started_at") or 0))
            message = str(job.get("message") or "").strip().splitlines()
            why = f"preempted: {lost}" if lost else (message[0][:300] if message else "the job failed")
            self._failed(spec, state, attempt, why, lost=bool(lost))

    def _failed(self, spec: dict[str, Any], state: dict[str, Any], attempt: dict[str, Any], why: str,
                lost: bool) -> None:
        if attempt.get("status") not in FINAL:
            attempt["status"], attempt["ended_at"] = "FAILED", round(self.clock(), 3)
        attempt["ended_reason"] = why
        saved = int(state.get("saved_step") or 0)
        attempt["lost_steps"] = max(0, int(attempt.get("last_step") or saved) - saved)
        if not lost:
            state["status"] = "FAILED"
            state["message"] = f"attempt {len(state['attempts'])} failed with no node lost, so it is not retried: {why}"
        elif len(state["attempts"]) >= int(spec.get("max_attempts", 3)):
            state["status"] = "FAILED"
            state["message"] = f"gave up after {len(state['attempts'])} attempts: {why}"
        else:
            state["status"], state["message"] = "RECOVERING", why
            state["failed_at"] = round(self.clock(), 3)
            state["failed_step"] = attempt.get("last_step")
        log.info("attempt %s ended: %s -> %s", attempt["id"], why, state["status"])

    def _recover(self, spec: dict[str, Any], state: dict[str, Any]) -> None:
        rc = self.kube.raycluster(spec["raycluster"])
        if rc is None:
            state["status"], state["message"] = "FAILED", f"RayCluster {spec['raycluster']} is gone"
            return
        pods = [p for p in self.kube.ray_pods(spec["raycluster"]) if _ready(p)]
        want = desired_pods(rc)
        if len(pods) < want or not self.ray.answers():
            state["waiting"] = f"{len(pods)}/{want} Ray pods ready"
            return
        state.pop("waiting", None)
        n = len(state["attempts"]) + 1
        failed_step = state.pop("failed_step", None)
        attempt = {"id": f"{spec['run']}-a{n}", "by": "supervisor", "started_at": round(self.clock(), 3),
                   "status": "SUBMITTED", "reason": f"{state.get('message', '')} (at step {failed_step or '?'})",
                   "resumed_from_step": int(state.get("saved_step") or 0), "pods": pod_snapshot(pods)}
        state["attempts"].append(attempt)
        state["status"], state["message"] = "RUNNING", ""
        # Recorded before Ray has it: if this submit is lost (or this process with it), the next
        # look finds Ray without the attempt and submits the same id again, never a new attempt.
        self.save(state)
        self.ray.submit(attempt["id"], spec, self.files)
        log.info("submitted attempt %d as %s, resuming from step %s", n, attempt["id"],
                 attempt["resumed_from_step"])


def main(env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s rltui-supervisor %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # deleted: go at once
    configmap = env.get("RLTUI_RUN_CONFIGMAP") or ""
    address = env.get("RAY_ADDRESS") or ""
    if not configmap or not address:
        print("rltui-supervisor: RLTUI_RUN_CONFIGMAP and RAY_ADDRESS must be set", file=sys.stderr)
        return 2
    sup = Supervisor(Kube(env), Ray(address), configmap)
    log.info("supervising %s through %s", configmap, address)
    status = ""
    while True:
        try:
            now = sup.tick()
            if now != status:
                log.info("run is %s", now)
                status = now
        except Trouble as exc:
            log.info("will look again: %s", exc)
        except Exception:  # noqa: BLE001 - a bug must not crash-loop the pod: say it, look again
            log.exception("look failed")
        sup.kube.follow(float(env.get("RLTUI_POLL_S") or sup.poll_s))


if __name__ == "__main__":
    sys.exit(main())
