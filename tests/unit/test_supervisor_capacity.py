"""Only Spot nodes are preempted: the run's spec.json says whether the GPU nodes are Spot
(CAPACITY), and the supervisor calls a lost node a preemption only then; on demand or from a
reservation it is a lost node, recovered the same way."""

from __future__ import annotations

import json

from rltui.config import parse_config
from rltui.manifests_supervisor import run_spec
from rltui.oncluster import supervisor as sup
from rltui.plan.supervision import parse_state
from tests.unit.test_supervisor_decisions import SPEC, Clock, FakeKube, FakeRay, _pod, _running_state


def _spec(capacity: str) -> dict:
    cfg = parse_config({"PROJECT_ID": "rl-demo-project", "CAPACITY": capacity})
    return run_spec(cfg, "r", entrypoint="bash run.sh", runtime_env={}, metadata={}, submitted_at=0.0)


def test_spec_json_says_whether_the_nodes_are_spot() -> None:
    assert _spec("spot")["preemptible"] is True
    assert _spec("on-demand")["preemptible"] is False
    assert _spec("reservation:a4-res")["preemptible"] is False


def _lose_a_worker(preemptible: bool) -> tuple[str, list[dict]]:
    head, worker = _pod("rc-head", "h", head=True), _pod("rc-worker", "w")
    spec = {**SPEC, "preemptible": preemptible}
    kube = FakeKube(_running_state([head, worker]), [head], spec)   # the worker's pod is gone
    s = sup.Supervisor(kube, FakeRay("FAILED"), "rltui-run-r", Clock())  # type: ignore[arg-type]
    assert s.tick() == "RECOVERING"
    return kube.saved[-1]["message"], kube.saved[-1].get("events", [])


def test_a_lost_spot_node_is_a_preemption() -> None:
    message, events = _lose_a_worker(True)
    assert message.startswith("preempted: pod rc-worker")
    assert [e["kind"] for e in events if e["kind"] == "preempted"]


def test_a_lost_on_demand_node_is_no_preemption_and_is_still_recovered() -> None:
    message, events = _lose_a_worker(False)
    assert message.startswith("node lost: pod rc-worker")
    assert not [e for e in events if e["kind"] == "preempted"]


def test_the_recovery_line_says_which() -> None:
    def line(reason: str) -> str:
        state = {"status": "RUNNING", "attempts": [
            {"id": "a", "by": "rltui", "reason": "submitted", "resumed_from_step": 0, "status": "FAILED",
             "last_step": 9, "ended_reason": reason},
            {"id": "b", "by": "supervisor", "reason": reason, "resumed_from_step": 8, "status": "RUNNING"}]}
        return parse_state("a", {"state.json": json.dumps(state)}).recovery_line()

    assert line("node lost: pod rc-worker was lost").startswith("node lost at step 9, resumed from step 8")
    assert line("preempted: pod rc-worker was lost").startswith("preempted at step 9, resumed from step 8")
