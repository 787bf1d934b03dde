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
- a FAILED attempt with every pod as it was is not judged at once: a node that dies without a
  graceful shutdown still shows Ready (and its pods Running and Ready) until the node controller
  stops hearing from its kubelet for --node-monitor-grace-period (kube-controller-manager, 50 s
  by default from Kubernetes 1.32; GKE does not publish its own value) and then marks the node's
  pods not Ready, while Ray fails the driver at once. So the supervisor looks again once
  spec.json's node_grace_s has passed; only then is a FAILED attempt with every pod as it was
  the job's own failure (a Python error): reported, never retried. STOPPED (someone stopped it)
  is final. After `max_attempts` it gives up.
- the resubmit waits for a whole cluster: every pod Running and Ready, Ray's job API answering,
  and, when the head was replaced, every worker's container started after the new head's or the
  head Ready for longer than a raylet keeps retrying a lost GCS (gcs_rpc_server_reconnect_timeout_s,
  60 s: src/ray/rpc/rpc_client.h): a worker still bound to the old GCS looks Ready until its raylet
  gives up and the container restarts, and a job submitted meanwhile finds too few GPUs
  (NeMo-RL's placement groups retry for about a minute: virtual_cluster.py, then fail the attempt).
- an attempt is saved as SUBMITTED before Ray has it (so a lost submit is retried with the same
  id, never doubled) and becomes PENDING once Ray accepted it; a follower that finds no such job
  while the attempt is SUBMITTED waits for it instead of calling it lost.
The log is tailed, never fetched whole: Ray's WebSocket tail (GET /api/jobs/<id>/logs/tail, ray
2.46.0 dashboard/modules/job/job_head.py, through JobSubmissionClient.tail_job_logs) sends what is
new, where GET /api/jobs/<id>/logs reads and sends the whole file every time. Once the run is
final the supervisor makes no more calls: it waits to be removed.
The steps come from the driver's own log lines, as NeMo-RL v0.4.0 prints them
(nemo_rl/algorithms/grpo.py): `===== Step s/S =====` starts a step and `Saving checkpoint for step
s...` starts a save, which is complete once the driver goes on to the next step (the save is
synchronous) or says `Max number of steps has been reached`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import time
from typing import Any

try:  # in the package (rltui's tests), or beside these files in the ConfigMap's folder (the pod)
    from .jobstatus import ACTIVE, FINAL
    from .kubeapi import Kube, Trouble
    from .rayapi import LogTail, Ray
except ImportError:
    from jobstatus import ACTIVE, FINAL  # type: ignore[import-not-found,no-redef]
    from kubeapi import Kube, Trouble  # type: ignore[import-not-found,no-redef]
    from rayapi import LogTail, Ray  # type: ignore[import-not-found,no-redef]

log = logging.getLogger("rltui-supervisor")

SPEC_KEY, FILE_PREFIX = "spec.json", "job."
STATE_KEY = "state.json"
# A driver line has no Ray prefix; worker lines start with "(ActorName pid=...)".
STEP_LINE = re.compile(r"^\s*=+ Step (\d+)/(\d+) =+\s*$")
SAVE_LINE = re.compile(r"^Saving checkpoint for step (\d+)\.\.\.")
END_LINE = re.compile(r"^(Max number of steps|Timeout) has been reached, stopping training early")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NODE_GRACE_S = 50.0  # kube-controller-manager --node-monitor-grace-period default (Kubernetes 1.32+)
TAIL_DRAIN_S = 10.0  # how long an ended job's tail may take to send its last lines
GCS_RECONNECT_S = 60.0  # RAY_gcs_rpc_server_reconnect_timeout_s default: a raylet then gives up


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


def _oom_killed(pod: dict[str, Any]) -> bool:
    """The last container restart was the kernel's OOM killer: the job's own doing, not a node's."""
    return any(((c.get("lastState") or {}).get("terminated") or {}).get("reason") == "OOMKilled"
               for c in (pod.get("status") or {}).get("containerStatuses") or [])


def lost_node(before: dict[str, dict[str, Any]], pods: list[dict[str, Any]], job_started: float,
              hard_only: bool = False) -> str | None:
    """Why the job's nodes are not what it started on, or None when they are. `hard_only`: a
    pod gone, recreated or restarted only, not one merely not Ready."""
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
        # A restart the first look missed shows as a container started after the job did.
        restarted = (earlier is not None and _restarts(pod) > earlier["restarts"]) or \
            bool(job_started and _started(pod) > job_started + 1)
        if restarted and not _oom_killed(pod):
            return f"pod {meta['name']} on node {node} restarted"
        if not _ready(pod) and not hard_only and not _oom_killed(pod):
            return f"pod {meta['name']} on node {node} is not running"
    return None


