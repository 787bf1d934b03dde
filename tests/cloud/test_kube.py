"""KubeAdapter against the sandbox's Kubernetes API over HTTP, with the official asyncio client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import traceback

import pytest

from rltui import manifests
from rltui.cloud.endpoints import Endpoints
from rltui.cloud.errors import CloudError
from rltui.cloud.kube import KubeAdapter, KubeEvent, raycluster_health
from rltui.plan.pods import pod_row
from rltui.config import parse_config
from rltui_sandbox.faults import Faults
from tests.cloud.conftest import gke_cluster

HF_TOKEN = "hf_" + "Sekr3t" * 5  # a test value: it must never show up anywhere


def codelab(**extra: str):
    return parse_config({"PROJECT_ID": "rl-test", "NUM_NODES": "2", "HF_TOKEN": HF_TOKEN, **extra})


class Collector:
    """Runs `kube.watch(...)` in a task and keeps every event and the state it implies."""

    def __init__(self, kube: KubeAdapter, kind: str, **selectors: str) -> None:
        self.events: list[KubeEvent] = []
        self.state: dict[str, dict] = {}
        self.task = asyncio.create_task(self._run(kube.watch(kind, **selectors)))

    async def _run(self, stream) -> None:
        async with contextlib.aclosing(stream):
            async for event in stream:
                self.events.append(event)
                name = event.obj.get("metadata", {}).get("name")
                if event.type == "DELETED":
                    self.state.pop(name, None)
                elif name:
                    self.state[name] = event.obj

    def names(self, kind: str) -> list[str]:
        return [e.obj["metadata"]["name"] for e in self.events if e.type == kind]

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


class CountedFaults(Faults):
    """The sandbox's deterministic faults, remembering which channels actually failed."""

    def __init__(self, p: float, seed: int) -> None:
        super().__init__(p, seed)
        self.hits: list[str] = []

    def hit(self, channel: str) -> bool:
        failed = super().hit(channel)
        if failed:
            self.hits.append(channel)
        return failed


