"""The codelab's RayCluster in the sandbox, end to end with the real clients: pods and service as
KubeRay makes them, Pending -> ContainerCreating -> Running seen through a watch, KubeRay's status,
the REAL Ray head behind a port-forward with the Secret in its env, Spot preemption of a worker's
node, and deletion stopping the Ray head process.

One Ray head for the module; the tests share it and run in file order.
"""

from __future__ import annotations

import http.client
import json
import re
import shlex
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.stream import portforward

from rltui import manifests
from rltui_sandbox.nodes import pool_node_prefix

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90, func_only=True)]

NAME = "ray-a4-gpu-spot"
IMAGE = "nvcr.io/nvidia/nemo-rl:v0.4.0"
HEAD = re.compile(rf"{NAME}-head-[a-z0-9]{{5}}")
WORKER = re.compile(rf"{NAME}-gpu-worker-group-worker-[a-z0-9]{{5}}")


@dataclass
class Rollout:
    core: client.CoreV1Api
    custom: client.CustomObjectsApi
    seen: list[tuple[str, str, str, str, bool]]  # (event type, pod, phase, waiting reason, ready)
    lustre_dir: str


def _rc(custom: client.CustomObjectsApi) -> dict:
    return custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", NAME)


def _pods(core: client.CoreV1Api) -> list[Any]:
    return core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={NAME}").items


def _ready(pod: Any) -> bool:
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box(controller_profile=tools.profile(spot_replace=50.0))  # a Spot node is back after ~1 s
    cfg = tools.config()
    box.xpk_cluster(cfg)
    box.enable_addons(cfg)
    return box


@pytest.fixture(scope="module")
def rollout(box, tools) -> Rollout:
    """The codelab's apply (Lustre ACTIVE first, PV with its IP), watched until every pod is Ready."""
    cfg = tools.config()
    ip = box.lustre_ip(cfg, box.create_lustre(cfg))
    core, custom = client.CoreV1Api(box.api()), client.CustomObjectsApi(box.api())
    core.create_persistent_volume(manifests.persistent_volume(cfg, ip))
    core.create_namespaced_persistent_volume_claim("default", manifests.persistent_volume_claim(cfg))
    core.create_namespaced_secret("default", manifests.job_secret(cfg))
    since = core.list_namespaced_pod("default").metadata.resource_version
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", manifests.ray_cluster(cfg))
    seen: list[tuple[str, str, str, str, bool]] = []
    state: dict[str, bool] = {}
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_pod, "default", label_selector=f"ray.io/cluster={NAME}",
                               resource_version=since, timeout_seconds=60):
        pod = event["object"]
        statuses = pod.status.container_statuses or []
        waiting = statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else ""
        seen.append((event["type"], pod.metadata.name, pod.status.phase, waiting, _ready(pod)))
        state[pod.metadata.name] = _ready(pod)
        if len(state) == 3 and all(state.values()):
            stream.stop()
    lustre_dir = box.fn(box.world.lustre_dir, tools.project, cfg.zone, cfg.lustre_instance_id)
    return Rollout(core, custom, seen, str(lustre_dir))


def test_head_service_and_pods_are_made_as_kuberay_makes_them(rollout) -> None:
    core = rollout.core
    rc = _rc(rollout.custom)
    svc = core.read_namespaced_service(f"{NAME}-head-svc", "default")
    assert svc.spec.selector == {"ray.io/cluster": NAME, "ray.io/node-type": "head"}
    assert {p.name: p.port for p in svc.spec.ports} == {"client": 10001, "dashboard": 8265, "gcs-server": 6379}
    pods = _pods(core)
    heads = [p for p in pods if p.metadata.labels["ray.io/node-type"] == "head"]
    workers = [p for p in pods if p.metadata.labels["ray.io/node-type"] == "worker"]
    assert len(heads) == 1 and len(workers) == 2
    assert HEAD.fullmatch(heads[0].metadata.name) and all(WORKER.fullmatch(w.metadata.name) for w in workers)
    assert heads[0].metadata.labels["ray.io/group"] == "headgroup"
    assert {w.metadata.labels["ray.io/group"] for w in workers} == {"gpu-worker-group"}
    template = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    for pod in [*heads, svc]:
        (owner,) = pod.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid, owner.controller) == ("RayCluster", NAME, rc["metadata"]["uid"], True)
    for pod in pods:
        assert pod.metadata.labels["ray.io/cluster"] == NAME
        assert pod.metadata.labels["ray.io/is-ray-node"] == "yes"
        assert pod.spec.node_selector == template["nodeSelector"]
        assert [t.key for t in pod.spec.tolerations] == ["nvidia.com/gpu"]
        assert pod.spec.volumes[0].persistent_volume_claim.claim_name == "rl-demo-gpu-lustre-pvc"
        assert pod.spec.node_name.startswith(pool_node_prefix(NAME, f"a4-highgpu-8g-{NAME}-a4-pool"))
    assert workers[0].spec.node_name != workers[1].spec.node_name  # 8 GPUs each: one worker per node
    assert workers[0].spec.containers[0].resources.limits["nvidia.com/gpu"] == "8"
    assert "ray start --head" in heads[0].spec.containers[0].args[0]


