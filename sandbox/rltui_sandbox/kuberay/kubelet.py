"""The kubelet: a bound pod's life on its node. Its volumes (volumes.py), image pulls (once per
node, shared by the pods that wait for them), container env from values, fields and Secrets
(CreateContainerConfigError when one is missing), then Running; a deleted pod stops its
containers and shows Terminating for the graceful period; a pod whose node is gone is removed
at once, as the pod garbage collector does. Events as the kubelet words them. A container
running a Python script from a ConfigMap volume is a real local process (procpods.py); a
head pod's Ray container a real Ray head (headpod.py); other containers are pretended. The Ray
containers' readiness and liveness probes run as the kubelet runs them (probes.py): a worker
with a readiness probe is Ready only once it passes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
import time

from rltui_sandbox import nodes as gke
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import now
from rltui_sandbox.kuberay.pods import (
    FINALIZER,
    TERMINAL,
    _Gone,
    _keep_transitions,
    _meta,
    _phase,
    _pod_status,
    _running_ready,
)
from rltui_sandbox.kuberay.probes import Probes, has_probes, is_ray_worker
from rltui_sandbox.kuberay.procpods import script_container
from rltui_sandbox.kuberay.templates import _is_head

log = logging.getLogger("rltui_sandbox.kuberay")  # the logger's name from before the split


class _ConfigError(Exception):
    """A container's env cannot be built (kubelet: CreateContainerConfigError)."""


def _live(pod: dict, uid: str) -> dict:
    """The pod, unless it was replaced (another uid) or is terminating: _Gone."""
    if _meta(pod)["uid"] != uid or _meta(pod).get("deletionTimestamp"):
        raise _Gone
    return pod


def _go_duration(seconds: float) -> str:
    """Go's time.Duration text, as kubelet messages print it (7m0.412s)."""
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


class Kubelet(Probes):
    """KubeRayController's kubelet role: every pod the API holds, from bound to gone."""

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
        stopping = self._stop_process(uid)  # gone without its graceful period (e.g. its namespace)
        if stopping is None:
            self._drop_pod_dir(uid)
        else:
            stopping.add_done_callback(lambda _t: self._drop_pod_dir(uid))

    async def _pod(self, uid: str, ns: str, name: str) -> dict:
        """The pod as stored now; _Gone once it was deleted, is terminating or was replaced."""
        try:
            pod = await self.store.get("pods", name, ns)
        except KubeError:
            raise _Gone from None
        return _live(pod, uid)

    def _pod_view(self, uid: str, ns: str, name: str) -> dict:
        """`_pod` without the copy (KubeStore.peek): to read, never to change."""
        try:
            pod = self.store.peek("pods", name, ns)
        except KubeError:
            raise _Gone from None
        return _live(pod, uid)

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
        self._stop_process(meta["uid"], grace=0)  # its node is gone: SIGKILL
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
        stopping = self._stop_process(meta["uid"])  # a process container: SIGTERM, SIGKILL after the grace
        if stopping is not None:
            await asyncio.shield(stopping)
        else:
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
            elif script_container(pod) is not None:
                await self._supervise_process(uid, ns, name, adopted)
            elif is_ray_worker(pod) and has_probes(pod["spec"]["containers"][0]):
                await self._supervise_worker(uid, ns, name)
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
        await self._mount_configmaps(uid, ns, name, node_name)
        pod = await self._pod(uid, ns, name)
        if _is_head(pod):
            self._prestart_head(uid, ns, name, pod)   # its local Ray head starts during the pull
        await self._pull_images(uid, ns, name, node_name)
        await self._check_config(uid, ns, name, node_name)
        pod = await self._pod(uid, ns, name)
        if script_container(pod) is not None:
            return  # a process container: _supervise_process starts it (procpods.py)
        for c in pod["spec"].get("containers") or []:
            await self._event(pod, "Normal", "Created", f"Created container: {c['name']}", "kubelet", node_name)
            await self._event(pod, "Normal", "Started", f"Started container {c['name']}", "kubelet", node_name)
        if _is_head(pod):
            return  # its pod_start runs beside the real Ray head's start (headpod.py _supervise_head)
        await self._pod_start(ns, name)
        # A Ray worker with a readiness probe is Ready once it passes (probes.py); without one, started is Ready.
        await self._mark_running(uid, ns, name, ready=not (is_ray_worker(pod) and
                                                           pod["spec"]["containers"][0].get("readinessProbe")))
        await self.store.append_log(ns, name, f"rltui sandbox: Ray worker on node {node_name} is emulated; "
                                              "Ray tasks run on the head's local Ray node.\n")

    async def _pod_start(self, ns: str, name: str) -> None:
        """The profile's pod_start ("pod start with image cached, Lustre mounted, ray start"), as
        one operation of the sandbox's record with its profile key, so a benchmark's critical
        path explains it (sandbox/rltui_sandbox/record.py)."""
        with self.world.record.operation("kubelet.pod_start", f"pods/{ns}/{name}", key="pod_start"):
            await self.clock.sleep("pod_start")

    async def _waiting(self, uid: str, ns: str, name: str, reason: str, message: str = "",
                       pod_ip: str | None = None) -> dict:
        pod = await self._pod(uid, ns, name)
        node = self._node(pod["spec"]["nodeName"]) or {}
        status = pod.get("status") or {}
        return await self._set_status(uid, ns, name, _pod_status(
            pod, gke.internal_ip(node), status.get("startTime") or now(), waiting=(reason, message),
            pod_ip=pod_ip or status.get("podIP")))

    def _pod_ip(self, node: dict, uid: str) -> str:
        base = node["spec"]["podCIDR"].rsplit(".", 1)[0]
        used = {(p.get("status") or {}).get("podIP") for p in self._placed(_meta(node)["name"], uid)}
        return next(f"{base}.{i}" for i in range(2, 255) if f"{base}.{i}" not in used)

    async def _pull_images(self, uid: str, ns: str, name: str, node_name: str) -> None:
        """Pull each image once per node (the node's status.images is its cache); pulls of one image
        on one node are shared, as the kubelet serialises them. An image no local environment runs
        fails as an unpullable one, with its back-off (procpods.py, images.py)."""
        pod = await self._pod(uid, ns, name)
        for c in pod["spec"].get("containers") or []:
            image = c.get("image", "")
            node = self._node(node_name)
            if node is None:
                raise _Gone
            error = self._unrunnable_image(pod, c)
            if error is not None:
                await self._image_pull_failing(uid, ns, name, node_name, c, error)
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
        # One operation of the sandbox's record per pull (benchmarks read the critical path there).
        rec = self.world.record.start("kubelet.image_pull", f"nodes/{node_name}", image=key[1])
        error: str | None = "cancelled"
        try:
            await self.clock.sleep("image_pull")
            error = None
            node = self._node(node_name)
            if node is not None and _meta(node)["uid"] == key[0]:
                images = list((node.get("status") or {}).get("images") or [])
                images.append({"names": [key[1]], "sizeBytes": 26_000_000_000})
                await self.store.patch_status("nodes", node_name, {"images": images})
        finally:
            self.world.record.end(rec, error)
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
