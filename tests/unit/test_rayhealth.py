"""rltui's RayCluster readiness on every KubeRay version (rltui/cloud/rayhealth.py): with KubeRay's
HeadPodReady condition (1.3 and later) it is read from the RayCluster; without it (1.1, 1.2, or
the gate off) from the pods, and a wait notices a pod turning Ready although the RayCluster's
status does not change then."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rltui.cloud.errors import CloudError
from rltui.cloud.kube import KubeEvent, raycluster_health
from rltui.cloud.rayhealth import wait_ready

UID = "rc-uid"


def rc(conditions: bool = False, head: str = "True", ready_workers: int | None = None) -> dict:
    status: dict[str, Any] = {"desiredWorkerReplicas": 2, "state": "ready"}
    if ready_workers is not None:
        status["readyWorkerReplicas"] = ready_workers
    if conditions:
        status["conditions"] = [{"type": "HeadPodReady", "status": head, "reason": "x"}]
    return {"metadata": {"name": "ray-a4", "namespace": "default", "uid": UID}, "status": status}


def pod(name: str, node_type: str, ready: bool, owner: str = UID, deleting: bool = False) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "default",
                            "labels": {"ray.io/cluster": "ray-a4", "ray.io/node-type": node_type},
                            "ownerReferences": [{"kind": "RayCluster", "uid": owner}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cond = {"type": "Ready", "status": "True" if ready else "False"}
    if not ready:
        cond.update(reason="ContainersNotReady", message="containers with unready status: [ray-head]")
    return {"metadata": meta, "status": {"phase": "Running", "conditions": [cond]}}


def test_without_the_condition_the_pods_say_it() -> None:
    all_ready = [pod("h", "head", True), pod("w1", "worker", True), pod("w2", "worker", True)]
    health = raycluster_health(rc(), all_ready)   # KubeRay 1.1: no readyWorkerReplicas either
    assert health.ready and health.head_ready and health.ready_workers == 2
    assert health.message == "head ready, workers 2/2 ready"
    head_down = [pod("h", "head", False), *all_ready[1:]]
    health = raycluster_health(rc(ready_workers=2), head_down)
    assert not health.ready  # `state` says ready: it is not
    assert health.message == "head not ready (containers with unready status: [ray-head]), workers 2/2 ready"
    # A terminating worker, and a pod of an earlier RayCluster of the same name, do not count.
    stale = [all_ready[0], all_ready[1], pod("w2", "worker", True, deleting=True), pod("w3", "worker", True, "old")]
    assert raycluster_health(rc(), stale).ready_workers == 1


def test_with_the_condition_it_is_read_and_without_pods_it_says_why_not() -> None:
    assert raycluster_health(rc(True, "True", 2), [pod("h", "head", False)]).ready  # the condition wins
    health = raycluster_health(rc(ready_workers=2))
    assert not health.ready and "no HeadPodReady condition" in health.message


class FakeKube:
    """KubeAdapter.watch as wait_ready uses it: events fed by the test, per kind."""

    def __init__(self) -> None:
        self.queues: dict[str, asyncio.Queue] = {}

    def watch(self, kind: str, **selectors: str) -> Any:
        queue = self.queues.setdefault(kind, asyncio.Queue())
        self.selectors = selectors

        async def events() -> Any:
            while True:
                yield await queue.get()
        return events()

    def send(self, kind: str, *events: KubeEvent) -> None:
        for event in events:
            self.queues.setdefault(kind, asyncio.Queue()).put_nowait(event)


async def _wait_for_the_pods() -> tuple[dict, list]:
    kube, updates = FakeKube(), []
    waiting = asyncio.create_task(_wait(kube, updates))
    kube.send("rayclusters", KubeEvent("ADDED", rc(ready_workers=2)), KubeEvent("SYNCED", {}))
    await asyncio.sleep(0.05)
    assert kube.selectors == {"label_selector": "ray.io/cluster=ray-a4"}  # it watches the pods now
    head, workers = pod("h", "head", False), [pod("w1", "worker", True), pod("w2", "worker", True)]
    kube.send("pods", *(KubeEvent("ADDED", p) for p in (head, *workers)), KubeEvent("SYNCED", {}))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    kube.send("pods", KubeEvent("MODIFIED", pod("h", "head", True)))  # the RayCluster does not change
    return await asyncio.wait_for(waiting, 2), updates


async def _wait(kube: FakeKube, updates: list) -> dict:
    return await wait_ready(kube, "ray-a4", updates.append, 5)


def test_a_wait_without_the_condition_follows_the_pods() -> None:
    ready, updates = asyncio.run(_wait_for_the_pods())
    assert ready["metadata"]["name"] == "ray-a4"
    assert [(u.head_ready, u.ready_workers, u.ready) for u in updates] == [(False, 2, False), (True, 2, True)]


def test_a_wait_with_the_condition_does_not_watch_the_pods() -> None:
    async def run() -> None:
        kube = FakeKube()
        waiting = asyncio.create_task(_wait(kube, []))
        kube.send("rayclusters", KubeEvent("ADDED", rc(True, "False", 2)), KubeEvent("SYNCED", {}))
        kube.send("rayclusters", KubeEvent("MODIFIED", rc(True, "True", 2)))
        assert raycluster_health(await asyncio.wait_for(waiting, 2)).ready
        assert "pods" not in kube.queues
    asyncio.run(run())


def test_a_wait_for_a_missing_raycluster_fails_at_once() -> None:
    async def run() -> None:
        kube = FakeKube()
        kube.send("rayclusters", KubeEvent("SYNCED", {}))
        with pytest.raises(CloudError, match="RayCluster ray-a4 not found"):
            await _wait(kube, [])
    asyncio.run(run())


def test_the_raycluster_step_reads_the_pods_when_kuberay_writes_no_condition(tmp_path) -> None:
    """The wizard's probe of the RayCluster step (plan/steps_kube.py) on a KubeRay 1.2 cluster."""
    from rltui.config import parse_config
    from rltui.plan.steps import build_plan
    from tests.plan.fakes import fake_context, seed

    cfg = parse_config({"PROJECT_ID": "rl-health-steps", "NUM_NODES": "2", "HF_TOKEN": "hf_" + "x" * 30})

    async def run() -> None:
        ctx = fake_context(cfg, tmp_path)
        step = {s.name: s for s in build_plan(ctx)}["raycluster"]
        assert "kubectl wait pod -l ray.io/cluster=ray-a4-gpu-spot,ray.io/node-type=head" in step.command()
        seed(ctx, ["enable_apis", "xpk_cluster", "addons", "credentials", "secret", "pv_pvc", "raycluster"])
        objects = ctx.cloud.objects
        del objects[("rayclusters", cfg.cluster_name)]["status"]["conditions"]  # as KubeRay before 1.3
        assert (await step.probe(ctx)).ready
        head = objects[("pods", f"{cfg.cluster_name}-head")]
        head["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
        got = await step.probe(ctx)
        assert not got.ready and got.detail.startswith("head not ready (ContainersNotReady)")
    asyncio.run(run())