async def settle(predicate, timeout: float = 8.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_apply_twice_creates_once_and_changes_nothing(api, kube: KubeAdapter) -> None:
    cfg = codelab()
    objs = [manifests.persistent_volume(cfg, "10.90.0.2"), manifests.persistent_volume_claim(cfg),
            manifests.job_secret(cfg), manifests.ray_cluster(cfg)]
    first = [await kube.apply(o) for o in objs]
    await asyncio.sleep(0.1)  # the PVC binds to the PV meanwhile, as in a real cluster
    before = [await kube.get(o["kind"], o["metadata"]["name"]) for o in objs]
    rv = api.store.resource_version
    second = [await kube.apply(o) for o in objs]
    assert api.store.resource_version == rv  # the second run wrote nothing at all
    for a, b in zip(before, second):
        assert a["metadata"]["uid"] == b["metadata"]["uid"]
        assert a["metadata"]["resourceVersion"] == b["metadata"]["resourceVersion"]
    for kind in ("persistentvolumes", "persistentvolumeclaims", "secrets", "rayclusters"):
        assert len(await kube.list(kind)) == 1
    # A changed manifest is patched in place: same object, new generation.
    bigger = await kube.apply(manifests.ray_cluster(codelab(NUM_NODES="4")))
    assert bigger["metadata"]["uid"] == first[3]["metadata"]["uid"]
    assert bigger["metadata"]["generation"] == 2
    assert bigger["spec"]["workerGroupSpecs"][0]["replicas"] == 4


async def test_a_secret_never_leaks(api, kube: KubeAdapter, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret = manifests.job_secret(codelab())
    applied = await kube.apply(secret)
    stored = await api.store.get("secrets", applied["metadata"]["name"], "default")
    assert set(stored["data"]) == {"HF_TOKEN"}  # really stored
    assert HF_TOKEN not in repr(applied) and HF_TOKEN not in repr(await kube.get("secrets", applied["metadata"]["name"]))
    assert applied["data"] == {"HF_TOKEN": "<redacted>"}
    elsewhere = {**secret, "metadata": {**secret["metadata"], "namespace": "no-such-namespace"}}
    with pytest.raises(CloudError) as info:
        await kube.apply(elsewhere)
    assert not info.value.transient and "404" in info.value.message
    assert info.value.__cause__ is None
    shown = "".join(traceback.format_exception(info.value))
    assert HF_TOKEN not in shown and HF_TOKEN not in caplog.text


async def test_delete_waits_for_the_object_and_is_idempotent(api, kube: KubeAdapter, make_pod) -> None:
    held = make_pod("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await kube.apply(held)
    deleting = asyncio.create_task(kube.delete("pods", "held", timeout_s=10))
    await settle(lambda: bool(api.store.list_sync("pods", "default")[0]["metadata"].get("deletionTimestamp")))
    await asyncio.sleep(0.3)
    assert not deleting.done()  # still Terminating: the finalizer holds it
    await api.store.patch("pods", "held", {"metadata": {"finalizers": None}}, "default")
    await asyncio.wait_for(deleting, 5)
    assert await kube.get("pods", "held") is None
    await kube.delete("pods", "held")             # already gone: fine
    await kube.delete("rayclusters", "never-was")  # never existed: fine


async def test_delete_times_out_with_a_clear_message(kube: KubeAdapter, make_pod) -> None:
    held = make_pod("stuck")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await kube.apply(held)
    with pytest.raises(CloudError, match="Pod stuck still exists .* finalizer"):
        await kube.delete("pods", "stuck", timeout_s=0.5)


async def test_watch_survives_cut_streams_and_server_errors(api, kube: KubeAdapter, make_pod) -> None:
    faults = CountedFaults(p=0.3, seed=11)
    watcher = Collector(kube, "pods", label_selector="app=demo")
    await settle(lambda: [e.type for e in watcher.events] == ["SYNCED"])
    api.store.faults = faults
    for i in range(30):
        await api.store.create("pods", make_pod(f"p{i:02d}", {"app": "demo"}), "default")
        if i % 3 == 0:
            await api.store.patch("pods", f"p{i:02d}", {"metadata": {"labels": {"tier": "x"}}}, "default")
        if i % 5 == 0:
            await api.store.delete("pods", f"p{i:02d}", "default")
        await asyncio.sleep(0.005)
    await api.store.create("pods", make_pod("other", {"app": "else"}), "default")  # not selected
    await api.store.create("pods", make_pod("last", {"app": "demo"}), "default")
    await settle(lambda: "last" in watcher.state)
    await watcher.stop()
    api.store.faults = None
    assert any(h.startswith("kube:WATCH-CUT") for h in faults.hits)  # streams were cut
    assert any(h.startswith("kube:WATCH:") for h in faults.hits)     # and resuming failed at times
    expected = [f"p{i:02d}" for i in range(30)] + ["last"]
    assert watcher.names("ADDED") == expected                        # each once, in order
    assert watcher.names("DELETED") == [f"p{i:02d}" for i in range(0, 30, 5)]
    assert watcher.names("MODIFIED") == [f"p{i:02d}" for i in range(0, 30, 3)]
    store_state = {p["metadata"]["name"]: p["metadata"]["resourceVersion"]
                   for p in api.store.list_sync("pods", "default", "app=demo")}
    assert {n: o["metadata"]["resourceVersion"] for n, o in watcher.state.items()} == store_state


@pytest.mark.parametrize("history", [6])
async def test_watch_relists_after_410_and_emits_only_the_difference(api, kube: KubeAdapter, make_pod) -> None:
    for name in ("a", "b", "c"):
        await api.store.create("pods", make_pod(name, {"app": "demo"}), "default")
    watcher = Collector(kube, "pods", label_selector="app=demo")
    await settle(lambda: [e.type for e in watcher.events] == ["ADDED"] * 3 + ["SYNCED"])
    # SYNCED comes before the watch request: wait until the server has taken it, or the faults
    # below would refuse it and "d" would never arrive (seen on a loaded CI machine).
    await settle(lambda: api.record.snapshot()["calls"].get("kube:WATCH:pods", 0) >= 1)
    api.store.faults = Faults(p=1.0)  # the next event cuts the stream; resuming fails meanwhile
    await api.store.create("pods", make_pod("d", {"app": "demo"}), "default")
    await settle(lambda: "d" in watcher.state)
    cut_at = len(watcher.events)
    await api.store.delete("pods", "a", "default")
    await api.store.patch("pods", "b", {"metadata": {"labels": {"tier": "x"}}}, "default")
    await api.store.create("pods", make_pod("e", {"app": "demo"}), "default")
    for i in range(8):  # more changes than the server remembers: the old resourceVersion expires
        await api.store.create("services", {"metadata": {"name": f"s{i}"},
                                            "spec": {"ports": [{"port": 80}]}}, "default")
    await asyncio.sleep(0.2)
    assert len(watcher.events) == cut_at  # nothing came through while the API failed
    api.store.faults = None
    await settle(lambda: len(watcher.events) > cut_at and watcher.events[-1].type == "SYNCED")
    await watcher.stop()
    missed = {(e.type, e.obj.get("metadata", {}).get("name")) for e in watcher.events[cut_at:-1]}
    assert missed == {("DELETED", "a"), ("MODIFIED", "b"), ("ADDED", "e")}
    assert sorted(watcher.state) == ["b", "c", "d", "e"]
    assert api.record.snapshot()["calls"]["kube:LIST:pods"] == 2  # the first list, one relist


async def test_a_watch_resumes_without_listing_again(api, kube: KubeAdapter, make_pod) -> None:
    """Windows that end (timeoutSeconds) and streams cut mid-way resume from the last
    resourceVersion: one LIST in all, however many watch requests (issue 13's API economy)."""
    events: list[KubeEvent] = []

    async def run() -> None:
        async with contextlib.aclosing(kube.watch("pods", label_selector="app=demo", window_s=1)) as stream:
            async for event in stream:
                events.append(event)
    task = asyncio.create_task(run())
    await settle(lambda: [e.type for e in events] == ["SYNCED"])
    api.store.faults = CountedFaults(p=0.2, seed=3)
    for i in range(12):
        await api.store.create("pods", make_pod(f"p{i:02d}", {"app": "demo"}), "default")
        await asyncio.sleep(0.2)  # 2.4 s: the 1 s windows end twice at least
    await settle(lambda: "p11" in [e.obj.get("metadata", {}).get("name") for e in events])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    api.store.faults = None
    calls = api.record.snapshot()["calls"]
    assert calls["kube:LIST:pods"] == 1
    assert calls["kube:WATCH:pods"] >= 3
    assert [e.obj["metadata"]["name"] for e in events if e.type == "ADDED"] == [f"p{i:02d}" for i in range(12)]


async def test_kube_event_lists_come_from_a_watch(api, kube: KubeAdapter) -> None:
    """The Monitor's Events: the list once, then a new list on every change, oldest first;
    an expired Event (DELETED) leaves it; the API is listed once."""
    from rltui.plan.pods import event_lists

    def event(name: str, when: str) -> dict:
        return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
                "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                "reason": "Scheduled", "message": name, "type": "Normal", "lastTimestamp": when}

    await api.store.create("events", event("late", "2026-01-01T00:05:00Z"), "default")
    seen: list[list[str]] = []

    async def run() -> None:
        async with contextlib.aclosing(event_lists(kube.watch("events", window_s=1))) as lists:
            async for items in lists:
                seen.append([e["metadata"]["name"] for e in items])
    task = asyncio.create_task(run())
    await settle(lambda: seen == [["late"]])
    await api.store.create("events", event("early", "2026-01-01T00:01:00Z"), "default")
    await settle(lambda: seen[-1] == ["early", "late"])
    await asyncio.sleep(1.5)  # a window ends: resumed, not relisted
    await api.store.delete("events", "late", "default")
    await settle(lambda: seen[-1] == ["early"])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert api.record.snapshot()["calls"]["kube:LIST:events"] == 1


async def test_wait_raycluster_ready_reads_replicas_and_head_condition(api, kube: KubeAdapter) -> None:
    rc = await kube.apply(manifests.ray_cluster(codelab()))
    name = rc["metadata"]["name"]
    updates = []
    waiting = asyncio.create_task(kube.wait_raycluster_ready(name, updates.append, timeout_s=10))

    async def status(ready_workers: int, head: str, state: str | None = None) -> None:
        body = {"desiredWorkerReplicas": 2, "readyWorkerReplicas": ready_workers,
                "conditions": [{"type": "HeadPodReady", "status": head, "reason": "x"}]}
        if state:
            body["state"] = state
        await api.store.patch_status("rayclusters", name, body, "default")
        await asyncio.sleep(0.15)

    await status(0, "False")
    await status(2, "False", state="ready")  # `state` says ready: it is not (head not ready)
    await status(1, "True", state="ready")   # a worker was preempted: still not ready
    assert not waiting.done()
    await status(2, "True", state="ready")
    ready = await asyncio.wait_for(waiting, 5)
    assert raycluster_health(ready).ready
    seen = [(u.ready_workers, u.head_ready, u.ready) for u in updates if u.desired_workers == 2]
    assert seen == [(0, False, False), (2, False, False), (1, True, False), (2, True, True)]
    assert updates[-2].message == "head ready, workers 1/2 ready"


async def test_wait_raycluster_ready_gives_clear_errors(api, kube: KubeAdapter) -> None:
    with pytest.raises(CloudError, match="RayCluster nope not found") as info:
        await kube.wait_raycluster_ready("nope", timeout_s=5)
    assert not info.value.transient
    rc = await kube.apply(manifests.ray_cluster(codelab()))
    name = rc["metadata"]["name"]
    await api.store.patch_status("rayclusters", name, {
        "desiredWorkerReplicas": 2, "readyWorkerReplicas": 1,
        "conditions": [{"type": "HeadPodReady", "status": "True"}]}, "default")
    with pytest.raises(CloudError, match=r"not ready after 0 s \(head ready, workers 1/2 ready\)") as info:
        await kube.wait_raycluster_ready(name, timeout_s=0.4)
    assert info.value.transient


async def test_pod_rows_as_the_pods_table_shows_them(api, kube: KubeAdapter, make_pod) -> None:
    head = make_pod("ray-a4-head-x", {"ray.io/node-type": "head"})
    worker = make_pod("ray-a4-worker-y", {"ray.io/node-type": "worker"})
    worker["metadata"]["finalizers"] = ["example.com/graceful"]
    spare = make_pod("ray-a4-worker-z", {"ray.io/node-type": "worker"})
    watcher = Collector(kube, "pods")
    for p in (head, worker, spare):
        await api.store.create("pods", p, "default")
    await api.store.patch("pods", "ray-a4-worker-y", {"spec": {"nodeName": "gke-b200-1"}}, "default")
    await api.store.patch_status("pods", "ray-a4-head-x", {
        "phase": "Running", "containerStatuses": [
            {"name": "ray-head", "ready": True, "restartCount": 2, "state": {"running": {}}}]}, "default")
    await settle(lambda: watcher.state.get("ray-a4-head-x", {}).get("status", {}).get("phase") == "Running"
                 and watcher.state.get("ray-a4-worker-y", {}).get("spec", {}).get("nodeName"))
    now = time.time()
    head_row = pod_row(watcher.state["ray-a4-head-x"], now=now + 90)
    assert (head_row.type, head_row.phase, head_row.restarts) == ("head", "Running", 2)
    assert 85 <= head_row.age_s <= 100
    row = pod_row(watcher.state["ray-a4-worker-y"])
    assert (row.type, row.node, row.phase) == ("worker", "gke-b200-1", "ContainerCreating")
    assert pod_row(watcher.state["ray-a4-worker-z"]).phase == "Pending"
    # A graceful delete shows Terminating, and its end is not a preemption.
    await api.store.delete("pods", "ray-a4-worker-y", "default")
    await settle(lambda: watcher.state["ray-a4-worker-y"]["metadata"].get("deletionTimestamp"))
    assert pod_row(watcher.state["ray-a4-worker-y"]).phase == "Terminating"
    await api.store.patch("pods", "ray-a4-worker-y", {"metadata": {"finalizers": None}}, "default")
    # A pod killed with its node (pod GC, no Terminating) is flagged at once.
    await api.store.delete("pods", "ray-a4-worker-z", "default")
    await settle(lambda: len(watcher.names("DELETED")) == 2)
    await watcher.stop()
    gone = {e.obj["metadata"]["name"]: e.obj for e in watcher.events if e.type == "DELETED"}
    assert pod_row(gone["ray-a4-worker-y"], gone=True).phase == "Deleted"
    assert pod_row(gone["ray-a4-worker-z"], gone=True).phase == "PREEMPTED"
    # On GKE the kubelet marks a pod killed by the Spot VM's shutdown.
    shutdown = {**worker, "status": {"phase": "Failed", "reason": "Terminated",
                                     "message": "Pod was terminated in response to imminent node shutdown."}}
    assert pod_row(shutdown).phase == "PREEMPTED"
    crashed = {**worker, "status": {"phase": "Running", "containerStatuses": [
        {"restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}
    assert (pod_row(crashed).phase, pod_row(crashed).restarts) == ("CrashLoopBackOff", 3)


async def test_events_of_one_object_oldest_first(api, kube: KubeAdapter) -> None:
    for i, (obj, reason) in enumerate([("ray-a4", "CreatedHeadPod"), ("node-1", "Preempted"),
                                       ("ray-a4", "CreatedWorkerPod")]):
        await api.store.create("events", {
            "metadata": {"name": f"ev{i}"}, "involvedObject": {"kind": "RayCluster", "name": obj},
            "reason": reason, "lastTimestamp": f"2026-01-01T00:00:0{i}Z"}, "default")
    assert [e["reason"] for e in await kube.events("ray-a4")] == ["CreatedHeadPod", "CreatedWorkerPod"]
    assert len(await kube.events()) == 3


async def test_transient_api_errors_are_retried(api, kube: KubeAdapter, make_pod) -> None:
    faults = CountedFaults(p=0.5, seed=3)
    api.store.faults = faults
    for i in range(6):
        await kube.apply(make_pod(f"r{i}"))
    assert len(await kube.list("pods")) == 6
    assert any(h.startswith("kube:POST") for h in faults.hits)


async def test_unreachable_api_is_transient(tmp_path, test_tls, token_endpoint) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    kube = KubeAdapter(Endpoints(label="SANDBOX", adc_file=token_endpoint[1]),
                       cluster=gke_cluster(f"127.0.0.1:{port}", test_tls), backoff_s=0.01)
    await kube.connect()
    try:
        with pytest.raises(CloudError, match="connection problem") as info:
            await kube.get("pods", "x")
        assert info.value.transient
    finally:
        await kube.close()
