"""The sandbox's toy KubeRay operator, with the scheduler and kubelet it needs.

Three roles on the daemon's event loop, all acting on the in-process KubeStore:
- nodes: the World's GKE node pools become Node objects (rltui/sandbox/nodes.py); a Spot
  preemption takes a GPU node and its pods away, and the node comes back fresh after `spot_replace`;
- scheduler + kubelet: every pod is bound to a node that fits it, waits for its volumes (a Lustre
  PV mounts only when its instance is ACTIVE and the PV names the instance's IP), pulls its image
  (once per node), starts; a KubeRay head pod runs a REAL local Ray head (rayhead.py);
- operator: a RayCluster gets its head service, pods and the status KubeRay writes, but only while
  a GKE cluster's RayOperator add-on is enabled.

Pods carry a finalizer so that a deleted pod shows Terminating for `raycluster_delete` time, as a
real pod's graceful shutdown does; the controller removes it once the "containers" stopped.
Everything is derived from the store and the World, so a restarted daemon re-adopts what exists.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import hashlib
import itertools
import logging
import math
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Coroutine

from aiohttp import web
from google.cloud import lustre_v1

from rltui.sandbox import nodes as gke
from rltui.sandbox.kube.errors import KubeError
from rltui.sandbox.kube.store import KubeStore, now
from rltui.sandbox.nemo_rl_tree import install_fake_nemo_rl, write_uv_shim
from rltui.sandbox.profile import Clock
from rltui.sandbox.rayhead import MAX_TEMP_DIR_CHARS, RayHead
from rltui.sandbox.world import World, WorldEvent

__all__ = ["KubeRayController", "add_preempt_route"]

log = logging.getLogger(__name__)

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
HEAD_GROUP = "headgroup"
FINALIZER = "sandbox.rltui/graceful-termination"
# The head service's ports when the head container does not name them (KubeRay's defaults).
HEAD_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001}
# Which `ray start` port of the local head stands behind each named container port.
LOCAL_PORT_FLAGS = {"gcs-server": "--port", "dashboard": "--dashboard-port", "client": "--ray-client-server-port"}
# Env KubeRay injects; the local head must not get it (it would point Ray at ports it does not use).
KUBERAY_ENV = {"RAY_CLUSTER_NAME", "RAY_CLOUD_INSTANCE_ID", "RAY_NODE_TYPE_NAME", "KUBERAY_GEN_RAY_START_CMD",
               "RAY_USAGE_STATS_KUBERAY_IN_USE", "FQ_RAY_IP", "RAY_IP", "RAY_ADDRESS", "RAY_PORT"}
OPERATOR = "raycluster-controller"
CRASH_BACKOFF_S = 10.0
HEAD_READY_TIMEOUT_S = 60.0
IDLE_RECHECK_S = 5.0
TERMINAL = ("Succeeded", "Failed")
LustreState = lustre_v1.Instance.State


class _Gone(Exception):
    """The pod a task drives was deleted, is terminating, or was replaced by a new one."""


class _ConfigError(Exception):
    """A container's env cannot be built (kubelet: CreateContainerConfigError)."""


# ---- pure helpers ---------------------------------------------------------------------------------

def _meta(obj: dict) -> dict:
    return obj["metadata"]


def _owned_by(obj: dict, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in _meta(obj).get("ownerReferences") or [])


def _is_head(pod: dict) -> bool:
    return (_meta(pod).get("labels") or {}).get(NODE_TYPE_LABEL) == "head" and \
        (_meta(pod).get("labels") or {}).get("ray.io/is-ray-node") == "yes"


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def _condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def _running_ready(pod: dict) -> bool:
    return _phase(pod) == "Running" and _condition(pod, "Ready").get("status") == "True"


def _cond(kind: str, status: str, reason: str = "", message: str = "") -> dict:
    out: dict[str, Any] = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now()}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _keep_transitions(old: list[dict] | None, new: list[dict]) -> None:
    """A condition whose status did not change keeps its lastTransitionTime, as the API does."""
    before = {c.get("type"): c for c in old or []}
    for cond in new:
        prev = before.get(cond["type"])
        if prev and prev.get("status") == cond["status"]:
            cond["lastTransitionTime"] = prev.get("lastTransitionTime")


def _qos(pod: dict) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, {**(res.get("limits") or {}), **(res.get("requests") or {})}
        any_set = any_set or bool(limits or requests)
        for name in ("cpu", "memory"):
            if name not in limits or gke.quantity(limits[name]) != gke.quantity(requests.get(name, limits[name])):
                guaranteed = False
    return "Guaranteed" if any_set and guaranteed else "Burstable" if any_set else "BestEffort"


def _go_duration(seconds: float) -> str:
    """Go's time.Duration text, as kubelet messages print it (7m0.412s)."""
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


