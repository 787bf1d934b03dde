"""Secret volumes of a container the sandbox runs (a head pod's Ray container, headpod.py; a process
pod's script, procpods.py), as the kubelet projects them, kept current.

What the kubelet does, and how the sandbox does it:
- The secret volume plugin (kubernetes pkg/volume/secret/secret.go, SetUpAt and MakePayload):
  each key of the Secret's data (or each `items` entry: key -> path, its own mode) is a file of
  mode `defaultMode` (0644 when unset: core/v1 SecretVolumeSourceDefaultMode); an `optional`
  volume whose Secret does not exist is mounted empty. Here: in a per-pod folder
  `<state_dir>/pods/<pod uid>/volumes/<volume>` (beside procpods.py's ConfigMap volumes; the
  kubelet drops the pod's folder with the pod), named in the container's env as SECRETS_MOUNT
  (the run script's variable, rltui/manifests.py run_script), since a process cannot see the
  mount path; a process pod's paths under the mountPath are rewritten to it instead (procpods.py).
  `optional` and `items` as the API reference's SecretVolumeSource has them (kubernetes.io/docs/
  reference/kubernetes-api/config-and-storage-resources/volume/): optional "Specify whether the
  Secret or its keys must be defined"; items: "If unspecified, each key-value pair in the Data
  field of the referenced Secret will be projected into the volume as a file whose name is the
  key and content is the value. If specified, the listed keys will be projected into the
  specified paths, and unlisted keys will not be present. If a key is specified which is not
  present in the Secret, the volume setup will error unless it is marked optional."
  (pkg/volume/secret/secret.go MakePayload: "references non-existent secret key: <key>"). The
  mount's failure for a missing Secret or key (`mount_problem`) holds a process pod in
  ContainerCreating with FailedMount (procpods.py); for a head pod it is not imitated here.
- The atomic writer (pkg/volume/util/atomic_writer.go): the files live in a timestamped folder
  `..<UTC date>.<random>`, `..data` is a symlink to it and each visible name a symlink to
  `..data/<name>`; an update writes a new folder and renames a new `..data` over the old one, so
  a reader sees the old set or the new one, never half of each; names no longer in the Secret
  go. A payload equal to what is there writes nothing.
- Updates: "Mounted Secrets are updated automatically ... the kubelet checks whether the mounted
  Secret is fresh on every periodic sync", so a change lands after up to "the kubelet sync
  period + cache propagation delay" (kubernetes.io, Concepts, Configuration, Secrets). A pod is
  synced every syncFrequency (1 min by default, KubeletConfiguration) jittered by up to +50%
  (pkg/kubelet/pod_workers.go: wait.Jitter(resyncInterval, workerResyncIntervalJitterFactor
  = 0.5)). Here: the folder is projected when the container starts and again at every such
  sync, on the sandbox's clock (60-90 profile seconds; a seeded draw per pod). The watch-based
  cache's own propagation delay (milliseconds) is not modelled. subPath mounts, which never
  update, are not used by rltui and not imitated.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kuberay.pods import _Gone, _meta

log = logging.getLogger("rltui_sandbox.kuberay")

ENV_VAR = "SECRETS_MOUNT"
KUBELET_SYNC_S = 60.0  # syncFrequency's default
SYNC_JITTER = 0.5  # workerResyncIntervalJitterFactor
DEFAULT_MODE = 0o644  # SecretVolumeSourceDefaultMode
DATA_DIR = "..data"


def payload(secret: dict | None, source: dict) -> dict[str, tuple[bytes, int]]:
    """Path -> (content, mode) the secret volume plugin projects for `source` (a volume's
    `secret` member) from the Secret as stored (None: it does not exist)."""
    data = {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}
    mode = int(source.get("defaultMode", DEFAULT_MODE)) & 0o777
    items = source.get("items")
    if not items:
        return {key: (value, mode) for key, value in data.items()}
    return {str(i.get("path") or i["key"]): (data[i["key"]], int(i.get("mode", mode)) & 0o777)
            for i in items if i.get("key") in data}


def mount_problem(secret: dict | None, source: dict) -> str | None:
    """What the kubelet's secret volume plugin says when it cannot set up `source` (a volume's
    `secret` member) from the Secret as stored (None: it does not exist), else None: the Secret
    missing (the kubelet's watch-based cache answers NotFound for resource "secret"), or a key
    `items` names that it lacks; neither when the volume is optional."""
    if source.get("optional"):
        return None
    if secret is None:
        return f'secret "{source.get("secretName", "")}" not found'
    data = secret.get("data") or {}
    missing = next((i["key"] for i in source.get("items") or [] if i.get("key") not in data), None)
    return None if missing is None else f"references non-existent secret key: {missing}"


def _current(folder: Path) -> dict[str, tuple[bytes, int]] | None:
    """What `..data` holds now (None: nothing projected yet)."""
    data = folder / DATA_DIR
    if not data.is_symlink():
        return None
    out = {}
    for path in data.resolve().rglob("*"):
        if path.is_file():
            out[str(path.relative_to(data.resolve()))] = (path.read_bytes(), path.stat().st_mode & 0o777)
    return out


def write_atomic(folder: Path, files: dict[str, tuple[bytes, int]]) -> bool:
    """Project `files` into `folder` as the kubelet's AtomicWriter does; False when unchanged."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    before = _current(folder)
    if before == files:
        return False
    old = os.readlink(folder / DATA_DIR) if (folder / DATA_DIR).is_symlink() else None
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
    new = Path(tempfile.mkdtemp(prefix=stamp, dir=folder))
    new.chmod(0o755)
    for rel, (content, mode) in files.items():
        path = new / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)
    for top in {rel.split("/", 1)[0] for rel in files}:
        if not (folder / top).is_symlink():
            os.symlink(f"{DATA_DIR}/{top}", folder / top)
    tmp = folder / "..data_tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    os.symlink(new.name, tmp)
    os.replace(tmp, folder / DATA_DIR)
    for gone in {rel.split("/", 1)[0] for rel in before or {}} - {rel.split("/", 1)[0] for rel in files}:
        with contextlib.suppress(FileNotFoundError):
            (folder / gone).unlink()
    if old:
        shutil.rmtree(folder / old, ignore_errors=True)
    return True


