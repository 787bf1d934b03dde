"""What the RayCluster's pods say, as the job supervisor reads them: whether a pod is Running and
Ready, restarted, replaced or gone since an attempt started, whether the cluster is whole again,
and whether a new head's workers may still be bound to the old one. Runs beside supervisor.py in
the cluster's image: Python 3.9, the standard library only. Every answer comes from the pods'
structured fields (metadata, status.conditions, status.containerStatuses), never from text.
"""

from __future__ import annotations

import time
from typing import Any

NODE_TYPE_LABEL = "ray.io/node-type"  # KubeRay's label: head or worker


def stamp(text: str) -> float:
    """RFC 3339 seconds (creationTimestamp) as epoch seconds."""
    import calendar

    try:
        return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))
    except (TypeError, ValueError):
        return 0.0


def ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if (pod.get("metadata") or {}).get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def _restarts(pod: dict[str, Any]) -> int:
    return sum(int(c.get("restartCount") or 0)
               for c in (pod.get("status") or {}).get("containerStatuses") or [])


def _is_head(pod: dict[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(NODE_TYPE_LABEL) == "head"


def pod_snapshot(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["uid"]: {"name": p["metadata"]["name"], "node": (p.get("spec") or {}).get("nodeName", ""),
                                   "restarts": _restarts(p), "head": _is_head(p)} for p in pods}


def _oom_killed(pod: dict[str, Any]) -> bool:
    """The last container restart was the kernel's OOM killer: the job's own doing, not a node's."""
    return any(((c.get("lastState") or {}).get("terminated") or {}).get("reason") == "OOMKilled"
               for c in (pod.get("status") or {}).get("containerStatuses") or [])


def lost_node(before: dict[str, dict[str, Any]], pods: list[dict[str, Any]], job_started: float,
              hard_only: bool = False) -> str | None:
    """Why the job's nodes are not what it started on, or None when they are. `hard_only`: a
    pod gone, recreated or restarted only, not one merely not Ready."""
    now = {p["metadata"]["uid"]: p for p in pods}
    # The head first: losing it loses the job table too, whatever else went with its node.
    for uid, was in sorted(before.items(), key=lambda kv: (not kv[1].get("head"), kv[1]["name"])):
        if uid not in now:
            what = "the Ray head's pod" if was.get("head") else "pod"
            return f"{what} {was['name']} on node {was['node'] or '?'} was lost"
    for pod in sorted(pods, key=lambda p: (not _is_head(p), p["metadata"]["name"])):
        meta = pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName") or "?"
        if job_started and stamp(meta.get("creationTimestamp", "")) > job_started + 1:
            return f"pod {meta['name']} was recreated on node {node} after the job started"
        earlier = before.get(meta["uid"])
        # A restart the first look missed shows as a container started after the job did.
        restarted = (earlier is not None and _restarts(pod) > earlier["restarts"]) or \
            bool(job_started and _started(pod) > job_started + 1)
        if restarted and not _oom_killed(pod):
            return f"pod {meta['name']} on node {node} restarted"
        if not ready(pod) and not hard_only and not _oom_killed(pod):
            return f"pod {meta['name']} on node {node} is not running"
    return None


def _started(pod: dict[str, Any]) -> float:
    """When the pod's (first) container last started, from status.containerStatuses."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return stamp(str(((statuses[0].get("state") or {}).get("running") or {}).get("startedAt") or ""))


def _ready_since(pod: dict[str, Any]) -> float:
    cond: dict[str, Any] = next((c for c in (pod.get("status") or {}).get("conditions") or []
                                 if c.get("type") == "Ready" and c.get("status") == "True"), {})
    return stamp(str(cond.get("lastTransitionTime") or ""))


def stale_workers(before: dict[str, dict[str, Any]], pods: list[dict[str, Any]], now: float,
                  reconnect_s: float) -> str:
    """Why Ray may not have every worker yet, or "": without GCS fault tolerance a new head has
    a new GCS, and a worker whose container started before it may still be retrying the old
    one (its raylet exits after reconnect_s and the container restarts: docs.ray.io, "GCS fault
    tolerance in KubeRay"). Such a worker counts once the head has been Ready for reconnect_s."""
    head = next((p for p in pods if _is_head(p)), None)
    was = before.get(head["metadata"]["uid"]) if head is not None else None
    if head is None or (was is not None and _restarts(head) == was["restarts"]):
        return ""  # the same head and GCS as the attempt's: its workers never lost it
    head_start = _started(head)
    early = [p["metadata"]["name"] for p in pods if not _is_head(p) and _started(p) < head_start]
    if not early or now - _ready_since(head) >= reconnect_s:
        return ""
    return (f"the Ray head is new; {len(early)} worker(s) started before it may still be bound to the "
            f"lost head ({', '.join(sorted(early)[:3])})")


def desired_pods(rc: dict[str, Any]) -> int:
    spec = rc.get("spec") or {}
    total = 1  # the head
    for group in spec.get("workerGroupSpecs") or []:
        if group.get("suspend"):
            continue
        replicas = group.get("replicas", group.get("minReplicas", 0)) or 0
        total += int(replicas) * int(group.get("numOfHosts") or 1)
    return total