def _fruitless(attempts: list[dict[str, Any]], saved: int) -> int:
    """How many of the latest attempts, in a row, ended without a checkpoint newer than the one
    they started from (`saved`: the newest now)."""
    count = 0
    for attempt in reversed(attempts):
        end = int(attempt.get("saved_step", saved) or 0)
        if end > int(attempt.get("resumed_from_step") or 0):
            break
        count += 1
    return count


def _started(pod: dict[str, Any]) -> float:
    """When the pod's (first) container last started, from status.containerStatuses."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return _stamp(str(((statuses[0].get("state") or {}).get("running") or {}).get("startedAt") or ""))


def _ready_since(pod: dict[str, Any]) -> float:
    cond: dict[str, Any] = next((c for c in (pod.get("status") or {}).get("conditions") or []
                                 if c.get("type") == "Ready" and c.get("status") == "True"), {})
    return _stamp(str(cond.get("lastTransitionTime") or ""))


def stale_workers(before: dict[str, dict[str, Any]], pods: list[dict[str, Any]], now: float,
                  reconnect_s: float) -> str:
    """Why Ray may not have every worker yet, or "": without GCS fault tolerance a new head has
    a new GCS, and a worker whose container started before it may still be retrying the old
    one (its raylet exits after reconnect_s and the container restarts: docs.ray.io, "GCS fault
    tolerance in KubeRay"). Such a worker counts once the head has been Ready for reconnect_s."""
    head = next((p for p in pods if _is_head(p)), None)
    was = before.get(head["metadata"]["uid"]) if head is not None else None
    if head is None or (was is not None and _restarts(head) == was["restarts"]):
        return ""  # the same head and GCS as the attempt's: its workers never lost it
    head_start = _started(head)
    early = [p["metadata"]["name"] for p in pods if not _is_head(p) and _started(p) < head_start]
    if not early or now - _ready_since(head) >= reconnect_s:
        return ""
    return (f"the Ray head is new; {len(early)} worker(s) started before it may still be bound to the "
            f"lost head ({', '.join(sorted(early)[:3])})")


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
        self.partial = ""
        self.first_step: int | None = None
        self.step: int | None = None
        self.total: int | None = None
        self.saving: int | None = None
        self.saved: int | None = None
        self.ended = False

    def feed(self, new_text: str) -> None:
        """The log's next characters, as the tail sends them (any chunking)."""
        lines = (self.partial + new_text).split("\n")
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
        self.tails: dict[str, LogTail] = {}
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
            self.stop_tails()
            return str(state["status"])
        if not attempts:
            raise SystemExit("rltui-supervisor: the run has no attempt to supervise")
        if state["status"] == "RECOVERING":
            self._recover(spec, state)
        else:
            self._watch(spec, state)
        self.save(state)
        return str(state["status"])

    def stop_tails(self, keep: str = "") -> None:
        for job_id in [j for j in self.tails if j != keep]:
            self.tails.pop(job_id).stop()

    def _track(self, state: dict[str, Any], attempt: dict[str, Any], ended: bool = False) -> None:
        """The attempt's steps and saves from its log's new text; `ended`: Ray says the job is
        over, so its tail closes once the last lines are sent (job_agent.py tail_job_logs)."""
        progress = self.progress.setdefault(attempt["id"], Progress())
        if attempt["id"] not in self.tails:
            self.stop_tails()  # one attempt at a time: an earlier one's log is over
            self.tails[attempt["id"]] = self.ray.tail(attempt["id"])
        tail = self.tails[attempt["id"]]
        if ended:
            tail.done.wait(TAIL_DRAIN_S)
        progress.feed(tail.take())
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
            # Ray does not answer: only a pod gone, replaced or restarted says the head went; a
            # pod briefly not Ready (a probe timing out under load) does not.
            lost = lost_node(attempt["pods"], pods, started, hard_only=True)
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
        status = str(job.get("status") or "")
        self._track(state, attempt, ended=status not in ACTIVE)
        if status in ACTIVE:
            state["status"], attempt["status"] = "RUNNING", status
            return
        attempt["status"] = status
        attempt.setdefault("ended_at", round(self.clock(), 3))
        if status == "SUCCEEDED":
            state["status"], state["message"] = "SUCCEEDED", ""
        elif status == "STOPPED":
            state["status"], state["message"] = "STOPPED", "the job was stopped; not resubmitted"
        else:
            lost = lost_node(attempt["pods"], pods, float(attempt.get("started_at") or 0))
            message = str(job.get("message") or "").strip().splitlines()
            grace = float(spec.get("node_grace_s", NODE_GRACE_S))
            if not lost and self.clock() - float(attempt["ended_at"]) < grace:
                # A node lost without a graceful shutdown shows only after the grace period.
                state["waiting"] = (f"attempt failed with every pod as it was: looking again after the "
                                    f"node-monitor grace period ({grace:.0f} s) before calling it final")
                return
            state.pop("waiting", None)
            why = f"preempted: {lost}" if lost else (message[0][:300] if message else "the job failed")
            self._failed(spec, state, attempt, why, lost=bool(lost))

    def _stop_earlier(self, attempts: list[dict[str, Any]]) -> str:
        """Never two drivers at once: an earlier attempt Ray still runs (judged lost while its
        head merely did not answer) is stopped, and the resubmit waits until it has ended."""
        for old in attempts:
            try:
                job = self.ray.job(old["id"])
            except Trouble:
                return f"cannot tell whether attempt {old['id']} still runs (the job API does not answer)"
            if job is not None and str(job.get("status") or "") in ACTIVE:
                self.ray.stop(old["id"])
                return f"stopping attempt {old['id']}, which Ray still runs, before resubmitting"
        return ""

    def _failed(self, spec: dict[str, Any], state: dict[str, Any], attempt: dict[str, Any], why: str,
                lost: bool) -> None:
        if attempt.get("status") not in FINAL:
            attempt["status"], attempt["ended_at"] = "FAILED", round(self.clock(), 3)
        attempt["ended_reason"] = why
        saved = int(state.get("saved_step") or 0)
        attempt["saved_step"] = saved
        attempt["lost_steps"] = max(0, int(attempt.get("last_step") or saved) - saved)
        if not lost:
            state["status"] = "FAILED"
            state["message"] = f"attempt {len(state['attempts'])} failed with no node lost, so it is not retried: {why}"
        elif _fruitless(state["attempts"], saved) >= int(spec.get("max_attempts", 3)):
            # Only attempts that saved nothing new count: a long Spot run may be preempted often.
            state["status"] = "FAILED"
            state["message"] = (f"gave up after {_fruitless(state['attempts'], saved)} attempts in a row that "
                                f"saved no new checkpoint: {why}")
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
        waiting = f"{len(pods)}/{want} Ray pods ready" if len(pods) < want else \
            stale_workers(state["attempts"][-1].get("pods") or {}, pods, self.clock(),
                          float(spec.get("gcs_reconnect_s", GCS_RECONNECT_S)))
        if not waiting and not self.ray.answers():
            waiting = "the Ray head's job API does not answer yet"
        if not waiting:
            waiting = self._stop_earlier(state["attempts"])
        if waiting:
            state["waiting"] = waiting
            return
        state.pop("waiting", None)
        n = len(state["attempts"]) + 1
        failed_step = state.pop("failed_step", None)
        attempt = {"id": f"{spec['run']}-a{n}", "by": "supervisor", "started_at": round(self.clock(), 3),
                   "status": "SUBMITTED", "reason": f"{state.get('message', '')} (at step {failed_step or '?'})",
                   "resumed_from_step": int(state.get("saved_step") or 0), "pods": pod_snapshot(pods)}
        state["attempts"].append(attempt)
        state["status"], state["message"] = "RUNNING", ""
        # Recorded as SUBMITTED before Ray has it: if this submit is lost (or this process with it),
        # the next look finds Ray without the attempt and submits the same id again, never a new one.
        self.save(state)
        self.ray.submit(attempt["id"], spec, self.files)
        attempt["status"] = "PENDING"  # Ray accepted it: a follower may now read its log
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
            if now in FINAL:
                log.info("the run is final: no more looks; waiting to be removed")
                while True:  # idle: `rltui down` (or the user) deletes the Deployment
                    time.sleep(3600)
        except Trouble as exc:
            log.info("will look again: %s", exc)
        except Exception:  # noqa: BLE001 - a bug must not crash-loop the pod: say it, look again
            log.exception("look failed")
        sup.kube.follow(float(env.get("RLTUI_POLL_S") or sup.poll_s))


if __name__ == "__main__":
    sys.exit(main())
