"""GKE nodes in the sandbox's Kubernetes API: what xpk's cluster registers, the scheduler's
verdicts, a RayCluster without the RayOperator add-on, the Lustre CSI DaemonSet, Spot
preemption of a GPU node, and cluster deletion. No Ray head is started here.

The module's tests share one sandbox and run in file order.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from rltui import manifests
from rltui_sandbox.nodes import pool_node_prefix
from rltui_sandbox.world import region_of

pytestmark = [pytest.mark.timeout(60, func_only=True)]

GPU_POOL = "a4-highgpu-8g-ray-a4-gpu-spot-a4-pool"  # Cluster Toolkit gke-node-pool's default name
GPU_NODE = re.compile(re.escape(pool_node_prefix("ray-a4-gpu-spot", GPU_POOL)) + r"[0-9a-f]{8}-[0-9a-z]{4}")


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box(controller_profile=tools.profile(spot_replace=50.0))  # back after ~1 s
    box.xpk_cluster(tools.config())
    return box


@pytest.fixture(scope="module")
def core(box) -> client.CoreV1Api:
    return client.CoreV1Api(box.api())


def _nodes(core: client.CoreV1Api) -> tuple[list, list]:
    nodes = core.list_node().items
    gpu = [n for n in nodes if "cloud.google.com/gke-accelerator" in n.metadata.labels]
    return gpu, [n for n in nodes if n not in gpu]


def _ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def test_xpk_cluster_registers_gke_nodes(box, core, tools) -> None:
    gpu, cpu = tools.wait_for(lambda: (r := _nodes(core)) and len(r[0]) == 2 and len(r[1]) == 1 and r,
                              5, "2 GPU nodes and xpk's default CPU node")
    for node in gpu:
        labels = node.metadata.labels
        assert GPU_NODE.fullmatch(node.metadata.name), node.metadata.name
        assert labels["cloud.google.com/gke-nodepool"] == GPU_POOL
        assert labels["cloud.google.com/gke-accelerator"] == "nvidia-b200"
        assert labels["cloud.google.com/gke-spot"] == "true"
        assert labels["node.kubernetes.io/instance-type"] == "a4-highgpu-8g"
        assert labels["topology.kubernetes.io/zone"] == "us-east1-b"
        assert labels["kubernetes.io/hostname"] == node.metadata.name
        assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [("nvidia.com/gpu", "present", "NoSchedule")]
        assert node.status.capacity["cpu"] == "224" and node.status.capacity["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert node.status.allocatable["cpu"].endswith("m")  # GKE reserves a share of the CPUs
        assert _ready(node)
    (default,) = cpu
    assert default.metadata.labels["cloud.google.com/gke-nodepool"] == "system"  # gke-cluster's system pool
    assert default.metadata.labels["node.kubernetes.io/instance-type"] == "e2-standard-4"
    assert [t.key for t in default.spec.taints] == [SYSTEM_TAINT] and "nvidia.com/gpu" not in default.status.capacity
    out = subprocess.run(["kubectl", "--kubeconfig", str(box.kubeconfig), "get", "nodes", "--no-headers"],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert [line.split()[1] for line in out.stdout.splitlines()] == ["Ready"] * 3


SYSTEM_TAINT = "components.gke.io/gke-managed-components"


def _pod(name: str, gpus: int | None = None, tolerate: bool = True, image: str = "busybox:1.36") -> dict:
    spec: dict = {"containers": [{"name": "main", "image": image}]}
    if gpus is None and tolerate:  # xpk's one CPU pool is the Toolkit's tainted `system` pool
        spec["tolerations"] = [{"key": SYSTEM_TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    if gpus is not None:
        spec["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-b200"}
        spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        if tolerate:
            spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_scheduler_explains_why_a_pod_stays_pending(core, tools) -> None:
    core.create_namespaced_pod("default", _pod("sixteen-gpus", gpus=16))
    core.create_namespaced_pod("default", _pod("no-toleration", gpus=8, tolerate=False))
    expected = {
        "sixteen-gpus": "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                        "2 Insufficient nvidia.com/gpu.",
        "no-toleration": "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                         "2 node(s) had untolerated taint {nvidia.com/gpu: present}.",
    }
    for name, message in expected.items():
        pod = tools.wait_for(lambda: (p := core.read_namespaced_pod(name, "default")).status.conditions and p,
                             5, f"{name} to be judged")
        (cond,) = pod.status.conditions
        assert (cond.type, cond.status, cond.reason, cond.message) == ("PodScheduled", "False", "Unschedulable", message)
        assert pod.status.phase == "Pending" and pod.spec.node_name is None
        assert [(e.type, e.reason, e.message) for e in tools.events_for(core, name)] == \
            [("Warning", "FailedScheduling", message)]
        core.delete_namespaced_pod(name, "default")


def test_the_system_pool_is_tainted_as_the_toolkit_leaves_it(core, tools) -> None:
    """cluster-toolkit v1.94.0 gke-cluster system_node_pool_taints: a pod that does not tolerate
    it has no node on xpk's cluster (the GPU nodes carry nvidia.com/gpu)."""
    system = _nodes(core)[1][0]
    assert [(t.key, t.value, t.effect) for t in system.spec.taints] == [(SYSTEM_TAINT, "true", "NoSchedule")]
    core.create_namespaced_pod("default", _pod("untolerated", tolerate=False))
    pod = tools.wait_for(lambda: (p := core.read_namespaced_pod("untolerated", "default")).status.conditions and p,
                         5, "untolerated to be judged")
    assert pod.status.phase == "Pending"
    assert f"1 node(s) had untolerated taint {{{SYSTEM_TAINT}: true}}" in pod.status.conditions[0].message
    core.delete_namespaced_pod("untolerated", "default")


