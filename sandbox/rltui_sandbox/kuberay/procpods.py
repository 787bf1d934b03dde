"""Containers the kubelet runs as REAL LOCAL PROCESSES: a pod whose one container runs a Python
script that lives in one of the pod's ConfigMap volumes (`command: [python, /opt/rltui/x.py]`
with `/opt/rltui` a configMap mount) - such as rltui's job supervisor on the
`rayproject/ray:2.46.0` image - is run with the Python of the environment that stands for its
image (images.py: Ray 2.46.0, not rltui's own), that environment's bin first on PATH, in its own
session, its stdout and stderr copied into the pod's log. Other containers keep the pretend
behaviour (kubelet.py).

Images: a container the sandbox runs for real (such a process, or a head pod's Ray container,
headpod.py) needs an environment for its image. Without one the kubelet reports the image as
one it cannot pull, in the kubelet's own words and states (Kubernetes pkg/kubelet/images/
image_manager.go `pullImage`, `evalCRIPullErr`; pkg/kubelet/kuberuntime/kuberuntime_container.go
`startContainer`): events Pulling `Pulling image "<image>"`, Failed `Failed to pull image
"<image>": <error>`, Failed `Error: ErrImagePull`, the container waiting with reason ErrImagePull
and the error as its message; then, while the pull backs off, BackOff `Back-off pulling image
"<image>"`, Failed `Error: ImagePullBackOff`, reason ImagePullBackOff with message `Back-off
pulling image "<image>": ErrImagePull: <error>` (the previous error, prevPullErrMsg); pulled
again after 10 s, doubling to 300 s (pkg/kubelet/kubelet.go imageBackOffPeriod,
MaxImageBackOff), so an environment installed meanwhile (`make ray-env`) is found. The error
text is the sandbox's own and says so (no registry is asked). Not modelled: when exactly the
kubelet's next sync turns ErrImagePull into ImagePullBackOff (here IMAGE_SYNC_S later), and the
back-off's real seconds are not scaled by the sandbox's speed (as CrashLoopBackOff's here).

What the kubelet does first, and how the sandbox does it:
- ConfigMap volumes (kubelet volume plugin configmap): each key (or each `items` entry) a file
  of mode defaultMode (0644) in a per-pod folder `<state_dir>/pods/<pod uid>/volumes/<volume>`;
  emptyDir volumes an empty folder there; a missing ConfigMap keeps the pod ContainerCreating
  with FailedMount `MountVolume.SetUp failed for volume "<v>" : configmap "<cm>" not found`, as
  the kubelet words it. Paths in command/args/workingDir and in the container's env values under
  a mountPath are rewritten to that folder (a process cannot see /opt/rltui). Later ConfigMap
  changes are not synced into a running container (the real kubelet syncs them within about a
  minute).
- Secret volumes: projected and kept current as secretvolumes.py does for the Ray pods (each key,
  or each `items` entry, a file; `optional`; updated at the kubelet's periodic sync); a Secret
  that does not exist, or a key `items` names that it lacks, keeps the pod ContainerCreating with
  FailedMount `MountVolume.SetUp failed for volume "<v>" : secret "<s>" not found` (or
  `references non-existent secret key: <key>`), unless the volume is optional
  (secretvolumes.mount_problem says where these come from).
- the ServiceAccount token volume (kube-api-access-*, mounted by the real admission plugin at
  /var/run/secrets/kubernetes.io/serviceaccount): `token` (minted through the TokenRequest
  path, bound to the pod: kube/serviceaccounts.py), `ca.crt` (the CA of the sandbox's HTTPS
  Kubernetes API) and `namespace`, in a folder whose path is env RLTUI_SERVICE_ACCOUNT_DIR
  (the script should read it, falling back to the in-cluster path). None with
  automountServiceAccountToken: false; no token when the ServiceAccount object does not exist
  (the sandbox keeps no `default` ServiceAccount objects).
- env: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT (the in-cluster config's variables,
  pointing at the HTTPS API the GKE cluster's endpoint names), HOSTNAME (the pod name), HOME
  (a per-pod folder), PATH, then the container's env as the kubelet resolves it (values,
  fieldRef, secretKeyRef), where a value naming a Service is rewritten to a local forwarder
  (svcproxy.py: the sandbox's one difference from a cluster, addresses). On a node whose pool
  runs the GKE metadata server (Workload Identity), GCE_METADATA_HOST and GCE_METADATA_IP name
  the pod's own address of the sandbox's GKE metadata server (gke_metadata.py says why), before
  the container's env (which may set them itself).
Lifecycle, as the kubelet's: Running and Ready once started (no probes are run); an exit is a
container restart (restartCount+1, lastState.terminated with the exit code; the first restart at
once, then CrashLoopBackOff back-off 10 s doubling to 5 min, reset after 10 min of running - the
kubelet's doBackOff/flowcontrol.Backoff) under
restartPolicy Always (OnFailure: only after a failure; Never: the pod ends Succeeded/Failed);
pod deletion: SIGTERM to the process group, SIGKILL after terminationGracePeriodSeconds, then
the pod goes; node lost: SIGKILL at once. Every process is reported through `on_children` with
the Ray heads, and stopped by PID when the controller stops.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import contextlib
import logging
import os
import re
import shutil
import signal
import time
from pathlib import Path

from rltui_sandbox import images
from rltui_sandbox import nodes as gke
from rltui_sandbox.gke_metadata import GkeMetadataServer
from rltui_sandbox.kube import serviceaccounts
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.store import now
from rltui_sandbox.kuberay.pods import BACKOFF_RESET_S, _meta, _pod_status, restart_backoff_s
from rltui_sandbox.kuberay.secretvolumes import SecretVolumes, mount_problem
from rltui_sandbox.kuberay.svcproxy import ServiceAddresses
from rltui_sandbox.kuberay.templates import _is_head

log = logging.getLogger("rltui_sandbox.kuberay")

SA_DIR_ENV = "RLTUI_SERVICE_ACCOUNT_DIR"
IN_CLUSTER_SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
STOP_GRACE_CAP_S = 10.0  # the controller's stop does not wait longer per process
IMAGE_BACKOFF_S, MAX_IMAGE_BACKOFF_S = 10.0, 300.0  # pkg/kubelet/kubelet.go imageBackOffPeriod, MaxImageBackOff
IMAGE_SYNC_S = 1.0  # ErrImagePull until the next sync finds the pull backing off (the sandbox's choice)
_PYTHON = re.compile(r"python(3(\.[0-9]+)?)?")


def _argv(container: dict) -> list[str]:
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]


def script_container(pod: dict) -> dict | None:
    """The pod's container when it is one the sandbox runs as a process (see the module doc)."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if len(containers) != 1:
        return None
    container = containers[0]
    argv = _argv(container)
    if not argv or not _PYTHON.fullmatch(os.path.basename(argv[0])):
        return None
    script = next((a for a in argv[1:] if not a.startswith("-")), None)
    if script is None or any(a in ("-c", "-m") for a in argv[1:argv.index(script)]):
        return None
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        path = str(mount.get("mountPath", "")).rstrip("/")
        if "configMap" in (volumes.get(mount.get("name")) or {}) and (script == path or script.startswith(path + "/")):
            return container
    return None


