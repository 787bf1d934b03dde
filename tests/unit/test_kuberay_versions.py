"""The sandbox's KubeRay by version (sandbox/rltui_sandbox/kuberay/versions.py): the probes the operator
puts in the pods, the status it writes (conditions or none, readyWorkerReplicas, `state`), the
head service - each as that KubeRay release does it - against the in-process KubeStore."""

from __future__ import annotations

import asyncio
import copy

import pytest

from rltui import manifests
from rltui.config import parse_config
from rltui_sandbox.kube.store import KubeStore, now
from rltui_sandbox.kuberay.operator import Operator
from rltui_sandbox.kuberay.pods import _pod_status
from rltui_sandbox.kuberay.templates import _head_service, _pod_manifest
from rltui_sandbox.kuberay.versions import DEFAULT, SUPPORTED, KubeRay, UnsupportedVersion

CFG = parse_config({"PROJECT_ID": "rl-versions", "NUM_NODES": "2", "HF_TOKEN": "hf_" + "x" * 30})
RAYLET = "http://localhost:52365/api/local_raylet_healthz | grep success"
GCS = "http://localhost:8265/api/gcs_healthz | grep success"


def rc(ray_version: str = "2.46.0", head_params: dict | None = None) -> dict:
    body = manifests.ray_cluster(CFG)
    body["spec"]["rayVersion"] = ray_version
    if head_params:
        body["spec"]["headGroupSpec"]["rayStartParams"].update(head_params)
    body["metadata"]["uid"] = "uid-1"
    return body


def ray_container(version: str, head: bool, cluster: dict | None = None) -> dict:
    cluster = cluster or rc()
    group = cluster["spec"]["headGroupSpec"] if head else cluster["spec"]["workerGroupSpecs"][0]
    return _pod_manifest(cluster, group, head, KubeRay.parse(version))["spec"]["containers"][0]


def test_versions_are_the_releases_and_others_are_refused_in_one_line() -> None:
    assert KubeRay.parse("v1.6.0").version == "1.6.0" and KubeRay.parse(None).version == DEFAULT
    assert DEFAULT == SUPPORTED[-1] == "1.7.0"
    for bad in ("1.0.0", "1.6", "2.0.0", "latest", "", "1.6.0-rc.0"):
        with pytest.raises(UnsupportedVersion) as info:
            KubeRay.parse(bad)
        assert "\n" not in str(info.value) and "1.1.0 to 1.7.0" in str(info.value)


@pytest.mark.parametrize("version, head, command, timeout", [
    ("1.1.1", True, f"wget -T 2 -q -O- {RAYLET} && wget -T 2 -q -O- {GCS}", 1),
    ("1.1.1", False, f"wget -T 2 -q -O- {RAYLET}", 1),
    ("1.2.0", True, f"wget -T 2 -q -O- {RAYLET} && wget -T 10 -q -O- {GCS}", 2),
    ("1.2.2", True, f"wget -T 2 -q -O- {RAYLET} && wget -T 10 -q -O- {GCS}", 5),
    ("1.2.2", False, f"wget -T 2 -q -O- {RAYLET}", 2),
    ("1.4.2", True, f"wget --tries 1 -T 2 -q -O- {RAYLET} && wget --tries 1 -T 10 -q -O- {GCS}", 5),
    ("1.6.0", True, f"wget --tries 1 -T 2 -q -O- {RAYLET} && wget --tries 1 -T 10 -q -O- {GCS}", 5),
    ("1.7.0", False, f"wget --tries 1 -T 2 -q -O- {RAYLET}", 2),
])
def test_exec_probes_for_ray_2_46_as_each_kuberay_writes_them(version, head, command, timeout) -> None:
    c = ray_container(version, head)
    for key, delay, failures in (("readinessProbe", 10, 10), ("livenessProbe", 30, 120)):
        probe = c[key]
        assert probe["exec"]["command"] == ["bash", "-c", command]
        assert (probe["initialDelaySeconds"], probe["periodSeconds"], probe["timeoutSeconds"],
                probe["successThreshold"], probe["failureThreshold"]) == (delay, 5, timeout, 1, failures)


@pytest.mark.parametrize("version, ray_version, unified", [
    ("1.6.0", "2.54.0", True), ("1.6.0", "2.53", True), ("1.7.0", "v2.53.0", True),
    ("1.6.0", "2.52.1", False), ("1.6.0", "2.46.0", False), ("1.6.0", "", False),
    ("1.6.0", "nightly", False), ("1.6.0", "02.60.0", False), ("1.5.2", "2.54.0", False),
])
def test_kuberay_1_6_checks_ray_2_53_and_later_on_api_healthz(version, ray_version, unified) -> None:
    for head in (True, False):
        c = ray_container(version, head, rc(ray_version))
        for key in ("readinessProbe", "livenessProbe"):
            if unified:
                assert c[key]["httpGet"] == {"path": "/api/healthz", "port": 52365, "scheme": "HTTP"}
                assert "exec" not in c[key]
            else:
                assert "httpGet" not in c[key] and "local_raylet_healthz" in c[key]["exec"]["command"][2]


