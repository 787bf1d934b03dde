"""The supervisor's side of a stall: a running attempt whose driver went silent is recorded,
stopped through Ray's job API, and, once Ray says it is no longer active, resubmitted from the
newest checkpoint as a new attempt whose reason says `stalled`; with the same budget of
fruitless attempts as preemptions. And its events, as `status --json` and the Monitor get them.
The seams (the in-cluster Kube client, Ray's job API and log tail) are small classes with the
same methods; the rest is the supervisor's own code."""

from __future__ import annotations

import json
import threading
from typing import Any

from rltui.oncluster import supervisor as sup
from rltui.plan.supervision import parse_state

T0 = 1_000_000.0
BAR = "=" * 25


def _pod(name: str, uid: str, head: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "creationTimestamp": "2001-09-09T01:36:40Z",
                         "labels": {"ray.io/node-type": "head" if head else "worker"}},
            "spec": {"nodeName": f"node-{name}"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"restartCount": 0, "state": {"running": {"startedAt": "2001-09-09T01:36:40Z"}}}]}}


PODS = [_pod("rc-head", "h", head=True), _pod("rc-worker", "w")]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Tail:
    def __init__(self) -> None:
        self.text, self.live = "", True
        self.done = threading.Event()
        self.done.set()  # the log is whole once Ray says the job ended

    def take(self) -> str:
        text, self.text = self.text, ""
        return text

    def stop(self) -> None:
        pass


class FakeRay:
    def __init__(self) -> None:
        self.status: dict[str, str] = {}
        self.tails: dict[str, Tail] = {}
        self.stopped: list[str] = []
        self.submitted: list[str] = []

    def job(self, job_id: str) -> dict[str, Any] | None:
        return {"status": self.status.get(job_id, "RUNNING"), "start_time": T0 * 1000}

    def tail(self, job_id: str) -> Tail:
        return self.tails.setdefault(job_id, Tail())

    def stop(self, job_id: str) -> None:
        self.stopped.append(job_id)  # Ray's stop is fire and forget: the status changes later

    def answers(self) -> bool:
        return True

    def submit(self, job_id: str, spec: dict[str, Any], files: dict[str, str]) -> None:
        self.submitted.append(job_id)


class FakeKube:
    def __init__(self, state: dict[str, Any], spec: dict[str, Any]) -> None:
        self.data = {"spec.json": json.dumps(spec), "state.json": json.dumps(state)}
        self.pod_watch = None
        self.saved: list[dict[str, Any]] = []

    def configmap(self, name: str) -> dict[str, Any]:
        return {"data": dict(self.data)}

    def save_state(self, name: str, state: dict[str, Any]) -> None:
        self.saved.append(json.loads(json.dumps(state)))
        self.data["state.json"] = json.dumps(state)

    def ray_pods(self, cluster: str) -> list[dict[str, Any]]:
        return PODS

    def raycluster(self, name: str) -> dict[str, Any]:
        return {"spec": {"workerGroupSpecs": [{"replicas": 1}]}}

    def state(self) -> dict[str, Any]:
        return dict(json.loads(self.data["state.json"]))


SPEC = {"run": "r", "raycluster": "rc", "entrypoint": "bash run.sh", "max_attempts": 3, "node_grace_s": 60.0,
        "gcs_reconnect_s": 60.0, "stall_k": 4, "stall_floor_s": 30.0}


def _setup() -> tuple[sup.Supervisor, FakeKube, FakeRay, Clock]:
    state = {"status": "RUNNING", "attempts": [{"id": "r", "by": "rltui", "status": "PENDING", "started_at": T0,
                                               "pods": sup.pod_snapshot(PODS), "resumed_from_step": 0}]}
    kube, ray, clock = FakeKube(state, SPEC), FakeRay(), Clock()
    s = sup.Supervisor(kube, ray, "rltui-run-r", clock)  # type: ignore[arg-type]
    s.notifier.url = lambda: None  # no webhook here: test_notify.py posts
    return s, kube, ray, clock


def _steps(ray: FakeRay, job: str, first: int, last: int, took: float = 10.0, save_every: int = 2) -> str:
    text = ""
    for n in range(first, last + 1):
        text += f"\n{BAR} Step {n}/20 {BAR}\n▶ Training policy...\n"
        if n % save_every == 0:
            text += f"Saving checkpoint for step {n}...\n"
        text += f"\n⏱️  Timing:\n  • Total step time: {took:.2f}s\n"
    ray.tail(job).text += text
    return text


def _look(s: sup.Supervisor, clock: Clock, dt: float) -> str:
    clock.now += dt
    return s.tick()


