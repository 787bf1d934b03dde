"""The budget guard's own arithmetic and decisions (rltui/oncluster/guard.py), on a fake clock with
GKE's and Kubernetes' answers written down as the JSON they send (container.v1 REST Operation and
Google's error body with its ErrorInfo; Node objects): what it spends, when it stops the job, when
it deletes the GPU pools, and when it gives up."""

from __future__ import annotations

from typing import Any

import pytest

from rltui.oncluster import guard as g
from rltui.oncluster.kubeapi import Trouble

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
POOL = "a4-highgpu-8g-ray-a4-gpu-spot-a4-pool"
BASE = "http://127.0.0.1:9/v1/projects/p/locations/us-east1"


def _iso(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def node(name: str, created: float, pool: str = POOL) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": _iso(created),
                         "labels": {g.POOL_LABEL: pool}}}


def spec(**guard: Any) -> dict[str, Any]:
    return {"run": "rltui-x", "guard": {"down_after": None, "max_cost_usd": None, "gpu_pools": [POOL],
                                       "gpu_node_hour_usd": 40.0, "currency": "USD", "project": "p",
                                       "location": "us-east1", "cluster": "c",
                                       "container_api": "http://127.0.0.1:9/", "time_scale": 1.0, **guard}}


def busy() -> tuple[int, dict[str, Any]]:
    """GKE's refusal while another operation runs on the cluster (AIP-193 error with ErrorInfo)."""
    return 400, {"error": {"code": 400, "status": "FAILED_PRECONDITION",
                           "message": "Cluster is running incompatible operation operation-1.",
                           "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                        "reason": "CLUSTER_ALREADY_HAS_OPERATION", "domain": "container.googleapis.com"}]}}


def denied() -> tuple[int, dict[str, Any]]:
    return 403, {"error": {"code": 403, "status": "PERMISSION_DENIED", "message": "Required 'container.clusters.update'",
                           "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                        "reason": "IAM_PERMISSION_DENIED", "domain": "iam.googleapis.com"}]}}


class Gke:
    """GKE's REST answers, in order, per (method, path after the location)."""

    def __init__(self, answers: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]]) -> None:
        self.answers, self.calls = answers, []

    def __call__(self, method: str, url: str) -> tuple[int, dict[str, Any]]:
        assert url.startswith(BASE), url
        key = (method, url[len(BASE):])
        self.calls.append(key)
        queue = self.answers[key]
        return queue.pop(0) if len(queue) > 1 else queue[0]


DELETE = ("DELETE", f"/clusters/c/nodePools/{POOL}")
OP = ("GET", "/operations/operation-7")
STARTED = (200, {"name": "operation-7", "operationType": "DELETE_NODE_POOL", "status": "RUNNING"})
DONE = (200, {"name": "operation-7", "operationType": "DELETE_NODE_POOL", "status": "DONE"})


class Run:
    """A run's state.json and what the guard did to it."""

    def __init__(self, status: str = "RUNNING", **guard: Any) -> None:
        self.spec = spec(**guard)
        self.state: dict[str, Any] = {"status": status, "attempts": [{"id": "rltui-x", "status": "RUNNING"}]}
        self.events: list[tuple[str, str]] = []
        self.stops = 0
        self.ray_answers = True

    def stop(self) -> None:
        if not self.ray_answers:
            raise Trouble("Ray job API: connection refused")
        self.stops += 1

    def look(self, guard: g.Guard, now: float, nodes: list[dict[str, Any]] | None) -> dict[str, Any]:
        guard.look(self.spec, self.state, now, nodes, self.stop, lambda kind, text: self.events.append((kind, text)))
        return dict(self.state["guard"])


def test_the_spend_counts_each_node_from_its_creation_and_keeps_a_replaced_spot_node() -> None:
    book: dict[str, Any] = {}
    a, b = node("gpu-a", T0), node("gpu-b", T0)
    g.account_nodes(book, [a, b], [POOL], T0 + 1800)
    assert g.spend(book, T0 + 1800, 1.0, 40.0) == pytest.approx(2 * 0.5 * 40.0)
    # b preempted and replaced: b's half hour stays, its successor counts from its own creation.
    b2 = node("gpu-b2", T0 + 2700)
    g.account_nodes(book, [a, b2], [POOL], T0 + 3600)
    assert g.spend(book, T0 + 3600, 1.0, 40.0) == pytest.approx((1.0 + 1.0 + 0.25) * 40.0)
    assert g.live_nodes(book) == 2
    # A node of another pool (the system pool) costs nothing here.
    g.account_nodes(book, [a, b2, node("sys-1", T0, pool="system")], [POOL], T0 + 3600)
    assert len(book) == 3


def test_the_spend_runs_on_the_clouds_clock_in_a_faster_sandbox() -> None:
    """time_scale is real seconds per reference second: at 1/60, a real minute is an hour."""
    book: dict[str, Any] = {}
    g.account_nodes(book, [node("gpu-a", T0)], [POOL], T0 + 60)
    assert g.spend(book, T0 + 60, 1 / 60, 40.0) == pytest.approx(40.0)
    assert g.spend(book, T0 + 60, 1 / 60, None) is None  # no price: no figure, never a guess


def test_down_after_gpus_deletes_the_pool_once_the_run_ends_and_says_so() -> None:
    run, gke = Run(down_after="gpus"), Gke({DELETE: [STARTED], OP: [(200, {**STARTED[1]}), DONE]})
    guard = g.Guard(gke)
    assert run.look(guard, T0 + 60, [node("gpu-a", T0)])["state"] == "watching"
    assert gke.calls == [] and run.state["spend_usd"] == pytest.approx(40.0 / 60, abs=1e-4)
    run.state["status"] = "SUCCEEDED"
    seen = run.look(guard, T0 + 120, [node("gpu-a", T0)])
    assert seen["state"] == "deleting" and seen["pools"] == {POOL: "deleting"}
    assert run.look(guard, T0 + 130, [node("gpu-a", T0)])["state"] == "deleting"  # the operation runs
    done = run.look(guard, T0 + 140, [])
    assert done["state"] == "done" and done["pools"] == {POOL: "deleted"}
    assert gke.calls == [DELETE, OP, OP]
    assert run.events == [("torn_down", f"GPU node pool(s) {POOL} deleted; Lustre and the checkpoints are kept")]
    assert run.stops == 0 and run.state["status"] == "SUCCEEDED"
    run.look(guard, T0 + 150, [])
    assert len(gke.calls) == 3, "done: no more calls"
    assert g.pending(run.state) is False


def test_the_budget_stops_the_job_first_then_deletes_the_pools() -> None:
    run = Run(max_cost_usd=50.0)
    gke = Gke({DELETE: [STARTED], OP: [DONE]})
    guard = g.Guard(gke)
    nodes = [node("gpu-a", T0), node("gpu-b", T0)]
    run.look(guard, T0 + 1800, nodes)  # $40 of $50
    assert run.stops == 0 and run.state["status"] == "RUNNING" and g.pending(run.state)
    run.ray_answers = False
    seen = run.look(guard, T0 + 2700, nodes)  # $60: past the budget, but Ray does not answer
    assert seen["state"] == "stopping" and run.state["status"] == "RUNNING" and gke.calls == []
    run.ray_answers = True
    seen = run.look(guard, T0 + 2760, nodes)
    assert run.stops == 1 and run.state["status"] == "STOPPED"
    assert run.state["attempts"][-1]["status"] == "STOPPED"
    assert "the budget was reached (~$61.33 spent of $50.00)" in run.state["message"]
    assert [k for k, _ in run.events] == ["budget"] and "$61.33 spent of $50.00" in run.events[0][1]
    assert seen["state"] == "deleting" and gke.calls == [DELETE]
    assert run.look(guard, T0 + 2770, [])["state"] == "done"
    assert run.stops == 1 and [k for k, _ in run.events] == ["budget", "torn_down"]


def test_max_cost_alone_keeps_watching_after_the_run_ends_the_nodes_bill_on() -> None:
    run = Run(status="SUCCEEDED", max_cost_usd=100.0)
    guard = g.Guard(Gke({DELETE: [STARTED], OP: [DONE]}))
    assert run.look(guard, T0 + 3600, [node("gpu-a", T0)])["state"] == "watching"
    assert g.pending(run.state), "the supervisor must go on looking"
    assert run.look(guard, T0 + 3 * 3600, [node("gpu-a", T0)])["state"] == "deleting"
    assert run.stops == 0, "the run had ended: nothing to stop"
    assert run.state["status"] == "SUCCEEDED"


def test_a_busy_cluster_is_tried_again_on_a_later_look() -> None:
    run, gke = Run(status="SUCCEEDED", down_after="gpus"), Gke({DELETE: [busy(), busy(), STARTED], OP: [DONE]})
    guard = g.Guard(gke)
    first = run.look(guard, T0, [])
    assert first["state"] == "deleting" and first["pools"] == {POOL: "present"}
    assert "busy with another operation" in first["message"]
    run.look(guard, T0 + 10, [])
    assert run.look(guard, T0 + 20, [])["pools"] == {POOL: "deleting"}
    assert run.look(guard, T0 + 30, [])["state"] == "done"
    assert gke.calls == [DELETE, DELETE, DELETE, OP]


def test_a_pool_already_gone_counts_as_deleted() -> None:
    gone = (404, {"error": {"code": 404, "status": "NOT_FOUND", "message": "Not found: nodePools/x."}})
    run, gke = Run(status="FAILED", down_after="gpus"), Gke({DELETE: [gone]})
    assert run.look(g.Guard(gke), T0, [])["state"] == "done"
    assert gke.calls == [DELETE] and [k for k, _ in run.events] == ["torn_down"]


def test_a_guard_that_may_not_delete_says_so_and_gives_up_after_a_bound() -> None:
    """Refusals are tried again for longer than IAM's propagation of a new binding, then given up."""
    run, gke = Run(status="SUCCEEDED", down_after="gpus"), Gke({DELETE: [denied()]})
    guard = g.Guard(gke)
    for t in (0, 10, g.REFUSED_FOR_S - 10):
        seen = run.look(guard, T0 + t, [])
        assert seen["state"] == "deleting" and "refused" in seen["message"]
    failed = run.look(guard, T0 + g.REFUSED_FOR_S, [])
    assert failed["state"] == "failed" and "`rltui down` deletes what is left" in failed["message"]
    assert "403 PERMISSION_DENIED (IAM_PERMISSION_DENIED)" in failed["message"]
    assert not g.pending(run.state) and [k for k, _ in run.events] == ["guard"], "the user is told"
    assert "the GPU nodes still bill" in run.events[0][1]
    calls = len(gke.calls)
    run.look(guard, T0 + g.REFUSED_FOR_S + 10, [])
    assert len(gke.calls) == calls == 4, "given up: no more calls"


def test_a_failed_operation_is_asked_for_again() -> None:
    failed_op = (200, {"name": "operation-7", "status": "DONE", "error": {"code": 13, "message": "internal"}})
    run, gke = Run(status="SUCCEEDED", down_after="gpus"), Gke({DELETE: [STARTED], OP: [failed_op, DONE]})
    guard = g.Guard(gke)
    run.look(guard, T0, [])
    assert run.look(guard, T0 + 10, [])["pools"] == {POOL: "present"}
    run.look(guard, T0 + 20, [])
    assert run.look(guard, T0 + 30, [])["state"] == "done"
    assert gke.calls == [DELETE, OP, DELETE, OP]


def test_no_guard_in_the_spec_means_nothing_is_asked_or_written() -> None:
    state: dict[str, Any] = {"status": "SUCCEEDED", "attempts": []}
    g.Guard(Gke({})).look({"run": "x"}, state, T0, [], lambda: None, lambda k, t: None)
    assert state == {"status": "SUCCEEDED", "attempts": []} and not g.pending(state)


def test_the_nodes_are_asked_for_by_their_pool_label() -> None:
    assert g.nodes_path(["b", "a"]) == ("/api/v1/nodes?labelSelector=cloud.google.com%2Fgke-nodepool+in+%28a%2Cb%29")


def test_a_job_of_another_run_keeps_the_pools_and_the_user_is_told() -> None:
    """The GPU pools are the cluster's: a later run training on them keeps them."""
    run, gke = Run(status="SUCCEEDED", down_after="gpus"), Gke({DELETE: [STARTED]})
    guard = g.Guard(gke)
    guard.look(run.spec, run.state, T0, [], run.stop, lambda kind, text: run.events.append((kind, text)),
               lambda: ["rltui-later"])
    seen = run.state["guard"]
    assert seen["state"] == "done" and "rltui-later" in seen["message"] and gke.calls == []
    assert [k for k, _ in run.events] == ["guard"] and not g.pending(run.state)


def test_a_head_that_does_not_answer_defers_the_deletion() -> None:
    run, gke = Run(status="SUCCEEDED", down_after="gpus"), Gke({DELETE: [STARTED], OP: [DONE]})
    guard = g.Guard(gke)

    def unknown() -> list[str]:
        raise Trouble("Ray job API /api/jobs/: ConnectionRefusedError")

    guard.look(run.spec, run.state, T0, [], run.stop, lambda kind, text: run.events.append((kind, text)), unknown)
    assert run.state["guard"]["state"] == "deleting" and gke.calls == [] and g.pending(run.state)
    assert run.look(guard, T0 + 10, [])["pools"] == {POOL: "deleting"}


def test_refusals_count_in_a_row() -> None:
    """An answer between two refusals starts the bound over (a transient 403 hours later)."""
    run, gke = Run(status="SUCCEEDED", down_after="gpus"), Gke({DELETE: [denied(), busy(), denied()]})
    guard = g.Guard(gke)
    run.look(guard, T0, [])
    run.look(guard, T0 + g.REFUSED_FOR_S - 5, [])  # busy: not a refusal
    assert run.look(guard, T0 + g.REFUSED_FOR_S + 5, [])["state"] == "deleting"
