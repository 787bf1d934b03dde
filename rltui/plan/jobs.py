"""Job submit and what follows it: the job folder, the checkpoint folder, the job records, the
logs, the latest job's summary, and stopping jobs before teardown. Both faces call these."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..config import RLConfig, submit_problems
from ..envfile import write_private
from .context import Context

if TYPE_CHECKING:
    from ..cloud.rayjobs import JobInfo


class Refused(Exception):
    """A request rltui will not carry out as asked (exit 2), e.g. submit without HF_TOKEN."""


@dataclass
class JobRecord:
    id: str
    checkpoint_dir: str
    job_dir: str
    submitted_at: float


def _jobs_file(ctx: Context) -> Path:
    return ctx.run_dir / "jobs.json"


def job_records(ctx: Context) -> list[JobRecord]:
    try:
        data = json.loads(_jobs_file(ctx).read_text())
        return [JobRecord(**j) for j in data.get("jobs", [])]
    except (OSError, ValueError, TypeError):
        return []


def save_job_records(ctx: Context, jobs: list[JobRecord]) -> None:
    ctx.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_private(_jobs_file(ctx), json.dumps({"jobs": [asdict(j) for j in jobs]}, indent=2))


def last_job_id(ctx: Context) -> str | None:
    jobs = job_records(ctx)
    return jobs[-1].id if jobs else None


def checkpoint_dir_for(cfg: RLConfig, jobs: list[JobRecord], resume: bool) -> tuple[str, str]:
    """(the folder, a line saying why): resume continues the newest job's folder; a new run
    gets a folder no earlier job used, so it never silently resumes an old one."""
    if resume:
        if not jobs:
            raise Refused("--resume: no earlier job of this cluster to resume; run `rltui submit`")
        return jobs[-1].checkpoint_dir, f"resuming from the newest checkpoint in {jobs[-1].checkpoint_dir}"
    used = {j.checkpoint_dir for j in jobs}
    folder, n = cfg.checkpoint_dir, 1
    while folder in used:
        n += 1
        folder = f"{cfg.checkpoint_dir}-{n}"
    return folder, (f"new run: checkpoints go to {folder} (use --resume to continue the last)" if n > 1 else "")


@dataclass
class Submitted:
    job_id: str
    job_dir: Path
    checkpoint_dir: str
    notes: list[str] = field(default_factory=list)


async def submit_job(ctx: Context, *, resume: bool) -> Submitted:
    """Write the job folder (run script, runtime env, .rayignore) and submit it to Ray's job
    API through the dashboard; HF_TOKEN is required only where the job downloads the model."""
    from .. import manifests
    from ..cloud.rayjobs import RayJobs

    cfg = ctx.cfg
    problems = submit_problems(cfg, ctx.endpoints.downloads_models)
    if problems:
        raise Refused("\n".join(str(p) for p in problems))
    jobs = job_records(ctx)
    checkpoint_dir, why = checkpoint_dir_for(cfg, jobs, resume)
    run_cfg = cfg.model_copy(update={"checkpoint_dir": checkpoint_dir})
    job_dir = ctx.jobs_dir / time.strftime("%Y%m%d-%H%M%S")
    job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, text in manifests.job_files(run_cfg).items():
        path = write_private(job_dir / name, text)
        if name == manifests.RUN_SCRIPT_FILE:
            path.chmod(0o700)
    url = await ctx.dashboard()
    job_id = await RayJobs(url).submit(job_dir, runtime_env=manifests.runtime_env(run_cfg),
                                       metadata={"rltui_checkpoint_dir": checkpoint_dir})
    jobs.append(JobRecord(job_id, checkpoint_dir, str(job_dir), time.time()))
    save_job_records(ctx, jobs)
    return Submitted(job_id, job_dir, checkpoint_dir, [why] if why else [])


async def resolve_job_id(ctx: Context, jobs_api: Any, wanted: str | None) -> str:
    """The job asked for, else the newest this machine submitted, else the newest Ray knows."""
    if wanted:
        return wanted
    known = last_job_id(ctx)
    if known:
        return known
    listed = sorted(await jobs_api.list(), key=lambda j: j.start_time_ms or 0)
    if not listed:
        raise Refused("no job has been submitted to this cluster: run `rltui submit`")
    return str(listed[-1].submission_id)


async def follow_logs(ctx: Context, on_text: Callable[[str], Any], job_id: str | None = None) -> str:
    """Stream a job's log text to `on_text` until it ends; returns its final status."""
    from ..cloud.rayjobs import RayJobs

    jobs_api = RayJobs(await ctx.dashboard())
    return str(await jobs_api.follow(await resolve_job_id(ctx, jobs_api, job_id), on_text))


async def job_logs(ctx: Context, job_id: str | None = None) -> str:
    from ..cloud.rayjobs import RayJobs

    jobs_api = RayJobs(await ctx.dashboard())
    return str(await jobs_api.logs(await resolve_job_id(ctx, jobs_api, job_id)))


async def job_info(ctx: Context, job_id: str | None = None) -> JobInfo | None:
    from ..cloud.rayjobs import RayJobs

    job_id = job_id or last_job_id(ctx)
    if job_id is None:
        return None
    return await RayJobs(await ctx.dashboard()).info(job_id)


async def job_summary(ctx: Context) -> dict[str, Any] | None:
    """The newest job's id, status and training step, read from its log."""
    from ..cloud.rayjobs import RayJobs
    from ..joblog import JobLogParser, RunTracker

    known = job_records(ctx)
    if not known:
        return None
    try:
        jobs_api = RayJobs(await ctx.dashboard())
        info = await jobs_api.info(known[-1].id)
        text = await jobs_api.logs(known[-1].id)
    except Exception:  # noqa: BLE001 - the cluster may be gone: the job is unknown, not an error
        return {"id": known[-1].id, "status": "UNKNOWN", "step": None, "total_steps": None}
    parser, tracker = JobLogParser(), RunTracker()
    for ev in parser.feed(text) + parser.flush():
        tracker.update(ev)
    last = tracker.records[-1] if tracker.records else None
    return {"id": info.submission_id, "status": info.status,
            "step": last.step if last else None, "total_steps": last.total_steps if last else None}


async def stop_jobs(ctx: Context, out: Callable[[str], None]) -> None:
    """Stop every running job before teardown; an unreachable dashboard does not stop down."""
    from ..cloud.rayjobs import RayJobs

    try:
        jobs_api = RayJobs(await ctx.dashboard())
        for info in await jobs_api.list():
            if not info.terminal:
                out(f"stopping job {info.submission_id} ({info.status})")
                await jobs_api.stop(info.submission_id)
    except Exception as exc:  # noqa: BLE001 - teardown goes on; the RayCluster goes next anyway
        out(f"could not reach the Ray dashboard to stop jobs ({exc}); going on")
