"""The RayCluster's Secret volume on the head pod: the Secret's keys as files, laid out as the
kubelet's atomic writer lays them out, updated at the kubelet's next sync of the pod; the head's
env names the folder and holds no token; a job run with the run script reads the token the
Secret has when it starts, after a change too. Nothing here prints a token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from rltui import manifests
from rltui_sandbox.kuberay import secretvolumes
from rltui_sandbox.kuberay.pods import _Gone
from rltui_sandbox.profile import Clock, LatencyProfile

NAME = "ray-a4-gpu-spot"
SECRET = f"{NAME}-job-secrets"
NEW_TOKEN = "hf_" + "N3wTok" * 6


def sha12(value: str | bytes) -> str:
    return hashlib.sha256(value if isinstance(value, bytes) else value.encode()).hexdigest()[:12]


# ---- the kubelet's projection and sync, on a controller of its own (no Ray) -------------------

class _Store:
    def __init__(self) -> None:
        self.secrets: dict[str, dict] = {}

    def list_sync(self, plural: str, ns: str, field_selector: str = "") -> list[dict]:
        name = field_selector.removeprefix("metadata.name=")
        return [self.secrets[name]] if plural == "secrets" and name in self.secrets else []

    def put(self, name: str, **values: str) -> None:
        self.secrets[name] = {"data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}}


class _Controller:
    """What SecretVolumes uses of the KubeRayController: store, clock, pod folders, tasks."""

    def __init__(self, root: Path, speed: float) -> None:
        self.store, self.root, self.gone = _Store(), root, False
        self.clock = Clock(LatencyProfile.load(), speed)
        self.tasks: list[asyncio.Task] = []

    def _pod_dir(self, uid: str) -> Path:
        return self.root / "pods" / uid

    def _spawn(self, coro: Any) -> asyncio.Task:
        self.tasks.append(asyncio.ensure_future(coro))
        return self.tasks[-1]

    async def _pod(self, uid: str, ns: str, name: str) -> dict:
        if self.gone:
            raise _Gone
        return {}


def _head(volume: dict) -> tuple[dict, dict]:
    container = {"name": "ray-head", "volumeMounts": [dict(manifests.SECRETS_VOLUME_MOUNT)]}
    pod = {"metadata": {"name": "h", "namespace": "default", "uid": "u1"},
           "spec": {"containers": [container], "volumes": [volume]}}
    return pod, container


def test_the_secret_is_files_behind_an_atomic_data_link(tmp_path) -> None:
    ctl = _Controller(tmp_path, speed=60.0)
    ctl.store.put(SECRET, HF_TOKEN="hf_a", netrc="machine api.wandb.ai\n  login user\n  password k\n")
    pod, container = _head({"name": "job-secrets", "secret": {"secretName": SECRET, "optional": True}})
    env = secretvolumes.head_secret_env(ctl, pod, container)
    folder = Path(env["SECRETS_MOUNT"])
    assert folder == tmp_path / "pods" / "u1" / "volumes" / "job-secrets"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("..")) == ["HF_TOKEN", "netrc"]
    assert os.readlink(folder / "HF_TOKEN") == "..data/HF_TOKEN"
    assert os.readlink(folder / "..data").startswith("..")   # the timestamped folder
    assert (folder / "HF_TOKEN").read_text() == "hf_a"
    assert (folder / "HF_TOKEN").stat().st_mode & 0o777 == 0o644   # defaultMode's default
    # An optional volume whose Secret does not exist is mounted empty.
    ctl.store.secrets.clear()
    pod["metadata"]["uid"] = "u2"
    empty = Path(secretvolumes.head_secret_env(ctl, pod, container)["SECRETS_MOUNT"])
    assert [p.name for p in empty.iterdir() if not p.name.startswith("..")] == []
    # items: only the keys named, under their paths and modes.
    files = secretvolumes.payload({"data": {"HF_TOKEN": base64.b64encode(b"x").decode()}},
                                  {"items": [{"key": "HF_TOKEN", "path": "hf/token", "mode": 0o400},
                                             {"key": "absent", "path": "no"}]})
    assert files == {"hf/token": (b"x", 0o400)}


def test_a_changed_secret_reaches_the_files_at_the_next_kubelet_sync(tmp_path) -> None:
    """60-90 profile seconds (speed 60: 1-1.5 s): not at once, within the sync period + jitter;
    a key taken out of the Secret goes; the old timestamped folder goes; the pod gone, it stops."""
    async def run() -> None:
        ctl = _Controller(tmp_path, speed=60.0)
        ctl.store.put(SECRET, HF_TOKEN="hf_old", netrc="n")
        pod, container = _head({"name": "job-secrets", "secret": {"secretName": SECRET, "optional": True}})
        folder = Path(secretvolumes.head_secret_env(ctl, pod, container)["SECRETS_MOUNT"])
        first = os.readlink(folder / "..data")
        await asyncio.sleep(0.2)
        changed = time.monotonic()
        ctl.store.put(SECRET, HF_TOKEN=NEW_TOKEN)
        await asyncio.sleep(0.3)
        assert (folder / "HF_TOKEN").read_text() == "hf_old", "the kubelet has not synced the pod yet"
        while (folder / "HF_TOKEN").read_text() != NEW_TOKEN:
            assert time.monotonic() - changed < 1.5 + 0.3, "not within the kubelet's sync period"
            await asyncio.sleep(0.05)
        assert not (folder / "netrc").exists()
        assert not (folder / first).exists() and os.readlink(folder / "..data") != first
        ctl.gone = True
        await asyncio.wait_for(asyncio.gather(*ctl.tasks), 3)

    asyncio.run(run())


# ---- on the sandbox's RayCluster, with its real Ray head ---------------------------------------

def _pods(core: client.CoreV1Api) -> list[Any]:
    return core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={NAME}").items


def _ready(pod: Any) -> bool:
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box()
    cfg = tools.config(MAX_STEPS="2")
    core = box.codelab_raycluster(cfg)
    try:
        tools.wait_for(lambda: (pods := _pods(core)) and len(pods) == 3 and all(map(_ready, pods))
                       and box.controller.dashboard_url(), 90, "head and 2 workers Ready")
    except AssertionError as exc:
        states = [(p.metadata.name, p.status.phase, [(c.ready, c.state) for c in p.status.container_statuses or []])
                  for p in _pods(core)]
        raise AssertionError(f"{exc}; pods: {states}") from None
    return box


@pytest.mark.slow
@pytest.mark.timeout(150, func_only=True)
def test_a_job_reads_the_token_the_secret_has_when_it_starts(box, tools, tmp_path) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    core, cfg = box.core, box.cfg
    (pid,) = box.controller.head_pids
    environ = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in e)
    assert not {"HF_TOKEN", "WANDB_API_KEY"} & set(environ), "the head's env holds no token"
    assert tools.hf_token not in Path(f"/proc/{pid}/environ").read_text()
    folder = Path(environ["SECRETS_MOUNT"])
    assert sha12((folder / "HF_TOKEN").read_bytes()) == sha12(tools.hf_token)
    # The token changes in env.sh: the Secret is applied again, and the job submitted right after.
    new = cfg.model_copy(update={"hf_token": type(cfg.hf_token)(NEW_TOKEN)})
    core.replace_namespaced_secret(SECRET, "default", manifests.job_secret(new))
    for name, text in manifests.job_files(new).items():
        (tmp_path / name).write_text(text)
    jobs = JobSubmissionClient(box.controller.dashboard_url())
    env = {**manifests.runtime_env(new, fingerprints=True)["env_vars"], "RLTUI_DEMO_CHECKPOINT_MB": "0.1"}
    job = jobs.submit_job(entrypoint="bash run_nemo_rl.sh",
                          runtime_env={"working_dir": str(tmp_path), "env_vars": env})
    deadline = time.monotonic() + 90
    while not (status := jobs.get_job_status(job)).is_terminal():
        assert time.monotonic() < deadline, f"job still {status}"
        time.sleep(0.3)
    logs = jobs.get_job_logs(job)
    assert status == JobStatus.SUCCEEDED, logs[-3000:]
    assert f"rltui sandbox: Hugging Face token sha256:{sha12(NEW_TOKEN)} from the file HF_TOKEN_PATH" in logs
    assert "variables with a token: none" in logs
    info = jobs.get_job_info(job)
    for text in (logs, str(info.runtime_env), str(info)):
        assert NEW_TOKEN not in text and tools.hf_token not in text