def test_a_watch_sees_every_pod_go_from_pending_to_running(rollout) -> None:
    for name in {s[1] for s in rollout.seen}:
        mine = [s for s in rollout.seen if s[1] == name]
        assert mine[0][:3] == ("ADDED", name, "Pending"), mine[0]
        assert any(s[2] == "Pending" and s[3] == "ContainerCreating" for s in mine), mine
        assert mine[-1][2:] == ("Running", "", True), mine[-1]
        phases = [s[2] for s in mine]
        assert phases.index("Running") > max(i for i, p in enumerate(phases) if p == "Pending")


def test_status_is_what_kuberay_writes(rollout, tools) -> None:
    # The operator writes status after it sees the pods Ready: moments after the watch did.
    status = tools.wait_for(lambda: (s := _rc(rollout.custom).get("status", {})).get("state") == "ready" and s,
                            5, "state ready")
    assert (status["desiredWorkerReplicas"], status["readyWorkerReplicas"], status["availableWorkerReplicas"]) == (2, 2, 2)
    assert (status["minWorkerReplicas"], status["maxWorkerReplicas"]) == (2, 2)
    assert (status["desiredCPU"], status["desiredGPU"], status["desiredMemory"]) == ("208", "16", "2064Gi")
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["HeadPodReady"]["status"] == "True"
    assert conditions["RayClusterProvisioned"]["status"] == "True"
    assert all(c["lastTransitionTime"] for c in conditions.values())
    head = next(p for p in _pods(rollout.core) if p.metadata.labels["ray.io/node-type"] == "head")
    assert status["head"]["podName"] == head.metadata.name and status["head"]["podIP"] == head.status.pod_ip
    assert status["endpoints"]["dashboard"] == "8265"
    assert status["observedGeneration"] == 1


def test_kubelet_events_and_a_shared_image_pull(rollout) -> None:
    core = rollout.core
    pods = _pods(core)
    head = next(p for p in pods if p.metadata.labels["ray.io/node-type"] == "head")
    events = [e for e in core.list_namespaced_event("default").items if e.involved_object.name == head.metadata.name]
    assert [e.reason for e in events] == ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    assert events[2].message.startswith(f'Successfully pulled image "{IMAGE}" in ')
    for node_name in {p.spec.node_name for p in pods}:
        images = core.read_node(node_name).status.images
        assert [i.names for i in images] == [[IMAGE]]  # each node pulled it once


def test_the_local_ray_head_starts_during_the_pull_but_the_pod_waits_for_pull_and_pod_start(box, rollout) -> None:
    """The local head's real start hides under the head pod's image pull; the modelled waits stay:
    its pod_start begins only after its node's pull, and the pod became Ready after both."""
    head = next(p for p in _pods(rollout.core) if p.metadata.labels["ray.io/node-type"] == "head")
    ops = box.world.record.snapshot()["operations"]
    pods_target = f"pods/default/{head.metadata.name}"
    [real] = [op for op in ops if op["kind"] == "ray.head_start" and op["target"] == pods_target]
    [pod_start] = [op for op in ops if op["kind"] == "kubelet.pod_start" and op["target"] == pods_target]
    [pull] = [op for op in ops if op["kind"] == "kubelet.image_pull" and op["target"] == f"nodes/{head.spec.node_name}"]
    assert real["real"] is True and pod_start["key"] == "pod_start" and real["error"] is None
    assert real["start_ref_s"] < pull["end_ref_s"] <= pod_start["start_ref_s"] < pod_start["end_ref_s"]
    assert _ready(head)


