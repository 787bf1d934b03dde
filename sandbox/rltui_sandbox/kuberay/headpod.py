"""The head pod's Ray container: a REAL local Ray head (sandbox/rltui_sandbox/rayhead.py), run as the
kubelet runs a container. Ready once its dashboard answers (or, where KubeRay injected probes,
once they pass: probes.py), the head service's ports pointed at the local head's, its output
copied into the pod's log; when it dies or fails its liveness probe, restarted with
CrashLoopBackOff. Its env is the container's, as the kubelet builds it, minus what KubeRay
injects for a cluster network the local head does not have."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from pathlib import Path

from rltui_sandbox import nodes as gke
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import now
from rltui_sandbox.kuberay.placement import ENV_VAR as CLUSTER_FILE_ENV
from rltui_sandbox.kuberay.placement import ClusterFiles
from rltui_sandbox.kuberay.pods import BACKOFF_RESET_S, _Gone, _meta, _pod_status, restart_backoff_s
from rltui_sandbox.kuberay.probes import has_probes, port_map
from rltui_sandbox.kuberay.templates import HEAD_PORTS
from rltui_sandbox.rayhead import MAX_TEMP_DIR_CHARS, RayHead, ray_executable

log = logging.getLogger("rltui_sandbox.kuberay")  # the logger's name from before the split

# Which `ray start` port of the local head stands behind each named container port.
LOCAL_PORT_FLAGS = {"gcs-server": "--port", "dashboard": "--dashboard-port", "client": "--ray-client-server-port"}
# Env KubeRay injects; the local head must not get it (it would point Ray at ports it does not use).
KUBERAY_ENV = {"RAY_CLUSTER_NAME", "RAY_CLOUD_INSTANCE_ID", "RAY_NODE_TYPE_NAME", "KUBERAY_GEN_RAY_START_CMD",
               "RAY_USAGE_STATS_KUBERAY_IN_USE", "FQ_RAY_IP", "RAY_IP", "RAY_ADDRESS", "RAY_PORT"}
HEAD_READY_TIMEOUT_S = 120.0  # a Ray 2.46 head spawns nine dashboard modules: 40 s on a loaded 2-core box


class HeadPods(ClusterFiles):
    """KubeRayController's head pod containers: one RayHead per running head pod, with the
    cluster file its jobs read (placement.py); when its Ray process stops, the workers lose the GCS."""

    def _head_env(self, pod: dict) -> dict[str, str]:
        container = (pod["spec"].get("containers") or [{}])[0]
        env = dict(self.head_env)
        env.update({k: v for k, v in self._resolve_env(pod, container).items() if k not in KUBERAY_ENV})
        env["NEMO_RL_DIR"] = str(self.nemo_rl_dir)
        env[CLUSTER_FILE_ENV] = str(self._cluster_file(_meta(pod)["uid"]))
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        lustre = self._lustre_dir(pod)
        if lustre is not None:
            env["LUSTRE_MOUNT"] = str(lustre)
        # Its Secret volumes as files, kept current as the kubelet keeps them (secretvolumes.py).
        from rltui_sandbox.kuberay.secretvolumes import head_secret_env
        env.update(head_secret_env(self, pod, container))
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
        answers, or with probes (KubeRay injects them: versions.py) as its readiness probe says;
        restarted (CrashLoopBackOff) when it dies or its liveness probe fails (probes.py)."""
        pod = await self._pod(uid, ns, name)
        first = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]
        # Adopted after a daemon restart: the old head process is gone, so the container restarts.
        restarts = first.get("restartCount", 0) + (1 if adopted else 0)
        first_start = not adopted
        failures = 0  # in a row, for the kubelet's back-off
        while True:
            pod = await self._pod(uid, ns, name)
            container = pod["spec"]["containers"][0]["name"]
            await self._mark_running(uid, ns, name, ready=False, restarts=restarts)
            started = time.time()
            # The profile's pod_start counts `ray start` in (latency_profile.json): on the pod's
            # first start the modelled time runs beside the real local head's start (begun during
            # the image pull: _prestart_head), and the pod is Ready when both are over. What the
            # real start takes beyond them is recorded as real time ("real": true).
            modelled = asyncio.ensure_future(self._pod_start(ns, name)) if first_start else None
            first_start = False
            killed = False   # by the kubelet, for its liveness probe
            boot = self._boots.pop(uid, None) or asyncio.ensure_future(self._boot_head(uid, ns, name, pod))
            try:
                try:
                    head = await boot
                finally:
                    begun = self._heads.get(uid)   # started, ready or not: its output is the pod's log
                    if begun is not None:
                        self._spawn(self._tail(uid, ns, name, container, begun))
                if modelled is not None:
                    await modelled
                await self._pod(uid, ns, name)
                for port_name, flag in LOCAL_PORT_FLAGS.items():
                    port = next((p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports") or []
                                 if p.get("name") == port_name), HEAD_PORTS[port_name])
                    await self.store.set_port_target(ns, name, port, "127.0.0.1", head.ports[flag])
                if has_probes(pod["spec"]["containers"][0]):
                    # Ready is the readiness probe's to say, liveness may kill it (probes.py); the
                    # probes start once the local head's dashboard agent listens.
                    await self._agent_listening(head.ports["--dashboard-agent-listen-port"], head.alive)
                    killed = await self._probe_container(uid, ns, name, restarts,
                                                         lambda: port_map(pod, head.ports), head.alive)
                else:
                    await self._mark_running(uid, ns, name, ready=True, restarts=restarts)
                while head.alive() and not killed:
                    await asyncio.sleep(1.0)
                reason = "the container failed its liveness probe and was killed" if killed else \
                    "the Ray head process exited: " + (head.log_tail(300).strip().splitlines() or [""])[-1]
            except (RuntimeError, TimeoutError) as exc:
                reason = str(exc).splitlines()[0]
            except KubeError:
                raise _Gone from None
            finally:
                if modelled is not None:
                    modelled.cancel()   # a no-op once done
            self._release_head(uid)
            restarts += 1
            failures = 1 if time.time() - started > BACKOFF_RESET_S else failures + 1
            backoff = restart_backoff_s(failures)
            with contextlib.suppress(KubeError):
                await self.store.append_log(ns, name, f"rltui sandbox: {reason}\n")
            # Killed by the kubelet: bash as PID 1 ignores SIGTERM, so SIGKILL ends it (137).
            await self._mark_crashed(uid, ns, name, restarts, started, reason, 137 if killed else 1, backoff)
            if backoff:
                await self._event(pod, "Warning", "BackOff", f"Back-off restarting failed container {container} in "
                                  f"pod {name}_{ns}({uid})", "kubelet", pod["spec"].get("nodeName"))
                await asyncio.sleep(backoff)

    def _prestart_head(self, uid: str, ns: str, name: str, pod: dict) -> None:
        """Start the head pod's local Ray head while its image is pulled: the local head is the
        sandbox's stand-in, whose start (seconds of REAL time, a minute or more of the cloud's
        at speed 15) GKE does not have; the pod still becomes Ready only after its pull and its
        pod_start, as on GKE (the profile's pod_start counts `ray start` in). Not when its env
        cannot be built yet (a Secret missing: the kubelet says so, and the head starts later)."""
        try:
            self._head_env(pod)
        except Exception:  # noqa: BLE001 - _check_config reports it as the kubelet does
            return
        if uid not in self._boots and uid not in self._heads:
            self._boots[uid] = asyncio.ensure_future(self._boot_head(uid, ns, name, pod))

    async def _boot_head(self, uid: str, ns: str, name: str, pod: dict) -> RayHead:
        """Start the pod's head and wait until its dashboard answers, recorded as real time
        (`"real": true` in the sandbox's record: nothing models it)."""
        with self.world.record.operation("ray.head_start", f"pods/{ns}/{name}", failed="failed",
                                         real=True):
            head = await self._start_head(uid, pod)
            await asyncio.to_thread(head.wait_ready, HEAD_READY_TIMEOUT_S)
        return head

    async def _mark_crashed(self, uid: str, ns: str, name: str, restarts: int, started: float, reason: str,
                            exit_code: int = 1, backoff: float = 0.0) -> None:
        pod = await self._pod(uid, ns, name)
        status = pod.get("status") or {}
        node = self._node(pod["spec"].get("nodeName", "")) or {}
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
        last = {"terminated": {"exitCode": exit_code, "reason": "Error", "message": reason, "startedAt": stamp,
                               "finishedAt": now()}}
        await self._set_status(uid, ns, name, _pod_status(
            pod, gke.internal_ip(node), status.get("startTime") or now(), pod_ip=status.get("podIP"),
            waiting=("CrashLoopBackOff", f"back-off {backoff:.0f}s restarting failed container") if backoff else None,
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
        """Launch the pod's head with the Ray of its container's image (images.py: ImageUnavailable,
        a RuntimeError, when none runs here); if the pod goes meanwhile, the process is stopped by PID."""
        ray = ray_executable((pod["spec"].get("containers") or [{}])[0].get("image", ""))
        job = asyncio.ensure_future(asyncio.to_thread(RayHead.start, self._temp_dir(uid), self._head_env(pod), 1, ray))
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
        self._remember_cluster(uid, pod)
        self._spawn(self._keep_cluster_file(uid, head))
        return head

    def _stop_orphan(self, head: RayHead) -> None:
        self._live_heads[head.pid] = head
        self._report_children()
        task = asyncio.ensure_future(self._stop_head(head))
        self._head_stops.add(task)
        task.add_done_callback(self._head_stops.discard)

    def _release_head(self, uid: str) -> None:
        """Stop the pod's Ray head (SIGTERM to its PID) in the background."""
        boot = self._boots.pop(uid, None)
        if boot is not None:
            boot.cancel()   # _start_head stops a process that it started meanwhile
        head = self._heads.pop(uid, None)
        if head is not None:
            self._stop_orphan(head)
            self._gcs_lost(uid)
        self._head_clusters.pop(uid, None)

    async def _stop_head(self, head: RayHead) -> None:
        try:
            await asyncio.to_thread(head.stop)
        finally:
            self._live_heads.pop(head.pid, None)
            self._report_children()
            temp = head.temp_dir
            if temp.is_relative_to(self.state_dir.absolute()):
                await asyncio.to_thread(shutil.rmtree, temp, True)

    def _child_pids(self) -> set[int]:
        """The local processes this controller started (ProcessPods adds its containers')."""
        return set(self._live_heads)

    def _report_children(self) -> None:
        pids = sorted(self._child_pids())
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
