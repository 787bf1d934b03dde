"""The official `kubernetes` client (37.x) against the fake API server, over HTTP."""

from __future__ import annotations

import json
import stat
import threading
import time

import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from rltui_sandbox.faults import Faults

PV = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "rl-demo-gpu-lustre-pv"},
      "spec": {"capacity": {"storage": "9000Gi"}, "accessModes": ["ReadWriteMany"],
               "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
               "claimRef": {"namespace": "default", "name": "rl-demo-gpu-lustre-pvc"},
               "csi": {"driver": "lustre.csi.storage.gke.io", "volumeHandle": "p/us-east1-b/rl-demo-gpu-lustre",
                       "volumeAttributes": {"ip": "10.90.0.2", "filesystem": "lustre"}}}}
PVC = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "rl-demo-gpu-lustre-pvc"},
       "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "rl-demo-gpu-lustre-pv",
                "resources": {"requests": {"storage": "9000Gi"}}}}
RAY = ("ray.io", "v1", "default", "rayclusters")


def raycluster(name: str = "ray-a4-gpu-spot") -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
            "spec": {"rayVersion": "2.54.0", "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}},
                     "workerGroupSpecs": [{"groupName": "gpu-worker-group", "replicas": 8}]}}


def test_create_get_duplicate_and_missing(core: client.CoreV1Api) -> None:
    pv = core.create_persistent_volume(PV)
    assert pv.metadata.uid and pv.metadata.resource_version and pv.status.phase == "Available"
    with pytest.raises(ApiException) as caught:
        core.create_persistent_volume(PV)
    assert caught.value.status == 409
    body = json.loads(caught.value.body)
    assert (body["reason"], body["message"]) == ("AlreadyExists",
                                                 'persistentvolumes "rl-demo-gpu-lustre-pv" already exists')
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("nope", "default")
    assert caught.value.status == 404 and json.loads(caught.value.body)["reason"] == "NotFound"
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod("default", {"metadata": {}, "spec": {"containers": [{"name": "c"}]}})
    assert caught.value.status == 422 and json.loads(caught.value.body)["reason"] == "Invalid"


def test_pvc_binds_by_volume_name(core: client.CoreV1Api) -> None:
    core.create_persistent_volume(PV)
    core.create_namespaced_persistent_volume_claim("default", PVC)
    pvc = core.read_namespaced_persistent_volume_claim("rl-demo-gpu-lustre-pvc", "default")
    pv = core.read_persistent_volume("rl-demo-gpu-lustre-pv")
    assert pvc.status.phase == "Bound" and pvc.status.capacity == {"storage": "9000Gi"}
    assert pv.status.phase == "Bound" and pv.spec.claim_ref.uid == pvc.metadata.uid


def test_list_with_label_and_field_selectors(core: client.CoreV1Api, pod_manifest, running) -> None:
    for name, node_type in (("head", "head"), ("w1", "worker"), ("w2", "worker")):
        labels = {"ray.io/cluster": "rc", "ray.io/node-type": node_type}
        core.create_namespaced_pod("default", pod_manifest(name, labels))
    core.create_namespaced_pod("default", pod_manifest("other", {"app": "x"}))
    core.patch_namespaced_pod_status("w1", "default", {"status": running})

    def names(**kw) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod("default", **kw).items]
    assert names(label_selector="ray.io/cluster=rc,ray.io/node-type==worker") == ["w1", "w2"]
    assert names(label_selector="ray.io/node-type!=worker") == ["head", "other"]
    assert names(label_selector="ray.io/node-type in (head, worker),ray.io/cluster") == ["head", "w1", "w2"]
    assert names(label_selector="ray.io/node-type notin (head),!app") == ["w1", "w2"]
    assert names(field_selector="status.phase=Running") == ["w1"]
    assert names(field_selector="metadata.name!=head", label_selector="ray.io/cluster") == ["w1", "w2"]
    listed = core.list_pod_for_all_namespaces()
    assert int(listed.metadata.resource_version) >= max(int(p.metadata.resource_version) for p in listed.items)
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_pod("default", field_selector="spec.bogus=1")
    assert caught.value.status == 400


def test_watch_from_a_resource_version_with_timeout(core: client.CoreV1Api, pod_manifest, running) -> None:
    core.create_namespaced_pod("default", pod_manifest("head"))
    since = core.list_namespaced_pod("default").metadata.resource_version

    def churn() -> None:
        time.sleep(0.2)
        core.patch_namespaced_pod_status("head", "default", {"status": running})
        core.create_namespaced_pod("default", pod_manifest("worker"))
        core.delete_namespaced_pod("worker", "default")
    threading.Thread(target=churn).start()
    started = time.monotonic()
    seen = [(e["type"], e["object"].metadata.name, e["object"].status.phase)
            for e in watch.Watch().stream(core.list_namespaced_pod, "default",
                                          resource_version=since, timeout_seconds=1)]
    assert seen == [("MODIFIED", "head", "Running"), ("ADDED", "worker", "Pending"), ("DELETED", "worker", "Pending")]
    assert 0.9 < time.monotonic() - started < 3  # ended by timeoutSeconds