def test_a_silent_driver_is_stopped_then_resumed_as_a_new_attempt() -> None:
    s, kube, ray, clock = _setup()
    _steps(ray, "r", 1, 7)                      # step 6 saved; step 7 is running
    assert _look(s, clock, 1) == "RUNNING"
    assert kube.state()["saved_step"] == 6
    assert _look(s, clock, 39) == "RUNNING" and ray.stopped == []       # 40 s: 4 x median 10 s
    assert _look(s, clock, 2) == "RUNNING"
    state = kube.state()
    stalled = state["attempts"][0]["stalled"]
    assert ray.stopped == ["r"] and stalled["step"] == 7 and stalled["median_s"] == 10.0
    assert stalled["why"] == "stalled at step 7: no new step for 0:41 (4 x median 0:10)"
    assert "stopping attempt r" in state["waiting"]
    line = parse_state("r", kube.data).recovery_line()
    assert line == "stalled at step 7: no new step for 0:41 (4 x median 0:10); stopping it to resume from step 6"
    # Ray has not stopped it yet: no second stop before STOP_AGAIN_S, no new attempt.
    assert _look(s, clock, 1) == "RUNNING" and ray.stopped == ["r"]
    ray.status["r"] = "STOPPED"                 # SIGKILL 3 s after the SIGTERM a frozen driver ignores
    assert _look(s, clock, 3) == "RECOVERING"
    assert "stalled at step 7" in kube.state()["message"]
    assert _look(s, clock, 1) == "RUNNING" and ray.submitted == ["r-a2"]
    second = kube.state()["attempts"][1]
    assert second["resumed_from_step"] == 6 and "stalled at step 7" in second["reason"]
    assert second["reason"].endswith("(at step 7)")
    _steps(ray, "r-a2", 7, 7)
    _look(s, clock, 5)
    run = parse_state("r", kube.data)
    assert run.attempts[0].stalled is not None and run.attempts[0].as_json()["stalled"]["step"] == 7
    assert "why" not in run.attempts[0].as_json()["stalled"]
    assert run.recovery_line().startswith("stalled at step 7: no new step for 0:41 (4 x median 0:10); "
                                          "resumed from step 6 in 0:")
    kinds = [e["kind"] for e in kube.state()["events"]]
    assert kinds == ["stalled", "recovering", "resumed"]
    stalled_event = kube.state()["events"][0]
    assert (stalled_event["run"], stalled_event["attempt"], stalled_event["step"]) == ("r", 1, 7)


def test_no_stall_before_the_first_step_nor_while_the_tail_reconnects() -> None:
    s, kube, ray, clock = _setup()
    ray.tail("r").text = "▶ Setting up model and training...\n"
    for _ in range(20):                          # an hour of model loading
        assert _look(s, clock, 180) == "RUNNING"
    assert ray.stopped == [] and "stalled" not in kube.state()["attempts"][0]
    _steps(ray, "r", 1, 3)
    _look(s, clock, 1)
    ray.tails["r"].live = False                  # Ray's tail broke: its silence is not the driver's
    assert _look(s, clock, 600) == "RUNNING" and ray.stopped == []
    ray.tails["r"].live = True
    _look(s, clock, 1)
    assert ray.stopped == ["r"]


def test_stalls_that_save_nothing_new_use_the_preemptions_budget() -> None:
    """Attempt 1 saved up to step 6; each later one stalls at step 7 again, saving nothing new:
    after max_attempts (3) such attempts in a row the run is FAILED, as after preemptions."""
    s, kube, ray, clock = _setup()
    job, statuses = "r", []
    _steps(ray, job, 1, 7)
    for _ in range(4):
        _look(s, clock, 1)
        _look(s, clock, 100)                     # silent: stalled, stopped
        ray.status[job] = "STOPPED"
        statuses.append(_look(s, clock, 1))
        if statuses[-1] != "RECOVERING":
            break
        _look(s, clock, 1)
        job = ray.submitted[-1]
        _steps(ray, job, 7, 7)
    state = kube.state()
    assert statuses == ["RECOVERING", "RECOVERING", "RECOVERING", "FAILED"]
    assert len(state["attempts"]) == 4 and all("stalled" in a for a in state["attempts"])
    assert "gave up after 3 attempts in a row that saved no new checkpoint: stalled at step 7" in state["message"]
    assert [e["kind"] for e in state["events"]][-1] == "failed"


def test_a_final_run_keeps_looking_only_while_posts_are_pending() -> None:
    s, kube, ray, clock = _setup()
    _steps(ray, "r", 1, 2)
    ray.tail("r").text += "Max number of steps has been reached, stopping training early\n"
    ray.status["r"] = "SUCCEEDED"
    assert _look(s, clock, 1) == "SUCCEEDED"
    assert [e["kind"] for e in kube.state()["events"]] == ["succeeded"]
    assert not s.has_work(s.state)               # no webhook: nothing to post, so no more looks
    s.notifier.url = lambda: "http://127.0.0.1:9/never"
    assert s.has_work(s.state)                   # with one, the event waits to be posted


def test_the_webhook_url_never_reaches_state_json_status_or_the_log(tmp_path, caplog) -> None:
    """NOTIFY_WEBHOOK's URL (its Secret's file) posted to and failing: state.json, what `status
    --json` and the Monitor read of it, and the supervisor's log name the failure, never the URL."""
    import logging
    import socket

    from rltui.oncluster.webhook import read_url

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]   # closed again: the post is refused
    canary = "C4n4ryT0ken" * 3
    secret_file = tmp_path / "NOTIFY_WEBHOOK"
    secret_file.write_text(f"http://127.0.0.1:{port}/services/{canary}?token={canary}\n")
    caplog.set_level(logging.INFO, logger="rltui-supervisor")
    s, kube, ray, clock = _setup()
    s.notifier.url = lambda: read_url({"RLTUI_NOTIFY_FILE": str(secret_file)})
    _steps(ray, "r", 1, 7)
    for dt in (1, 41, 1):
        _look(s, clock, dt)
        s.notifier.wait()
    ray.status["r"] = "STOPPED"
    for _ in range(4):
        _look(s, clock, 10)
        s.notifier.wait()
    state = kube.state()
    assert state["notify"]["failures"] >= 1 and "refused" in state["notify"]["error"]
    run = parse_state("r", kube.data)
    shown = json.dumps({"recovery": run.recovery_line(), "attempts": [a.as_json() for a in run.attempts],
                        "events": run.events})
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "notification 1 not posted" in logged
    for text in (json.dumps(kube.saved), shown, logged):
        assert canary not in text
