"""The codelab's `ray job submit` against the sandbox's real Ray head, and the head's clean stop.

Both tests share the session's one head; the stop test stops it, so it comes last in this file.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _proc_stats() -> dict[int, tuple[str, int, int, int, str]]:
    """pid -> (state, ppid, pgrp, session, cmdline), read straight from /proc."""
    stats = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        state, ppid, pgrp, session = stat[stat.rindex(")") + 2:].split()[:4]
        stats[int(pid)] = (state, int(ppid), int(pgrp), int(session), cmdline[:120])
    return stats


def _running(pids: set[int]) -> list[str]:
    return [f"{pid} {s[4]}" for pid, s in _proc_stats().items() if pid in pids and s[0] != "Z"]


def _head_processes(head_pid: int) -> set[int]:
    """The head's session and process group, plus every descendant (job entrypoints run in
    sessions of their own)."""
    stats = _proc_stats()
    found = {pid for pid, s in stats.items() if head_pid in (s[2], s[3])}
    grew = True
    while grew:
        more = {pid for pid, s in stats.items() if s[1] in found and pid not in found}
        found |= more
        grew = bool(more)
    return found


def test_codelab_job_submission_succeeds(demo_ray, tmp_path: Path, demo) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    workdir = tmp_path / "job"
    workdir.mkdir()
    shutil.copy(demo.run_script, workdir / "run_nemo_rl.sh")
    client = JobSubmissionClient(demo_ray.head.dashboard_url)
    job_id = client.submit_job(
        entrypoint="bash run_nemo_rl.sh",
        runtime_env={
            "working_dir": str(workdir),
            "env_vars": {
                "HF_HOME": str(demo_ray.lustre / "huggingface_cache"),
                "GLOO_SOCKET_IFNAME": "eth0",
                "NCCL_SOCKET_IFNAME": "eth0",
            },
        },
    )
    deadline = time.monotonic() + 90
    while not (status := client.get_job_status(job_id)).is_terminal():
        assert time.monotonic() < deadline, f"job still {status} after 90 s"
        time.sleep(0.25)
    logs = client.get_job_logs(job_id)
    assert status == JobStatus.SUCCEEDED, logs[-3000:]
    assert "--- Running on Ray Cluster ---" in logs
    assert "=" * 25 + " Step 20/20 " + "=" * 25 in logs
    assert "Max number of steps has been reached, stopping training early" in logs
    ckpt = demo_ray.lustre / "nemo_rl_qwen_72b_ds_cp" / "nemo-rl-grpo-test1"
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_18", "step_20"]
    assert (demo_ray.lustre / "huggingface_cache").is_dir()


def test_stop_leaves_no_process_of_the_head(demo_ray, tmp_path: Path, demo) -> None:
    """Stopped mid-job, like `rltui sandbox stop` during training: nothing of the head survives."""
    from ray.job_submission import JobSubmissionClient

    head = demo_ray.head
    assert head.alive()
    workdir = tmp_path / "job"
    workdir.mkdir()
    shutil.copy(demo.run_script, workdir / "run_nemo_rl.sh")
    client = JobSubmissionClient(head.dashboard_url)
    # A fresh Lustre folder: the other test's step_20 would make this run resume and end at once.
    job_id = client.submit_job(entrypoint="bash run_nemo_rl.sh", runtime_env={
        "working_dir": str(workdir),
        "env_vars": {"RLTUI_DEMO_STEP_SECONDS": "2", "LUSTRE_MOUNT": str(tmp_path / "lustre")}})
    deadline = time.monotonic() + 60
    while "=" * 25 + " Step 1/20 " + "=" * 25 not in client.get_job_logs(job_id):
        assert time.monotonic() < deadline, client.get_job_logs(job_id)[-2000:]
        time.sleep(0.25)
    before = _head_processes(head.pid)
    commands = " ".join(s[4] for pid, s in _proc_stats().items() if pid in before)
    assert "gcs_server" in commands and "raylet" in commands and "run_grpo_math.py" in commands

    started = time.monotonic()
    head.stop()
    assert time.monotonic() - started < 15
    assert not head.alive()
    assert _running(before) == []
    assert _running(_head_processes(head.pid)) == []
