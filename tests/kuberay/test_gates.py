"""What holds the codelab's pods back, in the order a hurried user meets it: no RayOperator
add-on, no Lustre CSI driver, a Lustre instance still CREATING, a PV applied with the blank IP;
and a daemon restart in the middle (pods re-adopted, the Ray head started anew).

The tests share one sandbox and run in file order; the Lustre instance stays CREATING for ~3 s.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.stream import portforward

from rltui import manifests

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90, func_only=True)]

NAME = "ray-a4-gpu-spot"


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box(world_profile=tools.profile(lustre_create=150.0))  # CREATING for ~3 s
    box.xpk_cluster(tools.config())
    return box


@pytest.fixture(scope="module")
def core(box) -> client.CoreV1Api:
    return client.CoreV1Api(box.api())


@pytest.fixture(scope="module")
def custom(box) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(box.api())


@pytest.fixture(scope="module")
def lustre_op(box, core, custom, tools) -> str:
    """The codelab's apply before Lustre is ACTIVE: the PV gets the blank IP placeholder."""
    cfg = tools.config()
    op = box.create_lustre(cfg)
    core.create_persistent_volume(manifests.persistent_volume(cfg, None))
    core.create_namespaced_persistent_volume_claim("default", manifests.persistent_volume_claim(cfg))
    core.create_namespaced_secret("default", manifests.job_secret(cfg))
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", manifests.ray_cluster(cfg))
    return op


def _pods(core: client.CoreV1Api) -> list[Any]:
    return core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={NAME}").items


def _waiting(pod: Any) -> str:
    statuses = pod.status.container_statuses or []
    return statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else ""


def _mount_failures(core: client.CoreV1Api, tools, pods: list[Any] | None, needle: str) -> list[str]:
    """The FailedMount message containing `needle` of each pod (waits until all have one). pods=None:
    the RayCluster's 3 pods as they are then (node recreation replaces pods)."""
    def found() -> list[str] | None:
        out = []
        current = pods if pods is not None else _pods(core)
        if pods is None and (len(current) != 3 or any(p.metadata.deletion_timestamp for p in current)):
            return None
        for pod in current:
            hits = [e.message for e in tools.events_for(core, pod.metadata.name)
                    if e.reason == "FailedMount" and needle in e.message]
            if not hits:
                return None
            out.append(hits[-1])
        return out
    return tools.wait_for(found, 5, f"FailedMount events saying {needle!r}")


def test_without_the_rayoperator_addon_nothing_happens(core, custom, lustre_op, tools) -> None:
    events = tools.wait_for(lambda: tools.events_for(core, NAME), 5, "an event on the RayCluster")
    assert [e.reason for e in events] == ["OperatorNotInstalled"]
    assert _pods(core) == []
    assert "status" not in custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", NAME)


def test_without_the_lustre_csi_driver_the_pods_cannot_mount(box, core, lustre_op, tools) -> None:
    box.enable_addons(tools.config(), ray=True, lustre=False)
    pods = tools.wait_for(lambda: len(p := _pods(core)) == 3 and p, 5, "KubeRay to create 3 pods")
    messages = _mount_failures(core, tools, pods, "lustre.csi.storage.gke.io")
    assert all(m.startswith('MountVolume.SetUp failed for volume "rl-demo-gpu-lustre-pv" : ') for m in messages)
    assert all("not found in the list of registered CSI drivers" in m for m in messages)
    assert all(p.spec.node_name and _waiting(p) == "ContainerCreating" for p in _pods(core))


def test_a_creating_lustre_instance_keeps_the_pods_in_container_creating(box, core, lustre_op, tools) -> None:
    box.enable_addons(tools.config(), ray=False, lustre=True)  # and recreates the nodes, as xpk does
    messages = _mount_failures(core, tools, None, "is CREATING, not ACTIVE")
    assert all(f'Managed Lustre instance "{tools.project}/us-east1-b/rl-demo-gpu-lustre"' in m for m in messages)
    assert {_waiting(p) for p in _pods(core)} == {"ContainerCreating"}


def test_a_restarted_controller_adopts_the_waiting_pods(box, core, tools) -> None:
    before = {p.metadata.uid for p in _pods(core)}
    box.restart_controller()
    time.sleep(0.5)  # the new controller has reconciled by now (it reacts within milliseconds)
    after = _pods(core)
    assert {p.metadata.uid for p in after} == before  # nothing recreated, nothing doubled
    assert {_waiting(p) for p in after} == {"ContainerCreating"}
    seen = [(e.involved_object.uid, e.reason, e.message) for e in core.list_namespaced_event("default").items]
    assert len(seen) == len(set(seen))  # the new controller recorded no event a second time


def test_once_active_a_pv_with_the_blank_ip_still_cannot_mount(box, core, lustre_op, tools) -> None:
    ip = box.lustre_ip(tools.config(), lustre_op)
    messages = _mount_failures(core, tools, _pods(core), f"serves {ip}@tcp:/lustre")
    assert all(f"mount of {manifests.LUSTRE_IP_PLACEHOLDER}@tcp:/lustre failed" in m for m in messages)
    assert {_waiting(p) for p in _pods(core)} == {"ContainerCreating"}


def test_reapplying_the_volume_with_the_ip_lets_the_pods_run(box, core, custom, lustre_op, tools) -> None:
    cfg = tools.config()
    core.delete_namespaced_persistent_volume_claim(cfg.pvc_name, "default")
    core.delete_persistent_volume(cfg.pv_name)
    core.create_persistent_volume(manifests.persistent_volume(cfg, box.lustre_ip(cfg, lustre_op)))
    core.create_namespaced_persistent_volume_claim("default", manifests.persistent_volume_claim(cfg))
    status = tools.wait_for(lambda: (s := custom.get_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", NAME).get("status", {})).get("state") == "ready" and s,
        30, "the RayCluster to be ready")
    assert status["readyWorkerReplicas"] == status["desiredWorkerReplicas"] == 2
    assert len(box.children[-1]) == 1


def _dashboard(core: client.CoreV1Api, pod: str) -> dict:
    pf = portforward(core.connect_get_namespaced_pod_portforward, pod, "default", ports="8265")
    conn = http.client.HTTPConnection("ray-head", 8265, timeout=10)
    conn.sock = pf.socket(8265)
    conn.request("GET", "/api/version", headers={"User-Agent": "rltui-test"})  # Ray 2.46 needs one
    body = json.loads(conn.getresponse().read())
    pf.close()
    return body


def test_a_restart_with_a_running_head_starts_a_new_ray_head(box, core, tools) -> None:
    head = next(p for p in _pods(core) if p.metadata.labels["ray.io/node-type"] == "head")
    (old_pid,) = box.children[-1]
    box.restart_controller()
    assert not tools.proc_alive(old_pid)  # stop() ended it by PID

    def restarted() -> Any:
        pod = core.read_namespaced_pod(head.metadata.name, "default")
        status = pod.status.container_statuses[0]
        return status.ready and status.restart_count == 1 and pod
    pod = tools.wait_for(restarted, 30, "the head container to restart and be Ready")
    assert pod.metadata.uid == head.metadata.uid and pod.status.pod_ip == head.status.pod_ip
    (new_pid,) = box.children[-1]
    assert new_pid != old_pid and tools.proc_alive(new_pid)
    assert _dashboard(core, head.metadata.name)["ray_version"]
    assert len(_pods(core)) == 3