def _rewrite_path(arg: str, mounts: dict[str, Path]) -> str:
    for mount in sorted(mounts, key=len, reverse=True):
        if arg == mount or arg.startswith(mount + "/"):
            return str(mounts[mount]) + arg[len(mount):]
    return arg


class ProcessPods:
    """KubeRayController's process containers, part of the kubelet role."""

    def init_process_pods(self) -> None:
        self._procs: dict[str, asyncio.subprocess.Process] = {}  # pod uid -> its process
        self._proc_grace: dict[str, float] = {}
        self._proc_stops: dict[str, asyncio.Task] = {}
        self.addresses = ServiceAddresses(self.store)
        self.metadata = GkeMetadataServer(self.world, self.store)  # Workload Identity's server

    def _pod_dir(self, uid: str) -> Path:
        return (self.state_dir / "pods" / uid).absolute()

    # ---- volumes --------------------------------------------------------------------------------

    def _missing_source(self, pod: dict) -> tuple[str, str] | None:
        """(volume, what the kubelet says) for the first ConfigMap or Secret volume it cannot set up."""
        ns = _meta(pod)["namespace"]
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            ref, secret = vol.get("configMap"), vol.get("secret")
            if isinstance(secret, dict):
                found = self.store.list_sync("secrets", ns, field_selector=f"metadata.name={secret.get('secretName')}")
                problem = mount_problem(found[0] if found else None, secret)
                if problem:
                    return vol["name"], problem
            if not isinstance(ref, dict) or ref.get("optional"):
                continue
            if not self.store.list_sync("configmaps", ns, field_selector=f"metadata.name={ref.get('name')}"):
                return vol["name"], f'configmap "{ref.get("name", "")}" not found'
        return None

    async def _mount_configmaps(self, uid: str, ns: str, name: str, node_name: str) -> None:
        """Wait for the pod's ConfigMaps and Secrets (FailedMount while one cannot be mounted)."""
        while True:
            token = self._changed
            pod = await self._pod(uid, ns, name)
            missing = self._missing_source(pod)
            if missing is None:
                return
            message = f'MountVolume.SetUp failed for volume "{missing[0]}" : {missing[1]}'
            await self._waiting(uid, ns, name, "ContainerCreating")
            await self._event(pod, "Warning", "FailedMount", message, "kubelet", node_name)
            await self._until_change(token)

    def _materialize(self, pod: dict, container: dict) -> dict[str, Path]:
        """Write the container's ConfigMap/emptyDir volumes; mountPath -> local folder or file."""
        ns, uid = _meta(pod)["namespace"], _meta(pod)["uid"]
        volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
        base = self._pod_dir(uid) / "volumes"
        mounts: dict[str, Path] = {}
        for mount in container.get("volumeMounts") or []:
            vol = volumes.get(mount.get("name")) or {}
            folder = base / str(mount.get("name"))
            if isinstance(vol.get("configMap"), dict):
                ref = vol["configMap"]
                found = self.store.list_sync("configmaps", ns, field_selector=f"metadata.name={ref.get('name')}")
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True, mode=0o700)
                if found:
                    self._write_configmap(folder, found[0], ref)
            elif "emptyDir" in vol:
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            else:
                continue
            sub = str(mount.get("subPath") or "")
            mounts[str(mount.get("mountPath", "")).rstrip("/")] = folder / sub if sub else folder
        return mounts

    @staticmethod
    def _write_configmap(folder: Path, cm: dict, ref: dict) -> None:
        files: dict[str, bytes] = {k: str(v).encode() for k, v in (cm.get("data") or {}).items()}
        files.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
        mode = int(ref.get("defaultMode", 420))
        items = ref.get("items")
        chosen = [(i["key"], i.get("path", i["key"]), int(i.get("mode", mode))) for i in items or []
                  if i.get("key") in files] if items else [(k, k, mode) for k in files]
        for key, rel, file_mode in chosen:
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(files[key])
            path.chmod(file_mode & 0o777)

    def _service_account_dir(self, pod: dict) -> Path | None:
        """token, ca.crt and namespace for the pod's ServiceAccount (None: not mounted)."""
        spec, meta = pod.get("spec") or {}, _meta(pod)
        sa_name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        found = self.store.list_sync("serviceaccounts", meta["namespace"], field_selector=f"metadata.name={sa_name}")
        automount = spec.get("automountServiceAccountToken")
        if automount is None and found:
            automount = found[0].get("automountServiceAccountToken")
        if automount is False:
            return None
        folder = self._pod_dir(meta["uid"]) / "serviceaccount"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        ca = base64.b64decode(self.world.kube_ca_b64) if self.world.kube_ca_b64 else b""
        (folder / "ca.crt").write_bytes(ca)
        (folder / "namespace").write_text(meta["namespace"])
        if found:
            token, _ = serviceaccounts.mint(self.store.sa_key, found[0], pod=pod,
                                            node=self._node(spec.get("nodeName", "")))
            path = folder / "token"
            path.write_text(token)
            path.chmod(0o600)
        return folder

    # ---- the process ----------------------------------------------------------------------------

    async def _process_env(self, pod: dict, container: dict, sa_dir: Path | None,
                           mounts: dict[str, Path] | None = None) -> dict[str, str]:
        ns = _meta(pod)["namespace"]
        host, _, port = str(self.world.kube_endpoint).partition(":")
        home = self._pod_dir(_meta(pod)["uid"]) / "home"
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOSTNAME": _meta(pod)["name"], "HOME": str(home),
               "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port or "443"}
        env.update(await self.metadata.env_for(pod, self._node((pod.get("spec") or {}).get("nodeName", ""))))
        for key, value in self._resolve_env(pod, container).items():
            env[key] = _rewrite_path(await self.addresses.rewrite(value, ns), mounts or {})
        if sa_dir is not None:
            env[SA_DIR_ENV] = str(sa_dir)
        return env

    async def _start_process(self, pod: dict, container: dict) -> asyncio.subprocess.Process:
        mounts = await asyncio.to_thread(self._materialize, pod, container)
        mounts.update(SecretVolumes.of(self).mounts_for(pod, container))  # projected, then kept synced
        sa_dir = await asyncio.to_thread(self._service_account_dir, pod)
        if sa_dir is not None:
            mounts.setdefault(IN_CLUSTER_SA_DIR, sa_dir)
        env = await self._process_env(pod, container, sa_dir, mounts)
        python = images.for_image(str(container.get("image", ""))).python
        if not any(e.get("name") == "PATH" for e in container.get("env") or []):
            # The image's Python first on PATH, as its ENV PATH puts it (the container's own PATH wins).
            env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
        argv = [str(python), *[_rewrite_path(a, mounts) for a in _argv(container)[1:]]]
        cwd = _rewrite_path(str(container.get("workingDir") or ""), mounts) or str(self._pod_dir(_meta(pod)["uid"]))
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True)
        uid = _meta(pod)["uid"]
        self._procs[uid] = proc
        self._proc_grace[uid] = float((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        self._report_children()
        return proc

    async def _copy_output(self, ns: str, name: str, container: str, proc: asyncio.subprocess.Process) -> None:
        """stdout+stderr into the pod's log until the process closes them."""
        assert proc.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        gone = False
        while chunk := await proc.stdout.read(65536):
            text = decoder.decode(chunk)
            if text and not gone:
                try:
                    await self.store.append_log(ns, name, text, container)
                except KubeError:
                    gone = True  # the pod is gone: keep draining so the process never blocks

    async def _supervise_process(self, uid: str, ns: str, name: str, adopted: bool) -> None:
        pod = await self._pod(uid, ns, name)
        first = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]
        restarts = first.get("restartCount", 0) + (1 if adopted else 0)
        failures = 0
        while True:
            pod = await self._pod(uid, ns, name)
            container = script_container(pod) or pod["spec"]["containers"][0]
            node = pod["spec"].get("nodeName", "")
            await self._event(pod, "Normal", "Created", f"Created container: {container['name']}", "kubelet", node)
            started = time.time()
            proc = await self._start_process(pod, container)
            await self._event(pod, "Normal", "Started", f"Started container {container['name']}", "kubelet", node)
            copy = asyncio.ensure_future(self._copy_output(ns, name, container["name"], proc))
            try:
                await self._mark_running(uid, ns, name, ready=True, restarts=restarts)
                code = await proc.wait()
                await copy
            except asyncio.CancelledError:
                copy.add_done_callback(lambda _f: None)
                raise  # the pod is being deleted or its node is gone: _terminate / _force_delete stop it
            self._procs.pop(uid, None)
            self._report_children()
            pod = await self._pod(uid, ns, name)
            policy = pod["spec"].get("restartPolicy", "Always")
            last = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                   "startedAt": _stamp(started), "finishedAt": now(),
                                   "containerID": f"containerd://{uid.replace('-', '')}{restarts:08x}"}}
            if policy == "Never" or (policy == "OnFailure" and code == 0):
                await self._finish(uid, ns, name, last, restarts)
                return
            failures = 1 if time.time() - started > BACKOFF_RESET_S else failures + 1
            restarts += 1
            if failures == 1:  # the kubelet's first restart is at once; its back-off starts after it
                await self._mark_crashed_at_once(uid, ns, name, restarts, last)
                continue
            backoff = restart_backoff_s(failures)
            await self._set_status(uid, ns, name, _pod_status(
                pod, gke.internal_ip(self._node(node) or {}), (pod.get("status") or {}).get("startTime") or now(),
                pod_ip=(pod.get("status") or {}).get("podIP"),
                waiting=("CrashLoopBackOff", f"back-off {backoff:.0f}s restarting failed container="
                         f"{container['name']} pod={name}_{ns}({uid})"),
                restarts=restarts, last_state=last))
            await self._event(pod, "Warning", "BackOff", f"Back-off restarting failed container {container['name']} "
                              f"in pod {name}_{ns}({uid})", "kubelet", node)
            await asyncio.sleep(backoff)

    async def _mark_crashed_at_once(self, uid: str, ns: str, name: str, restarts: int, last: dict) -> None:
        pod = await self._pod(uid, ns, name)
        status = pod.get("status") or {}
        await self._set_status(uid, ns, name, _pod_status(
            pod, gke.internal_ip(self._node(pod["spec"].get("nodeName", "")) or {}), status.get("startTime") or now(),
            pod_ip=status.get("podIP"), waiting=("ContainerCreating", ""), restarts=restarts, last_state=last))

    async def _finish(self, uid: str, ns: str, name: str, last: dict, restarts: int) -> None:
        """restartPolicy Never/OnFailure: the pod ends Succeeded or Failed with the container's state."""
        pod = await self._pod(uid, ns, name)
        status = dict(pod.get("status") or {})
        code = last["terminated"]["exitCode"]
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        entries = []
        for entry in status.get("containerStatuses") or []:
            entries.append({**entry, "ready": False, "started": False, "restartCount": restarts,
                            "state": last, "lastState": {}})
        status["containerStatuses"] = entries
        status["conditions"] = [{**c, "status": "False", "reason": "PodCompleted"}
                                if c.get("type") in ("Ready", "ContainersReady") else c
                                for c in status.get("conditions") or []]
        await self._set_status(uid, ns, name, status)
        self._settled.add(uid)

    # ---- images the sandbox cannot run ---------------------------------------------------------

    @staticmethod
    def _unrunnable_image(pod: dict, container: dict) -> str | None:
        """Why no environment runs `container`'s image here (images.py), or None: one does, or the
        sandbox only pretends to run this container (any image then does)."""
        spec = pod.get("spec") or {}
        first = (spec.get("containers") or [{}])[0]
        real = script_container(pod) or (first if _is_head(pod) else None)
        if real is None or real.get("name") != container.get("name"):
            return None
        try:
            images.for_image(str(container.get("image", "")))
        except images.ImageUnavailable as exc:
            return str(exc)
        return None

    async def _image_pull_failing(self, uid: str, ns: str, name: str, node_name: str, container: dict,
                                  error: str) -> None:
        """The kubelet's failed pull and its back-off (module doc), until a retry finds an
        environment for the image; _Gone or cancelled when the pod goes meanwhile."""
        boot = self._boots.pop(uid, None)  # a head begun during the pull (headpod.py): it cannot start
        if boot is not None:
            boot.add_done_callback(lambda f: f.cancelled() or f.exception())
            boot.cancel()
        image, backoff = str(container.get("image", "")), IMAGE_BACKOFF_S
        while True:
            pod = await self._pod(uid, ns, name)
            await self._event(pod, "Normal", "Pulling", f'Pulling image "{image}"', "kubelet", node_name)
            await self._event(pod, "Warning", "Failed", f'Failed to pull image "{image}": {error}', "kubelet",
                              node_name)
            await self._event(pod, "Warning", "Failed", "Error: ErrImagePull", "kubelet", node_name)
            await self._waiting(uid, ns, name, "ErrImagePull", error)
            await asyncio.sleep(IMAGE_SYNC_S)
            pod = await self._pod(uid, ns, name)
            await self._event(pod, "Normal", "BackOff", f'Back-off pulling image "{image}"', "kubelet", node_name)
            await self._event(pod, "Warning", "Failed", "Error: ImagePullBackOff", "kubelet", node_name)
            await self._waiting(uid, ns, name, "ImagePullBackOff",
                                f'Back-off pulling image "{image}": ErrImagePull: {error}')
            await asyncio.sleep(max(backoff - IMAGE_SYNC_S, 0.0))
            backoff = min(backoff * 2, MAX_IMAGE_BACKOFF_S)
            pod = await self._pod(uid, ns, name)
            again = self._unrunnable_image(pod, container)
            if again is None:
                return
            error = again

    # ---- stopping -------------------------------------------------------------------------------

    def _stop_process(self, uid: str, grace: float | None = None) -> asyncio.Task | None:
        """SIGTERM to the process group now, SIGKILL after `grace` (default: the pod's
        terminationGracePeriodSeconds); the task ends once the process is gone."""
        if uid in self._proc_stops:
            return self._proc_stops[uid]
        proc = self._procs.get(uid)
        if proc is None:
            return None
        wait = self._proc_grace.get(uid, 30.0) if grace is None else grace
        task = asyncio.ensure_future(self._end_process(uid, proc, wait))
        self._proc_stops[uid] = task
        return task

    async def _end_process(self, uid: str, proc: asyncio.subprocess.Process, grace: float) -> None:
        try:
            if proc.returncode is None:
                _signal_group(proc.pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
                try:
                    await asyncio.wait_for(proc.wait(), grace if grace > 0 else 5.0)
                except asyncio.TimeoutError:
                    _signal_group(proc.pid, signal.SIGKILL)
                    await asyncio.wait_for(proc.wait(), 5.0)
            _signal_group(proc.pid, signal.SIGKILL)  # whatever the script left in its session
        finally:
            if self._procs.get(uid) is proc:
                del self._procs[uid]
            self._proc_stops.pop(uid, None)
            self._report_children()

    async def _stop_all_processes(self) -> None:
        """The controller's stop: every process ends (SIGTERM, SIGKILL after at most 10 s)."""
        tasks = [t for uid in list(self._procs) if (t := self._stop_process(
            uid, min(self._proc_grace.get(uid, 30.0), STOP_GRACE_CAP_S))) is not None]
        await asyncio.gather(*tasks, *self._proc_stops.values(), return_exceptions=True)
        await self.addresses.close()
        await self.metadata.close()

    def _drop_pod_dir(self, uid: str) -> None:
        self.metadata.release(uid)  # the pod is gone: so is its metadata server address
        folder = self._pod_dir(uid)
        if folder.is_relative_to(self.state_dir.absolute()) and folder.exists():
            shutil.rmtree(folder, ignore_errors=True)

    def _child_pids(self) -> set[int]:
        """on_children hears the Ray heads' PIDs and the processes' (HeadPods._report_children)."""
        return {*self._live_heads, *(p.pid for p in self._procs.values())}

    @property
    def process_pids(self) -> dict[str, int]:
        """Pod uid -> PID of its container process, for the processes running now."""
        return {uid: p.pid for uid, p in self._procs.items() if p.returncode is None}


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


__all__ = ["IN_CLUSTER_SA_DIR", "SA_DIR_ENV", "ProcessPods", "script_container"]
