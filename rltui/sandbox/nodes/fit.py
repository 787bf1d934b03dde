"""The scheduler's fit check for one node: unschedulable, node selector, untolerated NoSchedule
and NoExecute taints, resources beside the pods already placed (pods included); the
FailedScheduling summary in the scheduler's words; and the LeastAllocated score."""

from __future__ import annotations

from rltui.sandbox.nodes.quantities import pod_requests, quantity

def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists" and not tol.get("key"):
            return True
        if tol.get("key") != taint.get("key"):
            continue
        if tol.get("operator") == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def misfit(pod: dict, node: dict, placed: list[dict]) -> list[str]:
    """Why `pod` cannot go on `node` beside `placed` pods, in the scheduler's words ([] = fits)."""
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return ["node(s) were unschedulable"]
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return ["node(s) didn't match Pod's node affinity/selector"]
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations") or [], taint):
            return [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    used: dict[str, float] = {"pods": float(len(placed))}
    for other in placed:
        for name, amount in pod_requests(other).items():
            used[name] = used.get(name, 0.0) + amount
    wanted = dict(pod_requests(pod), pods=1.0)
    return [f"Insufficient {name}" for name, amount in sorted(wanted.items())
            if amount > 0 and used.get(name, 0.0) + amount > quantity(allocatable.get(name, 0)) + 1e-9]


def unschedulable_message(reasons: dict[str, int], total: int) -> str:
    if total == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


def free_share(node: dict, placed: list[dict]) -> float:
    """LeastAllocated score: the mean free fraction of CPU and memory (spreads pods out)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    used: dict[str, float] = {}
    for other in placed:
        for name, amount in pod_requests(other).items():
            used[name] = used.get(name, 0.0) + amount
    shares = []
    for name in ("cpu", "memory"):
        total = quantity(allocatable.get(name, 0))
        shares.append(1.0 - used.get(name, 0.0) / total if total else 0.0)
    return sum(shares) / len(shares)
