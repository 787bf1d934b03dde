"""Server-side printing: the meta.k8s.io/v1 Tables `kubectl get` asks for, with the real columns."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

from rltui_sandbox.kube.resources import ResourceType

NONE = "<none>"
_ACCESS = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
           "ReadWriteOncePod": "RWOP"}


def human_duration(seconds: float) -> str:
    """kubectl's AGE format: 45s, 5m3s, 42m, 3h10m, 2d4h, 120d, 3y20d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def since(timestamp: str | None) -> str:
    if not timestamp:
        return NONE
    then = datetime.strptime(timestamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return human_duration((datetime.now(timezone.utc) - then).total_seconds())


def _age(obj: dict) -> str:
    return since(obj["metadata"].get("creationTimestamp"))


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _pod_row(pod: dict) -> list:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    total = len(spec.get("containers") or [])
    reason = status.get("reason") or status.get("phase") or "Pending"
    ready = restarts = 0
    for cs in status.get("containerStatuses") or []:
        restarts += int(cs.get("restartCount", 0))
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"] or {}
            reason = term.get("reason") or f"ExitCode:{term.get('exitCode', 0)}"
        elif cs.get("ready") and "running" in state:
            ready += 1
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates")
    return [pod["metadata"]["name"], f"{ready}/{total}", reason, str(restarts), _age(pod),
            status.get("podIP") or NONE, spec.get("nodeName") or NONE,
            status.get("nominatedNodeName") or NONE, f"0/{len(gates)}" if gates else NONE]


def _node_row(node: dict) -> list:
    status = node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Ready" if ready == "True" else "NotReady" if ready == "False" else "Unknown"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in (node["metadata"].get("labels") or {})
                   if k.startswith("node-role.kubernetes.io/"))
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [node["metadata"]["name"], state, ",".join(roles) or NONE, _age(node),
            info.get("kubeletVersion", ""), addresses.get("InternalIP", NONE),
            addresses.get("ExternalIP", NONE), info.get("osImage", NONE),
            info.get("kernelVersion", NONE), info.get("containerRuntimeVersion", NONE)]


def _service_row(svc: dict) -> list:
    spec = svc.get("spec") or {}
    ports = []
    for p in spec.get("ports") or []:
        node = f":{p['nodePort']}" if p.get("nodePort") else ""
        ports.append(f"{p.get('port')}{node}/{p.get('protocol', 'TCP')}")
    ingress = _get(svc, "status.loadBalancer.ingress") or []
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress) or \
        ("<pending>" if spec.get("type") == "LoadBalancer" else NONE)
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    return [svc["metadata"]["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP") or NONE,
            external, ",".join(ports) or NONE, _age(svc), selector or NONE]


def _access(modes: list | None) -> str:
    return ",".join(_ACCESS.get(m, m) for m in modes or [])


def _pv_row(pv: dict) -> list:
    spec, status = pv.get("spec") or {}, pv.get("status") or {}
    ref = spec.get("claimRef") or {}
    claim = f"{ref.get('namespace')}/{ref.get('name')}" if ref else ""
    return [pv["metadata"]["name"], _get(spec, "capacity.storage") or "", _access(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""), status.get("phase", ""), claim,
            spec.get("storageClassName", ""), spec.get("volumeAttributesClassName") or "<unset>",
            status.get("reason", ""), _age(pv), spec.get("volumeMode", "Filesystem")]


def _pvc_row(pvc: dict) -> list:
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    bound = status.get("phase") == "Bound"
    return [pvc["metadata"]["name"], status.get("phase", ""), spec.get("volumeName", ""),
            _get(status, "capacity.storage") or "" if bound else "",
            _access(status.get("accessModes")) if bound else "", spec.get("storageClassName") or "",
            spec.get("volumeAttributesClassName") or "<unset>", _age(pvc), spec.get("volumeMode", "Filesystem")]


def _event_row(ev: dict) -> list:
    inv = ev.get("involvedObject") or {}
    last = ev.get("lastTimestamp") or ev.get("eventTime") or ev["metadata"].get("creationTimestamp")
    source = _get(ev, "source.component") or ev.get("reportingComponent") or ""
    return [since(last), ev.get("type", ""), ev.get("reason", ""),
            f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}", ev.get("message", ""),
            inv.get("fieldPath", ""), source, since(ev.get("firstTimestamp") or last),
            int(ev.get("count", 1)), ev["metadata"]["name"]]


