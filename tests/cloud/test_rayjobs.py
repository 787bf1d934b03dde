"""RayJobs against a REAL local Ray head (the session's: tests/conftest.py ray_head), directly
and through the Kubernetes port-forward with a link that drops."""

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
from rltui.cloud.rayrest import auth_headers, excludes_for, package_uri, package_zip
from rltui_sandbox.rayhead import RayHead

pytestmark = pytest.mark.slow

COUNT_SH = """#!/bin/bash
# count.sh N PAUSE: numbered lines, one every PAUSE seconds
for i in $(seq 1 "$1"); do echo "line $i of $1"; sleep "$2"; done
"""


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


def _tree(root: Path) -> Path:
    """A job folder with everything Ray's packaging treats specially."""
    files = {"run.sh": "echo run\n", "env.sh": "SECRET=1\n", "a.sh.log": "log\n",
             ".rayignore": "xpkclusters/\n.git/\n*.sh.log\nenv.sh\n# a comment\n!keep.sh.log\n",
             "keep.sh.log": "kept\n", "xpkclusters/c/state.json": "{}\n", ".git/HEAD": "ref\n",
             "__pycache__/m.pyc": "x", "sub/.gitignore": "*.tmp\n/only-here\n",
             "sub/x.tmp": "t", "sub/only-here": "o", "sub/deep/only-here": "kept", "sub/[ab].txt": "b",
             "data/big.bin": "0" * 5000, "skipme/f": "f"}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "empty").mkdir()
    return root


def test_the_working_dir_package_is_the_one_ray_itself_makes(tmp_path: Path) -> None:
    """Same content-addressed name and same files as ray 2.60's own packaging (what
    JobSubmissionClient uploads), with no ray imported by rltui to make it."""
    import zipfile

    from ray._private.runtime_env.packaging import create_package, get_uri_for_directory

    root = _tree(tmp_path / "job")
    excludes = excludes_for(["skipme"])
    assert package_uri(root, excludes) == get_uri_for_directory(str(root), True, excludes=excludes)
    ours = zipfile.ZipFile(__import__("io").BytesIO(package_zip(root, excludes)))
    create_package(str(root), tmp_path / "ray.zip", True, excludes=excludes)
    theirs = zipfile.ZipFile(tmp_path / "ray.zip")
    assert sorted(ours.namelist()) == sorted(theirs.namelist())
    assert {n: ours.read(n) for n in ours.namelist()} == {n: theirs.read(n) for n in theirs.namelist()}
    # The ignore files really did their work (a wrong matcher would agree with nothing above).
    names = set(ours.namelist())
    assert {"run.sh", "keep.sh.log", "sub/deep/only-here", "empty/"} <= names
    assert not names & {"env.sh", "a.sh.log", "xpkclusters/c/state.json", ".git/HEAD",
                        "__pycache__/m.pyc", "sub/x.tmp", "sub/only-here", "skipme/f"}
    # Any change to the content is a new package name.
    (root / "run.sh").write_text("echo changed\n")
    assert package_uri(root, excludes) == get_uri_for_directory(str(root), True, excludes=excludes)
    assert package_uri(root, excludes) != package_uri(_tree(tmp_path / "again"), excludes)


async def test_the_job_runs_in_its_uploaded_folder_without_the_ignored_files(ray_head: RayHead,
                                                                             tmp_path: Path) -> None:
    root = _tree(tmp_path / "job")
    jobs = RayJobs(ray_head.dashboard_url, backoff_s=0.05)
    job_id = await jobs.submit(root, entrypoint="find . -type f | sort; cat run.sh", runtime_env={})
    assert await jobs.follow(job_id, lambda _: None, check_s=0.5) == "SUCCEEDED"
    text = await jobs.logs(job_id)
    listed = set(text.split())
    # Ray's own lines ("Runtime env is setting up", "Running entrypoint ...") interleave with
    # the job's output in either order: look for the job's line, not for the last line.
    assert "echo run" in text.splitlines()
    assert {"./run.sh", "./keep.sh.log", "./sub/deep/only-here"} <= listed
    assert not listed & {"./env.sh", "./a.sh.log", "./.git/HEAD", "./sub/x.tmp"}
    # The folder changed: a new package name, uploaded, and the job sees the change.
    (root / "run.sh").write_text("echo changed\n")
    again = await jobs.submit(root, entrypoint="cat run.sh", runtime_env={})
    assert await jobs.follow(again, lambda _: None, check_s=0.5) == "SUCCEEDED"
    lines = (await jobs.logs(again)).splitlines()
    assert "echo changed" in lines and "echo run" not in lines


def test_token_auth_headers_follow_rays_precedence(tmp_path: Path) -> None:
    """RAY_AUTH_MODE=token: RAY_AUTH_TOKEN, else RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token."""
    (tmp_path / "t").write_text("from-file\n")
    assert auth_headers({}) == {}
    assert auth_headers({"RAY_AUTH_TOKEN": "x"}) == {}  # auth off: nothing is sent
    on = {"RAY_AUTH_MODE": "token"}
    assert auth_headers({**on, "RAY_AUTH_TOKEN": "abc", "RAY_AUTH_TOKEN_PATH": str(tmp_path / "t")}) \
        == {"Authorization": "Bearer abc"}
    assert auth_headers({**on, "RAY_AUTH_TOKEN_PATH": str(tmp_path / "t")}) == \
        {"Authorization": "Bearer from-file"}
