"""The scheduler's fit check for one node: unschedulable, node selector and required node
affinity, untolerated NoSchedule and NoExecute taints, resources beside the pods already placed
(pods included); the FailedScheduling summary in the scheduler's words; and the LeastAllocated
score.

Node affinity after kubernetes/kubernetes staging/src/k8s.io/component-helpers/scheduling/corev1/
nodeaffinity/nodeaffinity.go (used by the NodeAffinity plugin): `requiredDuringScheduling
IgnoredDuringExecution.nodeSelectorTerms` are ORed, a term's matchExpressions (on labels) and
matchFields (only `metadata.name`) ANDed, an empty term matches no node; operators In, NotIn,
Exists, DoesNotExist, Gt, Lt (Gt/Lt compare the label as an integer; NotIn and DoesNotExist hold
where the label is absent). A node failing the selector or the affinity counts as
"node(s) didn't match Pod's node affinity/selector" (the plugin's ErrReasonPod).
"""

from __future__ import annotations

from rltui_sandbox.nodes.quantities import pod_requests, quantity

AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def expression_matches(expr: dict, values_of: dict[str, str]) -> bool:
    """One NodeSelectorRequirement against a node's labels (or fields)."""
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    present, value = key in values_of, values_of.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        have, want = _int(value), _int(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def affinity_matches(pod: dict, node: dict) -> bool:
    """The pod's required node affinity holds on `node` (True when it has none)."""
    required = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}) \
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}
    for term in required.get("nodeSelectorTerms") or []:
        exprs, field_exprs = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not exprs and not field_exprs:
            continue
        if all(expression_matches(e, labels) for e in exprs) and \
                all(expression_matches(e, fields) for e in field_exprs):
            return True
    return False

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
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()) \
            or not affinity_matches(pod, node):
        return [AFFINITY_MISMATCH]
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
