"""KubeRayController: the one object that plays every role of this package on the daemon's event
loop (scheduler, kubelet, Ray head pods and process pods, operator, the Deployment and ReplicaSet
controllers; GKE's nodes through GkeNodes), fed by the
KubeStore's watches and the World's events, and the fault routes: `POST /_sandbox/preempt` for
Spot preemption, `POST /_sandbox/stall` for a job whose driver hangs (stall.py)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import logging
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Coroutine

from aiohttp import web

from rltui_sandbox import nodes as gke
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import KubeStore
from rltui_sandbox.kuberay.headpod import HeadPods
from rltui_sandbox.kuberay.kubelet import Kubelet
from rltui_sandbox.kuberay.deployments import Deployments
from rltui_sandbox.kuberay.operator import Operator
from rltui_sandbox.kuberay.procpods import ProcessPods
from rltui_sandbox.kuberay.pods import _meta
from rltui_sandbox.kuberay.preemption import Preemption
from rltui_sandbox.kuberay.scheduler import Scheduler
from rltui_sandbox.kuberay.stall import stall
from rltui_sandbox.kuberay.versions import KubeRay
from rltui_sandbox.kuberay.volumes import VolumeManager
from rltui_sandbox.nemo_rl_tree import install_fake_nemo_rl, write_uv_shim
from rltui_sandbox.profile import Clock
from rltui_sandbox.rayhead import RayHead
from rltui_sandbox.world import World, WorldEvent

__all__ = ["KubeRayController", "add_preempt_route"]

log = logging.getLogger("rltui_sandbox.kuberay")  # the logger's name from before the split

IDLE_RECHECK_S = 5.0


class KubeRayController(Operator, Deployments, Preemption, ProcessPods, HeadPods, Kubelet, VolumeManager,
                        Scheduler):
    """Nodes, scheduler, kubelet and KubeRay operator of the sandbox's Kubernetes API (see package doc).

    `project` limits it to one emulated project's GKE clusters (None: all). `bin_dir` holds `uv`
    (written if missing) and goes first on the Ray head's PATH. `head_env` is laid under the
    head container's own env (e.g. the GRPO demo's knobs). `on_children(pids)` hears every change
    of the set of Ray head PIDs and process-container PIDs (procpods.py). `kuberay` is the KubeRay
    release the RayOperator add-on runs (versions.py; default versions.DEFAULT).
    """

    def __init__(self, store: KubeStore, world: World, clock: Clock, *, project: str | None,
                 state_dir: Path, bin_dir: Path, on_children: Callable[[list[int]], None] | None = None,
                 head_env: dict[str, str] | None = None, kuberay: KubeRay | None = None) -> None:
        self.store = store
        self.kuberay = kuberay or KubeRay()
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
        self._head_clusters: dict[str, tuple[str, str, str]] = {}  # head pod uid -> (ns, RayCluster, its uid)
        self._live_heads: dict[int, RayHead] = {}  # pid -> head, until its process is gone
        self._head_stops: set[asyncio.Task] = set()
        self._head_starts: set[asyncio.Future] = set()
        self._boots: dict[str, asyncio.Future[Any]] = {}  # head pod uid -> its head's start (headpod.py)
        self._reported: list[int] | None = None
        self._pulls: dict[tuple[str, str], asyncio.Task] = {}  # (node uid, image) -> pull
        self._events: set[tuple[str, str, str, str]] = set()
        self._event_seq = itertools.count()
        self._bind_lock = asyncio.Lock()
        self._unsubscribe: Callable[[], None] | None = None
        self.nodes = gke.GkeNodes(store, world, clock, project, record=self._event, kill_pod=self._force_delete)
        self.init_process_pods()
        self.init_preemption()

    # ---- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.to_thread(install_fake_nemo_rl, self.nemo_rl_dir)
        if not (self.bin_dir / "uv").exists():
            await asyncio.to_thread(write_uv_shim, self.bin_dir)
        self._unsubscribe = self.world.subscribe(self._on_world)
        await self.nodes.sync()
        for plural in ("nodes", "pods", "rayclusters", "services", "secrets", "persistentvolumeclaims",
                       "persistentvolumes", "configmaps", "serviceaccounts", "deployments", "replicasets"):
            self._spawn(self._watch(plural))
        self._spawn(self._reconcile_loop())
        self._spawn(self._workload_loop())

    async def stop(self) -> None:
        """Stop every task and every Ray head this controller started (by PID)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self.nodes.stop()
        tasks = [*self._tasks, *self._pod_tasks.values(), *self._pulls.values(), *self._boots.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for uid in list(self._heads):
            self._release_head(uid)
        await asyncio.gather(*list(self._head_starts), return_exceptions=True)
        await asyncio.sleep(0)  # let the starts' callbacks queue the stops of their heads
        await asyncio.gather(*list(self._head_stops), return_exceptions=True)
        await self._stop_all_processes()

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


async def _body(request: web.Request, example: str) -> dict[str, Any] | web.Response:
    """The request's JSON object ({} without a body, or for JSON that is not an object), or the
    400 answer naming `example`."""
    if not request.can_read_body:
        return {}
    try:
        body = await request.json()
    except ValueError:
        return web.json_response({"message": f"the body must be JSON like {example}"}, status=400)
    return body if isinstance(body, dict) else {}


async def _answer(work: Awaitable[Any]) -> web.Response:
    """`work`'s result as JSON; a LookupError is a 404 and a ValueError a 400, with its words."""
    try:
        return web.json_response(await work)
    except LookupError as exc:
        return web.json_response({"message": str(exc.args[0])}, status=404)
    except ValueError as exc:
        return web.json_response({"message": str(exc.args[0])}, status=400)


def add_preempt_route(app: web.Application, controller: KubeRayController) -> None:
    """`POST /_sandbox/preempt` {"node": optional name} or {"head": true} (the node of the Ray head
    pod), and "hard": true for a preemption without a graceful shutdown (preemption.py) -> what
    was preempted (404: no such GPU node; 400: --hard on the head's node). Also `POST
    /_sandbox/stall` (stall.py), which `rltui sandbox stall` posts to.
    Call before the app starts; `rltui sandbox preempt` posts here."""

    async def preempt(request: web.Request) -> web.Response:
        body = await _body(request, '{"node": "NAME"}')
        if isinstance(body, web.Response):
            return body
        node, head, hard = body.get("node"), body.get("head", False), body.get("hard", False)
        if node is not None and not isinstance(node, str):
            return web.json_response({"message": "node must be a node name (a string)"}, status=400)
        if not isinstance(head, bool) or (head and node):
            return web.json_response({"message": "head must be true or false, and not given with node"}, status=400)
        if not isinstance(hard, bool):
            return web.json_response({"message": "hard must be true or false"}, status=400)
        return await _answer(controller.preempt(node or None, head=head, hard=hard))

    app.router.add_post("/_sandbox/preempt", preempt)

    async def stall_job(request: web.Request) -> web.Response:
        """`POST /_sandbox/stall` {"job": optional submission id} -> the job and the driver PID
        frozen (404: no such job or driver; 400: not running, or more than one running)."""
        body = await _body(request, '{"job": "ID"}')
        if isinstance(body, web.Response):
            return body
        job = body.get("job")
        if job is not None and not isinstance(job, str):
            return web.json_response({"message": "job must be a submission id (a string)"}, status=400)
        return await _answer(stall(list(controller._heads.values()), job or None))

    app.router.add_post("/_sandbox/stall", stall_job)
