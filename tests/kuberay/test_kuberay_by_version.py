"""The RayOperator add-on's KubeRay release decides whether the codelab's RayCluster ever becomes
ready in the sandbox, as on GKE: KubeRay 1.6 with a rayVersion of 2.53 or later probes
`GET :52365/api/healthz`, which the image's Ray (2.46.0) does not serve, so the head is never
Ready and its liveness probe restarts it; with rayVersion 2.46.0 the same KubeRay probes the
older endpoints and it becomes Ready; KubeRay 1.2.2 writes no HeadPodReady condition and rltui
reads the pods instead. The real local Ray head answers every probe (probes.py).

One sandbox for the module (one worker, no Lustre: the probes are the point); each test runs
one RayCluster under one KubeRay version and deletes it. The tests run in file order.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from rltui import manifests
from rltui.cloud.endpoints import Endpoints
from rltui.cloud.kube import KubeAdapter, raycluster_health
from rltui_sandbox.kuberay.versions import KubeRay
from rltui_sandbox.world import region_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240, func_only=True)]


@pytest.fixture(scope="module")
def cfg(tools):
    return tools.config()


@pytest.fixture(scope="module")
def box(make_box, tools, cfg):
    box = make_box()
    box.xpk_cluster(cfg)
    box.enable_addons(cfg, lustre=False)
    client.CoreV1Api(box.api(cfg)).create_namespaced_secret("default", manifests.job_secret(cfg))
    return box


@pytest.fixture(scope="module")
def core(box, cfg) -> client.CoreV1Api:
    return client.CoreV1Api(box.api(cfg))


@pytest.fixture(scope="module")
def custom(box, cfg) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(box.api(cfg))


def _apply(box, custom, cfg, name: str, ray_version: str, kuberay: str) -> None:
    """The codelab's RayCluster without its Lustre volume and with one worker, under KubeRay `kuberay`."""
    box.fn(setattr, box.controller, "kuberay", KubeRay.parse(kuberay))
    body = manifests.ray_cluster(cfg)
    body["metadata"]["name"] = name
    body["spec"]["rayVersion"] = ray_version
    body["spec"]["workerGroupSpecs"][0].update(replicas=1, minReplicas=1, maxReplicas=1)
    for group in (body["spec"]["headGroupSpec"], *body["spec"]["workerGroupSpecs"]):
        spec = group["template"]["spec"]
        spec["volumes"] = [v for v in spec["volumes"] if "persistentVolumeClaim" not in v]
        spec["containers"][0]["volumeMounts"] = [m for m in spec["containers"][0]["volumeMounts"]
                                                 if m["name"] != "lustre-storage"]
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", body)


def _delete(core, custom, tools, name: str) -> None:
    custom.delete_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", name)
    tools.wait_for(lambda: not _pods(core, name), 120, f"the pods of {name} gone")


def _rc(custom, name: str) -> dict:
    return custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", name)


def _pods(core, name: str) -> list[Any]:
    return core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={name}").items


def _head(core, name: str) -> Any:
    return next((p for p in _pods(core, name) if p.metadata.labels["ray.io/node-type"] == "head"), None)


def _ready(pod: Any) -> bool:
    return pod is not None and pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _messages(core, tools, pod: str) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in tools.events_for(core, pod)]