class SecretVolumes:
    """The Secret volumes of the controller's head pods: projected at container start
    (`env_for`, from HeadPods._head_env) and at every kubelet sync of the pod after."""

    def __init__(self, ctl: Any) -> None:
        self.ctl = ctl
        self._syncs: dict[str, asyncio.Task] = {}
        self._lock = threading.Lock()  # AtomicWriter "must be synchronized by the caller"
        self._written: dict[Path, dict] = {}  # folder -> the payload last projected there

    @staticmethod
    def of(ctl: Any) -> "SecretVolumes":
        """The controller's one instance (made on first use)."""
        found = ctl.__dict__.get("_secret_volumes")
        if found is None:
            found = ctl.__dict__["_secret_volumes"] = SecretVolumes(ctl)
        return found

    def _mounts(self, pod: dict, container: dict) -> list[tuple[str, dict, Path]]:
        """(volume name, its `secret` source, local folder) for each Secret volume the container mounts."""
        volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
        base = self.ctl._pod_dir(_meta(pod)["uid"]) / "volumes"
        out = []
        for mount in container.get("volumeMounts") or []:
            source = (volumes.get(mount.get("name")) or {}).get("secret")
            if isinstance(source, dict):
                out.append((str(mount["name"]), source, base / str(mount["name"])))
        return out

    def _payloads(self, ns: str, mounts: list[tuple[str, dict, Path]]) -> list[tuple[Path, dict]]:
        """(folder, files) for each mount, from the store as it is now (read on the loop)."""
        out = []
        for _name, source, folder in mounts:
            found = self.ctl.store.list_sync("secrets", ns, field_selector=f"metadata.name={source.get('secretName')}")
            out.append((folder, payload(found[0] if found else None, source)))
        return out

    def _write(self, payloads: list[tuple[Path, dict]], force: bool = True) -> None:
        """Project each payload; unless `force` (a container start), only those that changed
        since the last projection: each sync of a pod costs two lookups, not a folder read."""
        with self._lock:
            for folder, files in payloads:
                if not force and self._written.get(folder) == files:
                    continue
                if write_atomic(folder, files):
                    log.info("kuberay: Secret volume %s projected (%d files)", folder.name, len(files))
                self._written[folder] = files

    def env_for(self, pod: dict, container: dict) -> dict[str, str]:
        """Project the container's Secret volumes now and keep them synced; the env naming the
        first one's folder (empty when the container mounts none)."""
        mounts = self._project(pod, container)
        return {ENV_VAR: str(mounts[0][2])} if mounts else {}

    def mounts_for(self, pod: dict, container: dict) -> dict[str, Path]:
        """Project the container's Secret volumes now and keep them synced: mountPath -> folder
        (a process pod's paths under a mountPath are rewritten to its folder)."""
        paths = {str(m.get("name")): str(m.get("mountPath", "")).rstrip("/") for m in container.get("volumeMounts") or []}
        return {paths[name]: folder for name, _source, folder in self._project(pod, container)}

    def _project(self, pod: dict, container: dict) -> list[tuple[str, dict, Path]]:
        mounts = self._mounts(pod, container)
        if not mounts:
            return []
        meta = _meta(pod)
        self._write(self._payloads(meta["namespace"], mounts))
        uid = meta["uid"]
        if uid not in self._syncs:
            with contextlib.suppress(RuntimeError):  # no running loop: projected once only
                asyncio.get_running_loop()
                task = self.ctl._spawn(self._keep(uid, meta["namespace"], meta["name"], mounts))
                self._syncs[uid] = task
                task.add_done_callback(lambda _t: self._syncs.pop(uid, None))
        return mounts

    async def _keep(self, uid: str, ns: str, name: str, mounts: list[tuple[str, dict, Path]]) -> None:
        """The kubelet's periodic pod sync: each 60-90 profile seconds, the Secret as it is now."""
        draws = random.Random(f"{self.ctl.clock.seed}/{uid}")
        try:
            while True:
                period = KUBELET_SYNC_S * (1.0 + SYNC_JITTER * draws.random())
                await asyncio.sleep(period / self.ctl.clock.speed)
                try:
                    await self.ctl._pod(uid, ns, name)
                except (_Gone, KubeError):
                    return
                payloads = self._payloads(ns, mounts)
                if all(self._written.get(folder) == files for folder, files in payloads):
                    continue
                try:
                    await asyncio.to_thread(self._write, payloads, False)
                except OSError:
                    log.exception("kuberay: projecting the Secret volumes of %s/%s failed", ns, name)
        finally:
            for _name, _source, folder in mounts:
                self._written.pop(folder, None)

def head_secret_env(ctl: Any, pod: dict, container: dict) -> dict[str, str]:
    """HeadPods._head_env's hook: see SecretVolumes.env_for."""
    return SecretVolumes.of(ctl).env_for(pod, container)
