"""What the pods table shows, for the screens: watch events and one row per pod (k9s's
columns: name, Ray node type, node, status as kubectl's STATUS column plus PREEMPTED,
restarts, age). A view of the objects cloud/kube.py's watch delivers; the screens take it
from here, never from the cloud adapters."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from ..cloud.kube import KubeEvent, Obj

__all__ = ["KubeEvent", "PodRow", "pod_row", "preempted"]

NODE_TYPE_LABEL = "ray.io/node-type"
# How the kubelet / pod GC / taint manager mark a pod killed by a Spot preemption or node loss.
PREEMPTED_REASONS = {"Terminated", "NodeShutdown", "Shutdown", "NodeLost", "Preempting"}
DISRUPTION_REASONS = {"TerminationByKubelet", "DeletionByPodGC", "DeletionByTaintManager",
                      "PreemptionByScheduler"}


@dataclass(frozen=True)
class PodRow:
    name: str
    type: str        # head / worker / "" (not a Ray pod)
    node: str
    phase: str       # as kubectl's STATUS column, plus PREEMPTED
    restarts: int
    age_s: float


def _parse_time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def preempted(pod: Obj, *, gone: bool = False) -> bool:
    """Killed by a Spot preemption / node loss: marked so by the kubelet or pod GC, or (`gone`)
    deleted without ever showing Terminating, as the sandbox's pod GC does."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if status.get("reason") in PREEMPTED_REASONS:
        return True
    cond: Obj = next((c for c in status.get("conditions") or [] if c.get("type") == "DisruptionTarget"), {})
    if cond.get("status") == "True" and cond.get("reason") in DISRUPTION_REASONS:
        return True
    return gone and not meta.get("deletionTimestamp")


def _phase(pod: Obj) -> str:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    shown = status.get("reason") or phase
    if phase == "Pending" and spec.get("nodeName"):
        shown = "ContainerCreating"  # scheduled, containers not started yet
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            shown = state["waiting"]["reason"]
        elif "terminated" in state and phase != "Running":
            term = state["terminated"] or {}
            shown = term.get("reason") or f"ExitCode:{term.get('exitCode', 0)}"
    if phase == "Succeeded" and shown in ("Succeeded",):
        shown = "Completed"
    return shown


def pod_row(pod: Obj, *, gone: bool = False, now: float | None = None) -> PodRow:
    """One row of the pods table; `gone` for a pod a watch reported DELETED."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    if preempted(pod, gone=gone):
        phase = "PREEMPTED"
    elif meta.get("deletionTimestamp") or gone:
        phase = "Terminating" if not gone else "Deleted"
    else:
        phase = _phase(pod)
    created = _parse_time(meta.get("creationTimestamp"))
    now = time.time() if now is None else now
    return PodRow(
        name=meta.get("name", ""),
        type=(meta.get("labels") or {}).get(NODE_TYPE_LABEL, ""),
        node=spec.get("nodeName") or "",
        phase=phase,
        restarts=sum(int(cs.get("restartCount") or 0) for cs in status.get("containerStatuses") or []),
        age_s=max(0.0, now - created) if created is not None else 0.0,
    )
