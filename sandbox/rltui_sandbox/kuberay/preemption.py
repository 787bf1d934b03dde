"""Spot preemption of a GPU node, as GKE and the Kubernetes control plane play it.

Graceful (the default), GKE's documented Spot and preemptible VM termination ("Terminate and
gracefully shut down Spot VMs", cloud.google.com/kubernetes-engine/docs/concepts/spot-vms and
docs/how-to/preemptible-vms): Compute Engine sends a preemption notice, the kubelet's graceful node
shutdown (GKE 1.20+) gives the node's non-system pods up to 15 s (a longer
terminationGracePeriodSeconds has no effect), then system pods 15 s, and the VM stops 30 s after the
notice. The kubelet gives the pods it shut down the Failed phase and the reason Terminated
("Pod was terminated in response to imminent node shutdown.", kubernetes.io/docs/concepts/
cluster-administration/node-shutdown, with a DisruptionTarget condition TerminationByKubelet) and
accepts no new pod meanwhile; the node shows NotReady and the node lifecycle controller taints it
node.kubernetes.io/not-ready:NoSchedule (TaintNodesByCondition). KubeRay replaces the failed pods.

Hard (`rltui sandbox preempt --hard`): the VM is gone without a shutdown. Its processes die at once,
so Ray on the other nodes loses that node's raylet (the sandbox's cluster file marks the node's
Ray pods lost: the GRPO demo's driver then fails as NeMo-RL's does), but nobody tells Kubernetes:
the node and its pods stay Ready until the node controller has not heard from the kubelet for
--node-monitor-grace-period (kube-controller-manager, 50 s by default from Kubernetes 1.32), then
it sets the node's Ready condition Unknown ("Kubelet stopped posting node status."), marks the
node's pods not Ready (MarkPodsNotReady) and taints it node.kubernetes.io/unreachable.
Not modelled: what follows on GKE (taint-based eviction after the pods' 300 s toleration, or the
recreated VM's kubelet re-registering under the same name); the sandbox then deletes the node and
its pods as after a graceful shutdown. A hard preemption takes a worker's node only: the sandbox's
head pod is a real local Ray head that its kubelet would restart, which a dead VM's cannot.

In both, the node comes back empty after `spot_replace` (sandbox/rltui_sandbox/nodes/pools.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging

from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import now
from rltui_sandbox.kuberay.pods import TERMINAL, _meta, _phase
from rltui_sandbox.kuberay.templates import _is_head

log = logging.getLogger("rltui_sandbox.kuberay")

SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."


class Preemption:
    """KubeRayController's share: Spot preemption of one GPU node (see the module doc)."""

    def init_preemption(self) -> None:
        self._ray_lost: set[str] = set()  # pod uids whose Ray died with a hard-preempted node

    async def preempt(self, node: str | None = None, head: bool = False, hard: bool = False) -> dict:
        """Preempt a GPU node (default: one with a Ray worker but not the head; `head`: the head
        pod's). LookupError when there is no such node, ValueError for `hard` on the head's."""
        target = copy.deepcopy(self.nodes.preemption_target(node, head=head))
        name = _meta(target)["name"]
        pods = [copy.deepcopy(p) for p in self.store.list_sync("pods", field_selector=f"spec.nodeName={name}")
                if _phase(p) not in TERMINAL]
        if hard and any(_is_head(p) for p in pods):
            raise ValueError(f"--hard takes a Ray worker's node; {name} runs the Ray head pod, whose local Ray "
                             "head the sandbox's kubelet would restart (use a graceful preemption for it)")
        await self._event(target, "Warning", "Preempted", f"Compute Engine preempted Spot VM {name}; a "
                          "replacement is created", "gce-spot")
        names = [_meta(p)["name"] for p in pods]
        speed = self.clock.speed
        shutdown = self.clock.seconds("spot_shutdown")  # the notice until the VM stops
        if hard:
            self._ray_lost.update(_meta(p)["uid"] for p in pods if (_meta(p).get("labels") or {}).get(
                "ray.io/node-type"))
            self._kick()  # the cluster file: the node's raylets are gone
            grace = self.clock.seconds("node_monitor_grace")
            self._spawn(self._after_hard_loss(target, grace))
            return {"node": name, "pods": names, "mode": "hard", "not_ready_in_s": round(grace, 3),
                    "returns_in_s": round(grace + self.clock.seconds("spot_replace"), 3),
                    "message": f"preempted Spot node {name} without a shutdown: its Ray processes are gone, "
                               f"Kubernetes sees it NotReady in {grace:.1f} s"}
        await self._node_not_ready(target, "False", "KubeletNotReady", "node is shutting down",
                                   "node.kubernetes.io/not-ready")
        # Non-system pods get the first half (15 s of GKE's 30 s), at most their own grace period.
        await asyncio.gather(*(self._shut_down_pod(p, min(shutdown / 2, _grace(p) / speed)) for p in pods))
        self._spawn(self._vm_stops(target, shutdown / 2))
        return {"node": name, "pods": names, "mode": "graceful",
                "returns_in_s": round(shutdown / 2 + self.clock.seconds("spot_replace"), 3),
                "message": f"preempted Spot node {name}: its pods were shut down ({', '.join(names) or 'none'})"}

    async def _shut_down_pod(self, pod: dict, grace_s: float) -> None:
        """The kubelet's graceful node shutdown of one pod: its containers stopped within the
        grace, then phase Failed, reason Terminated."""
        meta = _meta(pod)
        uid = meta["uid"]
        node = (pod.get("spec") or {}).get("nodeName")
        for c in (pod.get("spec") or {}).get("containers") or []:
            await self._event(pod, "Normal", "Killing", f"Stopping container {c['name']}", "kubelet", node)
        self._cancel_pod_task(uid)  # also stops a head pod's local Ray head (SIGTERM)
        stopping = self._stop_process(uid, grace=grace_s)
        if stopping is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(stopping), grace_s + 5)
        with contextlib.suppress(KubeError):
            current = await self.store.get("pods", meta["name"], meta["namespace"])
            if _meta(current)["uid"] != uid:
                return
            status = copy.deepcopy(current.get("status") or {})
            stamp = now()
            status.update({"phase": "Failed", "reason": "Terminated", "message": SHUTDOWN_MESSAGE})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
            for cond in conditions:
                if cond.get("type") in ("Ready", "ContainersReady") and cond.get("status") != "False":
                    cond.update({"status": "False", "lastTransitionTime": stamp, "reason": "PodFailed"})
            conditions.append({"type": "DisruptionTarget", "status": "True", "lastTransitionTime": stamp,
                               "reason": "TerminationByKubelet", "message": SHUTDOWN_MESSAGE})
            status["conditions"] = conditions
            for cs in status.get("containerStatuses") or []:
                started = ((cs.get("state") or {}).get("running") or {}).get("startedAt") or stamp
                cs["state"] = {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": started,
                                              "finishedAt": stamp}}
                cs["ready"] = False
            await self.store.replace("pods", {"metadata": {"name": meta["name"]}, "status": status},
                                     meta["namespace"], subresource="status")
            self._settled.add(uid)  # final: the kubelet leaves it as it is

    async def _vm_stops(self, target: dict, after_s: float) -> None:
        await asyncio.sleep(after_s)
        await self.nodes.take_node(target)

    async def _after_hard_loss(self, target: dict, grace_s: float) -> None:
        """The node controller's view once the kubelet has been silent for the grace period."""
        await asyncio.sleep(grace_s)
        name = _meta(target)["name"]
        await self._node_not_ready(target, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.",
                                   "node.kubernetes.io/unreachable")
        for pod in self.store.list_sync("pods", field_selector=f"spec.nodeName={name}"):
            await self._mark_pod_not_ready(pod)
        lost = {_meta(p)["uid"] for p in self.store.list_sync("pods", field_selector=f"spec.nodeName={name}")}
        await self.nodes.take_node(target)  # its pods go with it
        self._ray_lost.difference_update(lost)

    async def _mark_pod_not_ready(self, pod: dict) -> None:
        """MarkPodsNotReady (node lifecycle controller): Ready False, the phase unchanged."""
        meta = _meta(pod)
        status = copy.deepcopy(pod.get("status") or {})
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Ready":
                cond.update({"status": "False", "lastTransitionTime": now()})
        with contextlib.suppress(KubeError):
            await self.store.replace("pods", {"metadata": {"name": meta["name"]}, "status": status},
                                     meta["namespace"], subresource="status")

    async def _node_not_ready(self, target: dict, status: str, reason: str, message: str, taint: str) -> None:
        name = _meta(target)["name"]
        with contextlib.suppress(KubeError):
            node = await self.store.get("nodes", name)
            conditions = copy.deepcopy((node.get("status") or {}).get("conditions") or [])
            for cond in conditions:
                if cond.get("type") == "Ready":
                    cond.update({"status": status, "reason": reason, "message": message,
                                 "lastTransitionTime": now(), "lastHeartbeatTime": now()})
            await self.store.patch_status("nodes", name, {"conditions": conditions})
            taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != taint]
            taints.append({"key": taint, "effect": "NoSchedule", "timeAdded": now()})
            await self.store.patch("nodes", name, {"spec": {"taints": taints}})
        await self._event(target, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady",
                          "node-controller")


def _grace(pod: dict) -> float:
    return float((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
