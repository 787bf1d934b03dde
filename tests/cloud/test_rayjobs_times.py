"""A finished job's log read after it ended, from a REAL local Ray head (the session's:
tests/conftest.py ray_head): Ray's own job times (JobDetails start_time/end_time, ms since the
epoch) reach the job feed through RayJobs.follow, and every save is dated within the job's
run by its step timers, not at the moment the log was read."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from rltui.cloud.rayjobs import RayJobs
from rltui.session import Session

pytestmark = pytest.mark.slow

# Four short steps printed as NeMo-RL v0.4.0's grpo_train prints them (the lines
# rltui/saves.py reads), each save's own wall clock on a line of its own to check against.
TRAIN_PY = """
import time
for step in range(1, 5):
    began = time.monotonic()
    print(f"========================= Step {step}/4 =========================", flush=True)
    time.sleep(0.3)
    saved = None
    if step % 2 == 0:
        print(f"Saving checkpoint for step {step}...", flush=True)
        print(f"(saving at {time.time():.3f})", flush=True)
        t0 = time.monotonic()
        time.sleep(0.2)
        saved = time.monotonic() - t0
    total = time.monotonic() - began
    print("\\u23f1\\ufe0f  Timing:", flush=True)
    print(f"  \\u2022 Total step time: {total:.2f}s", flush=True)
    if saved is not None:
        print(f"  \\u2022 checkpointing: {saved:.2f}s ({100 * saved / total:.1f}%)", flush=True)
    print("", flush=True)
"""


class _Follower:
    """Session.follow_job as the wizard's cloud worker runs it, over this RayJobs."""

    def __init__(self, jobs: RayJobs) -> None:
        self.jobs = jobs

    async def follow_logs(self, on_text, job_id=None) -> str:
        return await self.jobs.follow(job_id, on_text, check_s=0.5)

    follow_parsed = Session.follow_parsed
    follow_job = Session.follow_job


async def test_a_finished_jobs_saves_read_later_lie_within_its_run(ray_head, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN_PY)
    jobs = RayJobs(ray_head.dashboard_url, backoff_s=0.05)
    job_id = await jobs.submit(tmp_path, entrypoint="python train.py", runtime_env={})
    deadline = time.monotonic() + 120
    while not (info := await jobs.info(job_id)).terminal and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert info.status == "SUCCEEDED", info
    await asyncio.sleep(3.0)   # the wizard opens after the job ended
    assert info.start_time_ms and info.end_time_ms
    start, end = info.start_time_ms / 1000, info.end_time_ms / 1000
    assert start < end < time.time() - 2.5, "Ray's times are ms since the epoch"

    updates = []
    final, _ = await _Follower(jobs).follow_job(updates.append, job_id)
    assert final == "SUCCEEDED"
    saves = {s.step: s for u in updates for s in u.changed_saves}
    printed = {2 + 2 * i: float(t) for i, t in
               enumerate(re.findall(r"\(saving at ([\d.]+)\)", await jobs.logs(job_id)))}
    assert sorted(saves) == sorted(printed) == [2, 4]
    for step, save in saves.items():
        assert start <= save.started and save.ended is not None and save.ended <= end + 1e-3, (save, start, end)
        # Late by the driver's exit after its last step (and the timers' rounding), no more.
        assert -0.05 <= save.started - printed[step] <= 2.0, (save, printed[step])
        assert save.estimated
