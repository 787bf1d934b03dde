"""RayJobs against a REAL local Ray head (one for this module), directly and through the
Kubernetes port-forward with a link that drops."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path
from typing import Iterator

import pytest

from rltui.cloud.errors import CloudError
from rltui.cloud.portforward import DashboardForward
from rltui.cloud.rayjobs import RayJobs
from rltui.sandbox.rayhead import RayHead

pytestmark = pytest.mark.slow

COUNT_SH = """#!/bin/bash
# count.sh N PAUSE: numbered lines, one every PAUSE seconds
for i in $(seq 1 "$1"); do echo "line $i of $1"; sleep "$2"; done
"""


@pytest.fixture(scope="module")
def ray_head() -> Iterator[RayHead]:
    head = RayHead.start(None, env={})
    try:
        head.wait_ready(timeout=90)
        yield head
    finally:
        head.stop()  # by PID, never `ray stop`


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("job")
    (folder / "count.sh").write_text(COUNT_SH)
    return folder


def numbered(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^line (\d+) of \d+$", text, re.MULTILINE)]


async def test_follow_gives_each_line_once_and_the_final_status(ray_head: RayHead, job_dir: Path) -> None:
    jobs = RayJobs(ray_head.dashboard_url, backoff_s=0.05)
    job_id = await jobs.submit(job_dir, entrypoint="bash count.sh 30 0.03", runtime_env={},
                               metadata={"owner": "rltui-test"})
    chunks: list[str] = []
    status = await jobs.follow(job_id, chunks.append, check_s=0.5)
    assert status == "SUCCEEDED"
    text = "".join(chunks)
    assert numbered(text) == list(range(1, 31))
    assert text == await jobs.logs(job_id)
    info = await jobs.info(job_id)
    assert (info.status, info.entrypoint, dict(info.metadata)) == \
        ("SUCCEEDED", "bash count.sh 30 0.03", {"owner": "rltui-test"})
    assert job_id in [j.submission_id for j in await jobs.list()]
    # The same submission id again is a clear, permanent error.
    with pytest.raises(CloudError, match="already exists") as err:
        await jobs.submit(job_dir, entrypoint="true", runtime_env={}, submission_id=job_id)
    assert not err.value.transient
    # A failing consumer (`rltui logs -f | head`) gets its own error back, not a retry loop.
    def closed_pipe(_: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        await jobs.follow(job_id, closed_pipe)
    # What exactly-once relies on: a new tail connection starts from the log's beginning.
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(ray_head.dashboard_url)
    replay = "".join([chunk async for chunk in client.tail_job_logs(job_id)])
    assert replay == text


async def test_follow_through_a_port_forward_whose_link_drops(ray_head: RayHead, job_dir: Path,
                                                              api, kube, head, relay) -> None:
    link = await relay(int(ray_head.dashboard_url.rsplit(":", 1)[1]))
    await head("ray-a4-head-aaaaa", link.port)
    forward = DashboardForward(kube, "ray-a4-head-svc")
    try:
        url = await forward.start()
        await forward.wait_ready(timeout_s=10)
        jobs = RayJobs(url, backoff_s=0.05)
        job_id = await jobs.submit(job_dir, entrypoint="bash count.sh 40 0.08", runtime_env={})
        chunks: list[str] = []
        cuts: list[int] = []

        def on_text(text: str) -> None:
            chunks.append(text)
            got = numbered("".join(chunks))
            # Drop the link twice mid-stream: once early, once later on.
            if (not cuts and got and got[-1] >= 8) or (len(cuts) == 1 and got[-1] >= 25):
                cuts.append(link.cut())

        status = await jobs.follow(job_id, on_text, check_s=0.5)
        assert status == "SUCCEEDED"
        assert len(cuts) == 2 and all(cuts)  # the tail's connection really was cut, twice
        assert numbered("".join(chunks)) == list(range(1, 41))  # each line once, in order
    finally:
        await forward.close()


async def test_stop_ends_the_job_as_stopped(ray_head: RayHead, job_dir: Path) -> None:
    jobs = RayJobs(ray_head.dashboard_url, backoff_s=0.05)
    job_id = await jobs.submit(job_dir, entrypoint="bash count.sh 1000 0.05", runtime_env={})
    chunks: list[str] = []
    follow = asyncio.create_task(jobs.follow(job_id, chunks.append, check_s=0.5))
    async with asyncio.timeout(30):
        while not numbered("".join(chunks)):
            await asyncio.sleep(0.1)
    assert await jobs.stop(job_id) is True
    assert await asyncio.wait_for(follow, 30) == "STOPPED"
    got = numbered("".join(chunks))
    assert got == list(range(1, len(got) + 1)) and len(got) < 1000


async def test_unknown_job_and_unreachable_dashboard(ray_head: RayHead) -> None:
    jobs = RayJobs(ray_head.dashboard_url, backoff_s=0.01)
    with pytest.raises(CloudError, match="no job nope-123") as err:
        await jobs.follow("nope-123", print)
    assert not err.value.transient
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(CloudError) as err:
        await RayJobs(f"http://127.0.0.1:{port}", backoff_s=0.01).status("x")
    assert err.value.transient and "Failed to connect" in err.value.message
