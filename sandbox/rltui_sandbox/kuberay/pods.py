"""Pods as the API server and the kubelet show them: reading a pod's owner, phase and conditions,
and the status the kubelet writes for a bound pod (conditions, container statuses, QoS class)."""

from __future__ import annotations

import hashlib
from typing import Any

from rltui_sandbox import nodes as gke
from rltui_sandbox.kube.store import now

# The sandbox's own finalizer on every Ray pod: it holds a deleted pod in Terminating for the graceful period.
FINALIZER = "sandbox.rltui/graceful-termination"
TERMINAL = ("Succeeded", "Failed")


class _Gone(Exception):
    """The pod a task drives was deleted, is terminating, or was replaced by a new one."""


def _meta(obj: dict) -> dict:
    return obj["metadata"]


def _owned_by(obj: dict, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in _meta(obj).get("ownerReferences") or [])


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def _condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _running_ready(pod: dict) -> bool:
    return _phase(pod) == "Running" and _condition(pod, "Ready").get("status") == "True"


def _cond(kind: str, status: str, reason: str = "", message: str = "") -> dict:
    out: dict[str, Any] = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now()}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _keep_transitions(old: list[dict] | None, new: list[dict]) -> None:
    """A condition whose status did not change keeps its lastTransitionTime, as the API does."""
    before = {c.get("type"): c for c in old or []}
    for cond in new:
        prev = before.get(cond["type"])
        if prev and prev.get("status") == cond["status"]:
            cond["lastTransitionTime"] = prev.get("lastTransitionTime")


def _qos(pod: dict) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, {**(res.get("limits") or {}), **(res.get("requests") or {})}
        any_set = any_set or bool(limits or requests)
        for name in ("cpu", "memory"):
            if name not in limits or gke.quantity(limits[name]) != gke.quantity(requests.get(name, limits[name])):
                guaranteed = False
    return "Guaranteed" if any_set and guaranteed else "Burstable" if any_set else "BestEffort"


# The kubelet's container restart back-off: the first restart at once, then 10 s doubling to a
# 5-minute cap, reset once the container ran 10 minutes (Kubernetes in Action, 2nd ed., 6.2.1;
# KEP-4603 "Tune CrashLoopBackoff" on the 10-minute reset; GKE's NodeKubeletConfig
# CrashLoopBackOffConfig: max_container_restart_period up to 300 s, unset = the kubelet's own).
# Real seconds, not the sandbox's: the kubelet's timer, not the cloud's work.
BACKOFF_S, MAX_BACKOFF_S, BACKOFF_RESET_S = 10.0, 300.0, 600.0


def restart_backoff_s(failures: int) -> float:
    """The wait before restarting a container that failed `failures` times in a row (1: none)."""
    return 0.0 if failures <= 1 else min(BACKOFF_S * 2 ** (failures - 2), MAX_BACKOFF_S)


def _pod_status(pod: dict, node_ip: str, start: str, *, pod_ip: str | None = None,
                waiting: tuple[str, str] | None = None, running_since: str | None = None,
                ready: bool = False, restarts: int = 0, last_state: dict | None = None) -> dict:
    """The status of a pod bound to a node: waiting (ContainerCreating, ...) or running."""
    containers = (pod.get("spec") or {}).get("containers") or []
    unready = f"containers with unready status: [{' '.join(c['name'] for c in containers)}]"
    started = running_since is not None
    if started:
        state: dict = {"running": {"startedAt": running_since}}
    else:
        reason, message = waiting or ("ContainerCreating", "")
        state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    conditions = [
        _cond("PodReadyToStartContainers", "True" if pod_ip else "False"),
        _cond("Initialized", "True"),
        _cond("Ready", "True") if ready else _cond("Ready", "False", "ContainersNotReady", unready),
        _cond("ContainersReady", "True") if ready else _cond("ContainersReady", "False", "ContainersNotReady", unready),
        _cond("PodScheduled", "True"),
    ]
    statuses = []
    for c in containers:
        entry = {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": ready,
                 "started": started, "restartCount": restarts, "state": state, "lastState": last_state or {}}
        if started or restarts:
            image = c.get("image", "")
            digest = hashlib.sha256(image.encode()).hexdigest()  # stable stand-in for the registry's
            entry["imageID"] = f"{image.rsplit(':', 1)[0] if ':' in image.split('/')[-1] else image}@sha256:{digest}"
            entry["containerID"] = f"containerd://{_meta(pod)['uid'].replace('-', '')}{restarts:08x}"
        statuses.append(entry)
    out = {"phase": "Running" if started or restarts else "Pending", "conditions": conditions,
           "hostIP": node_ip, "hostIPs": [{"ip": node_ip}], "startTime": start, "qosClass": _qos(pod),
           "containerStatuses": statuses}
    if pod_ip:
        out["podIP"], out["podIPs"] = pod_ip, [{"ip": pod_ip}]
    return out
