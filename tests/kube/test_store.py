"""KubeStore in-process: the API the toy KubeRay controller will call on the server's loop."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from rltui_sandbox.kube import KubeError, KubeStore

PV = {"apiVersion": "v1", "kind": "PersistentVolume",
      "metadata": {"name": "rl-demo-gpu-lustre-pv"},
      "spec": {"capacity": {"storage": "9000Gi"}, "accessModes": ["ReadWriteMany"],
               "persistentVolumeReclaimPolicy": "Retain",
               "claimRef": {"namespace": "default", "name": "rl-demo-gpu-lustre-pvc"},
               "csi": {"driver": "lustre.csi.storage.gke.io", "volumeHandle": "p/us-east1-b/rl",
                       "volumeAttributes": {"ip": "10.90.0.2", "filesystem": "lustre"}}}}
PVC = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
       "metadata": {"name": "rl-demo-gpu-lustre-pvc"},
       "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                "volumeName": "rl-demo-gpu-lustre-pv", "resources": {"requests": {"storage": "9000Gi"}}}}
RAYCLUSTER = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "ray-a4-gpu-spot"},
              "spec": {"rayVersion": "2.54.0", "headGroupSpec": {"rayStartParams": {}},
                       "workerGroupSpecs": [{"groupName": "gpu-worker-group", "replicas": 8}]}}


def owned_pod(name: str, owner: dict, labels: dict | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {},
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                              "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]},
            "spec": {"containers": [{"name": "ray-worker", "image": "x"}]}}


async def drain(watcher, wait: float = 0.05) -> list[tuple[str, str]]:
    out = []
    while (item := await watcher.next(wait)) is not None:
        out.append((item[0], item[1]["metadata"]["name"]))
    return out


async def test_create_fills_server_fields_and_duplicates_fail_like_the_apiserver() -> None:
    store = KubeStore(None)
    pv = await store.create("persistentvolumes", PV)
    meta = pv["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
    assert int(meta["resourceVersion"]) == store.resource_version
    assert pv["status"] == {"phase": "Available"}
    with pytest.raises(KubeError) as caught:
        await store.create("persistentvolumes", PV)
    assert caught.value.status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'persistentvolumes "rl-demo-gpu-lustre-pv" already exists', "reason": "AlreadyExists",
        "details": {"name": "rl-demo-gpu-lustre-pv", "kind": "persistentvolumes"}, "code": 409}


async def test_missing_name_unknown_namespace_and_custom_not_found() -> None:
    store = KubeStore(None)
    with pytest.raises(KubeError) as caught:
        await store.create("pods", {"metadata": {}, "spec": {"containers": [{"name": "c"}]}})
    assert (caught.value.code, caught.value.reason) == (422, "Invalid")
    assert "metadata.name: Required value" in caught.value.message
    with pytest.raises(KubeError) as caught:
        await store.create("pods", {"metadata": {"name": "p", "namespace": "nope"},
                                    "spec": {"containers": [{"name": "c"}]}})
    assert caught.value.code == 404 and caught.value.message == 'namespaces "nope" not found'
    with pytest.raises(KubeError) as caught:
        await store.get("rayclusters", "missing")
    assert caught.value.message == 'rayclusters.ray.io "missing" not found'
    assert caught.value.details == {"name": "missing", "group": "ray.io", "kind": "rayclusters"}


async def test_generation_status_and_noop_updates() -> None:
    store = KubeStore(None)
    rc = await store.create("rayclusters", {**RAYCLUSTER, "status": {"state": "ready"}})
    assert "status" not in rc  # a CRD with a status subresource drops status on create
    rv = store.resource_version
    same = await store.patch("rayclusters", "ray-a4-gpu-spot", {"spec": {"rayVersion": "2.54.0"}})
    assert store.resource_version == rv and same["metadata"]["resourceVersion"] == str(rv)
    labelled = await store.patch("rayclusters", "ray-a4-gpu-spot", {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["generation"] == 1
    ignored = await store.patch("rayclusters", "ray-a4-gpu-spot", {"status": {"state": "ready"}})
    assert "status" not in ignored
    scaled = await store.patch("rayclusters", "ray-a4-gpu-spot", [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4}], patch_type="json")
    assert scaled["metadata"]["generation"] == 2
    status = await store.patch_status("rayclusters", "ray-a4-gpu-spot", {"state": "ready", "readyWorkerReplicas": 4})
    assert status["status"] == {"state": "ready", "readyWorkerReplicas": 4}
    assert status["metadata"]["generation"] == 2 and status["spec"]["workerGroupSpecs"][0]["replicas"] == 4


async def test_patch_types() -> None:
    store = KubeStore(None)
    await store.create("rayclusters", RAYCLUSTER)
    with pytest.raises(KubeError) as caught:
        await store.patch("rayclusters", "ray-a4-gpu-spot", {"spec": {}}, patch_type="strategic")
    assert (caught.value.code, caught.value.reason) == (415, "UnsupportedMediaType")
    with pytest.raises(KubeError) as caught:
        await store.patch("rayclusters", "ray-a4-gpu-spot", [{"op": "remove", "path": "/spec/nope"}],
                          patch_type="json")
    assert caught.value.code == 422
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "ray-head", "image": "a", "env": [{"name": "X", "value": "1"}]},
        {"name": "sidecar", "image": "b"}]}}
    await store.create("pods", pod)
    patched = await store.patch("pods", "p", {"spec": {"containers": [
        {"name": "ray-head", "env": [{"name": "Y", "value": "2"}]}]}}, patch_type="strategic")
    head, sidecar = patched["spec"]["containers"]
    assert (head["image"], [e["name"] for e in head["env"]], sidecar["name"]) == ("a", ["X", "Y"], "sidecar")
    merged = await store.patch("pods", "p", {"spec": {"containers": [{"name": "only"}]}}, patch_type="merge")
    assert [c["name"] for c in merged["spec"]["containers"]] == ["only"]
    with pytest.raises(KubeError) as caught:
        await store.patch("pods", "p", {"metadata": {"resourceVersion": "1"}})
    assert (caught.value.code, caught.value.reason) == (409, "Conflict")


async def test_garbage_collection_cascades_by_policy() -> None:
    store = KubeStore(None)
    rc = await store.create("rayclusters", RAYCLUSTER)
    for name in ("head", "worker-1", "worker-2"):
        await store.create("pods", owned_pod(name, rc))
    await store.create("pods", {"metadata": {"name": "unrelated"}, "spec": {"containers": [{"name": "c"}]}})
    watcher = store.watch("pods", "default", store.resource_version)
    await store.delete("rayclusters", "ray-a4-gpu-spot")
    assert sorted(await drain(watcher)) == [("DELETED", "head"), ("DELETED", "worker-1"), ("DELETED", "worker-2")]
    assert [p["metadata"]["name"] for p in await store.list("pods")] == ["unrelated"]

    rc = await store.create("rayclusters", RAYCLUSTER)
    await store.create("pods", owned_pod("kept", rc))
    await store.delete("rayclusters", "ray-a4-gpu-spot", propagation="Orphan")
    kept = await store.get("pods", "kept")
    assert kept["metadata"]["ownerReferences"] == []

    rc = await store.create("rayclusters", RAYCLUSTER)
    await store.create("pods", owned_pod("first", rc))
    all_events = store.watch("rayclusters", None, store.resource_version)
    pod_events = store.watch("pods", None, store.resource_version)
    await store.delete("rayclusters", "ray-a4-gpu-spot", propagation="Foreground")
    rc_gone = (await all_events.next(0.1))[1]["metadata"]["resourceVersion"]
    pod_gone = (await pod_events.next(0.1))[1]["metadata"]["resourceVersion"]
    assert int(pod_gone) < int(rc_gone)  # foreground: dependents go first


async def test_pvc_binds_to_its_volume_in_either_order_and_releases() -> None:
    store = KubeStore(None)
    pvc = await store.create("persistentvolumeclaims", PVC)
    assert pvc["status"] == {"phase": "Pending"}
    await store.create("persistentvolumes", PV)
    pvc = await store.get("persistentvolumeclaims", "rl-demo-gpu-lustre-pvc")
    pv = await store.get("persistentvolumes", "rl-demo-gpu-lustre-pv")
    assert pvc["status"] == {"phase": "Bound", "accessModes": ["ReadWriteMany"], "capacity": {"storage": "9000Gi"}}
    assert pv["status"]["phase"] == "Bound" and pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    await store.delete("persistentvolumeclaims", "rl-demo-gpu-lustre-pvc")
    assert (await store.get("persistentvolumes", "rl-demo-gpu-lustre-pv"))["status"]["phase"] == "Released"

    other = KubeStore(None)
    await other.create("persistentvolumes", PV)
    watcher = other.watch("persistentvolumeclaims", "default", other.resource_version)
    created = await other.create("persistentvolumeclaims", PVC)
    assert created["status"]["phase"] == "Pending"  # the POST answers with the object as created
    assert [(kind, obj["status"]["phase"]) for kind, obj in [await watcher.next(0.1), await watcher.next(0.1)]] == [
        ("ADDED", "Pending"), ("MODIFIED", "Bound")]


async def test_a_volume_claimed_by_another_pvc_does_not_bind() -> None:
    store = KubeStore(None)
    await store.create("persistentvolumes", PV)
    stranger = json.loads(json.dumps(PVC))
    stranger["metadata"]["name"] = "someone-else"
    pvc = await store.create("persistentvolumeclaims", stranger)
    assert pvc["status"]["phase"] == "Pending"


async def test_finalizers_hold_deletion_until_removed() -> None:
    store = KubeStore(None)
    await store.create("rayclusters", {**RAYCLUSTER, "metadata": {"name": "r", "finalizers": ["ray.io/gcs"]}})
    marked = await store.delete("rayclusters", "r")
    assert marked["metadata"]["deletionTimestamp"]
    assert (await store.get("rayclusters", "r"))["metadata"]["deletionTimestamp"]
    await store.patch("rayclusters", "r", {"metadata": {"finalizers": None}})
    with pytest.raises(KubeError):
        await store.get("rayclusters", "r")


async def test_watch_from_resource_version_with_selectors_and_expiry() -> None:
    store = KubeStore(None, history=8)
    await store.create("pods", {"metadata": {"name": "a", "labels": {"ray.io/node-type": "head"}},
                                "spec": {"containers": [{"name": "c"}]}})
    start = store.resource_version
    current = store.watch("pods", "default", None, "ray.io/node-type=head")
    assert await drain(current) == [("ADDED", "a")]
    await store.create("pods", {"metadata": {"name": "b", "labels": {"ray.io/node-type": "worker"}},
                                "spec": {"containers": [{"name": "c"}]}})
    await store.patch("pods", "a", {"metadata": {"labels": {"ray.io/node-type": "worker"}}})
    await store.patch("pods", "a", {"metadata": {"labels": {"ray.io/node-type": "head"}}})
    # Moving out of / into a selector reads as DELETED / ADDED.
    assert await drain(current) == [("DELETED", "a"), ("ADDED", "a")]
    replay = store.watch("pods", "default", start)
    assert await drain(replay) == [("ADDED", "b"), ("MODIFIED", "a"), ("MODIFIED", "a")]
    for n in range(10):
        await store.create("secrets", {"metadata": {"name": f"s{n}"}})
    with pytest.raises(KubeError) as caught:
        store.watch("pods", "default", start)
    assert (caught.value.code, caught.value.reason) == (410, "Expired")
    current.close()
    with pytest.raises(StopAsyncIteration):
        await current.next(0.1)


async def test_restart_keeps_objects_versions_logs_and_ports(tmp_path: Path) -> None:
    root = tmp_path / "kube"
    store = KubeStore(root)
    await store.create("secrets", {"metadata": {"name": "hf-token"}, "stringData": {"HF_TOKEN": "hf_x"}})
    await store.create("pods", {"metadata": {"name": "head"}, "spec": {"containers": [{"name": "ray-head"}]}})
    await store.patch_status("pods", "head", {"phase": "Running"})
    await store.append_log("default", "head", "line 1\nline 2\n")
    await store.set_port_target("default", "head", 8265, "127.0.0.1", 40001)
    await store.delete("secrets", "hf-token")
    await store.create("secrets", {"metadata": {"name": "hf-token"}, "stringData": {"HF_TOKEN": "hf_y"}})
    rv = store.resource_version
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    secret_file = next(root.glob("core/v1/secrets/default/hf-token.json"))
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert not list(root.rglob("*.tmp"))

    again = KubeStore(root)
    assert again.resource_version == rv
    assert (await again.get("pods", "head"))["status"]["phase"] == "Running"
    assert (await again.get("secrets", "hf-token"))["data"] == {"HF_TOKEN": "aGZfeQ=="}
    assert await again.read_log("default", "head") == "line 1\nline 2\n"
    assert again.port_target("default", "head", 8265) == ("127.0.0.1", 40001)
    created = await again.create("pods", {"metadata": {"name": "next"}, "spec": {"containers": [{"name": "c"}]}})
    assert int(created["metadata"]["resourceVersion"]) == rv + 1
    again.watch("pods", None, rv)  # the current version is still watchable
    with pytest.raises(KubeError):
        again.watch("pods", None, rv - 1)  # older history did not survive the restart


async def test_logs_tail_container_choice_and_follow() -> None:
    store = KubeStore(None)
    await store.create("pods", {"metadata": {"name": "head"}, "spec": {"containers": [{"name": "ray-head"},
                                                                                     {"name": "autoscaler"}]}})
    with pytest.raises(KubeError) as caught:
        await store.read_log("default", "head")
    assert caught.value.message == 'container "ray-head" in pod "head" is waiting to start: ContainerCreating'
    await store.patch_status("pods", "head", {"phase": "Running"})
    await store.append_log("default", "head", "a\nb\nc\n")
    await store.append_log("default", "head", "scaling\n", container="autoscaler")
    assert await store.read_log("default", "head", tail_lines=2) == "b\nc\n"
    assert await store.read_log("default", "head", container="autoscaler") == "scaling\n"
    with pytest.raises(KubeError) as caught:
        await store.read_log("default", "head", container="nope")
    assert caught.value.code == 400

    chunks: list[str] = []

    async def follow() -> None:
        async for chunk in store.follow_log("default", "head", tail_lines=1, tick=0.05):
            chunks.append(chunk)
    task = asyncio.create_task(follow())
    await asyncio.sleep(0.1)
    await store.append_log("default", "head", "d\n")
    await asyncio.sleep(0.1)
    await store.append_log("default", "head", "e\n")
    await store.patch_status("pods", "head", {"phase": "Succeeded"})
    await asyncio.wait_for(task, 2)
    assert "".join(chunks) == "c\nd\ne\n"


async def test_resolve_service_to_the_running_head_pod() -> None:
    store = KubeStore(None)
    await store.create("services", {"metadata": {"name": "ray-a4-gpu-spot-head-svc"},
                                    "spec": {"selector": {"ray.io/cluster": "ray-a4-gpu-spot",
                                                          "ray.io/node-type": "head"},
                                             "ports": [{"name": "dashboard", "port": 8265,
                                                        "targetPort": "dashboard"}]}})
    labels = {"ray.io/cluster": "ray-a4-gpu-spot", "ray.io/node-type": "head"}
    await store.create("pods", {"metadata": {"name": "ray-a4-gpu-spot-head-x", "labels": labels},
                                "spec": {"containers": [{"name": "ray-head",
                                                         "ports": [{"containerPort": 8265, "name": "dashboard"}]}]}})
    with pytest.raises(KubeError):
        await store.resolve_service("default", "ray-a4-gpu-spot-head-svc", 8265)  # not Running yet
    await store.patch_status("pods", "ray-a4-gpu-spot-head-x", {"phase": "Running"})
    assert await store.resolve_service("default", "ray-a4-gpu-spot-head-svc", 8265) == ("ray-a4-gpu-spot-head-x", 8265)
    svc = await store.get("services", "ray-a4-gpu-spot-head-svc")
    assert svc["spec"]["clusterIP"].startswith("10.96.")
