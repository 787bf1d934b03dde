"""The scheduler: a pod is bound to a Ready node that fits it (node selector, required node affinity, taints, resources,
bound claims; the fit check is sandbox/rltui_sandbox/nodes/fit.py), spreading pods as LeastAllocated
does; until a node fits, the pod stays Pending with Unschedulable and a FailedScheduling Event
in the default scheduler's words."""

from __future__ import annotations

from rltui_sandbox import nodes as gke
from rltui_sandbox.kube.store import now
from rltui_sandbox.kuberay.pods import TERMINAL, _cond, _meta, _phase, _pod_status, _qos


class Scheduler:
    """KubeRayController's scheduler role (its pods are read and written by the kubelet role)."""

    def _placed(self, node: str, skip_uid: str) -> list[dict]:
        return [p for p in self.store.list_sync("pods", field_selector=f"spec.nodeName={node}")
                if _phase(p) not in TERMINAL and _meta(p)["uid"] != skip_uid]

    def _claims_problem(self, pod: dict) -> str | None:
        """The scheduler's volume binding check: every PVC exists and is bound."""
        ns = _meta(pod)["namespace"]
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            found = self.store.list_sync("persistentvolumeclaims", ns, field_selector=f"metadata.name={claim}")
            if not found:
                return f'persistentvolumeclaim "{claim}" not found'
            if (found[0].get("status") or {}).get("phase") != "Bound":
                return "pod has unbound immediate PersistentVolumeClaims"
        return None

    async def _schedule(self, uid: str, ns: str, name: str) -> str:
        """Bind the pod to a Ready node that fits it; until one does, Unschedulable + FailedScheduling."""
        while True:
            token = self._changed
            pod = await self._pod(uid, ns, name)
            if pod["spec"].get("nodeName"):
                return pod["spec"]["nodeName"]
            async with self._bind_lock:
                nodes = self.store.list_sync("nodes")
                total = len(nodes)
                problem = self._claims_problem(pod)
                reasons: dict[str, int] = {}
                fits = []
                for node in nodes if problem is None else []:
                    why = ["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"] \
                        if not gke.is_ready(node) else gke.misfit(pod, node, self._placed(_meta(node)["name"], uid))
                    for reason in why:
                        reasons[reason] = reasons.get(reason, 0) + 1
                    if not why:
                        fits.append(node)
                if fits:
                    fits.sort(key=lambda n: _meta(n)["name"])  # ties go to the first name
                    best = max(fits, key=lambda n: gke.free_share(n, self._placed(_meta(n)["name"], uid)))
                    return await self._bind(pod, best)
            message = f"0/{total} nodes are available: {problem}." if problem else \
                gke.unschedulable_message(reasons, total)
            await self._set_status(uid, ns, name, {
                "phase": "Pending", "qosClass": _qos(pod),
                "conditions": [_cond("PodScheduled", "False", "Unschedulable", message)]})
            await self._event(pod, "Warning", "FailedScheduling", message, "default-scheduler")
            await self._until_change(token)

    async def _bind(self, pod: dict, node: dict) -> str:
        meta, node_name = _meta(pod), _meta(node)["name"]
        bound = await self.store.patch("pods", meta["name"], {"spec": {"nodeName": node_name}}, meta["namespace"])
        await self._set_status(meta["uid"], meta["namespace"], meta["name"],
                               _pod_status(bound, gke.internal_ip(node), now()))
        await self._event(pod, "Normal", "Scheduled",
                          f"Successfully assigned {meta['namespace']}/{meta['name']} to {node_name}",
                          "default-scheduler")
        return node_name