def test_kuberay_1_6_takes_the_ports_from_ray_start_params() -> None:
    params = {"dashboard-agent-listen-port": "52366", "dashboard-port": "8266"}
    new = ray_container("1.6.0", True, rc("2.54.0", params))
    assert new["readinessProbe"]["httpGet"]["port"] == 52366
    exec_probe = ray_container("1.6.0", True, rc("2.46.0", params))["livenessProbe"]["exec"]["command"][2]
    assert "localhost:52366/api/local_raylet_healthz" in exec_probe and "localhost:8266/api/gcs_healthz" in exec_probe
    old = ray_container("1.5.2", True, rc("2.46.0", params))["livenessProbe"]["exec"]["command"][2]
    assert "localhost:52365/" in old and "localhost:8265/" in old   # before 1.6: the defaults, always


def test_a_probe_the_user_wrote_is_kept_and_the_env_switch_turns_injection_off() -> None:
    cluster = rc()
    mine = {"tcpSocket": {"port": 6379}, "periodSeconds": 7}
    cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["livenessProbe"] = copy.deepcopy(mine)
    c = ray_container("1.6.0", True, cluster)
    assert c["livenessProbe"] == mine and "exec" in c["readinessProbe"]
    off = KubeRay.parse("1.6.0", {"ENABLE_PROBES_INJECTION": "False"})
    pod = _pod_manifest(rc(), rc()["spec"]["headGroupSpec"], True, off)
    assert "livenessProbe" not in pod["spec"]["containers"][0] and "readinessProbe" not in pod["spec"]["containers"][0]
    assert "readinessProbe" not in rc()["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]  # not the CR's


def test_the_head_service_is_headless_from_kuberay_1_2() -> None:
    assert "clusterIP" not in _head_service(rc(), KubeRay.parse("1.1.1"))["spec"]
    svc = _head_service(rc(), KubeRay.parse("1.2.0"))["spec"]
    assert svc["clusterIP"] == "None" and svc["publishNotReadyAddresses"] is True
    ip = KubeRay.parse("1.7.0", {"ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE": "true"})
    assert "clusterIP" not in _head_service(rc(), ip)["spec"]


class _Operator(Operator):
    def __init__(self, store: KubeStore, kuberay: KubeRay) -> None:
        self.store, self.kuberay = store, kuberay


async def _status(version: str, ready: list[bool], extra_worker: bool = False) -> dict:
    """The RayCluster's status as `version` writes it: a head and 2 workers, Ready as `ready` says."""
    store = KubeStore(None)
    kuberay = KubeRay.parse(version)
    cluster = await store.create("rayclusters", rc(), "default")
    await store.create("services", _head_service(cluster, kuberay), "default")
    groups = [(cluster["spec"]["headGroupSpec"], True)] + [(cluster["spec"]["workerGroupSpecs"][0], False)] * (
        3 if extra_worker else 2)
    for (group, head), is_ready in zip(groups, ready + [True]):
        pod = await store.create("pods", _pod_manifest(cluster, group, head, kuberay), "default")
        status = _pod_status(pod, "10.0.0.1", now(), pod_ip="10.8.0.9", running_since=now(), ready=is_ready)
        await store.patch_status("pods", pod["metadata"]["name"], status, "default")
    op = _Operator(store, kuberay)
    await op._write_rc_status(await store.get("rayclusters", cluster["metadata"]["name"], "default"))
    await op._write_rc_status(await store.get("rayclusters", cluster["metadata"]["name"], "default"))
    return (await store.get("rayclusters", cluster["metadata"]["name"], "default"))["status"]


def test_kuberay_before_1_3_writes_no_conditions_and_1_1_no_ready_workers() -> None:
    old = asyncio.run(_status("1.1.1", [True, True, True]))
    assert "conditions" not in old and "readyWorkerReplicas" not in old and "stateTransitionTimes" not in old
    assert old["state"] == "ready" and old["desiredWorkerReplicas"] == 2
    assert old["head"]["serviceIP"].startswith("10.96.")  # a ClusterIP service
    mid = asyncio.run(_status("1.2.2", [True, True, False]))
    assert "conditions" not in mid and mid["readyWorkerReplicas"] == 1 and "state" not in mid
    assert mid["head"]["serviceIP"] == "10.8.0.9"  # headless: the head pod's IP


def test_kuberay_1_3_and_later_write_the_conditions() -> None:
    for version in ("1.3.0", "1.6.0", "1.7.0"):
        status = asyncio.run(_status(version, [False, True, True]))
        conditions = {c["type"]: c for c in status["conditions"]}
        assert set(conditions) == {"HeadPodReady", "RayClusterProvisioned", "RayClusterSuspended",
                                   "RayClusterSuspending"}
        assert conditions["HeadPodReady"]["status"] == "False"
        assert conditions["HeadPodReady"]["reason"] == "ContainersNotReady"
        assert conditions["RayClusterSuspended"]["status"] == conditions["RayClusterSuspending"]["status"] == "False"
        assert status["readyWorkerReplicas"] == 2 and "state" not in status
    ready = asyncio.run(_status("1.6.0", [True, True, True]))
    assert {c["type"]: c["status"] for c in ready["conditions"]}["HeadPodReady"] == "True"
    assert ready["state"] == "ready"


def test_from_1_3_state_turns_ready_only_with_desired_plus_one_pods() -> None:
    # A third worker pod (say, one being replaced) while 2 are desired: 1.2.2 calls it ready, 1.3 not.
    assert asyncio.run(_status("1.2.2", [True, True, True], extra_worker=True))["state"] == "ready"
    assert "state" not in asyncio.run(_status("1.3.0", [True, True, True], extra_worker=True))
