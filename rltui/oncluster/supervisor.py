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
  RLTUI_NOTIFY_FILE          the mounted Secret file holding NOTIFY_WEBHOOK (absent: no posts)

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
- a running attempt whose driver prints no new step for too long is STALLED (watchdog.py: what
  counts as progress, when it is armed, the defaults): recorded in the attempt (`stalled`),
  stopped through Ray's job API, and once Ray says it is no longer active, resubmitted from the
  newest checkpoint as after a preemption (reason `stalled at step N: ...`, the same budget of
  attempts that saved nothing new).
- what happens is appended to state.json's `events` (events.py) and posted to NOTIFY_WEBHOOK, one
  message per event (webhook.py: in a thread, retried with back-off, each once). A final run is
  still looked at, every poll, while `has_work` (a post pending); then it waits to be removed.
The log is tailed, never fetched whole: Ray's WebSocket tail (GET /api/jobs/<id>/logs/tail, ray
2.46.0 dashboard/modules/job/job_head.py, through JobSubmissionClient.tail_job_logs) sends what is
new, where GET /api/jobs/<id>/logs reads and sends the whole file every time.
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
    from .events import add_event, status_events
    from .guard import Guard, nodes_path
    from .guard import pending as guard_pending
    from .jobstatus import ACTIVE, FINAL
    from .kubeapi import Kube, Trouble
    from .pods import desired_pods, lost_node, pod_snapshot, ready, stale_workers
    from .rayapi import LogTail, Ray
    from .watchdog import END_LINE, EPOCH_LINE, SAVE_LINE, STEP_LINE, Watchdog, clock_text
    from .webhook import Notifier, read_url
except ImportError:
    from events import add_event, status_events  # type: ignore[import-not-found,no-redef]
    from guard import Guard, nodes_path  # type: ignore[import-not-found,no-redef]
    from guard import pending as guard_pending  # type: ignore[no-redef]
    from jobstatus import ACTIVE, FINAL  # type: ignore[import-not-found,no-redef]
    from kubeapi import Kube, Trouble  # type: ignore[import-not-found,no-redef]
    from pods import desired_pods, lost_node, pod_snapshot, ready, stale_workers  # type: ignore[import-not-found,no-redef]
    from rayapi import LogTail, Ray  # type: ignore[import-not-found,no-redef]
    from watchdog import END_LINE, EPOCH_LINE, SAVE_LINE, STEP_LINE, Watchdog, clock_text  # type: ignore[import-not-found,no-redef]
    from webhook import Notifier, read_url  # type: ignore[import-not-found,no-redef]

log = logging.getLogger("rltui-supervisor")

SPEC_KEY, FILE_PREFIX = "spec.json", "job."
STATE_KEY = "state.json"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NODE_GRACE_S = 50.0  # kube-controller-manager --node-monitor-grace-period default (Kubernetes 1.32+)
TAIL_DRAIN_S = 10.0  # how long an ended job's tail may take to send its last lines
GCS_RECONNECT_S = 60.0  # RAY_gcs_rpc_server_reconnect_timeout_s default: a raylet then gives up
STOP_AGAIN_S = 30.0  # a stalled attempt Ray still runs this long after its stop is stopped again


# ---- attempts -----------------------------------------------------------------------------------------


def _node_lost(spec: dict[str, Any], lost: str) -> str:
    """Why an attempt ended with a node gone: a preemption only on Spot nodes (spec.json's
    `preemptible`, from CAPACITY; Compute Engine preempts Spot VMs alone), else a lost node
    (maintenance, a host error); either is recovered the same way."""
    return f"preempted: {lost}" if spec.get("preemptible", True) else f"node lost: {lost}"


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


# ---- the log: steps and saves ---------------------------------------------------------------------------