def _get(pf: Any, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("ray-head", 8265, timeout=10)
    conn.sock = pf.socket(8265)
    conn.request("GET", path, headers={"User-Agent": "rltui-test"})  # Ray 2.46's dashboard needs one
    response = conn.getresponse()
    return response.status, response.read()


def test_the_ray_dashboard_answers_through_the_port_forward(box, rollout) -> None:
    head = next(p for p in _pods(rollout.core) if p.metadata.labels["ray.io/node-type"] == "head")
    pf = portforward(rollout.core.connect_get_namespaced_pod_portforward, head.metadata.name, "default",
                     ports="8265")
    status, body = _get(pf, "/api/version")
    pf.close()
    assert status == 200
    assert json.loads(body)["ray_version"]
    direct = box.controller.dashboard_url()  # what the daemon reports as the local dashboard
    with urllib.request.urlopen(f"{direct}/api/version", timeout=5) as resp:
        assert json.loads(resp.read()) == json.loads(body)


def test_the_secret_reaches_the_head_and_its_output_the_pod_log(box, rollout, tools) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    head = next(p for p in _pods(rollout.core) if p.metadata.labels["ray.io/node-type"] == "head")
    bridge = tools.bridge(rollout.core, head.metadata.name, 8265)
    try:
        jobs = JobSubmissionClient(f"http://127.0.0.1:{bridge.local_port}")
        # The token is a file of the mounted Secret (SECRETS_MOUNT), never an env var.
        probe = ("import os; print('HF_TOKEN=' + ('set' if os.environ.get('HF_TOKEN') else 'unset')); "
                 "m = os.environ.get('SECRETS_MOUNT', ''); "
                 "print('HF_TOKEN file=' + ('yes' if m and os.path.isfile(os.path.join(m, 'HF_TOKEN')) else 'no')); "
                 "print('LUSTRE_MOUNT=' + os.environ.get('LUSTRE_MOUNT', '')); "
                 "print('NEMO_RL_DIR=' + os.environ.get('NEMO_RL_DIR', ''))")
        job = jobs.submit_job(entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(probe)}")
        deadline = time.monotonic() + 45
        while not (status := jobs.get_job_status(job)).is_terminal():
            assert time.monotonic() < deadline, f"job still {status}"
            time.sleep(0.2)
        logs = jobs.get_job_logs(job)
    finally:
        bridge.close()
    assert status == JobStatus.SUCCEEDED, logs
    assert "HF_TOKEN=unset" in logs and "HF_TOKEN file=yes" in logs and tools.hf_token not in logs
    assert f"LUSTRE_MOUNT={rollout.lustre_dir}" in logs
    assert "NEMO_RL_DIR=" + str(box.controller.nemo_rl_dir) in logs
    text = tools.wait_for(lambda: (t := rollout.core.read_namespaced_pod_log(head.metadata.name, "default"))
                          and "Ray runtime started" in t and t, 5, "ray start's output in the pod log")
    assert tools.hf_token not in text


def test_preempting_a_worker_node_recreates_its_pod_once_the_node_is_back(box, rollout, tools) -> None:
    core, custom = rollout.core, rollout.custom
    before = {p.metadata.name: p for p in _pods(core)}
    head = next(p for p in before.values() if p.metadata.labels["ray.io/node-type"] == "head")
    code, result = box.post_preempt({})
    assert code == 200, result
    node = result["node"]
    assert node != head.spec.node_name  # a worker-only node first: the job's head survives
    (victim,) = result["pods"]
    assert WORKER.fullmatch(victim) and before[victim].spec.node_name == node
    tools.wait_for(lambda: node not in {n.metadata.name for n in core.list_node().items}, 5, "the node to go")
    tools.wait_for(lambda: victim not in {p.metadata.name for p in _pods(core)}, 5, "the victim pod to go")
    assert "Killing" in {e.reason for e in tools.events_for(core, victim)}
    assert {"Preempted", "NodeNotReady"} <= {e.reason for e in tools.events_for(core, node)}

    def replacement() -> Any:
        return next((p for p in _pods(core) if p.metadata.name not in before), None)
    new = tools.wait_for(replacement, 5, "KubeRay to recreate the worker")
    failed = tools.wait_for(lambda: [e for e in tools.events_for(core, new.metadata.name)
                                     if e.reason == "FailedScheduling"], 5, "the new worker to be Unschedulable")
    assert "Insufficient nvidia.com/gpu" in failed[0].message
    assert _rc(custom)["status"]["readyWorkerReplicas"] == 1
    assert _rc(custom)["status"]["state"] == "ready"  # set once, never cleared

    tools.wait_for(lambda: core.read_node(node), 5, "the Spot node to come back")
    running = tools.wait_for(lambda: _ready(p := core.read_namespaced_pod(new.metadata.name, "default")) and p,
                             10, "the new worker to run")
    assert running.spec.node_name == node
    reasons = [e.reason for e in tools.events_for(core, new.metadata.name)]
    assert reasons[:3] == ["FailedScheduling", "Scheduled", "Pulling"]  # fresh node: no image cached
    status = tools.wait_for(lambda: (s := _rc(custom)["status"])["readyWorkerReplicas"] == 2 and s, 5,
                            "readyWorkerReplicas back to 2")
    assert status["desiredWorkerReplicas"] == 2


def test_deleting_the_raycluster_stops_the_ray_head(box, rollout, tools) -> None:
    core, custom = rollout.core, rollout.custom
    (pid,) = box.children[-1]
    assert tools.proc_alive(pid)
    # A watch from before the delete sees every step (polling could miss a short Terminating
    # window on a loaded machine): each pod is first marked for deletion, then goes.
    since = core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={NAME}"
                                     ).metadata.resource_version
    custom.delete_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", NAME)
    terminating = False
    for event in watch.Watch().stream(core.list_namespaced_pod, "default",
                                      label_selector=f"ray.io/cluster={NAME}",
                                      resource_version=since, timeout_seconds=20):
        if event["type"] == "MODIFIED" and event["object"].metadata.deletion_timestamp:
            terminating = True
            break
        assert event["type"] != "DELETED" or terminating, "a pod went without Terminating first"
    assert terminating, "no pod showed Terminating"
    tools.wait_for(lambda: _pods(core) == [], 10, "the pods to go")
    tools.wait_for(lambda: box.children[-1] == [], 20, "on_children([])")
    assert not tools.proc_alive(pid)
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_service(f"{NAME}-head-svc", "default")
    assert gone.value.status == 404
