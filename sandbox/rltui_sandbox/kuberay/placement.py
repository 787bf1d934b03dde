"""What the head pod's Ray head knows of its cluster, and what losing it does to the workers.

1. The cluster file. A real Ray head learns its worker nodes from their raylets; the sandbox's
   workers are Kubernetes objects only, so the head pod's container keeps a JSON file of the
   RayCluster's pods (uid, restartCount, Kubernetes node, IPs, GPUs, ready, terminating) current,
   rewritten on every change the API sees, and names it in the head's env (ENV_VAR); the GRPO
   demo's driver inherits it and places its actors there (sandbox/rltui_sandbox/grpo_demo/cluster.py).

2. A lost GCS. Without GCS fault tolerance "the Ray cluster, the GCS process, and the Ray head Pod
   are fate-sharing": a new head pod starts with an empty cluster state, and the worker pods'
   raylets cannot stay (docs.ray.io, "GCS fault tolerance in KubeRay", Fate-sharing without GCS
   fault tolerance). A raylet that cannot reach the GCS for gcs_rpc_server_reconnect_timeout_s
   (60 s by default) logs "Failed to connect to GCS within 60 seconds. GCS may have been killed.
   ..." and exits with EXIT_FAILURE (src/ray/rpc/rpc_client.h); `ray start --block`, the worker
   container's command, then reports "Some Ray subprocesses exited unexpectedly" and exits 1
   (ray/scripts/scripts.py), so the kubelet restarts the container (restartCount + 1, lastState
   terminated, exit code 1). Here: each Running worker pod of the cluster restarts its container
   that timeout (in profile time) after its head's Ray process stopped, and stays not Ready until
   a head pod of the cluster is Ready again (its new raylet registers with the new GCS).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path

from rltui_sandbox import nodes as gke
from rltui_sandbox.grpo_demo.cluster import ENV_VAR, FORMAT
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import now
from rltui_sandbox.kuberay.pods import TERMINAL, _Gone, _meta, _owned_by, _phase, _running_ready
from rltui_sandbox.kuberay.templates import CLUSTER_LABEL, GROUP_LABEL, NODE_TYPE_LABEL, _is_head

log = logging.getLogger("rltui_sandbox.kuberay")

__all__ = ["ENV_VAR", "GCS_RECONNECT_TIMEOUT_S", "ClusterFiles", "cluster_doc"]

GCS_RECONNECT_TIMEOUT_S = 60.0  # RAY_gcs_rpc_server_reconnect_timeout_s's default
FILE_RECHECK_S = 1.0


def _owner_uid(pod: dict) -> str:
    return next((r.get("uid", "") for r in _meta(pod).get("ownerReferences") or [] if r.get("kind") == "RayCluster"),
                "")


def _gpus(pod: dict) -> int:
    total = 0.0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        limits = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        total += sum(gke.quantity(v) for k, v in limits.items() if k.endswith("/gpu"))
    return int(total)


def cluster_doc(pods: list[dict], cluster: str, lost: set[str] | frozenset[str] = frozenset()) -> dict:
    """The file's content: every pod of the RayCluster that runs (or is being stopped), but not
    those in `lost` (a node gone without a shutdown: Ray lost their raylets before Kubernetes
    noticed; sandbox/rltui_sandbox/kuberay/preemption.py)."""
    entries = []
    for pod in sorted(pods, key=lambda p: _meta(p)["name"]):
        status = pod.get("status") or {}
        if _phase(pod) != "Running" or _meta(pod)["uid"] in lost:
            continue
        first = (status.get("containerStatuses") or [{}])[0]
        labels = _meta(pod).get("labels") or {}
        entries.append({"pod": _meta(pod)["name"], "namespace": _meta(pod).get("namespace", ""),
                        "uid": _meta(pod)["uid"],
                        "restarts": int(first.get("restartCount", 0)),
                        "nodeType": labels.get(NODE_TYPE_LABEL, ""), "group": labels.get(GROUP_LABEL, ""),
                        "node": (pod.get("spec") or {}).get("nodeName", ""), "hostIP": status.get("hostIP", ""),
                        "podIP": status.get("podIP", ""), "gpus": _gpus(pod), "ready": _running_ready(pod),
                        "terminating": bool(_meta(pod).get("deletionTimestamp"))})
    return {"format": FORMAT, "cluster": cluster, "pods": entries}


def write_atomic(path: Path, doc: dict) -> None:
    """Replace the file in one rename, so a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    os.replace(tmp, path)