def _daemonset_row(ds: dict) -> list:
    status, spec = ds.get("status") or {}, ds.get("spec") or {}
    pod_spec = _get(spec, "template.spec") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted((pod_spec.get("nodeSelector") or {}).items()))
    containers = pod_spec.get("containers") or []
    match = ",".join(f"{k}={v}" for k, v in sorted((_get(spec, "selector.matchLabels") or {}).items()))
    return [ds["metadata"]["name"], status.get("desiredNumberScheduled", 0),
            status.get("currentNumberScheduled", 0), status.get("numberReady", 0),
            status.get("updatedNumberScheduled", 0), status.get("numberAvailable", 0),
            selector or NONE, _age(ds), ",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers), match or NONE]


def _raycluster_row(rc: dict) -> list:
    status = rc.get("status") or {}
    return [rc["metadata"]["name"], status.get("desiredWorkerReplicas"), status.get("availableWorkerReplicas"),
            status.get("desiredCPU"), status.get("desiredMemory"), status.get("desiredGPU"),
            status.get("desiredTPU"), status.get("state"), _age(rc), _get(status, "head.podIP"),
            _get(status, "head.serviceIP")]


def _template_cells(obj: dict) -> list:
    containers = _get(obj, "spec.template.spec.containers") or []
    match = ",".join(f"{k}={v}" for k, v in sorted((_get(obj, "spec.selector.matchLabels") or {}).items()))
    return [",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
            match or NONE]


def _deployment_row(d: dict) -> list:
    status = d.get("status") or {}
    return [d["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{_get(d, 'spec.replicas') or 0}",
            status.get("updatedReplicas", 0), status.get("availableReplicas", 0), _age(d), *_template_cells(d)]


def _replicaset_row(rs: dict) -> list:
    status = rs.get("status") or {}
    return [rs["metadata"]["name"], _get(rs, "spec.replicas") or 0, status.get("replicas", 0),
            status.get("readyReplicas", 0), _age(rs), *_template_cells(rs)]


def _binding_row(b: dict) -> list:
    subjects = b.get("subjects") or []

    def names(kind: str) -> str:
        out = [(f"{s.get('namespace', '')}/{s['name']}" if kind == "ServiceAccount" else s["name"])
               for s in subjects if s.get("kind") == kind]
        return ", ".join(out)
    ref = b.get("roleRef") or {}
    return [b["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}", _age(b),
            names("User"), names("Group"), names("ServiceAccount")]


_WORKLOAD_WIDE = [("Containers", "string", 1), ("Images", "string", 1), ("Selector", "string", 1)]
_BINDING_COLUMNS = [("Name", "string", 0), ("Role", "string", 0), ("Age", "string", 0), ("Users", "string", 1),
                    ("Groups", "string", 1), ("ServiceAccounts", "string", 1)]

# Columns per resource: (name, type, priority); priority 1 shows only with -o wide.
_C = tuple[str, str, int]
COLUMNS: dict[str, tuple[list[_C], Callable[[dict], list]]] = {
    "pods": ([("Name", "string", 0), ("Ready", "string", 0), ("Status", "string", 0),
              ("Restarts", "string", 0), ("Age", "string", 0), ("IP", "string", 1), ("Node", "string", 1),
              ("Nominated Node", "string", 1), ("Readiness Gates", "string", 1)], _pod_row),
    "nodes": ([("Name", "string", 0), ("Status", "string", 0), ("Roles", "string", 0), ("Age", "string", 0),
               ("Version", "string", 0), ("Internal-IP", "string", 1), ("External-IP", "string", 1),
               ("OS-Image", "string", 1), ("Kernel-Version", "string", 1),
               ("Container-Runtime", "string", 1)], _node_row),
    "services": ([("Name", "string", 0), ("Type", "string", 0), ("Cluster-IP", "string", 0),
                  ("External-IP", "string", 0), ("Port(s)", "string", 0), ("Age", "string", 0),
                  ("Selector", "string", 1)], _service_row),
    "secrets": ([("Name", "string", 0), ("Type", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
                lambda s: [s["metadata"]["name"], s.get("type", "Opaque"), len(s.get("data") or {}), _age(s)]),
    "namespaces": ([("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)],
                   lambda n: [n["metadata"]["name"], _get(n, "status.phase") or "", _age(n)]),
    "persistentvolumes": ([("Name", "string", 0), ("Capacity", "string", 0), ("Access Modes", "string", 0),
                           ("Reclaim Policy", "string", 0), ("Status", "string", 0), ("Claim", "string", 0),
                           ("StorageClass", "string", 0), ("VolumeAttributesClass", "string", 0),
                           ("Reason", "string", 0), ("Age", "string", 0), ("VolumeMode", "string", 1)], _pv_row),
    "persistentvolumeclaims": ([("Name", "string", 0), ("Status", "string", 0), ("Volume", "string", 0),
                                ("Capacity", "string", 0), ("Access Modes", "string", 0),
                                ("StorageClass", "string", 0), ("VolumeAttributesClass", "string", 0),
                                ("Age", "string", 0), ("VolumeMode", "string", 1)], _pvc_row),
    "events": ([("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0),
                ("Object", "string", 0), ("Message", "string", 0), ("Subobject", "string", 1),
                ("Source", "string", 1), ("First Seen", "string", 1), ("Count", "integer", 1),
                ("Name", "string", 1)], _event_row),
    "daemonsets": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                    ("Ready", "integer", 0), ("Up-to-date", "integer", 0), ("Available", "integer", 0),
                    ("Node Selector", "string", 0), ("Age", "string", 0), ("Containers", "string", 1),
                    ("Images", "string", 1), ("Selector", "string", 1)], _daemonset_row),
    "deployments": ([("Name", "string", 0), ("Ready", "string", 0), ("Up-to-date", "string", 0),
                     ("Available", "string", 0), ("Age", "string", 0), *_WORKLOAD_WIDE], _deployment_row),
    "replicasets": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                     ("Ready", "integer", 0), ("Age", "string", 0), *_WORKLOAD_WIDE], _replicaset_row),
    "configmaps": ([("Name", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
                   lambda c: [c["metadata"]["name"], len(c.get("data") or {}) + len(c.get("binaryData") or {}),
                              _age(c)]),
    "serviceaccounts": ([("Name", "string", 0), ("Secrets", "integer", 0), ("Age", "string", 0)],
                        lambda a: [a["metadata"]["name"], len(a.get("secrets") or []), _age(a)]),
    "roles": ([("Name", "string", 0), ("Created At", "string", 0)],
              lambda r: [r["metadata"]["name"], r["metadata"].get("creationTimestamp", "")]),
    "clusterroles": ([("Name", "string", 0), ("Created At", "string", 0)],
                     lambda r: [r["metadata"]["name"], r["metadata"].get("creationTimestamp", "")]),
    "rolebindings": (_BINDING_COLUMNS, _binding_row),
    "clusterrolebindings": (_BINDING_COLUMNS, _binding_row),
    # The KubeRay CRD's additionalPrinterColumns.
    "rayclusters": ([("Name", "string", 0), ("desired workers", "integer", 0),
                     ("available workers", "integer", 0), ("cpus", "string", 0), ("memory", "string", 0),
                     ("gpus", "string", 0), ("tpus", "string", 1), ("status", "string", 0),
                     ("age", "date", 0), ("head pod IP", "string", 1), ("head service IP", "string", 1)],
                    _raycluster_row),
}


def _row_object(obj: dict, include_object: str) -> dict | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def table(rtype: ResourceType, objs: list[dict], resource_version: int | str,
          include_object: str = "Metadata") -> dict:
    columns, row = COLUMNS.get(rtype.plural, ([("Name", "string", 0), ("Age", "string", 0)],
                                              lambda obj: [obj["metadata"]["name"], _age(obj)]))
    definitions = [{"name": name, "type": kind, "format": "name" if name == "Name" else "",
                    "description": "", "priority": prio} for name, kind, prio in columns]
    rows = []
    for obj in objs:
        entry: dict[str, Any] = {"cells": row(obj)}
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            entry["object"] = embedded
        rows.append(entry)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": str(resource_version)},
            "columnDefinitions": definitions, "rows": rows}


def wants_table(accept: str) -> bool:
    return "as=Table" in accept.replace(" ", "")