def test_a_plain_pod_runs_on_the_cpu_node(core, tools) -> None:
    core.create_namespaced_pod("default", _pod("hello"))
    pod = tools.wait_for(lambda: (p := core.read_namespaced_pod("hello", "default")).status.phase == "Running" and p,
                         5, "hello to run")
    assert pod.spec.node_name == _nodes(core)[1][0].metadata.name
    assert pod.status.container_statuses[0].ready and pod.status.pod_ip.startswith("10.8.")
    reasons = [e.reason for e in tools.events_for(core, "hello")]
    assert reasons == ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    core.delete_namespaced_pod("hello", "default")


def test_raycluster_is_left_alone_without_the_rayoperator_addon(box, core, tools) -> None:
    cfg = tools.config(CLUSTER_NAME="lonely")
    custom = client.CustomObjectsApi(box.api())
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", manifests.ray_cluster(cfg))
    events = tools.wait_for(lambda: tools.events_for(core, "lonely"), 5, "an event on the RayCluster")
    assert [(e.type, e.reason) for e in events] == [("Warning", "OperatorNotInstalled")]
    assert "RayOperator add-on of GKE cluster ray-a4-gpu-spot is disabled" in events[0].message
    assert "--update-addons=RayOperator=ENABLED" in events[0].message
    rc = custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", "lonely")
    assert "status" not in rc
    assert core.list_namespaced_pod("default", label_selector="ray.io/cluster=lonely").items == []
    assert core.list_namespaced_service("default").items == []
    custom.delete_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", "lonely")


def test_lustre_csi_daemonset_follows_the_addon(box, tools) -> None:
    apps = client.AppsV1Api(box.api())
    assert apps.list_namespaced_daemon_set("kube-system").items == []
    box.enable_addons(tools.config(), ray=False, lustre=True)
    # enable_addons recreates the nodes as xpk does; the counts follow the nodes as they return.
    ds = tools.wait_for(lambda: (d := apps.read_namespaced_daemon_set("lustre-csi-node", "kube-system"))
                        .status.desired_number_scheduled == 3 and d, 5, "the lustre-csi-node DaemonSet on 3 nodes")
    assert ds.status.number_ready == 3


def test_preempt_takes_a_gpu_node_away_and_a_fresh_one_returns(box, core, tools) -> None:
    gpu, cpu = _nodes(core)
    code, body = box.post_preempt({"node": "gke-nope"})
    assert code == 404 and body["message"].startswith('no GPU node named "gke-nope"')
    assert all(n.metadata.name in body["message"] for n in gpu)
    assert box.post_preempt({"node": cpu[0].metadata.name})[0] == 404  # a CPU node is no Spot GPU node

    code, body = box.post_preempt(None)
    assert code == 200, body
    name = body["node"]
    old = next(n for n in gpu if n.metadata.name == name)
    assert body["pods"] == [] and 0.5 < body["returns_in_s"] < 1.5
    # Gone once its graceful shutdown is over (30 profile seconds: 10 ms here).
    tools.wait_for(lambda: name not in {n.metadata.name for n in core.list_node().items}, 5, "the node to go")
    assert {e.reason for e in tools.events_for(core, name)} >= {"Preempted", "NodeNotReady"}

    back = tools.wait_for(lambda: core.read_node(name), 5, f"{name} to come back")
    assert back.metadata.uid != old.metadata.uid
    assert back.status.node_info.boot_id != old.status.node_info.boot_id
    assert _ready(back) and not back.status.images
    assert back.metadata.labels == old.metadata.labels


def test_a_missing_secret_holds_the_container_until_it_exists(core, tools) -> None:
    pod = _pod("needs-secret")
    pod["spec"]["containers"][0]["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "TOKEN"}}}]
    core.create_namespaced_pod("default", pod)

    def waiting() -> str:
        statuses = core.read_namespaced_pod("needs-secret", "default").status.container_statuses or []
        return statuses and statuses[0].state.waiting and statuses[0].state.waiting.reason
    assert tools.wait_for(waiting, 5, "a waiting reason") in ("ContainerCreating", "CreateContainerConfigError")
    tools.wait_for(lambda: waiting() == "CreateContainerConfigError", 5, "CreateContainerConfigError")
    failed = [e for e in tools.events_for(core, "needs-secret") if e.reason == "Failed"]
    assert [(e.type, e.message) for e in failed] == [("Warning", 'Error: secret "later" not found')]
    core.create_namespaced_secret("default", {"metadata": {"name": "later"}, "stringData": {"TOKEN": "x"}})
    tools.wait_for(lambda: core.read_namespaced_pod("needs-secret", "default").status.phase == "Running", 5,
                   "the pod to start once the Secret exists")
    core.delete_namespaced_pod("needs-secret", "default")


def test_deleting_the_cluster_removes_its_nodes(box, core, tools) -> None:
    cfg = tools.config()
    op = box.fn(box.world.delete_cluster, tools.project, region_of(cfg.zone), cfg.cluster_name)
    box.call(box.world.wait_cluster_operation(tools.project, region_of(cfg.zone), op.name))
    tools.wait_for(lambda: core.list_node().items == [], 5, "the nodes to go")
    # The client from before the delete: a deleted cluster has no endpoint to build one from.
    apps = client.AppsV1Api(core.api_client)
    tools.wait_for(lambda: apps.list_namespaced_daemon_set("kube-system").items == [], 5,
                   "the CSI DaemonSet to go with the cluster")
