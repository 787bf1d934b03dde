"""The objects KubeRay builds from a RayCluster: its head and worker pods (labels, `ray start`
command, injected env, owner reference, and the liveness and readiness probes the KubeRay
version injects: versions.py) and the head service, with KubeRay's default ports (headless from
KubeRay 1.2.0: versions.py)."""

from __future__ import annotations

import copy
import math

from rltui_sandbox import nodes as gke
from rltui_sandbox.kuberay.pods import FINALIZER, _meta
from rltui_sandbox.kuberay.versions import KubeRay

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
HEAD_GROUP = "headgroup"
# The head service's ports when the head container does not name them (KubeRay's defaults).
HEAD_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001}


def _is_head(pod: dict) -> bool:
    return (_meta(pod).get("labels") or {}).get(NODE_TYPE_LABEL) == "head" and \
        (_meta(pod).get("labels") or {}).get("ray.io/is-ray-node") == "yes"


def _ray_start_line(rc: dict, params: dict, container: dict, head: bool) -> str:
    """The `ray start` command KubeRay writes into a Ray container, from rayStartParams + resources."""
    flags = {k: str(v) for k, v in (params or {}).items()}
    res = container.get("resources") or {}
    wanted = {**(res.get("requests") or {}), **(res.get("limits") or {})}
    if "cpu" in wanted:
        flags.setdefault("num-cpus", str(math.ceil(gke.quantity(wanted["cpu"]))))
    if "memory" in wanted:
        flags.setdefault("memory", str(int(gke.quantity(wanted["memory"]))))
    if gke.GPU in wanted:
        flags.setdefault("num-gpus", str(int(gke.quantity(wanted[gke.GPU]))))
    flags.setdefault("metrics-export-port", "8080")
    flags.setdefault("dashboard-agent-listen-port", "52365")
    rendered = "  ".join(f"--{k}={v}" for k, v in sorted(flags.items()))
    if head:
        return f"ulimit -n 65536; ray start --head  --block  {rendered}"
    meta = _meta(rc)
    return (f"ulimit -n 65536; ray start  --address={meta['name']}-head-svc.{meta['namespace']}"
            f".svc.cluster.local:6379  --block  {rendered}")


def _pod_manifest(rc: dict, group: dict, head: bool, kuberay: KubeRay | None = None) -> dict:
    """A Ray pod as KubeRay (`kuberay`, default: versions.DEFAULT) builds it from a group's template."""
    meta = _meta(rc)
    name, ns = meta["name"], meta["namespace"]
    group_name = HEAD_GROUP if head else group.get("groupName", "workergroup")
    node_type = "head" if head else "worker"
    template = copy.deepcopy(group.get("template") or {})
    tmeta, spec = template.get("metadata") or {}, template.get("spec") or {}
    labels = {**(tmeta.get("labels") or {}), CLUSTER_LABEL: name, NODE_TYPE_LABEL: node_type,
              GROUP_LABEL: group_name, "ray.io/identifier": f"{name}-{node_type}",
              "ray.io/is-ray-node": "yes", "app.kubernetes.io/name": "kuberay",
              "app.kubernetes.io/created-by": "kuberay-operator"}
    containers = spec.get("containers") or []
    if containers:
        ray = containers[0]
        line = _ray_start_line(rc, group.get("rayStartParams") or {}, ray, head)
        if not ray.get("command") and not ray.get("args"):
            ray["command"], ray["args"] = ["/bin/bash", "-c", "--"], [line]
        env = [{"name": "RAY_CLUSTER_NAME", "value": name},
               {"name": "RAY_CLOUD_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
               {"name": "RAY_NODE_TYPE_NAME", "value": group_name},
               {"name": "KUBERAY_GEN_RAY_START_CMD", "value": line.split("; ", 1)[-1]},
               {"name": "RAY_USAGE_STATS_KUBERAY_IN_USE", "value": "1"}]
        if not head:
            fq = f"{name}-head-svc.{ns}.svc.cluster.local"
            env += [{"name": "FQ_RAY_IP", "value": fq}, {"name": "RAY_IP", "value": fq}]
        present = {e.get("name") for e in ray.get("env") or []}
        ray["env"] = list(ray.get("env") or []) + [e for e in env if e["name"] not in present]
        # BuildPod injects the probes last, into the Ray container (index 0), from the group's
        # rayStartParams and spec.rayVersion (pod.go, BuildPod -> initLivenessAndReadinessProbe).
        (kuberay or KubeRay()).inject_probes(ray, head, group.get("rayStartParams") or {},
                                             str((rc.get("spec") or {}).get("rayVersion") or ""))
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": f"{name}-head-" if head else f"{name}-{group_name}-worker-",
            "namespace": ns, "labels": labels,
            "annotations": {**(tmeta.get("annotations") or {}), "ray.io/ft-enabled": "false"},
            "ownerReferences": [{"apiVersion": rc["apiVersion"], "kind": "RayCluster", "name": name,
                                 "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
            "finalizers": [FINALIZER],
        },
        "spec": spec,
    }


def _head_service(rc: dict, kuberay: KubeRay | None = None) -> dict:
    meta = _meta(rc)
    name = meta["name"]
    head = ((rc["spec"].get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    ports = {p["name"]: int(p["containerPort"]) for c in head.get("containers") or []
             for p in c.get("ports") or [] if p.get("name") and p.get("containerPort")}
    ports = {**HEAD_PORTS, **ports}
    labels = {CLUSTER_LABEL: name, NODE_TYPE_LABEL: "head", "ray.io/identifier": f"{name}-head",
              "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"{name}-head-svc", "namespace": meta["namespace"], "labels": labels,
                     "ownerReferences": [{"apiVersion": rc["apiVersion"], "kind": "RayCluster", "name": name,
                                          "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"type": "ClusterIP", "selector": {CLUSTER_LABEL: name, NODE_TYPE_LABEL: "head"},
                 "ports": [{"name": n, "port": p, "targetPort": p, "protocol": "TCP", "appProtocol": "tcp"}
                           for n, p in sorted(ports.items())],
                 # Headless from KubeRay 1.2.0, and then published before the head is Ready
                 # (v1.2.0 service.go:127-130).
                 **({"clusterIP": "None", "publishNotReadyAddresses": True}
                    if (kuberay or KubeRay()).headless_head_service else {})},
    }