def test_kuberay_1_6_and_ray_2_54_leave_a_ray_2_46_head_unready_and_restart_it(box, core, custom, cfg, tools):
    name = "kr16-ray254"
    _apply(box, custom, cfg, name, "2.54.0", "1.6.0")
    head = tools.wait_for(lambda: (h := _head(core, name)) is not None and h.status.phase == "Running" and h,
                          120, "the head pod Running")
    probe = head.spec.containers[0].readiness_probe
    assert (probe.http_get.path, probe.http_get.port) == ("/api/healthz", 52365)
    unhealthy = ("Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 404")
    tools.wait_for(lambda: _ready(_head(core, name)) or unhealthy in _messages(core, tools, head.metadata.name),
                   120, "the readiness probe's verdict")
    if _ready(_head(core, name)):
        _delete(core, custom, tools, name)
        pytest.skip("the sandbox's Ray head serves /api/healthz (Ray 2.53 or later), unlike the image's 2.46.0")
    # 120 liveness failures 5 s apart after 30 s: the kubelet kills the container and starts it again.
    restarted = tools.wait_for(lambda: (h := _head(core, name)).status.container_statuses[0].restart_count >= 1
                               and h, 120, "a liveness restart")
    events = _messages(core, tools, head.metadata.name)
    assert ("Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 404") in events
    assert ("Killing", "Container ray-head failed liveness probe, will be restarted") in events
    assert restarted.status.container_statuses[0].last_state.terminated.exit_code == 137
    status = _rc(custom, name)["status"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["HeadPodReady"] == "False" and conditions["RayClusterProvisioned"] == "False"
    assert "state" not in status and not raycluster_health(_rc(custom, name)).ready
    worker = next(p for p in _pods(core, name) if p.metadata.labels["ray.io/node-type"] == "worker")
    assert not _ready(worker)   # its raylet is checked on /api/healthz too
    _delete(core, custom, tools, name)


def test_kuberay_1_6_and_ray_2_46_probe_the_old_endpoints_and_get_ready(box, core, custom, cfg, tools):
    name = "kr16-ray246"
    _apply(box, custom, cfg, name, "2.46.0", "1.6.0")
    tools.wait_for(lambda: raycluster_health(_rc(custom, name)).ready, 150, "rltui's ready")
    head = _head(core, name)
    command = head.spec.containers[0].liveness_probe._exec.command
    assert command[:2] == ["bash", "-c"] and "localhost:52365/api/local_raylet_healthz" in command[2]
    assert "localhost:8265/api/gcs_healthz" in command[2]
    assert head.status.container_statuses[0].restart_count == 0
    assert not [m for r, m in _messages(core, tools, head.metadata.name) if r == "Unhealthy"]
    status = _rc(custom, name)["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["HeadPodReady"] == "True"
    assert status["state"] == "ready" and status["readyWorkerReplicas"] == 1
    _delete(core, custom, tools, name)


def test_kuberay_1_2_writes_no_conditions_and_rltui_reads_the_pods(box, core, custom, cfg, tools):
    name = "kr122"
    _apply(box, custom, cfg, name, "2.46.0", "1.2.2")
    cluster = box.fn(box.world.get_cluster, tools.project, region_of(cfg.zone), cfg.cluster_name)

    async def wait() -> dict:
        kube = KubeAdapter(Endpoints(label="SANDBOX", adc_file=box.adc), cluster=cluster)
        await kube.connect()
        try:
            return await kube.wait_raycluster_ready(name, timeout_s=150)
        finally:
            await kube.close()

    box.call(wait(), timeout=180)   # ready, from the pods
    rc = tools.wait_for(lambda: (r := _rc(custom, name))["status"].get("state") == "ready" and r,
                        30, "the operator's state ready")
    assert "conditions" not in rc["status"] and rc["status"]["readyWorkerReplicas"] == 1
    health = raycluster_health(rc)   # the RayCluster alone cannot say
    assert not health.ready and "no HeadPodReady condition" in health.message
    pods = [client.ApiClient().sanitize_for_serialization(p) for p in _pods(core, name)]
    assert raycluster_health(rc, pods).ready   # the pods can
    svc = core.read_namespaced_service(f"{name}-head-svc", "default")
    assert svc.spec.cluster_ip == "None"   # headless from KubeRay 1.2
    assert rc["status"]["head"]["serviceIP"] == _head(core, name).status.pod_ip
    probe = _head(core, name).spec.containers[0].readiness_probe
    assert probe.timeout_seconds == 5 and "--tries" not in probe._exec.command[2]
    _delete(core, custom, tools, name)
