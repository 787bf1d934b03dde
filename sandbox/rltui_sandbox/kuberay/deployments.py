"""The Deployment and ReplicaSet controllers (kube-controller-manager's), on the controller's loop.

After kubernetes/kubernetes pkg/controller/deployment (sync.go, recreate.go, rolling.go,
util/deployment_util.go) and pkg/controller/replicaset/replica_set.go:
- a Deployment owns ReplicaSet `<deployment>-<pod-template-hash>` (the hash label added to its
  selector, template and labels; annotations deployment.kubernetes.io/revision,
  desired-replicas, max-replicas; ownerReferences controller: true, blockOwnerDeletion: true),
  which owns pods `<rs>-<5 chars>` (generateName) with the template's labels and
  ownerReferences; the revision annotation goes on the Deployment too;
- Recreate: old ReplicaSets are scaled to 0 and the new one is made only once none of their
  pods is left (recreate.go); RollingUpdate, simplified: the new ReplicaSet gets every replica
  at once and the old ones go to 0 once it is fully available (no maxSurge/maxUnavailable steps);
- the ReplicaSet keeps `replicas` pods that are neither terminating nor finished: a deleted
  pod, or one gone with its node, is replaced (SuccessfulCreate `Created pod: <name>`,
  SuccessfulDelete `Deleted pod: <name>`, FailedCreate `Error creating: <API error>` with the
  ReplicaFailure condition);
- status as the controllers write it: ReplicaSet replicas, fullyLabeledReplicas, readyReplicas,
  availableReplicas (minReadySeconds 0: ready is available), observedGeneration; Deployment
  observedGeneration, replicas, updatedReplicas, readyReplicas, availableReplicas,
  unavailableReplicas and conditions Available (MinimumReplicasAvailable "Deployment has minimum
  availability." / MinimumReplicasUnavailable "Deployment does not have minimum availability.")
  and Progressing (NewReplicaSetCreated `Created new replica set "<rs>"`, ReplicaSetUpdated
  `ReplicaSet "<rs>" is progressing.`, NewReplicaSetAvailable `ReplicaSet "<rs>" has
  successfully progressed.`), a condition keeping its times while status and reason stay
  (SetDeploymentCondition); events ScalingReplicaSet `Scaled up replica set <rs> from 0 to 1`;
- deleting a Deployment takes its ReplicaSets and pods (the garbage collector: the KubeStore
  follows ownerReferences, Background propagation by default).
Not done: progressDeadlineSeconds (ProgressDeadlineExceeded), revisionHistoryLimit clean-up,
paused Deployments, rollbacks, minReadySeconds, adoption of orphaned ReplicaSets or pods.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import now
from rltui_sandbox.kube.workloads import pod_template_hash
from rltui_sandbox.kuberay.pods import FINALIZER, TERMINAL, _meta, _phase, _running_ready

log = logging.getLogger("rltui_sandbox.kuberay")

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX = "deployment.kubernetes.io/max-replicas"


def _controller_uid(obj: dict) -> str | None:
    return next((r.get("uid") for r in _meta(obj).get("ownerReferences") or [] if r.get("controller")), None)


def _owner_ref(obj: dict) -> dict:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": _meta(obj)["name"],
            "uid": _meta(obj)["uid"], "controller": True, "blockOwnerDeletion": True}


def _active(pod: dict) -> bool:
    return not _meta(pod).get("deletionTimestamp") and _phase(pod) not in TERMINAL


def _condition(kind: str, status: str, reason: str, message: str) -> dict:
    stamp = now()
    return {"type": kind, "status": status, "lastUpdateTime": stamp, "lastTransitionTime": stamp,
            "reason": reason, "message": message}


def _set_conditions(old: list[dict], new: list[dict]) -> list[dict]:
    """SetDeploymentCondition: unchanged status and reason keep the old condition as it was;
    a changed reason with the same status keeps lastTransitionTime."""
    before = {c.get("type"): c for c in old}
    out = []
    for cond in new:
        prev = before.get(cond["type"])
        if prev and prev.get("status") == cond["status"] and prev.get("reason") == cond["reason"]:
            out.append(prev)
        else:
            if prev and prev.get("status") == cond["status"]:
                cond["lastTransitionTime"] = prev.get("lastTransitionTime")
            out.append(cond)
    return out


class Deployments:
    """KubeRayController's Deployment and ReplicaSet controllers."""

    async def _workload_loop(self) -> None:
        while True:
            token = self._changed
            for plural, sync in (("deployments", self._sync_deployment), ("replicasets", self._sync_replicaset)):
                for obj in self.store.list_sync(plural):
                    try:
                        await sync(copy.deepcopy(obj))
                    except KubeError as exc:
                        log.info("kuberay: sync of %s %s: %s", plural, _meta(obj)["name"], exc)
                    except Exception:
                        log.exception("kuberay: sync of %s %s failed", plural, _meta(obj)["name"])
            await self._until_change(token)
            await asyncio.sleep(0.01)

    # ---- Deployment -----------------------------------------------------------------------------

    def _owned(self, plural: str, ns: str, uid: str) -> list[dict]:
        return [o for o in self.store.list_sync(plural, ns) if _controller_uid(o) == uid]

    async def _scale(self, deploy: dict, rs: dict, replicas: int) -> None:
        before = rs["spec"].get("replicas", 0)
        if before == replicas:
            return
        annotations = {DESIRED: str(deploy["spec"]["replicas"]), MAX: str(deploy["spec"]["replicas"])}
        await self.store.patch("replicasets", _meta(rs)["name"], {"metadata": {"annotations": annotations},
                                                                 "spec": {"replicas": replicas}}, _meta(rs)["namespace"])
        way = "up" if replicas > before else "down"
        await self._event(deploy, "Normal", "ScalingReplicaSet", f"Scaled {way} replica set {_meta(rs)['name']} "
                          f"from {before} to {replicas}", "deployment-controller")

    async def _new_replicaset(self, deploy: dict, pod_hash: str, revision: int) -> dict:
        meta, spec = _meta(deploy), deploy["spec"]
        template = copy.deepcopy(spec["template"])
        labels = {**((template.get("metadata") or {}).get("labels") or {}), HASH_LABEL: pod_hash}
        template.setdefault("metadata", {})["labels"] = labels
        selector = copy.deepcopy(spec["selector"])
        selector.setdefault("matchLabels", {})[HASH_LABEL] = pod_hash
        body = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": f"{meta['name']}-{pod_hash}", "namespace": meta["namespace"], "labels": labels,
                             "annotations": {DESIRED: str(spec["replicas"]), MAX: str(spec["replicas"]),
                                             REVISION: str(revision)},
                             "ownerReferences": [_owner_ref(deploy)]},
                "spec": {"replicas": 0, "selector": selector, "template": template}}
        rs = await self.store.create("replicasets", body, meta["namespace"])
        await self.store.patch("deployments", meta["name"], {"metadata": {"annotations": {REVISION: str(revision)}}},
                               meta["namespace"])
        return rs

    async def _sync_deployment(self, deploy: dict) -> None:
        meta, spec = _meta(deploy), deploy["spec"]
        if meta.get("deletionTimestamp"):
            return
        ns, replicas = meta["namespace"], int(spec.get("replicas", 1))
        pod_hash = pod_template_hash(spec["template"], (deploy.get("status") or {}).get("collisionCount", 0))
        owned = self._owned("replicasets", ns, meta["uid"])
        new = next((rs for rs in owned if (_meta(rs).get("labels") or {}).get(HASH_LABEL) == pod_hash), None)
        old = [rs for rs in owned if rs is not new]
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        created = False
        if new is None:
            if recreate:
                for rs in old:
                    await self._scale(deploy, rs, 0)
                if any(self._owned("pods", ns, _meta(rs)["uid"]) for rs in old):
                    return await self._deployment_status(deploy, None, created=False)  # old pods still going
            revisions = [int((_meta(rs).get("annotations") or {}).get(REVISION, "0") or 0) for rs in owned]
            new = await self._new_replicaset(deploy, pod_hash, max(revisions, default=0) + 1)
            created = True
        await self._scale(deploy, new, replicas)
        new = await self.store.get("replicasets", _meta(new)["name"], ns)
        if not recreate and (new.get("status") or {}).get("availableReplicas", 0) >= replicas:
            for rs in old:
                await self._scale(deploy, rs, 0)
        await self._deployment_status(deploy, new, created=created)

    async def _deployment_status(self, deploy: dict, new: dict | None, *, created: bool) -> None:
        meta, spec = _meta(deploy), deploy["spec"]
        replicas = int(spec.get("replicas", 1))
        owned = self._owned("replicasets", meta["namespace"], meta["uid"])
        total = sum((rs.get("status") or {}).get("replicas", 0) for rs in owned)
        ready = sum((rs.get("status") or {}).get("readyReplicas", 0) for rs in owned)
        available = sum((rs.get("status") or {}).get("availableReplicas", 0) for rs in owned)
        updated = (new.get("status") or {}).get("replicas", 0) if new else 0
        status: dict[str, Any] = {"observedGeneration": meta.get("generation", 1), "replicas": total,
                                  "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": available}
        if replicas - available > 0:
            status["unavailableReplicas"] = replicas - available
        status = {k: v for k, v in status.items() if v or k == "observedGeneration"}  # omitempty
        max_unavailable = 0 if (spec.get("strategy") or {}).get("type") == "Recreate" else \
            _percent(((spec.get("strategy") or {}).get("rollingUpdate") or {}).get("maxUnavailable", "25%"), replicas)
        conditions = [
            _condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
            if available >= replicas - max_unavailable else
            _condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")]
        if new is not None:
            rs_name = _meta(new)["name"]
            if updated == replicas and available == replicas and total == replicas:
                conditions.append(_condition("Progressing", "True", "NewReplicaSetAvailable",
                                             f'ReplicaSet "{rs_name}" has successfully progressed.'))
            elif created:
                conditions.append(_condition("Progressing", "True", "NewReplicaSetCreated",
                                             f'Created new replica set "{rs_name}"'))
            else:
                conditions.append(_condition("Progressing", "True", "ReplicaSetUpdated",
                                             f'ReplicaSet "{rs_name}" is progressing.'))
        old_status = deploy.get("status") or {}
        status["conditions"] = _set_conditions(old_status.get("conditions") or [], conditions)
        if status != old_status:
            await self.store.replace("deployments", {"metadata": {"name": meta["name"]}, "status": status},
                                     meta["namespace"], subresource="status")

    # ---- ReplicaSet -----------------------------------------------------------------------------

    async def _sync_replicaset(self, rs: dict) -> None:
        meta, spec = _meta(rs), rs["spec"]
        if meta.get("deletionTimestamp"):
            return
        ns, want = meta["namespace"], int(spec.get("replicas", 1))
        active = [p for p in self._owned("pods", ns, meta["uid"]) if _active(p)]
        failure = None
        if len(active) < want:
            for _ in range(want - len(active)):
                try:
                    pod = await self.store.create("pods", self._pod_body(rs), ns)
                except KubeError as exc:
                    failure = exc.message
                    await self._event(rs, "Warning", "FailedCreate", f"Error creating: {exc.message}",
                                      "replicaset-controller")
                    break
                await self._event(rs, "Normal", "SuccessfulCreate", f"Created pod: {_meta(pod)['name']}",
                                  "replicaset-controller")
        elif len(active) > want:
            # Pods not yet scheduled, then not ready, then the newest go first (ActivePodsWithRanks, roughly).
            ranked = sorted(active, key=lambda p: (bool(p["spec"].get("nodeName")), _running_ready(p),
                                                   _meta(p).get("creationTimestamp", "")), reverse=False)
            for pod in ranked[: len(active) - want]:
                with_name = _meta(pod)["name"]
                try:
                    await self.store.delete("pods", with_name, ns)
                except KubeError:
                    continue
                await self._event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {with_name}", "replicaset-controller")
        await self._replicaset_status(rs, failure)

    def _pod_body(self, rs: dict) -> dict:
        template = copy.deepcopy(rs["spec"]["template"])
        tmeta = template.get("metadata") or {}
        metadata: dict[str, Any] = {"generateName": f"{_meta(rs)['name']}-", "labels": tmeta.get("labels") or {},
                                    "ownerReferences": [_owner_ref(rs)],
                                    # The sandbox's own: a deleted pod shows Terminating for its grace period.
                                    "finalizers": [FINALIZER]}
        if tmeta.get("annotations"):
            metadata["annotations"] = tmeta["annotations"]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template.get("spec") or {}}

    async def _replicaset_status(self, rs: dict, failure: str | None) -> None:
        meta = _meta(rs)
        current = await self.store.get("replicasets", meta["name"], meta["namespace"])
        active = [p for p in self._owned("pods", meta["namespace"], meta["uid"]) if _active(p)]
        ready = sum(1 for p in active if _running_ready(p))
        status: dict[str, Any] = {"replicas": len(active), "fullyLabeledReplicas": len(active), "readyReplicas": ready,
                                  "availableReplicas": ready, "observedGeneration": meta.get("generation", 1)}
        status = {k: v for k, v in status.items() if v or k in ("replicas", "observedGeneration")}  # omitempty
        old = current.get("status") or {}
        if failure is not None:
            prev = next((c for c in old.get("conditions") or [] if c.get("type") == "ReplicaFailure"), None)
            status["conditions"] = [prev if prev and prev.get("message") == f"Error creating: {failure}" else
                                    {"type": "ReplicaFailure", "status": "True", "lastTransitionTime": now(),
                                     "reason": "FailedCreate", "message": f"Error creating: {failure}"}]
        if status != old:
            await self.store.replace("replicasets", {"metadata": {"name": meta["name"]}, "status": status},
                                     meta["namespace"], subresource="status")


def _percent(value: Any, total: int) -> int:
    """An IntOrString like maxUnavailable against `total` (percentages round down, as for it)."""
    text = str(value)
    if text.endswith("%"):
        return int(total * int(text[:-1]) / 100)
    return int(text)
