"""Is a RayCluster ready: its head and every worker, read the way every KubeRay version allows.

KubeRay's `state` is no answer: it turns "ready" once and is never cleared. From KubeRay 1.3
the operator writes the HeadPodReady condition (the RayClusterStatusConditions feature gate is
on by default; in 1.2 it is Alpha and off, before 1.2 it does not exist) and from 1.2
status.readyWorkerReplicas (ray-operator/pkg/features/features.go and
controllers/ray/raycluster_controller.go calculateStatus at the release tags). The RayOperator
add-on's version is GKE's choice, so where the condition is absent the pods are read instead:
the head pod Running with its Ready condition True, and as many Running and Ready worker pods
as desiredWorkerReplicas - what KubeRay's own HeadPodReady and readyWorkerReplicas are made of
(utils.FindHeadPodReadyCondition, utils.CalculateReadyReplicas).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import CloudError

Obj = dict[str, Any]
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
NO_CONDITION = ("no HeadPodReady condition: KubeRay before 1.3, or its RayClusterStatusConditions"
                " gate off")


@dataclass(frozen=True)
class RayClusterHealth:
    ready: bool
    head_ready: bool
    ready_workers: int
    desired_workers: int
    state: str       # KubeRay's `state`: informative only (it is never cleared)
    message: str


def _condition(obj: Obj, kind: str) -> Obj:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            found: Obj = cond
            return found
    return {}


def has_head_condition(rc: Obj) -> bool:
    return bool(_condition(rc, "HeadPodReady"))


def pod_selector(name: str) -> str:
    """The label selector of a RayCluster's pods (KubeRay labels each with ray.io/cluster)."""
    return f"{CLUSTER_LABEL}={name}"


def _running_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and _condition(pod, "Ready").get("status") == "True"


def _own_pods(rc: Obj, pods: list[Obj]) -> list[Obj]:
    """The RayCluster's live pods: owned by this RayCluster (not a deleted namesake's), not terminating."""
    uid = (rc.get("metadata") or {}).get("uid")
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        owners = [r.get("uid") for r in meta.get("ownerReferences") or [] if r.get("kind") == "RayCluster"]
        if meta.get("deletionTimestamp") or (uid and owners and uid not in owners):
            continue
        out.append(pod)
    return out


def raycluster_health(rc: Obj, pods: list[Obj] | None = None) -> RayClusterHealth:
    """Ready = the head ready and readyWorkerReplicas == desiredWorkerReplicas (not `state`).

    Head and workers come from the HeadPodReady condition and readyWorkerReplicas when the
    condition is there, else from `pods` (the RayCluster's, e.g. listed with pod_selector);
    without either the head counts as not ready and the message says why."""
    status = rc.get("status") or {}
    desired = int(status.get("desiredWorkerReplicas") or 0)
    head = _condition(rc, "HeadPodReady")
    why = ""
    if head or pods is None:
        ready_workers = int(status.get("readyWorkerReplicas") or 0)
        head_ready = head.get("status") == "True"
        why = (head.get("message") or head.get("reason") or "") if head else NO_CONDITION
    else:
        own = _own_pods(rc, pods)
        heads = [p for p in own if ((p.get("metadata") or {}).get("labels") or {}).get(NODE_TYPE_LABEL) == "head"]
        workers = [p for p in own if ((p.get("metadata") or {}).get("labels") or {}).get(NODE_TYPE_LABEL) == "worker"]
        ready_workers = sum(1 for p in workers if _running_ready(p))
        head_ready = any(_running_ready(p) for p in heads)
        if not heads:
            why = "no head pod"
        elif not head_ready:
            cond = _condition(heads[0], "Ready")
            why = cond.get("message") or cond.get("reason") or (heads[0].get("status") or {}).get("phase", "")
    ready = head_ready and ready_workers == desired and "desiredWorkerReplicas" in status
    message = f"head {'ready' if head_ready else 'not ready'}"
    if not head_ready and why:
        message += f" ({why})"
    message += f", workers {ready_workers}/{desired} ready"
    return RayClusterHealth(ready, head_ready, ready_workers, desired, status.get("state", ""), message)


async def wait_ready(kube: Any, name: str, on_update: Callable[[RayClusterHealth], Any] | None,
                     timeout_s: float) -> Obj:
    """KubeAdapter.wait_raycluster_ready: watch the RayCluster and, once it shows no HeadPodReady
    condition, its pods too (a change of a pod's readiness need not change the RayCluster)."""
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    tasks: list[asyncio.Task[None]] = []

    def follow(tag: str, events: Any) -> None:
        async def pump() -> None:
            async with contextlib.aclosing(events) as stream:
                async for event in stream:
                    await queue.put((tag, event))
        tasks.append(asyncio.create_task(pump()))

    last: RayClusterHealth | None = None
    rc: Obj | None = None
    pods: dict[tuple[str, str], Obj] | None = None
    pods_synced = False
    follow("rc", kube.watch("rayclusters", field_selector=f"metadata.name={name}"))
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait([getter, *tasks], return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    for task in [t for t in tasks if t in done]:
                        task.result()  # a watch that gave up raises its error
                        tasks.remove(task)
                    continue
                tag, event = getter.result()
                if tag == "rc":
                    if event.type == "SYNCED":
                        if rc is None:
                            raise CloudError(f"RayCluster {name} not found: apply ray-cluster.yaml first",
                                             transient=False, code="NotFound")
                        continue
                    if event.type == "DELETED":
                        raise CloudError(f"RayCluster {name} was deleted while starting",
                                         transient=False, code="Deleted")
                    rc = event.obj
                    if pods is None and not has_head_condition(rc):
                        pods = {}
                        follow("pods", kube.watch("pods", label_selector=pod_selector(name)))
                else:
                    meta = event.obj.get("metadata") or {}
                    key = (meta.get("namespace", ""), meta.get("name", ""))
                    if event.type == "SYNCED":
                        pods_synced = True
                    elif pods is not None and event.type == "DELETED":
                        pods.pop(key, None)
                    elif pods is not None:
                        pods[key] = event.obj
                if rc is None or (not has_head_condition(rc) and not pods_synced):
                    continue  # the pods are not all known yet
                health = raycluster_health(rc, None if pods is None else list(pods.values()))
                if health != last and on_update is not None:
                    on_update(health)
                last = health
                if health.ready:
                    return rc
    except TimeoutError:
        pass
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    detail = last.message if last else "no status yet"
    raise CloudError(f"RayCluster {name} not ready after {timeout_s:.0f} s ({detail})",
                     transient=True, code="Timeout")