class Progress:
    """The driver's steps and completed saves, from its log text fed in any chunking.

    NeMo-RL v0.4.0 (nemo_rl/algorithms/grpo.py, `grpo_train`) prints "Epoch e/E", then
    "Step s/S" with s restarting at 1 each epoch and S = min(len(dataloader), max_num_steps),
    while saves print its `total_steps + 1`, the run-wide step. That is (e-1)*S + s: a second
    epoch starts only when max_num_steps >= len(dataloader), and then S is len(dataloader).
    `step`/`total` are the header's s/S (as shown); `global_step` is the number saves use."""

    def __init__(self) -> None:
        self.partial = ""
        self.first_step: int | None = None  # global, like the saves
        self.step: int | None = None
        self.total: int | None = None
        self.global_step: int | None = None
        self.epoch: int | None = None
        self.total_epochs: int | None = None
        self.saving: int | None = None
        self.saved: int | None = None
        self.ended = False

    def feed(self, new_text: str) -> list[str]:
        """The log's next characters, as the tail sends them (any chunking); returns the lines
        they completed, as read."""
        lines = (self.partial + new_text).split("\n")
        self.partial = lines.pop()
        done = [ANSI.sub("", raw).rstrip("\r") for raw in lines]
        for line in done:
            self.line(line)
        return done

    def line(self, line: str) -> None:
        m = STEP_LINE.match(line)
        if m:
            self.step, self.total = int(m.group(1)), int(m.group(2))
            at = (self.epoch - 1) * self.total + self.step if self.epoch else self.step
            if self.saving is not None and at > self.saving:
                self.saved, self.saving = self.saving, None
            self.global_step = at
            if self.first_step is None:
                self.first_step = at
            return
        m = EPOCH_LINE.match(line)
        if m:
            self.epoch, self.total_epochs = int(m.group(1)), int(m.group(2))
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
        self.guard = Guard()  # the budget guard (guard.py): acts only when spec.json has one
        self.watchdog, self.watched = Watchdog(), ""  # the stall watchdog and the attempt it watches
        self.notifier = Notifier()  # NOTIFY_WEBHOOK's posts (webhook.py)
        self.spec: dict[str, Any] = {}
        self.state: dict[str, Any] = {}

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
        self.spec, self.state = spec, state
        self.poll_s = float(spec.get("poll_s") or self.poll_s)
        self.watchdog.configure(spec)
        state.setdefault("status", "RUNNING")
        attempts = state.setdefault("attempts", [])
        if state["status"] in FINAL:
            self.kube.pod_watch = None  # no decision left to make from the pods: wait asleep
            self.stop_tails()
            self.look_guard(spec, state)  # the GPU nodes bill on after the run: the guard acts
            self.notifier.look(state)  # what is left to post
            self.save(state)
            return str(state["status"])
        if not attempts:
            raise SystemExit("rltui-supervisor: the run has no attempt to supervise")
        before = str(state["status"])
        if state["status"] == "RECOVERING":
            self._recover(spec, state)
        else:
            self._watch(spec, state)
        self.look_guard(spec, state)
        status_events(state, spec, before, self.clock())
        self.notifier.look(state)  # never waits: the post runs in a thread (webhook.py)
        self.save(state)
        return str(state["status"])

    def has_work(self, state: dict[str, Any]) -> bool:
        """Whether a final run still needs looks: notifications not posted yet, or the budget
        guard's work (GPU pools to delete, or a budget the still-billing nodes may cross)."""
        return self.notifier.pending(state) or guard_pending(state)

    def look_guard(self, spec: dict[str, Any], state: dict[str, Any]) -> None:
        """The budget guard's look (guard.py), when spec.json has one: the GPU pools' Nodes read
        here (a failed read keeps the spend as it was), the job stopped through Ray."""
        guard = spec.get("guard")
        if not isinstance(guard, dict):
            return
        nodes: list[dict[str, Any]] | None = None
        if (state.get("guard") or {}).get("state") not in ("done", "failed"):
            try:
                nodes = list((self.kube.request("GET", nodes_path(list(guard.get("gpu_pools") or [])))
                              or {}).get("items") or [])
            except Trouble as exc:
                log.info("guard: the GPU nodes were not read: %s", exc)

        def stop_job() -> None:
            if state.get("status") != "RECOVERING":  # recovering: no attempt runs to stop
                self.ray.stop(str(state["attempts"][-1]["id"]))

        def emit(kind: str, text: str) -> None:  # the run's events, posted to NOTIFY_WEBHOOK
            add_event(state, spec, kind, text, self.clock())

        def others() -> list[str]:  # jobs of other runs the head still runs (guard.py _alone)
            ours = {str(a.get("id")) for a in state.get("attempts") or []}
            return [str(j.get("submission_id")) for j in self.ray.jobs()
                    if str(j.get("status") or "") in ACTIVE and str(j.get("submission_id")) not in ours]

        try:
            self.guard.look(spec, state, self.clock(), nodes, stop_job, emit, others)
        except Exception:  # noqa: BLE001 - the guard's bug must not cost the look its save or its posts
            log.exception("guard: the look failed")

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
        if self.watched != attempt["id"]:
            self.watchdog.begin()  # not armed before this attempt's first step
            self.watched = attempt["id"]
        now = self.clock()
        for line in progress.feed(tail.take()):
            self.watchdog.line(line, now)
        if progress.first_step is not None and attempt.get("first_step") is None:
            attempt["first_step"] = progress.first_step
            if state.get("failed_at"):
                attempt["recover_s"] = round(self.clock() - state.pop("failed_at"), 1)
            if attempt.get("by") == "supervisor":
                took = f" after {clock_text(attempt['recover_s'])}" if attempt.get("recover_s") is not None else ""
                add_event(state, self.spec, "resumed", f"resumed from step {attempt.get('resumed_from_step')}: "
                          f"attempt {len(state['attempts'])} is at step {progress.first_step}{took}", now)
        if progress.global_step is not None:
            attempt["last_step"] = progress.global_step
            state["step"], state["total_steps"] = progress.step, progress.total
            if progress.total_epochs is not None and progress.total_epochs > 1:
                state["epoch"], state["total_epochs"] = progress.epoch, progress.total_epochs
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
            self._failed(spec, state, attempt, _node_lost(spec, lost), lost=True)
            return
        if job is None:
            # This head does not know the attempt: a lost head (its pod replaced) took the job
            # table with it; else its submit has not landed yet (rltui submits, then makes us;
            # an attempt of ours whose submit we did not see through is submitted again).
            lost = lost_node(attempt["pods"], pods, started)
            if lost:
                self._failed(spec, state, attempt, _node_lost(spec, lost), lost=True)
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
            self._judge_stall(spec, state, attempt)
            return
        attempt["status"] = status
        attempt.setdefault("ended_at", round(self.clock(), 3))
        if attempt.get("stalled") and status != "SUCCEEDED":
            # Stopped by the watchdog (or ended meanwhile): recovered as after a preemption.
            state.pop("waiting", None)
            self._failed(spec, state, attempt, str(attempt["stalled"].get("why") or "stalled"), lost=True)
        elif status == "SUCCEEDED":
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
            why = _node_lost(spec, lost) if lost else (message[0][:300] if message else "the job failed")
            self._failed(spec, state, attempt, why, lost=bool(lost))

    def _judge_stall(self, spec: dict[str, Any], state: dict[str, Any], attempt: dict[str, Any]) -> None:
        """The watchdog's verdict on a running attempt (watchdog.py: when it is armed, what counts
        as progress), only while the log tail is connected. A stalled attempt is recorded
        (`stalled`: what, how long, the log's last lines) and stopped through Ray's job API; once
        Ray says it is no longer active, _watch recovers it as after a preemption.
        What the stop does (ray 2.46.0 dashboard/modules/job/job_manager.py stop_job: the job's
        JobSupervisor actor's stop.remote(), fire and forget; job_supervisor.py JobSupervisor.run):
        RAY_JOB_STOP_SIGNAL (SIGTERM by default) by os.kill to the entrypoint's process and each of
        its descendants (psutil children, recursive), RAY_JOB_STOP_WAIT_TIME_S (3 s) for them to
        exit, then SIGKILL to each, then the status STOPPED. A driver frozen by SIGSTOP keeps the
        SIGTERM pending and dies of the SIGKILL, so Ray says STOPPED about 3 s after the stop."""
        now = self.clock()
        stalled = attempt.get("stalled")
        if stalled is None:
            tail = self.tails.get(attempt["id"])
            if tail is not None and not getattr(tail, "live", True):
                return  # a reconnecting tail is not the driver's silence
            stalled = self.watchdog.verdict(now)
            if stalled is None:
                return
            attempt["stalled"] = stalled
            add_event(state, spec, "stalled", f"{stalled['why']}; stopping attempt {len(state['attempts'])} to "
                      f"resume from step {int(state.get('saved_step') or 0)}", now)
        if now - float(stalled.get("stop_sent_at") or 0) >= STOP_AGAIN_S:
            try:
                self.ray.stop(attempt["id"])
                stalled["stop_sent_at"] = round(now, 3)
            except Trouble as exc:
                log.info("stop of the stalled attempt %s: %s; trying again", attempt["id"], exc)
        state["waiting"] = f"{stalled['why']}: stopping attempt {attempt['id']} before resubmitting"

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
        if lost and why.startswith("preempted"):
            add_event(state, spec, "preempted", why, self.clock())
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
        pods = [p for p in self.kube.ray_pods(spec["raycluster"]) if ready(p)]
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
    sup.notifier = Notifier(lambda: read_url(env))
    log.info("supervising %s through %s", configmap, address)
    status = ""
    while True:
        try:
            now = sup.tick()
            if now != status:
                log.info("run is %s", now)
                status = now
            if now in FINAL and not sup.has_work(sup.state):
                log.info("the run is final and nothing is left to do: no more looks; waiting to be removed")
                while True:  # idle: `rltui down` (or the user) deletes the Deployment
                    time.sleep(3600)
        except Trouble as exc:
            log.info("will look again: %s", exc)
        except Exception:  # noqa: BLE001 - a bug must not crash-loop the pod: say it, look again
            log.exception("look failed")
        sup.kube.follow(float(env.get("RLTUI_POLL_S") or sup.poll_s))


if __name__ == "__main__":
    sys.exit(main())
