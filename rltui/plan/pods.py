"""What the pods table shows, for the screens: watch events and one row per pod (k9s's
columns: name, Ray node type, node, status as kubectl's STATUS column plus PREEMPTED, GPU
and CPU requests, restarts, age), the RayCluster's desired size per group, and the lines of
a pod's describe. A view of the objects cloud/kube.py delivers; the screens take it from
here, never from the cloud adapters."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

from ..cloud.kube import KubeEvent, Obj

__all__ = [
    "HEAD_GROUP",
    "KubeEvent",
    "PodRow",
    "PodsSummary",
    "age_text",
    "describe_lines",
    "desired_sizes",
    "event_lists",
    "pod_row",
    "preempted",
    "requests",
    "summarize",
]

NODE_TYPE_LABEL = "ray.io/node-type"
# KubeRay's group label and its head group's value (ray-operator/controllers/ray/utils/
# constant.go: RayNodeGroupLabelKey, RayNodeHeadGroupLabelValue).
GROUP_LABEL = "ray.io/group"
HEAD_GROUP = "headgroup"
GPU = "nvidia.com/gpu"
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
    group: str = ""  # KubeRay's ray.io/group ("headgroup" for the head)
    gpu: str = ""    # the containers' nvidia.com/gpu requests, summed ("" when none)
    cpu: str = ""    # the containers' cpu requests, summed


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


def _quantity(text: object) -> Decimal | None:
    """A Kubernetes quantity ("100", "500m", "8") as a number of units (cpu: cores)."""
    raw = str(text).strip()
    try:
        if raw.endswith("m"):
            return Decimal(raw[:-1]) / 1000
        return Decimal(raw)
    except InvalidOperation:
        return None


def _shown(total: Decimal) -> str:
    return f"{total.normalize():f}" if total == total.to_integral() else f"{total:.2f}".rstrip("0")


def requests(pod: Obj) -> dict[str, str]:
    """What the pod asks the scheduler for, per resource (cpu, nvidia.com/gpu, memory): each
    container's `resources.requests`, or its `limits` where the request is left out (the
    API server copies a limit into a missing request: Kubernetes docs, "Resource Management
    for Pods and Containers"), summed over the containers."""
    totals: dict[str, Decimal] = {}
    raw: dict[str, str] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        wanted = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for key, value in wanted.items():
            q = _quantity(value)
            if q is None:   # memory's "1000Gi": shown as written
                raw[key] = str(value)
                continue
            totals[key] = totals.get(key, Decimal(0)) + q
    return {**raw, **{k: _shown(v) for k, v in totals.items()}}


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
    labels = meta.get("labels") or {}
    asked = requests(pod)
    return PodRow(
        name=meta.get("name", ""),
        type=labels.get(NODE_TYPE_LABEL, ""),
        node=spec.get("nodeName") or "",
        phase=phase,
        restarts=sum(int(cs.get("restartCount") or 0) for cs in status.get("containerStatuses") or []),
        age_s=max(0.0, now - created) if created is not None else 0.0,
        group=labels.get(GROUP_LABEL) or (HEAD_GROUP if labels.get(NODE_TYPE_LABEL) == "head"
                                          else labels.get(NODE_TYPE_LABEL, "")),
        gpu=asked.get(GPU, ""),
        cpu=asked.get("cpu", ""),
    )


def desired_sizes(raycluster: Obj | None) -> dict[str, int]:
    """Pods the RayCluster wants per group: 1 for the head group, and per worker group
    KubeRay's GetWorkerGroupDesiredReplicas (ray-operator/controllers/ray/utils/util.go):
    0 when `suspend`, else `replicas` clamped to [minReplicas, maxReplicas], times
    `numOfHosts` (CRD default 1). {} without a RayCluster."""
    if not raycluster:
        return {}
    spec = raycluster.get("spec") or {}
    sizes = {HEAD_GROUP: 1}
    for group in spec.get("workerGroupSpecs") or []:
        if group.get("suspend"):
            n = 0
        else:
            low = int(group.get("minReplicas") or 0)
            high = group.get("maxReplicas")
            n = int(group["replicas"]) if group.get("replicas") is not None else low
            n = max(n, low)
            if high is not None:
                n = min(n, int(high))
            n *= int(group.get("numOfHosts") or 1)
        name = str(group.get("groupName") or "")
        sizes[name] = sizes.get(name, 0) + n
    return sizes


@dataclass(frozen=True)
class PodsSummary:
    running: int
    wanted: int              # the RayCluster's desired pods (the live pods' count without one)
    replaced: frozenset[str]  # preempted pods whose replacement runs
    outstanding: int         # preempted pods not replaced yet