def test_watch_without_version_lists_current_state_and_sends_bookmarks(core: client.CoreV1Api, pod_manifest) -> None:
    core.create_namespaced_pod("default", pod_manifest("head"))
    stream = watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1,
                                  allow_watch_bookmarks=True)
    events = [(e["type"], e["raw_object"]["metadata"].get("name")) for e in stream]
    assert events[0] == ("ADDED", "head")
    assert ("BOOKMARK", None) in events  # the test server bookmarks every 0.3 s


@pytest.mark.parametrize("bookmarks", [False, True])
def test_a_long_watch_keeps_delivering(server, core: client.CoreV1Api, pod_manifest, bookmarks: bool) -> None:
    core.create_namespaced_pod("default", pod_manifest("head"))
    since = core.list_namespaced_pod("default").metadata.resource_version

    def churn() -> None:  # spread over more than the server's 0.3 s bookmark interval
        for n in range(6):
            time.sleep(0.1)
            server.call(server.store.patch("pods", "head", {"metadata": {"labels": {"n": str(n)}}}))
    threading.Thread(target=churn).start()
    # Ended once the last change (and, asked for, a bookmark) came, else at the timeout: a loaded
    # machine may stretch the churn past any fixed watch length.
    events: list[tuple[str, str | None]] = []
    w = watch.Watch()
    for e in w.stream(core.list_namespaced_pod, "default", resource_version=since, timeout_seconds=10,
                      allow_watch_bookmarks=bookmarks):
        events.append((e["type"], (e["raw_object"]["metadata"].get("labels") or {}).get("n")))
        if ("MODIFIED", "5") in events and (not bookmarks or any(t == "BOOKMARK" for t, _ in events)):
            w.stop()
    assert [e for e in events if e[0] == "MODIFIED"] == [("MODIFIED", str(n)) for n in range(6)]
    assert any(e[0] == "BOOKMARK" for e in events) == bookmarks


def test_too_old_resource_version_is_410(make_server, tmp_path) -> None:
    server = make_server(None)
    server.store._history = type(server.store._history)(maxlen=3)
    core = client.CoreV1Api(server.api_client())
    old = core.list_namespaced_pod("default").metadata.resource_version
    for n in range(6):
        core.create_namespaced_secret("default", {"metadata": {"name": f"s{n}"}})
    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=old, timeout_seconds=1))
    assert caught.value.status == 410