def _pod_status(pod: dict, node_ip: str, start: str, *, pod_ip: str | None = None,
                waiting: tuple[str, str] | None = None, running_since: str | None = None,
                ready: bool = False, restarts: int = 0, last_state: dict | None = None) -> dict:
    """The status of a pod bound to a node: waiting (ContainerCreating, ...) or running."""
    containers = (pod.get("spec") or {}).get("containers") or []
    unready = f"containers with unready status: [{' '.join(c['name'] for c in containers)}]"
    started = running_since is not None
    if started:
        state: dict = {"running": {"startedAt": running_since}}
    else:
        reason, message = waiting or ("ContainerCreating", "")
        state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    conditions = [
        _cond("PodReadyToStartContainers", "True" if pod_ip else "False"),
        _cond("Initialized", "True"),
        _cond("Ready", "True") if ready else _cond("Ready", "False", "ContainersNotReady", unready),
        _cond("ContainersReady", "True") if ready else _cond("ContainersReady", "False", "ContainersNotReady", unready),
        _cond("PodScheduled", "True"),
    ]
    statuses = []
    for c in containers:
        entry = {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": ready,
                 "started": started, "restartCount": restarts, "state": state, "lastState": last_state or {}}
        if started or restarts:
            image = c.get("image", "")
            digest = hashlib.sha256(image.encode()).hexdigest()  # stable stand-in for the registry's
            entry["imageID"] = f"{image.rsplit(':', 1)[0] if ':' in image.split('/')[-1] else image}@sha256:{digest}"
            entry["containerID"] = f"containerd://{_meta(pod)['uid'].replace('-', '')}{restarts:08x}"
        statuses.append(entry)
    out = {"phase": "Running" if started or restarts else "Pending", "conditions": conditions,
           "hostIP": node_ip, "hostIPs": [{"ip": node_ip}], "startTime": start, "qosClass": _qos(pod),
           "containerStatuses": statuses}
    if pod_ip:
        out["podIP"], out["podIPs"] = pod_ip, [{"ip": pod_ip}]
    return out


def _resources(spec: dict) -> dict[str, float]:
    return gke.pod_requests({"spec": spec})


def _replicas(group: dict) -> int:
    """KubeRay's desired worker count: replicas clamped to [minReplicas, maxReplicas]."""
    lo = int(group.get("minReplicas") or 0)
    hi = int(group.get("maxReplicas") or 2 ** 31 - 1)
    wanted = group.get("replicas")
    return max(lo, min(hi, lo if wanted is None else int(wanted)))


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


def _pod_manifest(rc: dict, group: dict, head: bool) -> dict:
    """A Ray pod as KubeRay builds it from a group's template."""
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


def _head_service(rc: dict) -> dict:
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
                           for n, p in sorted(ports.items())]},
    }


# ---- the controller -------------------------------------------------------------------------------

