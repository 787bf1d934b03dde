"""rltui's Ray clients against the Ray the cluster runs: 2.46.0, which nvcr.io/nvidia/nemo-rl:v0.4.0
pins (sandbox/rltui_sandbox/images.py). The session's head (tests/conftest.py ray_head), from the
sandbox's Ray environment as the sandbox's head pods start it; rltui's REST client (RayJobs)
talks to it from rltui's venv, and the job supervisor's Ray class from that environment's
Python, as its rayproject/ray:2.46.0 pod runs it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from rltui.cloud.errors import CloudError
from rltui.cloud.rayjobs import RayJobs
from rltui_sandbox import images
from rltui_sandbox.rayhead import RayHead

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
ONCLUSTER = REPO / "rltui" / "oncluster"  # supervisor.py and kubeapi.py: the ConfigMap's files

COUNT_SH = 'for i in $(seq 1 "$1"); do echo "line $i of $1"; sleep "$2"; done\n'
WHICH_PY = "import ray, sys; print('job python', sys.prefix, 'ray', ray.__version__)"

# The supervisor's Ray class as its pod uses it, run by the image's Python: submit (twice: the
# second finds the job and does nothing), read the job, tail its log to the end.
SUPERVISOR = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import ray
import supervisor as sup
r = sup.Ray(sys.argv[2])
job_id = sys.argv[3]
files = {"run.sh": "echo from the supervisor\npython -c 'import ray; print(\"driver ray\", ray.__version__)'\n"}
spec = {"entrypoint": "bash run.sh", "metadata": {"by": "supervisor"}, "runtime_env": {}}
answers = r.answers()
r.submit(job_id, spec, files)
r.submit(job_id, spec, files)
deadline = time.monotonic() + 90
while (job := r.job(job_id)) is None or job["status"] not in ("SUCCEEDED", "FAILED", "STOPPED"):
    assert time.monotonic() < deadline, job
    time.sleep(0.2)
tail = r.tail(job_id)
assert tail.done.wait(30), "the tail did not end"
print(json.dumps({"ray": ray.__version__, "answers": answers, "status": job["status"],
                  "missing": r.job("no-such-job"), "log": tail.take()}))
'''


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("job246")
    (folder / "count.sh").write_text(COUNT_SH)
    return folder


def test_the_head_and_its_jobs_run_the_images_ray(ray_head: RayHead, job_dir: Path) -> None:
    with urllib.request.urlopen(ray_head.dashboard_url + "/api/version", timeout=10) as resp:
        assert json.loads(resp.read())["ray_version"] == "2.46.0"
    env = images.ray_env()
    # `ray start` itself is the environment's (the raylet may not be up yet when the dashboard answers).
    command = Path(f"/proc/{ray_head.pid}/cmdline").read_bytes().split(b"\0")
    assert [c.decode() for c in command[:3]] == [str(env.python), str(env.ray), "start"]

    async def run() -> tuple[str, str]:
        jobs = RayJobs(ray_head.dashboard_url, backoff_s=0.05)
        job_id = await jobs.submit(job_dir, entrypoint=f'python -c "{WHICH_PY}"', runtime_env={})
        chunks: list[str] = []
        return await jobs.follow(job_id, chunks.append, check_s=0.5), "".join(chunks)

    status, text = asyncio.run(run())
    assert status == "SUCCEEDED", text
    assert f"job python {env.root} ray 2.46.0" in text  # `python` in a job is the image's


def test_rltui_rayjobs_submits_follows_lists_and_stops_on_246(ray_head: RayHead, job_dir: Path) -> None:
    async def run() -> None:
        jobs = RayJobs(ray_head.dashboard_url, backoff_s=0.05)
        job_id = await jobs.submit(job_dir, entrypoint="bash count.sh 20 0.05", runtime_env={},
                                   metadata={"owner": "rltui-test"})
        chunks: list[str] = []
        assert await jobs.follow(job_id, chunks.append, check_s=0.5) == "SUCCEEDED"
        text = "".join(chunks)
        assert [line for line in text.splitlines() if line.startswith("line ")] == \
            [f"line {i} of 20" for i in range(1, 21)]
        assert text == await jobs.logs(job_id)
        info = await jobs.info(job_id)
        assert (info.status, info.entrypoint, dict(info.metadata), info.driver_exit_code) == \
            ("SUCCEEDED", "bash count.sh 20 0.05", {"owner": "rltui-test"}, 0)
        assert info.start_time_ms and info.end_time_ms and info.end_time_ms >= info.start_time_ms
        assert job_id in [j.submission_id for j in await jobs.list()]
        with pytest.raises(CloudError, match="already exists"):
            await jobs.submit(job_dir, entrypoint="true", runtime_env={}, submission_id=job_id)

        long = await jobs.submit(job_dir, entrypoint="bash count.sh 600 1", runtime_env={})
        while await jobs.status(long) != "RUNNING":
            await asyncio.sleep(0.2)
        assert await jobs.stop(long) is True
        assert await jobs.follow(long, lambda _: None, check_s=0.5) == "STOPPED"
        with pytest.raises(CloudError) as missing:
            await jobs.status("rltui-no-such-job")
        assert missing.value.code == "NotFound" and not missing.value.transient

    asyncio.run(run())


def test_the_supervisors_ray_class_under_the_images_python(ray_head: RayHead) -> None:
    job_id = "rltui-supervisor-246"
    ran = subprocess.run([str(images.for_image(images.SUPERVISOR_IMAGE).python), "-c", SUPERVISOR,
                          str(ONCLUSTER), ray_head.dashboard_url, job_id],
                         capture_output=True, text=True, timeout=180, env={**os.environ, "RAY_ADDRESS": ""})
    assert ran.returncode == 0, ran.stderr[-3000:]
    got = json.loads(ran.stdout.strip().splitlines()[-1])
    assert (got["ray"], got["answers"], got["status"], got["missing"]) == ("2.46.0", True, "SUCCEEDED", None)
    assert "from the supervisor\n" in got["log"] and "driver ray 2.46.0\n" in got["log"]

    async def seen_by_rltui() -> tuple[list[str], dict[str, str]]:
        jobs = RayJobs(ray_head.dashboard_url)
        listed = [j.submission_id for j in await jobs.list()]
        return listed, dict((await jobs.info(job_id)).metadata)

    listed, metadata = asyncio.run(seen_by_rltui())
    assert listed.count(job_id) == 1 and metadata == {"by": "supervisor"}