class ClusterFiles:
    """HeadPods' share: the cluster file of each head pod, and the workers' fate when a head's
    Ray process stops. Uses the controller's store, clock, `_changed`, `_heads`, `_head_clusters`."""

    def _cluster_file(self, uid: str) -> Path:
        return (self.state_dir / "rayclusters" / f"{uid}.json").absolute()

    def _cluster_pods(self, ns: str, cluster: str, owner: str) -> list[dict]:
        return [p for p in self.store.list_sync("pods", ns, label_selector=f"{CLUSTER_LABEL}={cluster}")
                if _owned_by(p, owner)]

    def _remember_cluster(self, uid: str, pod: dict) -> None:
        self._head_clusters[uid] = (_meta(pod)["namespace"], (_meta(pod).get("labels") or {}).get(CLUSTER_LABEL, ""),
                                    _owner_uid(pod))

    async def _keep_cluster_file(self, uid: str, head: object) -> None:
        """Rewrite the head's cluster file on every change while `head` is this pod's Ray head."""
        ns, cluster, owner = self._head_clusters[uid]
        path, last = self._cluster_file(uid), None
        try:
            while self._heads.get(uid) is head:
                token = self._changed
                doc = cluster_doc(self._cluster_pods(ns, cluster, owner), cluster, self._ray_lost)
                if doc != last:
                    await asyncio.to_thread(write_atomic, path, doc)
                    last = doc
                await self._until_change(token, FILE_RECHECK_S)
        finally:
            if uid not in self._heads:  # else a restarted head of the same pod writes it again
                with contextlib.suppress(OSError):
                    path.unlink()

    def _gcs_lost(self, uid: str) -> None:
        """The head pod `uid`'s Ray process stopped: its cluster's workers lose the GCS."""
        where = self._head_clusters.get(uid)
        if where is None or self._unsubscribe is None:  # unknown, or the controller is stopping
            return
        ns, cluster, owner = where
        for pod in self._cluster_pods(ns, cluster, owner):
            if not _is_head(pod) and _phase(pod) == "Running" and not _meta(pod).get("deletionTimestamp"):
                self._spawn(self._worker_loses_gcs(_meta(pod)["uid"], ns, _meta(pod)["name"], cluster, owner))

    async def _worker_loses_gcs(self, uid: str, ns: str, name: str, cluster: str, owner: str) -> None:
        try:
            await asyncio.sleep(GCS_RECONNECT_TIMEOUT_S / self.clock.speed)  # 60 s = one profile minute
            pod = await self._pod(uid, ns, name)
            first = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]
            if _phase(pod) in TERMINAL or not first.get("state", {}).get("running"):
                return
            restarts = int(first.get("restartCount", 0)) + 1
            started = first["state"]["running"].get("startedAt") or now()
            last = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": started, "finishedAt": now()}}
            head_svc = f"{cluster}-head-svc"
            await self.store.append_log(ns, name, "rltui sandbox: the raylet lost the GCS at "
                                        f"{head_svc} (the head's Ray process stopped) and exited after "
                                        f"{GCS_RECONNECT_TIMEOUT_S:.0f} s; ray start exited 1 and the container "
                                        "restarts\n")
            await self._mark_running(uid, ns, name, ready=False, restarts=restarts, last_state=last)
            if any(c.get("readinessProbe") for c in pod["spec"].get("containers") or []):
                return  # the kubelet's prober decides when it is Ready again (probes.py)
            while True:  # Ready once a head of the cluster is (its raylet joins the new GCS)
                token = self._changed
                if any(_is_head(p) and _running_ready(p) and not _meta(p).get("deletionTimestamp")
                       for p in self._cluster_pods(ns, cluster, owner)):
                    break
                await self._pod(uid, ns, name)
                await self._until_change(token)
            await self._mark_running(uid, ns, name, ready=True, restarts=restarts)
        except (_Gone, KubeError):
            pass
        except Exception:
            log.exception("kuberay: worker %s/%s losing the GCS failed", ns, name)