class KubeRayController:
    """Nodes, scheduler, kubelet and KubeRay operator of the sandbox's Kubernetes API (see module doc).

    `project` limits it to one emulated project's GKE clusters (None: all). `bin_dir` holds `uv`
    (written if missing) and goes first on the Ray head's PATH. `head_env` is laid under the
    head container's own env (e.g. the GRPO demo's knobs). `on_children(pids)` hears every change
    of the set of Ray head PIDs.
    """

    def __init__(self, store: KubeStore, world: World, clock: Clock, *, project: str | None,
                 state_dir: Path, bin_dir: Path, on_children: Callable[[list[int]], None] | None = None,
                 head_env: dict[str, str] | None = None) -> None:
        self.store = store
        self.world = world
        self.clock = clock
        self.project = project
        self.state_dir = Path(state_dir)
        self.bin_dir = Path(bin_dir)
        self.on_children = on_children
        self.head_env = dict(head_env or {})
        self.nemo_rl_dir = self.state_dir / "nemo-rl"
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._pod_tasks: dict[str, asyncio.Task] = {}
        self._settled: set[str] = set()
        self._terminating: set[str] = set()
        self._heads: dict[str, RayHead] = {}  # pod uid -> its running head
        self._live_heads: dict[int, RayHead] = {}  # pid -> head, until its process is gone
        self._head_stops: set[asyncio.Task] = set()
        self._head_starts: set[asyncio.Future] = set()
        self._reported: list[int] | None = None
        self._pulls: dict[tuple[str, str], asyncio.Task] = {}  # (node uid, image) -> pull
        self._events: set[tuple[str, str, str, str]] = set()
        self._event_seq = itertools.count()
        self._bind_lock = asyncio.Lock()
        self._unsubscribe: Callable[[], None] | None = None
        self.nodes = gke.GkeNodes(store, world, clock, project, record=self._event, kill_pod=self._force_delete)

    # ---- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(install_fake_nemo_rl, self.nemo_rl_dir)
        if not (self.bin_dir / "uv").exists():
            await asyncio.to_thread(write_uv_shim, self.bin_dir)
        self._unsubscribe = self.world.subscribe(self._on_world)
        await self.nodes.sync()
        for plural in ("nodes", "pods", "rayclusters", "services", "secrets",
                       "persistentvolumeclaims", "persistentvolumes"):
            self._spawn(self._watch(plural))
        self._spawn(self._reconcile_loop())

    async def stop(self) -> None:
        """Stop every task and every Ray head this controller started (by PID)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self.nodes.stop()
        tasks = [*self._tasks, *self._pod_tasks.values(), *self._pulls.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for uid in list(self._heads):
            self._release_head(uid)
        await asyncio.gather(*list(self._head_starts), return_exceptions=True)
        await asyncio.sleep(0)  # let the starts' callbacks queue the stops of their heads
        await asyncio.gather(*list(self._head_stops), return_exceptions=True)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- change notification: every watch event wakes whoever waits for "something changed" --

    def _kick(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _until_change(self, token: asyncio.Event, timeout: float = IDLE_RECHECK_S) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(token.wait(), timeout)

    async def _watch(self, plural: str) -> None:
        async with self.store.watch(plural) as watcher:
            async for kind, obj in watcher:
                try:
                    if plural == "pods":
                        self._on_pod(kind, obj)
                    elif plural == "nodes" and kind in ("ADDED", "DELETED"):
                        self._spawn(self.nodes.sync_daemonset())
                except Exception:
                    log.exception("kuberay: handling %s %s failed", kind, plural)
                self._kick()

    async def _reconcile_loop(self) -> None:
        while True:
            token = self._changed
            for rc in self.store.list_sync("rayclusters"):
                try:
                    await self._reconcile(copy.deepcopy(rc))
                except KubeError as exc:
                    log.info("kuberay: reconcile of %s: %s", _meta(rc)["name"], exc)
                except Exception:
                    log.exception("kuberay: reconcile of %s failed", _meta(rc)["name"])
            await self._until_change(token)
            await asyncio.sleep(0.01)  # let a burst of changes settle into one pass

    # ---- the GKE side ---------------------------------------------------------------------------

    async def preempt(self, node: str | None = None) -> dict:
        """Take a GPU node away like a Spot preemption (see GkeNodes.preempt); KubeRay recreates
        the pods it ran once the node is back. LookupError when there is no such GPU node."""
        return await self.nodes.preempt(node)

    async def _on_world(self, event: WorldEvent) -> None:
        try:
            await self.nodes.on_world(event)
        except Exception:
            log.exception("kuberay: world event %s failed", event.kind)
        self._kick()

    def _node(self, name: str) -> dict | None:
        return self.nodes.node(name)

    # ---- events ---------------------------------------------------------------------------------

    async def _event(self, obj: dict, kind: str, reason: str, message: str, component: str,
                     host: str | None = None) -> None:
        """Record an Event once per object, reason and message (also across restarts)."""
        meta = _meta(obj)
        key = (meta.get("uid", ""), kind, reason, message)
        if key in self._events:
            return
        self._events.add(key)
        ns = meta.get("namespace") or "default"
        earlier = self.store.list_sync("events", ns, field_selector=f"involvedObject.uid={meta.get('uid', '')},"
                                                                    f"reason={reason}")
        if any(e.get("message") == message for e in earlier):
            return
        involved = {"kind": obj.get("kind"), "name": meta["name"], "uid": meta.get("uid"),
                    "apiVersion": obj.get("apiVersion"), "resourceVersion": meta.get("resourceVersion")}
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        source = {"component": component, **({"host": host} if host else {})}
        body = {"metadata": {"name": f"{meta['name']}.{time.time_ns() + next(self._event_seq):x}", "namespace": ns},
                "involvedObject": involved, "reason": reason, "message": message, "type": kind,
                "source": source, "reportingComponent": component, "reportingInstance": host or component}
        try:
            await self.store.create("events", body, ns)
        except KubeError as exc:
            log.info("kuberay: event %s not recorded: %s", reason, exc)

    # ---- pods: the scheduler and kubelet ---------------------------------------------------------

    def _on_pod(self, kind: str, pod: dict) -> None:
        meta = _meta(pod)
        uid = meta["uid"]
        if kind == "DELETED":
            self._forget(uid)
            return
        if meta.get("deletionTimestamp"):
            if uid not in self._terminating:
                self._terminating.add(uid)
                self._cancel_pod_task(uid)
                self._spawn(self._terminate(pod))
            return
        if _phase(pod) in TERMINAL or uid in self._settled or uid in self._pod_tasks:
            return
        self._pod_tasks[uid] = asyncio.ensure_future(self._run_pod(uid, meta["namespace"], meta["name"]))

    def _cancel_pod_task(self, uid: str) -> None:
        task = self._pod_tasks.pop(uid, None)
        if task is not None:
            task.cancel()
        self._release_head(uid)

    def _forget(self, uid: str) -> None:
        self._cancel_pod_task(uid)
        self._settled.discard(uid)
        self._terminating.discard(uid)

    async def _pod(self, uid: str, ns: str, name: str) -> dict:
        """The pod as stored now; _Gone once it was deleted, is terminating or was replaced."""
        try:
            pod = await self.store.get("pods", name, ns)
        except KubeError:
            raise _Gone from None
        if _meta(pod)["uid"] != uid or _meta(pod).get("deletionTimestamp"):
            raise _Gone
        return pod

    async def _set_status(self, uid: str, ns: str, name: str, status: dict) -> dict:
        pod = await self._pod(uid, ns, name)
        old = pod.get("status") or {}
        _keep_transitions(old.get("conditions"), status.get("conditions") or [])
        if status == old:
            return pod
        try:
            return await self.store.replace("pods", {"metadata": {"name": name}, "status": status}, ns,
                                            subresource="status")
        except KubeError:
            raise _Gone from None

    async def _force_delete(self, pod: dict) -> None:
        """Gone now, without the graceful Terminating period (node lost, pod GC)."""
        meta = _meta(pod)
        self._cancel_pod_task(meta["uid"])
        with contextlib.suppress(KubeError):
            finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
            if FINALIZER in (meta.get("finalizers") or []):
                await self.store.patch("pods", meta["name"], {"metadata": {"finalizers": finalizers or None}},
                                       meta["namespace"])
            await self.store.delete("pods", meta["name"], meta["namespace"])

    async def _terminate(self, pod: dict) -> None:
        """A deleted pod: SIGTERM to its containers now, gone after the graceful period."""
        meta = _meta(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        if node and _phase(pod) == "Running":
            for c in pod["spec"].get("containers") or []:
                await self._event(pod, "Normal", "Killing", f"Stopping container {c['name']}", "kubelet", node)
        await self.clock.sleep("raycluster_delete")
        with contextlib.suppress(KubeError):
            current = await self.store.get("pods", meta["name"], meta["namespace"])
            if _meta(current)["uid"] == meta["uid"] and FINALIZER in (_meta(current).get("finalizers") or []):
                rest = [f for f in _meta(current)["finalizers"] if f != FINALIZER]
                await self.store.patch("pods", meta["name"], {"metadata": {"finalizers": rest or None}},
                                       meta["namespace"])

    async def _run_pod(self, uid: str, ns: str, name: str) -> None:
        try:
            pod = await self._pod(uid, ns, name)
            node = pod["spec"].get("nodeName")
            if node and self._node(node) is None:
                await self._force_delete(pod)  # its node is gone: the pod garbage collector's job
                return
            adopted = _phase(pod) == "Running"  # running before this task: a daemon restart
            if not adopted:
                await self._bring_up(uid, ns, name)
            pod = await self._pod(uid, ns, name)
            if _is_head(pod):
                await self._supervise_head(uid, ns, name, adopted)
            else:
                if not _running_ready(pod):
                    await self._mark_running(uid, ns, name, ready=True)
                self._settled.add(uid)
        except (_Gone, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("kuberay: pod %s/%s failed", ns, name)
        finally:
            if self._pod_tasks.get(uid) is asyncio.current_task():
                del self._pod_tasks[uid]
            self._release_head(uid)

    async def _bring_up(self, uid: str, ns: str, name: str) -> None:
        node_name = await self._schedule(uid, ns, name)
        await self._mount_volumes(uid, ns, name, node_name)
        await self._pull_images(uid, ns, name, node_name)
        await self._check_config(uid, ns, name, node_name)
        pod = await self._pod(uid, ns, name)
        for c in pod["spec"].get("containers") or []:
            await self._event(pod, "Normal", "Created", f"Created container: {c['name']}", "kubelet", node_name)
            await self._event(pod, "Normal", "Started", f"Started container {c['name']}", "kubelet", node_name)
        await self.clock.sleep("pod_start")
        await self._mark_running(uid, ns, name, ready=not _is_head(pod))
        if not _is_head(pod):
            await self.store.append_log(ns, name, f"rltui sandbox: Ray worker on node {node_name} is emulated; "
                                                  "Ray tasks run on the head's local Ray node.\n")

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

    async def _waiting(self, uid: str, ns: str, name: str, reason: str, message: str = "",
                       pod_ip: str | None = None) -> dict:
        pod = await self._pod(uid, ns, name)
        node = self._node(pod["spec"]["nodeName"]) or {}
        status = pod.get("status") or {}
        return await self._set_status(uid, ns, name, _pod_status(
            pod, gke.internal_ip(node), status.get("startTime") or now(), waiting=(reason, message),
            pod_ip=pod_ip or status.get("podIP")))

    def _mount_problem(self, pod: dict) -> tuple[str, str, str] | None:
        """(stage, volume, kubelet's failure text) for the first volume that cannot be mounted, or None.

        Lustre volumes fail as the Lustre CSI driver's troubleshooting guide shows them
        (GoogleCloudPlatform/lustre-csi-driver docs/troubleshooting.md):
        - the node has no driver registered (the add-on is off, or the node predates its
          enablement and was not recreated): "MountVolume.SetUp failed ... mounter.SetUpAt failed
          to get CSI client: driver name lustre.csi.storage.gke.io not found in the list of
          registered CSI drivers";
        - the node's LNet port and the instance disagree: an instance made WITH
          gke_support_enabled is reached only on the legacy port 6988 (LustreCsiDriverConfig
          .enable_legacy_lustre_port docstring), so a node without it, or a node with it facing an
          instance without gke_support_enabled (inferred: the two ends listen on different ports;
          not stated by a source), cannot reach the MGS: "MountVolume.MountDevice failed ... rpc
          error: code = Internal desc = Could not mount ... mount failed: exit status 5 ...
          Input/output error / Is the MGS running?", the guide's "cannot connect" case, whose
          remedy names the gke-support-enabled flag.
        """
        ns = _meta(pod)["namespace"]
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvcs = self.store.list_sync("persistentvolumeclaims", ns, field_selector=f"metadata.name={claim}")
            pv_name = (pvcs[0].get("spec") or {}).get("volumeName") if pvcs else None
            pvs = self.store.list_sync("persistentvolumes", field_selector=f"metadata.name={pv_name}") \
                if pv_name else []
            if not pvs or (pvcs[0].get("status") or {}).get("phase") != "Bound":
                return "SetUp", vol["name"], f'persistentvolumeclaim "{claim}" is not bound'
            csi = (pvs[0].get("spec") or {}).get("csi") or {}
            if csi.get("driver") != gke.LUSTRE_DRIVER:
                continue
            node = self._node(node_name)
            if not self.nodes.lustre_csi_enabled() or not gke.has_lustre_driver(node):
                return "SetUp", pv_name, (f"kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name "
                                          f"{gke.LUSTRE_DRIVER} not found in the list of registered CSI drivers")
            handle = csi.get("volumeHandle", "")
            inst = self.nodes.lustre(handle)
            if inst is None:
                return "SetUp", pv_name, (f"rpc error: code = NotFound desc = Managed Lustre instance "
                                          f'"{handle}" (volumeHandle) not found')
            if inst.state != LustreState.ACTIVE:
                return "SetUp", pv_name, (f"rpc error: code = Unavailable desc = Managed Lustre instance "
                                          f'"{handle}" is {inst.state.name}, not ACTIVE')
            attrs = csi.get("volumeAttributes") or {}
            ip, fs = attrs.get("ip", ""), attrs.get("filesystem", "")
            want_ip, want_fs = inst.mount_point.split("@", 1)[0], inst.filesystem
            if (ip, fs) != (want_ip, want_fs):
                return "SetUp", pv_name, (f"rpc error: code = Internal desc = mount of {ip}@tcp:/{fs} failed: "
                                          f"Managed Lustre instance \"{handle}\" serves {inst.mount_point} "
                                          f"(fix volumeAttributes ip/filesystem of PersistentVolume {pv_name})")
            wanted_port = 6988 if inst.gke_support_enabled else 988
            if gke.lnet_port(node) != wanted_port:
                source = f"{ip}@tcp:/{fs}"
                target = (f"/var/lib/kubelet/plugins/kubernetes.io/csi/{gke.LUSTRE_DRIVER}/"
                          f"{hashlib.sha256(handle.encode()).hexdigest()}/globalmount")
                return "MountDevice", pv_name, (
                    f'rpc error: code = Internal desc = Could not mount "{source}" at "{target}" on node '
                    f"{node_name}: mount failed: exit status 5\nMounting command: mount\nMounting arguments: "
                    f"-t lustre {source} {target}\nOutput: mount.lustre: mount {source} at {target} failed: "
                    "Input/output error\nIs the MGS running?")
        return None

    async def _mount_volumes(self, uid: str, ns: str, name: str, node_name: str) -> None:
        """Kubelet's volume manager: no container starts before every volume is mounted."""
        while True:
            token = self._changed
            pod = await self._pod(uid, ns, name)
            problem = self._mount_problem(pod)
            if problem is None:
                break
            stage, volume, text = problem
            await self._waiting(uid, ns, name, "ContainerCreating")
            await self._event(pod, "Warning", "FailedMount",
                              f'MountVolume.{stage} failed for volume "{volume}" : {text}', "kubelet", node_name)
            await self._until_change(token)
        node = self._node(node_name)
        if node is None:
            raise _Gone
        await self._waiting(uid, ns, name, "ContainerCreating", pod_ip=self._pod_ip(node, uid))

    def _pod_ip(self, node: dict, uid: str) -> str:
        base = node["spec"]["podCIDR"].rsplit(".", 1)[0]
        used = {(p.get("status") or {}).get("podIP") for p in self._placed(_meta(node)["name"], uid)}
        return next(f"{base}.{i}" for i in range(2, 255) if f"{base}.{i}" not in used)

    async def _pull_images(self, uid: str, ns: str, name: str, node_name: str) -> None:
        """Pull each image once per node (the node's status.images is its cache); pulls of one image
        on one node are shared, as the kubelet serialises them."""
        pod = await self._pod(uid, ns, name)
        for c in pod["spec"].get("containers") or []:
            image = c.get("image", "")
            node = self._node(node_name)
            if node is None:
                raise _Gone
            if gke.has_image(node, image):
                await self._event(pod, "Normal", "Pulled", f'Container image "{image}" already present on machine',
                                  "kubelet", node_name)
                continue
            await self._event(pod, "Normal", "Pulling", f'Pulling image "{image}"', "kubelet", node_name)
            key = (_meta(node)["uid"], image)
            if key not in self._pulls:
                self._pulls[key] = asyncio.ensure_future(self._pull(node_name, key))
            began = time.monotonic()
            await asyncio.shield(self._pulls[key])
            took = _go_duration((time.monotonic() - began) * self.clock.speed)
            await self._event(pod, "Normal", "Pulled", f'Successfully pulled image "{image}" in {took} '
                              f"({took} including waiting)", "kubelet", node_name)

    async def _pull(self, node_name: str, key: tuple[str, str]) -> None:
        try:
            await self.clock.sleep("image_pull")
            node = self._node(node_name)
            if node is not None and _meta(node)["uid"] == key[0]:
                images = list((node.get("status") or {}).get("images") or [])
                images.append({"names": [key[1]], "sizeBytes": 26_000_000_000})
                await self.store.patch_status("nodes", node_name, {"images": images})
        finally:
            self._pulls.pop(key, None)

    def _resolve_env(self, pod: dict, container: dict) -> dict[str, str]:
        """A container's env as the kubelet builds it; secret values never leave this dict."""
        ns = _meta(pod)["namespace"]
        env: dict[str, str] = {}

        def secret(name: str, optional: bool) -> dict | None:
            found = self.store.list_sync("secrets", ns, field_selector=f"metadata.name={name}")
            if not found and not optional:
                raise _ConfigError(f'secret "{name}" not found')
            return found[0] if found else None

        for source in container.get("envFrom") or []:
            ref = source.get("secretRef")
            if ref and (obj := secret(ref["name"], bool(ref.get("optional")))):
                for key, value in (obj.get("data") or {}).items():
                    env[source.get("prefix", "") + key] = base64.b64decode(value).decode()
        for entry in container.get("env") or []:
            name, ref = entry["name"], entry.get("valueFrom") or {}
            if "secretKeyRef" in ref:
                sk = ref["secretKeyRef"]
                obj = secret(sk["name"], bool(sk.get("optional")))
                data = (obj or {}).get("data") or {}
                if sk["key"] in data:
                    env[name] = base64.b64decode(data[sk["key"]]).decode()
                elif obj is not None and not sk.get("optional"):
                    raise _ConfigError(f"couldn't find key {sk['key']} in Secret {ns}/{sk['name']}")
            elif "fieldRef" in ref:
                env[name] = self._field(pod, ref["fieldRef"].get("fieldPath", ""))
            elif not ref:
                env[name] = str(entry.get("value", ""))
        return env

    @staticmethod
    def _field(pod: dict, path: str) -> str:
        match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
        if match:
            return str((_meta(pod).get(match.group(1)) or {}).get(match.group(2), ""))
        known = {"metadata.name": _meta(pod)["name"], "metadata.namespace": _meta(pod)["namespace"],
                 "metadata.uid": _meta(pod)["uid"], "spec.nodeName": pod["spec"].get("nodeName", ""),
                 "status.podIP": (pod.get("status") or {}).get("podIP", ""),
                 "status.hostIP": (pod.get("status") or {}).get("hostIP", "")}
        return str(known.get(path, ""))

    async def _check_config(self, uid: str, ns: str, name: str, node_name: str) -> None:
        while True:
            token = self._changed
            pod = await self._pod(uid, ns, name)
            try:
                for c in pod["spec"].get("containers") or []:
                    self._resolve_env(pod, c)
                return
            except _ConfigError as exc:
                await self._waiting(uid, ns, name, "CreateContainerConfigError", str(exc))
                await self._event(pod, "Warning", "Failed", f"Error: {exc}", "kubelet", node_name)
            await self._until_change(token)

    async def _mark_running(self, uid: str, ns: str, name: str, *, ready: bool, restarts: int | None = None,
                            last_state: dict | None = None) -> dict:
        pod = await self._pod(uid, ns, name)
        status = pod.get("status") or {}
        node = self._node(pod["spec"].get("nodeName", "")) or {}
        previous = (status.get("containerStatuses") or [{}])[0]
        restarts = previous.get("restartCount", 0) if restarts is None else restarts
        since = ((previous.get("state") or {}).get("running") or {}).get("startedAt")
        if since is None or restarts != previous.get("restartCount", 0):
            since = now()  # a (re)started container
        return await self._set_status(uid, ns, name, _pod_status(
            pod, gke.internal_ip(node), status.get("startTime") or now(),
            pod_ip=status.get("podIP") or (self._pod_ip(node, uid) if node else None), running_since=since,
            ready=ready, restarts=restarts,
            last_state=last_state if last_state is not None else previous.get("lastState")))

    # ---- the head pod's real Ray head ------------------------------------------------------------

    def _head_env(self, pod: dict) -> dict[str, str]:
        container = (pod["spec"].get("containers") or [{}])[0]
        env = dict(self.head_env)
        env.update({k: v for k, v in self._resolve_env(pod, container).items() if k not in KUBERAY_ENV})
        env["NEMO_RL_DIR"] = str(self.nemo_rl_dir)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        lustre = self._lustre_dir(pod)
        if lustre is not None:
            env["LUSTRE_MOUNT"] = str(lustre)
        return env

    def _lustre_dir(self, pod: dict) -> Path | None:
        """The local folder of the Lustre instance behind the pod's first Lustre PVC."""
        ns = _meta(pod)["namespace"]
        for vol in pod["spec"].get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            pvcs = self.store.list_sync("persistentvolumeclaims", ns, field_selector=f"metadata.name={claim}") \
                if claim else []
            pv_name = (pvcs[0].get("spec") or {}).get("volumeName") if pvcs else None
            pvs = self.store.list_sync("persistentvolumes", field_selector=f"metadata.name={pv_name}") \
                if pv_name else []
            csi = ((pvs[0].get("spec") or {}).get("csi") or {}) if pvs else {}
            if csi.get("driver") == gke.LUSTRE_DRIVER:
                return self.nodes.lustre_dir(csi.get("volumeHandle", ""))
        return None

    def _temp_dir(self, uid: str) -> Path | None:
        """Under state_dir when the path is short enough for Ray's socket paths, else Ray's own."""
        path = (self.state_dir / "ray" / uid[:8]).absolute()
        return path if len(str(path)) <= MAX_TEMP_DIR_CHARS else None

    async def _supervise_head(self, uid: str, ns: str, name: str, adopted: bool) -> None:
        """Run the pod's Ray head like the kubelet runs its container: Ready once the dashboard
        answers, restarted (CrashLoopBackOff) when it dies."""
        pod = await self._pod(uid, ns, name)
        first = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]
        # Adopted after a daemon restart: the old head process is gone, so the container restarts.
        restarts = first.get("restartCount", 0) + (1 if adopted else 0)
        while True:
            pod = await self._pod(uid, ns, name)
            container = pod["spec"]["containers"][0]["name"]
            await self._mark_running(uid, ns, name, ready=False, restarts=restarts)
            started = time.time()
            head = await self._start_head(uid, pod)
            self._spawn(self._tail(uid, ns, name, container, head))
            try:
                await asyncio.to_thread(head.wait_ready, HEAD_READY_TIMEOUT_S)
                await self._pod(uid, ns, name)
                for port_name, flag in LOCAL_PORT_FLAGS.items():
                    port = next((p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports") or []
                                 if p.get("name") == port_name), HEAD_PORTS[port_name])
                    await self.store.set_port_target(ns, name, port, "127.0.0.1", head.ports[flag])
                await self._mark_running(uid, ns, name, ready=True, restarts=restarts)
                while head.alive():
                    await asyncio.sleep(1.0)
                reason = "the Ray head process exited: " + (head.log_tail(300).strip().splitlines() or [""])[-1]
            except (RuntimeError, TimeoutError) as exc:
                reason = str(exc).splitlines()[0]
            except KubeError:
                raise _Gone from None
            self._release_head(uid)
            restarts += 1
            with contextlib.suppress(KubeError):
                await self.store.append_log(ns, name, f"rltui sandbox: {reason}\n")
            await self._mark_crashed(uid, ns, name, restarts, started, reason)
            await self._event(pod, "Warning", "BackOff", f"Back-off restarting failed container {container} in pod "
                              f"{name}_{ns}({uid})", "kubelet", pod["spec"].get("nodeName"))
            await asyncio.sleep(CRASH_BACKOFF_S)

    async def _mark_crashed(self, uid: str, ns: str, name: str, restarts: int, started: float, reason: str) -> None:
        pod = await self._pod(uid, ns, name)
        status = pod.get("status") or {}
        node = self._node(pod["spec"].get("nodeName", "")) or {}
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
        last = {"terminated": {"exitCode": 1, "reason": "Error", "message": reason, "startedAt": stamp,
                               "finishedAt": now()}}
        await self._set_status(uid, ns, name, _pod_status(
            pod, gke.internal_ip(node), status.get("startTime") or now(), pod_ip=status.get("podIP"),
            waiting=("CrashLoopBackOff", f"back-off {CRASH_BACKOFF_S:.0f}s restarting failed container"),
            restarts=restarts, last_state=last))

    async def _tail(self, uid: str, ns: str, name: str, container: str, head: RayHead) -> None:
        """Copy the head's output into the pod's log, line by line, while the head is this pod's."""
        offset, partial = 0, ""
        while True:
            current = self._heads.get(uid) is head and head.alive()
            with contextlib.suppress(OSError):
                with open(head.log_path, "rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                offset += len(chunk)
                text = partial + chunk.decode(errors="replace")
                done, _, partial = text.rpartition("\n")
                if done:
                    try:
                        await self.store.append_log(ns, name, done + "\n", container)
                    except KubeError:
                        return
            if not current:
                return
            await asyncio.sleep(0.5)

    async def _start_head(self, uid: str, pod: dict) -> RayHead:
        """Launch the pod's head; if the pod goes meanwhile, the new process is stopped by PID."""
        job = asyncio.ensure_future(asyncio.to_thread(RayHead.start, self._temp_dir(uid), self._head_env(pod), 1))
        self._head_starts.add(job)
        job.add_done_callback(self._head_starts.discard)
        try:
            head = await asyncio.shield(job)
        except asyncio.CancelledError:
            job.add_done_callback(lambda f: None if f.cancelled() or f.exception() else self._stop_orphan(f.result()))
            raise
        self._heads[uid] = head
        self._live_heads[head.pid] = head
        self._report_children()
        return head

    def _stop_orphan(self, head: RayHead) -> None:
        self._live_heads[head.pid] = head
        self._report_children()
        task = asyncio.ensure_future(self._stop_head(head))
        self._head_stops.add(task)
        task.add_done_callback(self._head_stops.discard)

    def _release_head(self, uid: str) -> None:
        """Stop the pod's Ray head (SIGTERM to its PID) in the background."""
        head = self._heads.pop(uid, None)
        if head is not None:
            self._stop_orphan(head)

    async def _stop_head(self, head: RayHead) -> None:
        try:
            await asyncio.to_thread(head.stop)
        finally:
            self._live_heads.pop(head.pid, None)
            self._report_children()
            temp = head.temp_dir
            if temp.is_relative_to(self.state_dir.absolute()):
                await asyncio.to_thread(shutil.rmtree, temp, True)

    def _report_children(self) -> None:
        pids = sorted(self._live_heads)
        if pids != self._reported:
            self._reported = pids
            if self.on_children is not None:
                try:
                    self.on_children(pids)
                except Exception:
                    log.exception("kuberay: on_children failed")

    @property
    def head_pids(self) -> list[int]:
        """PIDs of the Ray heads running now."""
        return sorted(self._live_heads)

    def dashboard_url(self) -> str | None:
        """The local URL of a head pod's Ray dashboard (it answers once that pod is Ready), or None.
        Clients should rather port-forward to `<name>-head-svc:8265`, as against GKE."""
        return next((h.dashboard_url for h in self._heads.values()), None)

    # ---- the operator: RayCluster -> service, pods, status --------------------------------------

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
            await self.store.create("services", _head_service(rc), ns)
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
            created = await self.store.create("pods", _pod_manifest(rc, spec.get("headGroupSpec") or {}, True), ns)
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
                created = await self.store.create("pods", _pod_manifest(rc, group, False), ns)
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
        status: dict[str, Any] = {
            "desiredWorkerReplicas": desired,
            "minWorkerReplicas": sum(int(g.get("minReplicas") or 0) for g in groups),
            "maxWorkerReplicas": sum(int(g.get("maxReplicas") or 2 ** 31 - 1) for g in groups),
            "readyWorkerReplicas": ready_workers,
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
            status["head"]["serviceIP"] = svcs[0]["spec"].get("clusterIP", "")
            status["endpoints"] = {p["name"]: str(p["port"]) for p in svcs[0]["spec"].get("ports") or []}
        all_ready = head_ready and ready_workers >= desired
        if old.get("state") == "ready" or all_ready:
            status["state"] = "ready"  # KubeRay sets it once and never clears it
            status["stateTransitionTimes"] = old.get("stateTransitionTimes") or {"ready": now()}
        if head_ready:
            head_cond = _cond("HeadPodReady", "True", "HeadPodRunningAndReady")
        elif head is None:
            head_cond = _cond("HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found")
        else:
            ready = _condition(head, "Ready")
            head_cond = _cond("HeadPodReady", "False", ready.get("reason") or "HeadPodNotReady",
                              ready.get("message", ""))
        provisioned = all_ready or _condition(rc, "RayClusterProvisioned").get("status") == "True"
        prov_cond = _cond("RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
                          "All Ray Pods are ready for the first time") if provisioned else \
            _cond("RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                  "RayCluster Pods are being provisioned for first time")
        status["conditions"] = [head_cond, prov_cond]
        for cond in status["conditions"]:
            cond.pop("lastProbeTime", None)
        _keep_transitions(old.get("conditions"), status["conditions"])
        if {k: v for k, v in old.items() if k != "lastUpdateTime"} == status:
            return
        status["lastUpdateTime"] = now()
        await self.store.replace("rayclusters", {"metadata": {"name": name}, "status": status}, ns,
                                 subresource="status")


def add_preempt_route(app: web.Application, controller: KubeRayController) -> None:
    """`POST /_sandbox/preempt` {"node": optional name} -> what was preempted (404: no such GPU node).
    Call before the app starts; `rltui sandbox preempt` posts here."""

    async def preempt(request: web.Request) -> web.Response:
        body: Any = {}
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                return web.json_response({"message": 'the body must be JSON like {"node": "NAME"}'}, status=400)
        node = body.get("node") if isinstance(body, dict) else None
        if node is not None and not isinstance(node, str):
            return web.json_response({"message": "node must be a node name (a string)"}, status=400)
        try:
            return web.json_response(await controller.preempt(node or None))
        except LookupError as exc:
            return web.json_response({"message": str(exc.args[0])}, status=404)

    app.router.add_post("/_sandbox/preempt", preempt)
