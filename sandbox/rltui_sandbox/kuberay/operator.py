"""The KubeRay operator: a RayCluster gets its head service, one head pod, its worker pods
(replicas clamped to min/max) and the status KubeRay writes (state, conditions, desired
resources), but only while a GKE cluster's RayOperator add-on is enabled. What differs by
KubeRay version (status.conditions and readyWorkerReplicas present or not, when `state` turns
"ready", the probes in the pods, a headless head service) is `self.kuberay` (versions.py)."""

from __future__ import annotations

from typing import Any

from rltui_sandbox import nodes as gke
from rltui_sandbox.kube.store import now
from rltui_sandbox.kuberay.pods import (
    TERMINAL,
    _cond,
    _condition,
    _keep_transitions,
    _meta,
    _owned_by,
    _phase,
    _running_ready,
)
from rltui_sandbox.kuberay.templates import CLUSTER_LABEL, GROUP_LABEL, _head_service, _is_head, _pod_manifest
from rltui_sandbox.kuberay.versions import KubeRay

OPERATOR = "raycluster-controller"


def _resources(spec: dict) -> dict[str, float]:
    return gke.pod_requests({"spec": spec})


def _replicas(group: dict) -> int:
    """KubeRay's desired worker count: replicas clamped to [minReplicas, maxReplicas]."""
    lo = int(group.get("minReplicas") or 0)
    hi = int(group.get("maxReplicas") or 2 ** 31 - 1)
    wanted = group.get("replicas")
    return max(lo, min(hi, lo if wanted is None else int(wanted)))


