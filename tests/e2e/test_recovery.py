"""Issue 11's recovery: `rltui submit`, a Spot preemption at step 5 or later, and then no rltui
command but `status`: the supervisor on the cluster resubmits from the newest checkpoint and
the run ends SUCCEEDED at Step 20/20 with two attempts. Also the case `make test` keeps from
the chaos matrix (tests/chaos): a preemption with no rltui process running."""

from __future__ import annotations

import pytest

from tests.headless_user import make_user, preempted_run_recovers, run_state, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # a whole run, preempted and recovered


@pytest.fixture(scope="module")
def user(sandbox, sandbox_dir, tmp_path_factory):
    u = make_user(tmp_path_factory.mktemp("recovery"), "recovery-e2e", sandbox_dir, sandbox)
    yield u
    u.run("down", "--yes")  # the sandbox's one Kubernetes API is shared: leave it empty


def test_a_preempted_run_recovers_with_no_rltui_running(user):
    up = user.run("up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    preempted_run_recovers(user)


def test_a_python_error_in_the_job_is_reported_not_retried(user):
    """The supervisor's other branch, on the same cluster: a job that fails with every pod as it
    was is the job's own failure. Submitted through the engine with an entrypoint that raises."""
    import asyncio
    import time

    from rltui.cloud.endpoints import Endpoints
    from rltui.cloud.rayjobs import RayJobs, new_submission_id
    from rltui.config import parse_config
    from rltui.envfile import EnvFile
    from rltui.plan.context import Context
    from rltui.plan.supervision import run_state as engine_run_state
    from rltui.plan.supervision import start_supervisor

    cfg = parse_config(EnvFile.read(user.env_sh).values())
    entrypoint = "python -c \"raise ValueError('a bug in the job')\""

    up = user.run("up", "--yes")  # the cluster of the test before, or a new one
    assert up.returncode == 0, up.stdout[-2000:]
    job_dir = user.home / "failing-job"
    job_dir.mkdir()
    (job_dir / "note.txt").write_text("no files needed\n")

    async def submit() -> str:
        ctx = Context(cfg, Endpoints.sandbox(user.status))
        try:
            job_id = await RayJobs(await ctx.dashboard()).submit(
                job_dir, entrypoint=entrypoint, submission_id=new_submission_id())
            await start_supervisor(ctx, job_id, {"note.txt": "no files needed\n"}, entrypoint=entrypoint,
                                   runtime_env={}, metadata={}, submitted_at=time.time())
            return job_id
        finally:
            await ctx.close()

    job_id = asyncio.run(submit())
    final = wait_for("the run to end", lambda: (s := run_state(user, job_id)) and s.get("status") in
                     ("SUCCEEDED", "FAILED", "STOPPED") and s, 180, every_s=1.0)
    assert final["status"] == "FAILED", final
    assert len(final["attempts"]) == 1, "not retried"
    assert "with no node lost, so it is not retried" in final["message"], final["message"]

    async def state():
        ctx = Context(cfg, Endpoints.sandbox(user.status))
        try:
            return await engine_run_state(ctx, job_id)
        finally:
            await ctx.close()

    seen = asyncio.run(state())
    assert seen is not None and seen.status == "FAILED" and seen.recovery_line() == ""


def test_down_removes_the_supervisor_first(user):
    out = user.run("down", "--yes")
    assert out.returncode == 0, out.stdout[-3000:]
    lines = out.stdout.splitlines()
    removing = next(i for i, line in enumerate(lines) if "removing the job supervisor" in line)
    assert all("destroying" not in line for line in lines[:removing])
