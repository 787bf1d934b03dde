"""The supervisor's decisions where the cluster is not kind: a node gone without a shutdown
(Ray fails the driver before Kubernetes notices), a new head whose workers may still be bound
to the old GCS, a log tail that reconnects, and a follower that asks before Ray accepted an
attempt. Its seams (the in-cluster Kube client, Ray's job API) are stood in for by small
classes with the same methods; the rest is the supervisor's own code."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from rltui.oncluster import supervisor as sup

T0 = 1_000_000.0


def _stamp(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _pod(name: str, uid: str, *, head: bool = False, ready: bool = True, started: float = T0,
         ready_since: float = T0, restarts: int = 0) -> dict:
    return {"metadata": {"name": name, "uid": uid, "creationTimestamp": _stamp(T0 - 600),
                         "labels": {"ray.io/node-type": "head" if head else "worker"}},
            "spec": {"nodeName": f"node-{name}"},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": _stamp(ready_since)}],
                       "containerStatuses": [{"restartCount": restarts,
                                              "state": {"running": {"startedAt": _stamp(started)}}}]}}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Tail:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.done.set()

    def take(self) -> str:
        return ""

    def stop(self) -> None:
        pass


class FakeRay:
    def __init__(self, status: str, **by_id: str) -> None:
        self.status, self.by_id, self.submitted, self.stopped = status, by_id, [], []

    def job(self, job_id: str) -> dict | None:
        return {"status": self.by_id.get(job_id, self.status),
                "message": "Job entrypoint command failed with exit code 1"}

    def stop(self, job_id: str) -> None:
        self.stopped.append(job_id)
        self.by_id[job_id] = "STOPPED"

    def tail(self, job_id: str) -> Tail:
        return Tail()

    def answers(self) -> bool:
        return True

    def submit(self, job_id: str, spec: dict, files: dict) -> None:
        self.submitted.append(job_id)


class FakeKube:
    def __init__(self, state: dict, pods: list[dict], spec: dict) -> None:
        self.data = {"spec.json": json.dumps(spec), "state.json": json.dumps(state)}
        self.pods, self.pod_watch = pods, None
        self.saved: list[dict] = []

    def configmap(self, name: str) -> dict:
        return {"data": dict(self.data)}

    def save_state(self, name: str, state: dict) -> None:
        self.saved.append(json.loads(json.dumps(state)))
        self.data["state.json"] = json.dumps(state)

    def ray_pods(self, cluster: str) -> list[dict]:
        return self.pods

    def raycluster(self, name: str) -> dict:
        return {"spec": {"workerGroupSpecs": [{"replicas": 1}]}}


SPEC = {"run": "r", "raycluster": "rc", "entrypoint": "bash run.sh", "max_attempts": 3, "node_grace_s": 60.0,
        "gcs_reconnect_s": 60.0}


def _running_state(pods: list[dict]) -> dict:
    return {"status": "RUNNING", "attempts": [{"id": "r", "by": "rltui", "status": "RUNNING", "started_at": T0,
                                               "pods": sup.pod_snapshot(pods), "last_step": 7}]}


def test_a_failure_with_every_pod_ready_waits_for_the_node_grace_period() -> None:
    """A VM gone without a shutdown: Ray fails the driver at once, the pods still look Ready."""
    head, worker = _pod("rc-head", "h", head=True), _pod("rc-worker", "w")
    kube, ray, clock = FakeKube(_running_state([head, worker]), [head, worker], SPEC), FakeRay("FAILED"), Clock()
    s = sup.Supervisor(kube, ray, "rltui-run-r", clock)  # type: ignore[arg-type]
    assert s.tick() == "RUNNING"  # before: FAILED, "not retried", at once
    assert "node-monitor grace period" in kube.saved[-1]["waiting"]
    clock.now += 30
    assert s.tick() == "RUNNING"
    # The node controller marks the lost node's pods not Ready: a preemption after all.
    kube.pods = [head, _pod("rc-worker", "w", ready=False)]
    clock.now += 31
    assert s.tick() == "RECOVERING"
    assert kube.saved[-1]["message"].startswith("preempted: pod rc-worker")


def test_a_failure_still_with_every_pod_ready_after_the_grace_is_the_jobs_own() -> None:
    head, worker = _pod("rc-head", "h", head=True), _pod("rc-worker", "w")
    kube, clock = FakeKube(_running_state([head, worker]), [head, worker], SPEC), Clock()
    s = sup.Supervisor(kube, FakeRay("FAILED"), "rltui-run-r", clock)  # type: ignore[arg-type]
    s.tick()
    clock.now += 61
    assert s.tick() == "FAILED"
    assert "with no node lost, so it is not retried" in kube.saved[-1]["message"]


class LogTail(Tail):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def take(self) -> str:
        text, self.text = self.text, ""
        return text


def test_steps_lost_in_a_later_epoch_are_counted_from_the_last_save() -> None:
    """Epoch 2 of 10-step epochs, saved at step 15, preempted at its step 8 (run-wide 18)."""
    head, worker = _pod("rc-head", "h", head=True), _pod("rc-worker", "w")
    steps = [(1, s) for s in range(1, 11)] + [(2, s) for s in range(1, 9)]
    lines = []
    for epoch, step in steps:
        if step == 1:
            lines.append(f"===== Epoch {epoch}/3 =====")
        if (epoch, step) == (2, 6):
            lines.append("Saving checkpoint for step 15...")  # saves print the run-wide step
        lines.append(f"===== Step {step}/10 =====")
    log = "\n".join(lines) + "\n"
    ray = FakeRay("FAILED")
    ray.tail = lambda job_id: LogTail(log)  # type: ignore[method-assign]
    kube, clock = FakeKube(_running_state([head, worker]), [head, worker], SPEC), Clock()
    s = sup.Supervisor(kube, ray, "rltui-run-r", clock)  # type: ignore[arg-type]
    s.tick()
    kube.pods = [head, _pod("rc-worker", "w", ready=False)]
    clock.now += 61
    assert s.tick() == "RECOVERING"
    state = kube.saved[-1]
    assert (state["step"], state["total_steps"], state["epoch"], state["total_epochs"]) == (8, 10, 2, 3)
    assert state["saved_step"] == 15
    assert (state["attempts"][0]["last_step"], state["attempts"][0]["lost_steps"]) == (18, 3)
    assert state["failed_step"] == 18


def test_a_new_head_waits_until_its_workers_can_have_joined_it() -> None:
    old_head = _pod("rc-head-a", "h1", head=True)
    worker = _pod("rc-worker", "w", started=T0 - 100)
    before = sup.pod_snapshot([old_head, worker])
    new_head = _pod("rc-head-b", "h2", head=True, started=T0, ready_since=T0 + 5)
    # The worker's container started before the new head: its raylet may still retry the old GCS.
    assert "started before it" in sup.stale_workers(before, [new_head, worker], T0 + 10, 60.0)
    assert sup.stale_workers(before, [new_head, worker], T0 + 66, 60.0) == ""  # it would have restarted
    restarted = _pod("rc-worker", "w", started=T0 + 20, restarts=1)
    assert sup.stale_workers(before, [new_head, restarted], T0 + 21, 60.0) == ""
    # The same head as the attempt's: its workers never lost the GCS.
    assert sup.stale_workers(before, [old_head, _pod("rc-worker-2", "w2", started=T0 + 50)], T0 + 51, 60.0) == ""


def test_the_resubmit_is_saved_as_submitted_then_pending_once_ray_has_it() -> None:
    head, worker = _pod("rc-head", "h", head=True), _pod("rc-worker", "w2", started=T0 + 10)
    state = {"status": "RECOVERING", "message": "preempted: pod rc-worker was lost", "saved_step": 6,
             "attempts": [{"id": "r", "status": "FAILED", "pods": sup.pod_snapshot([head, _pod("rc-worker", "w")])}]}
    kube, ray, clock = FakeKube(state, [head, worker], SPEC), FakeRay("PENDING", r="FAILED"), Clock()
    clock.now = T0 + 20
    s = sup.Supervisor(kube, ray, "rltui-run-r", clock)  # type: ignore[arg-type]
    assert s.tick() == "RUNNING"
    assert ray.submitted == ["r-a2"]
    assert [a["status"] for a in kube.saved[0]["attempts"]] == ["FAILED", "SUBMITTED"]  # before Ray has it
    assert kube.saved[-1]["attempts"][-1]["status"] == "PENDING"


def test_a_reconnected_tail_hands_out_each_character_once() -> None:
    tail = sup.LogTail.__new__(sup.LogTail)  # no thread: the chunks are put by hand
    import queue

    tail._chunks, tail._taken, tail._seen = queue.Queue(), 0, {}
    tail._chunks.put((1, "Step 1\nSte"))
    assert tail.take() == "Step 1\nSte"
    tail._chunks.put((2, "Step 1\nStep 2\n"))  # a new connection sends the log from its start
    tail._chunks.put((2, "Step 3\n"))
    assert tail.take() == "p 2\nStep 3\n"
    progress = sup.Progress()
    progress.feed("===== Step 1/20 =====\n===== Ste")
    progress.feed("p 2/20 =====\n")
    assert progress.step == 2


def test_a_follower_waits_for_an_attempt_ray_has_not_accepted_yet() -> None:
    """The attempt is in the ConfigMap as SUBMITTED before Ray has it: a NotFound then is not
    "the log went with the lost Ray head"."""
    from rltui.cloud.errors import CloudError
    from rltui.plan import supervision

    states = [
        {"status": "RUNNING", "attempts": [{"id": "r", "status": "FAILED"}, {"id": "r-a2", "status": "SUBMITTED"}]},
        {"status": "RUNNING", "attempts": [{"id": "r", "status": "FAILED"}, {"id": "r-a2", "status": "PENDING"}]},
        {"status": "SUCCEEDED", "attempts": [{"id": "r", "status": "FAILED"}, {"id": "r-a2", "status": "SUCCEEDED"}]},
    ]

    class Kube:
        async def get(self, kind: str, name: str) -> dict:
            if kind == "deployments":  # the supervisor runs
                return {"status": {"conditions": [{"type": "Available", "status": "True"}]}}
            return {"data": {"state.json": json.dumps(states[0] if len(states) == 1 else states.pop(0))}}

    class Ctx:
        async def kube(self) -> Kube:
            return Kube()

    class Jobs:
        asked = 0

        async def follow(self, job_id: str, say: Any) -> str:
            Jobs.asked += 1
            if Jobs.asked == 1:
                raise CloudError("no such job", transient=False, code="NotFound")
            await say("===== Step 7/20 =====\n")
            return "SUCCEEDED"

    out: list[str] = []
    run = supervision.parse_state("r", {"state.json": json.dumps(states[0])})
    final = asyncio.run(supervision.follow_run(Ctx(), Jobs(), run, "r-a2", out.append, poll_s=0.01))  # type: ignore[arg-type]
    text = "".join(out)
    assert final == "SUCCEEDED" and "Step 7/20" in text
    assert "went with the lost Ray head" not in text


def test_why_the_supervisor_does_not_run_comes_from_its_pod_status() -> None:
    """What `submit` and `status` say when recovery is not on (the defect: the supervisor's pod
    stayed Pending on the tainted system pool while submit said recovery was on)."""
    from rltui.plan.supervision import pending_reason

    pending = {"metadata": {"name": "rltui-supervisor-x-1"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 1 node(s) had untolerated taint "
                    "{components.gke.io/gke-managed-components: true}, 2 node(s) didn't match Pod's node affinity"}]}}
    assert pending_reason([pending]) == ("pod rltui-supervisor-x-1 is Pending: 0/3 nodes are available: 1 node(s) "
                                         "had untolerated taint {components.gke.io/gke-managed-components: true}, "
                                         "2 node(s) didn't match Pod's node affinity")
    pulling = {"metadata": {"name": "p"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}], "containerStatuses": [
        {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}}
    assert pending_reason([pulling]) == "pod p is waiting: ImagePullBackOff: Back-off pulling image"
    assert pending_reason([]) == "no supervisor pod exists yet"


def test_an_earlier_attempt_ray_still_runs_is_stopped_before_the_resubmit() -> None:
    """Judged lost while its head merely did not answer: never two drivers on the same GPUs."""
    head, worker = _pod("rc-head", "h", head=True), _pod("rc-worker", "w2", started=T0 + 10)
    state = {"status": "RECOVERING", "message": "preempted", "attempts": [
        {"id": "r", "status": "FAILED", "pods": sup.pod_snapshot([head, _pod("rc-worker", "w")])}]}
    kube, ray, clock = FakeKube(state, [head, worker], SPEC), FakeRay("PENDING", r="RUNNING"), Clock()
    clock.now = T0 + 20
    s = sup.Supervisor(kube, ray, "rltui-run-r", clock)  # type: ignore[arg-type]
    assert s.tick() == "RECOVERING"
    assert ray.stopped == ["r"] and ray.submitted == []
    assert "stopping attempt r" in kube.saved[-1]["waiting"]
    assert s.tick() == "RUNNING" and ray.submitted == ["r-a2"]  # once Ray says it ended


def test_only_attempts_that_saved_nothing_new_use_up_the_budget() -> None:
    attempts = [{"resumed_from_step": 0, "saved_step": 6}, {"resumed_from_step": 6, "saved_step": 12},
                {"resumed_from_step": 12, "saved_step": 18}]
    assert sup._fruitless(attempts, 18) == 0  # three preemptions, each after progress: go on
    assert sup._fruitless([*attempts, {"resumed_from_step": 18, "saved_step": 18}], 18) == 1


def test_an_oom_kill_is_the_jobs_own_and_a_slow_probe_no_lost_head() -> None:
    head, worker = _pod("rc-head", "h", head=True), _pod("rc-worker", "w")
    before = sup.pod_snapshot([head, worker])
    oom = _pod("rc-worker", "w", started=T0 + 60, restarts=1)
    oom["status"]["containerStatuses"][0]["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    assert sup.lost_node(before, [head, oom], T0 + 10) is None
    # A restart the supervisor's first look missed: the container started after the job did.
    late = _pod("rc-worker", "w", started=T0 + 60)
    assert "restarted" in (sup.lost_node(sup.pod_snapshot([head, late]), [head, late], T0 + 10) or "")
    # Ray not answering plus a worker briefly not Ready is no evidence that the head went.
    unready = _pod("rc-worker", "w", ready=False)
    assert sup.lost_node(before, [head, unready], T0 + 10, hard_only=True) is None
    assert sup.lost_node(before, [head, unready], T0 + 10) is not None


def test_a_follower_does_not_wait_forever_for_a_supervisor_that_never_ran() -> None:
    """Only the supervisor writes a final status: with none running, `logs --follow` ends with
    Ray's status and says why, instead of polling a RUNNING record forever."""
    from rltui.plan import supervision

    class Kube:
        async def get(self, kind: str, name: str) -> dict | None:
            if kind == "deployments":
                return None  # never made, or removed
            return {"data": {"state.json": json.dumps({"status": "RUNNING", "attempts": [{"id": "r"}]})}}

        async def list(self, kind: str, selector: str) -> list:
            return []

    class Ctx:
        async def kube(self) -> Kube:
            return Kube()

    class Jobs:
        async def follow(self, job_id: str, say: Any) -> str:
            await say("===== Step 20/20 =====\n")
            return "SUCCEEDED"

    out: list[str] = []
    run = supervision.parse_state("r", {"state.json": json.dumps({"status": "RUNNING", "attempts": [{"id": "r"}]})})
    final = asyncio.run(asyncio.wait_for(supervision.follow_run(Ctx(), Jobs(), run, "r", out.append,  # type: ignore[arg-type]
                                                                poll_s=0.01), 10))
    assert final == "SUCCEEDED"
    assert "the job's supervisor does not run" in "".join(out)