class Operator:
    """KubeRayController's operator role: RayCluster -> service, pods, status."""

    kuberay: KubeRay = KubeRay()

    async def _reconcile(self, rc: dict) -> None:
        meta = _meta(rc)
        if meta.get("deletionTimestamp"):
            return
        missing = self.nodes.operator_missing()
        if missing:
            await self._event(rc, "Warning", "OperatorNotInstalled", missing, "rltui-sandbox")
            return
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        svc_name = f"{name}-head-svc"
        if not self.store.list_sync("services", ns, field_selector=f"metadata.name={svc_name}"):
            await self.store.create("services", _head_service(rc, self.kuberay), ns)
            await self._event(rc, "Normal", "CreatedService", f"Created service {ns}/{svc_name}", OPERATOR)
        pods = [p for p in self.store.list_sync("pods", ns, label_selector=f"{CLUSTER_LABEL}={name}")
                if _owned_by(p, uid)]
        for pod in pods:
            if _phase(pod) in TERMINAL and not _meta(pod).get("deletionTimestamp"):
                await self.store.delete("pods", _meta(pod)["name"], ns)
        live = [p for p in pods if not _meta(p).get("deletionTimestamp") and _phase(p) not in TERMINAL]
        heads = [p for p in live if _is_head(p)]
        spec = rc.get("spec") or {}
        if not heads:
            created = await self.store.create("pods", _pod_manifest(rc, spec.get("headGroupSpec") or {}, True, self.kuberay), ns)
            await self._event(rc, "Normal", "CreatedHeadPod", f"Created head Pod {ns}/{_meta(created)['name']}",
                              OPERATOR)
        for extra in heads[1:]:
            await self.store.delete("pods", _meta(extra)["name"], ns)
        for group in spec.get("workerGroupSpecs") or []:
            group_name = group.get("groupName", "workergroup")
            workers = sorted((p for p in live if not _is_head(p)
                              and (_meta(p).get("labels") or {}).get(GROUP_LABEL) == group_name),
                             key=lambda p: _meta(p)["creationTimestamp"])
            for _ in range(_replicas(group) - len(workers)):
                created = await self.store.create("pods", _pod_manifest(rc, group, False, self.kuberay), ns)
                await self._event(rc, "Normal", "CreatedWorkerPod",
                                  f"Created worker Pod {ns}/{_meta(created)['name']}", OPERATOR)
            for extra in workers[_replicas(group):]:
                await self.store.delete("pods", _meta(extra)["name"], ns)
                await self._event(rc, "Normal", "DeletedWorkerPod",
                                  f"Deleted worker Pod {ns}/{_meta(extra)['name']}", OPERATOR)
        await self._write_rc_status(rc)

    async def _write_rc_status(self, rc: dict) -> None:
        meta, spec = _meta(rc), rc.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        old = rc.get("status") or {}
        pods = [p for p in self.store.list_sync("pods", ns, label_selector=f"{CLUSTER_LABEL}={name}")
                if _owned_by(p, meta["uid"]) and not _meta(p).get("deletionTimestamp")]
        head = next((p for p in pods if _is_head(p)), None)
        workers = [p for p in pods if not _is_head(p)]
        groups = spec.get("workerGroupSpecs") or []
        desired = sum(_replicas(g) for g in groups)
        total = _resources(((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {})
        for g in groups:
            for key, amount in _resources((g.get("template") or {}).get("spec") or {}).items():
                total[key] = total.get(key, 0.0) + amount * _replicas(g)
        svcs = self.store.list_sync("services", ns, field_selector=f"metadata.name={name}-head-svc")
        head_ready = head is not None and _running_ready(head)
        ready_workers = sum(1 for p in workers if _running_ready(p))
        kr = self.kuberay
        status: dict[str, Any] = {
            "desiredWorkerReplicas": desired,
            "minWorkerReplicas": sum(int(g.get("minReplicas") or 0) for g in groups),
            "maxWorkerReplicas": sum(int(g.get("maxReplicas") or 2 ** 31 - 1) for g in groups),
            **({"readyWorkerReplicas": ready_workers} if kr.ready_worker_replicas else {}),
            "availableWorkerReplicas": sum(1 for p in workers if _phase(p) == "Running"),
            "desiredCPU": gke.format_quantity(total.get("cpu", 0.0)),
            "desiredMemory": gke.format_quantity(total.get("memory", 0.0), binary=True),
            "desiredGPU": gke.format_quantity(sum(v for k, v in total.items() if k.endswith("gpu"))),
            "desiredTPU": gke.format_quantity(total.get("google.com/tpu", 0.0)),
            "head": {"serviceName": f"{name}-head-svc"},
            "observedGeneration": meta.get("generation", 1),
        }
        if head is not None:
            status["head"]["podName"] = _meta(head)["name"]
            if (head.get("status") or {}).get("podIP"):
                status["head"]["podIP"] = head["status"]["podIP"]
        if svcs:
            ip = svcs[0]["spec"].get("clusterIP", "")
            # A headless head service: KubeRay reports the head pod's IP (getHeadServiceIPAndName).
            status["head"]["serviceIP"] = status["head"].get("podIP", "") if ip == "None" else ip
            status["endpoints"] = {p["name"]: str(p["port"]) for p in svcs[0]["spec"].get("ports") or []}
        # CheckAllPodsRunning: at least one pod, every one Running and Ready; from 1.3.0 only with
        # desired + 1 pods (versions.py).
        all_running = bool(pods) and all(_running_ready(p) for p in pods)
        all_ready = all_running and (len(pods) == desired + 1 if kr.state_needs_pod_count else True)
        if old.get("state") == "ready" or all_ready:
            status["state"] = "ready"  # KubeRay sets it once and never clears it
            if kr.ready_worker_replicas:  # stateTransitionTimes: 1.2.0 on, like readyWorkerReplicas
                status["stateTransitionTimes"] = old.get("stateTransitionTimes") or {"ready": now()}
        if not kr.status_conditions:  # the RayClusterStatusConditions gate absent or off
            await self._replace_rc_status(rc, old, status)
            return
        if head_ready:
            head_cond = _cond("HeadPodReady", "True", "HeadPodRunningAndReady")
        elif head is None:
            head_cond = _cond("HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found")
        else:
            ready = _condition(head, "Ready")
            head_cond = _cond("HeadPodReady", "False", ready.get("reason") or "HeadPodNotReady",
                              ready.get("message", ""))
        provisioned = all_running or _condition(rc, "RayClusterProvisioned").get("status") == "True"
        prov_cond = _cond("RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
                          "All Ray Pods are ready for the first time") if provisioned else \
            _cond("RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                  "RayCluster Pods are being provisioned for first time")
        status["conditions"] = [head_cond, prov_cond]
        if kr.suspend_conditions:  # not suspended: both False (v1.3.0 raycluster_controller.go:1378)
            status["conditions"] += [_cond("RayClusterSuspended", "False", "RayClusterSuspended"),
                                     _cond("RayClusterSuspending", "False", "RayClusterSuspending")]
        for cond in status["conditions"]:
            cond.pop("lastProbeTime", None)
        _keep_transitions(old.get("conditions"), status["conditions"])
        await self._replace_rc_status(rc, old, status)

    async def _replace_rc_status(self, rc: dict, old: dict, status: dict) -> None:
        if {k: v for k, v in old.items() if k != "lastUpdateTime"} == status:
            return
        status["lastUpdateTime"] = now()
        meta = _meta(rc)
        await self.store.replace("rayclusters", {"metadata": {"name": meta["name"]}, "status": status},
                                 meta["namespace"], subresource="status")