def test_custom_objects_patch_types_and_status(custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(*RAY, raycluster())
    assert created["metadata"]["generation"] == 1
    patched = custom.patch_namespaced_custom_object(*RAY, "ray-a4-gpu-spot",
                                                    {"spec": {"workerGroupSpecs": [{"groupName": "g", "replicas": 2}]}})
    assert patched["spec"]["workerGroupSpecs"] == [{"groupName": "g", "replicas": 2}]
    assert patched["metadata"]["generation"] == 2
    jsonp = custom.patch_namespaced_custom_object(*RAY, "ray-a4-gpu-spot",
                                                  [{"op": "replace", "path": "/spec/rayVersion", "value": "2.60.0"}],
                                                  _content_type="application/json-patch+json")
    assert jsonp["spec"]["rayVersion"] == "2.60.0"
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(*RAY, "ray-a4-gpu-spot", {"spec": {}},
                                              _content_type="application/strategic-merge-patch+json")
    assert caught.value.status == 415
    status = custom.patch_namespaced_custom_object_status(*RAY, "ray-a4-gpu-spot",
                                                          {"status": {"state": "ready", "desiredWorkerReplicas": 2}})
    assert status["status"]["state"] == "ready"
    got = custom.get_namespaced_custom_object(*RAY, "ray-a4-gpu-spot")
    assert got["status"] == {"state": "ready", "desiredWorkerReplicas": 2} and got["metadata"]["generation"] == 3
    listed = custom.list_namespaced_custom_object(*RAY)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["ray-a4-gpu-spot"]


def test_strategic_merge_on_a_pod_merges_containers_by_name(core: client.CoreV1Api, pod_manifest) -> None:
    core.create_namespaced_pod("default", pod_manifest("head"))
    # The client sends a dict body to a built-in as a strategic-merge patch.
    patched = core.patch_namespaced_pod("head", "default", {
        "metadata": {"labels": {"ray.io/node-type": "head"}},
        "spec": {"containers": [{"name": "ray-head", "env": [{"name": "RAY_PORT", "value": "6379"}]}]}})
    container = patched.spec.containers[0]
    assert container.image == "nvcr.io/nvidia/nemo-rl:v0.4.0" and container.env[0].name == "RAY_PORT"
    assert patched.metadata.labels == {"ray.io/node-type": "head"}


def test_deleting_a_raycluster_collects_its_pods(core, custom, pod_manifest) -> None:
    rc = custom.create_namespaced_custom_object(*RAY, raycluster())
    for name in ("ray-a4-gpu-spot-head", "ray-a4-gpu-spot-worker-0"):
        core.create_namespaced_pod("default", pod_manifest(name, {"ray.io/cluster": "ray-a4-gpu-spot"}, owner=rc))
    core.create_namespaced_pod("default", pod_manifest("bystander"))
    deleted = custom.delete_namespaced_custom_object(*RAY, "ray-a4-gpu-spot")
    assert deleted["metadata"]["name"] == "ray-a4-gpu-spot"
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["bystander"]


def test_pod_logs(server, core, pod_manifest, running) -> None:
    core.create_namespaced_pod("default", pod_manifest("head"))
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod_log("head", "default")
    assert caught.value.status == 400 and "waiting to start" in json.loads(caught.value.body)["message"]
    core.patch_namespaced_pod_status("head", "default", {"status": running})
    server.call(server.store.append_log("default", "head", "step 1\nstep 2\nstep 3\n"))
    assert core.read_namespaced_pod_log("head", "default") == "step 1\nstep 2\nstep 3\n"
    assert core.read_namespaced_pod_log("head", "default", tail_lines=1, container="ray-head") == "step 3\n"

    def finish() -> None:
        time.sleep(0.3)
        server.call(server.store.append_log("default", "head", "step 4\n"))
        server.call(server.store.patch_status("pods", "head", {"phase": "Succeeded"}))
    threading.Thread(target=finish).start()
    lines = list(watch.Watch().stream(core.read_namespaced_pod_log, name="head", namespace="default", tail_lines=2))
    assert lines == ["step 2", "step 3", "step 4"]


def test_faults_are_reproducible_per_seed(make_server) -> None:
    def codes(seed: int) -> list[int]:
        server = make_server(None, Faults(p=0.4, seed=seed))
        core = client.CoreV1Api(server.api_client())
        out = []
        for n in range(16):
            try:  # POST: urllib3 does not retry it, so every injected 429 shows
                core.create_namespaced_secret("default", {"metadata": {"name": f"s{n}"}})
                out.append(201)
            except ApiException as exc:
                out.append(exc.status)
                if exc.status == 429:
                    assert exc.headers["Retry-After"] == "1"
                    assert json.loads(exc.body)["reason"] == "TooManyRequests"
        return out
    first = codes(3)
    assert first == codes(3)
    assert {500, 503, 429} <= set(first) and 201 in first
    assert first != codes(4)


def test_a_faulty_watch_is_cut_after_complete_lines(make_server, pod_manifest) -> None:
    # With seed 2 the watch request itself passes and the cut comes after the second event.
    server = make_server(None, Faults(p=0.0, seed=2))
    core = client.CoreV1Api(server.api_client())
    for n in range(5):
        core.create_namespaced_pod("default", pod_manifest(f"p{n}"))
    server.store.faults.p = 0.3
    started = time.monotonic()
    seen = [e["object"].metadata.name
            for e in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=5)]
    assert seen == ["p0", "p1"]  # ended early, and the events that came were whole
    assert time.monotonic() - started < 2


def test_delete_collection_by_label(core: client.CoreV1Api, pod_manifest) -> None:
    for name, node_type in (("head", "head"), ("w1", "worker"), ("w2", "worker")):
        core.create_namespaced_pod("default", pod_manifest(name, {"ray.io/node-type": node_type}))
    core.delete_collection_namespaced_pod("default", label_selector="ray.io/node-type=worker")
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["head"]


def test_kubeconfig_is_private_and_points_at_the_server(server) -> None:
    assert stat.S_IMODE(server.kubeconfig.stat().st_mode) == 0o600
    config = yaml.safe_load(server.kubeconfig.read_text())
    assert config["current-context"] == "rltui-sandbox"
    assert config["clusters"][0]["cluster"]["server"] == server.url
    version = client.VersionApi(server.api_client()).get_code()
    assert (version.major, version.minor) == ("1", "32")
