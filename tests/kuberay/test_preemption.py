"""Spot preemption as GKE plays it (sandbox/rltui_sandbox/kuberay/preemption.py): by default a graceful
node shutdown (the pods Failed with reason Terminated, the node NotReady, gone 30 s after the
notice); with "hard", a VM gone without a word, which Kubernetes sees only after the
node-monitor grace period. No Ray head is started here: the pods are plain GPU pods.

The module's tests share one sandbox and run in file order.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = [pytest.mark.timeout(60, func_only=True)]

SHUTDOWN = "Pod was terminated in response to imminent node shutdown."


@pytest.fixture(scope="module")
def box(make_box, tools):
    # At the boxes' speed 3000: the shutdown takes 2 s, the grace period 3 s, a node is back in 1 s.
    box = make_box(controller_profile=tools.profile(spot_shutdown=100.0, node_monitor_grace=150.0,
                                                    spot_replace=50.0))
    box.xpk_cluster(tools.config())
    return box


@pytest.fixture(scope="module")
def core(box) -> client.CoreV1Api:
    return client.CoreV1Api(box.api())


def _gpu_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"ray.io/node-type": "worker"}},
            "spec": {"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-b200"},
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "busybox:1.36",
                                     "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}


def _ready(obj: Any) -> str:
    return next((c.status for c in obj.status.conditions or [] if c.type == "Ready"), "")


def _running(core: client.CoreV1Api, tools: Any, name: str) -> Any:
    core.create_namespaced_pod("default", _gpu_pod(name))
    return tools.wait_for(lambda: (p := core.read_namespaced_pod(name, "default")).status.phase == "Running"
                          and _ready(p) == "True" and p, 10, f"{name} to run")


def _all_gpu_nodes_back(core: client.CoreV1Api, tools: Any) -> None:
    def back() -> bool:
        nodes = [n for n in core.list_node().items if "cloud.google.com/gke-accelerator" in n.metadata.labels]
        return len(nodes) == 2 and all(_ready(n) == "True" and not any(
            t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or []) for n in nodes)
    tools.wait_for(back, 15, "both GPU nodes Ready and untainted")


def test_a_graceful_preemption_shuts_the_pods_down_then_the_node_goes(box, core, tools) -> None:
    pod = _running(core, tools, "graceful")
    node = pod.spec.node_name
    code, result = box.post_preempt({"node": node})
    assert code == 200 and result["mode"] == "graceful" and result["pods"] == ["graceful"], result
    # The kubelet's graceful node shutdown: the pod ends Failed, reason Terminated.
    done = core.read_namespaced_pod("graceful", "default")
    assert (done.status.phase, done.status.reason, done.status.message) == ("Failed", "Terminated", SHUTDOWN)
    disruption = next(c for c in done.status.conditions if c.type == "DisruptionTarget")
    assert (disruption.status, disruption.reason) == ("True", "TerminationByKubelet")
    assert _ready(done) == "False" and done.status.container_statuses[0].state.terminated is not None
    # The node shows NotReady, tainted so nothing new lands there, until the VM stops.
    shutting = core.read_node(node)
    assert _ready(shutting) == "False"
    assert "node.kubernetes.io/not-ready" in {t.key for t in shutting.spec.taints}
    assert {"Preempted", "NodeNotReady"} <= {e.reason for e in tools.events_for(core, node)}
    assert "Killing" in {e.reason for e in tools.events_for(core, "graceful")}
    tools.wait_for(lambda: node not in {n.metadata.name for n in core.list_node().items}, 10,
                   "the VM to stop 30 profile seconds after the notice")
    with pytest.raises(ApiException):
        core.read_namespaced_pod("graceful", "default")
    _all_gpu_nodes_back(core, tools)


def test_a_hard_preemption_stays_unseen_until_the_grace_period_ends(box, core, tools) -> None:
    pod = _running(core, tools, "hard")
    node = pod.spec.node_name
    code, result = box.post_preempt({"node": node, "hard": True})
    assert code == 200 and result["mode"] == "hard", result
    assert 2.0 < result["not_ready_in_s"] < 4.0
    # Nobody told Kubernetes: the node and the pod still look Ready.
    assert _ready(core.read_node(node)) == "True"
    still = core.read_namespaced_pod("hard", "default")
    assert still.status.phase == "Running" and _ready(still) == "True"

    def noticed() -> bool:
        try:
            return _ready(core.read_node(node)) == "Unknown" or _ready(core.read_namespaced_pod("hard", "default")) \
                == "False"
        except ApiException:
            return True  # already gone
    tools.wait_for(noticed, 8, "the node controller to notice the silent kubelet")
    tools.wait_for(lambda: "hard" not in {p.metadata.name for p in core.list_namespaced_pod("default").items}, 8,
                   "the node's pods to go with it")
    _all_gpu_nodes_back(core, tools)


def test_bad_preempt_requests_are_refused(box) -> None:
    assert box.post_preempt({"hard": "yes"})[0] == 400
    code, body = box.post_preempt({"head": True, "hard": True})
    assert code == 404 and "no Ray head pod" in body["message"]  # no RayCluster here