def summarize(rows: list[PodRow], desired: Mapping[str, int], gone_at: Mapping[str, float],
              born_at: Mapping[str, float] | None = None) -> PodsSummary:
    """Counts against the RayCluster's desired size. A preempted pod is replaced once its
    group runs as many pods as it wants again (the oldest preemption is replaced first: KubeRay
    creates a new pod per missing replica, under a new name, so no pod names its successor).
    Without a RayCluster: once a pod of its group first seen after the preemption runs.
    `gone_at` / `born_at`: when the watch showed each pod gone / first (any increasing order)."""
    born = born_at or {}
    live = [r for r in rows if r.phase != "PREEMPTED"]
    running = sum(r.phase == "Running" for r in live)
    done: set[str] = set()
    outstanding = 0
    for group in {r.group for r in rows if r.phase == "PREEMPTED"}:
        gone = sorted((r for r in rows if r.phase == "PREEMPTED" and r.group == group),
                      key=lambda r: gone_at.get(r.name, 0.0))
        up = [r for r in live if r.group == group and r.phase == "Running"]
        if group in desired:
            missing = max(0, desired[group] - len(up))
        else:
            first = gone_at.get(gone[0].name, 0.0)
            missing = max(0, len(gone) - sum(born.get(r.name, 0.0) > first for r in up))
        missing = min(missing, len(gone))
        outstanding += missing
        done.update(r.name for r in gone[:len(gone) - missing])
    wanted = sum(desired.values()) if desired else len(live)
    return PodsSummary(running, wanted, frozenset(done), outstanding)


def age_text(seconds: float) -> str:
    """kubectl's AGE column (HumanDuration)."""
    s = int(seconds)
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    return f"{d}d"


def _event_when(ev: Obj) -> float:
    for stamp in (ev.get("lastTimestamp"), ev.get("eventTime"), ev.get("firstTimestamp"),
                  (ev.get("metadata") or {}).get("creationTimestamp")):
        when = _parse_time(str(stamp).split(".")[0].rstrip("Z") + "Z") if stamp else None
        if when is not None:
            return when
    return 0.0


async def event_lists(watch: AsyncIterator[KubeEvent]) -> AsyncIterator[list[Obj]]:
    """The Events a watch of them holds (KubeAdapter.watch("events")), oldest first as
    KubeAdapter.events() sorts them: once the first list is delivered (SYNCED), then after every
    change. A watch, not a poll: one LIST, then only what changed, resumed from the last
    resourceVersion when a stream ends (Kubernetes API concepts, "Efficient detection of
    changes"); Events that expire (the API server's --event-ttl, 1 h by default) arrive as
    DELETED and leave the list."""
    held: dict[tuple[str, str], Obj] = {}
    synced = False
    async for event in watch:
        if event.type == "SYNCED":
            synced = True
        else:
            meta = event.obj.get("metadata") or {}
            key = (meta.get("namespace", ""), meta.get("name", ""))
            if event.type == "DELETED":
                held.pop(key, None)
            else:
                held[key] = event.obj
        if synced:
            yield sorted(held.values(), key=_event_when)


def describe_lines(pod: Obj, events: list[Obj], *, now: float | None = None) -> list[str]:
    """`kubectl describe pod` as text: node, status, conditions, each container's requests,
    limits, state and restarts, then the pod's Events (as kubectl's describePod lists them:
    those whose involvedObject is this pod, oldest first; k8s.io/kubectl/pkg/describe)."""
    now = time.time() if now is None else now
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    row = pod_row(pod, now=now)
    out = [f"Name:         {meta.get('name', '')}",
           f"Namespace:    {meta.get('namespace', 'default')}",
           f"Node:         {spec.get('nodeName') or '<none>'}"
           + (f"/{status['hostIP']}" if status.get("hostIP") else ""),
           f"Start Time:   {status.get('startTime') or '<none>'}",
           "Labels:       " + ", ".join(f"{k}={v}" for k, v in sorted((meta.get("labels") or {}).items())),
           f"Status:       {row.phase}" + (f" ({status['reason']})" if status.get("reason") else ""),
           f"IP:           {status.get('podIP') or '<none>'}",
           f"Restarts:     {row.restarts}", f"Age:          {age_text(row.age_s)}"]
    if status.get("message"):
        out.append(f"Message:      {status['message']}")
    out.append("Containers:")
    states = {cs.get("name"): cs for cs in status.get("containerStatuses") or []}
    for c in spec.get("containers") or []:
        out.append(f"  {c.get('name', '')}:")
        out.append(f"    Image:      {c.get('image', '')}")
        cs = states.get(c.get("name")) or {}
        for key, value in (cs.get("state") or {}).items():
            detail = value or {}
            why = detail.get("reason") or ""
            out.append(f"    State:      {key.title()}" + (f" ({why})" if why else "")
                       + (f" exit code {detail['exitCode']}" if "exitCode" in detail else ""))
        if cs:
            out.append(f"    Ready:      {cs.get('ready', False)}")
            out.append(f"    Restarts:   {cs.get('restartCount', 0)}")
        res = c.get("resources") or {}
        for title in ("limits", "requests"):
            if res.get(title):
                out.append(f"    {title.title() + ':':<11} "
                           + ", ".join(f"{k}={v}" for k, v in sorted(res[title].items())))
    out.append("Conditions:")
    conds = status.get("conditions") or []
    out += [f"  {c.get('type', ''):<26} {c.get('status', '')}"
            + (f"  {c.get('reason')}" if c.get("reason") else "") for c in conds] or ["  <none>"]
    out.append("Events:")
    if not events:
        out.append("  <none>")
    for ev in sorted(events, key=_event_when):
        when = _event_when(ev)
        age = age_text(max(0.0, now - when)) if when else "?"
        count = int(ev.get("count") or 1)
        out.append(f"  {ev.get('type', ''):<8} {ev.get('reason', ''):<18} {age:>5}"
                   + (f" (x{count})" if count > 1 else "")
                   + f"  {' '.join(str(ev.get('message', '')).split())}")
    return out
