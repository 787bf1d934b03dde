"""Job submit and what follows it: the job folder, the checkpoint folder, the job records, the
logs, the latest job's summary, and stopping jobs before teardown. Both faces call these."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import runs
from ..config import RLConfig, submit_problems
from ..envfile import write_private
from .checkpoints import Volume, ask_volume, in_family
from .context import Context

if TYPE_CHECKING:
    from ..cloud.rayjobs import JobInfo
    from .supervision import RunState


class Refused(Exception):
    """A request rltui will not carry out as asked (exit 2), e.g. submit without HF_TOKEN."""


@dataclass
class JobRecord:
    id: str
    checkpoint_dir: str
    job_dir: str
    submitted_at: float
    supervised: bool = False  # a supervisor on the cluster resubmits it after a preemption


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


def retire_jobs(ctx: Context, raycluster_state: str | None) -> bool:
    """After a teardown that removed the RayCluster (deleted, or found absent), its jobs went
    with it: move their records aside (kept under runs/, for comparing runs later), so no face
    shows a deleted cluster's job as the current one. True when records were moved."""
    if raycluster_state not in ("destroyed", "absent"):
        return False
    src = _jobs_file(ctx)
    if not src.exists():
        return False
    runs.retire(ctx.run_dir, [j.id for j in job_records(ctx)])  # their summaries stay, ended
    retired = ctx.run_dir / "runs"
    retired.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    dest, n = retired / f"jobs-{stamp}.json", 1
    while dest.exists():
        n += 1
        dest = retired / f"jobs-{stamp}-{n}.json"
    src.replace(dest)
    return True


# --- run summaries (rltui/runs.py): written here, so both faces write them the same way ---

def _record_for(ctx: Context, job_id: str) -> JobRecord | None:
    """The record of the run `job_id` is (its first attempt) or belongs to (a later attempt)."""
    for record in reversed(job_records(ctx)):
        if job_id == record.id or (record.supervised and job_id.startswith(record.id + "-a")):
            return record
    return None


def _summary_of(ctx: Context, record: JobRecord) -> runs.RunSummary:
    return runs.read(ctx.run_dir, record.id) or runs.RunSummary(
        id=record.id, project=ctx.cfg.project_id, cluster=ctx.cfg.cluster_name,
        started_at=record.submitted_at, config=runs.config_of(ctx.cfg),
        checkpoint_dir=record.checkpoint_dir, supervised=record.supervised,
        attempts=[{"id": record.id, "reason": "submitted", "resumed_from_step": 0}])


def remember_job(ctx: Context, record: JobRecord) -> None:
    """After a submit: the job's record (jobs.json) and its run's first summary, PENDING."""
    save_job_records(ctx, [*job_records(ctx), record])
    runs.write(ctx.run_dir, _summary_of(ctx, record))


def recorder(ctx: Context, job_id: str, status: str | None = None) -> runs.Recorder | None:
    """A Recorder for the run `job_id` is part of, or None for a job this machine did not
    submit (no record: its config is not known here)."""
    record = _record_for(ctx, job_id)
    if record is None:
        return None
    summary = _summary_of(ctx, record)
    if status:
        summary.status = status
    return runs.Recorder(ctx.run_dir, summary)


def record_log(ctx: Context, job_id: str | None, text: str, status: str) -> None:
    """`rltui logs` without --follow: the whole log as read now, and the status asked now."""
    wanted = job_id or last_job_id(ctx)
    rec = recorder(ctx, wanted) if wanted else None
    if rec is not None:
        rec.feed(text)
        rec.finish(status)


def _attempts(run: RunState | None, job_id: str, status: str) -> list[dict[str, Any]]:
    if run is None:
        return [{"id": job_id, "reason": "submitted", "resumed_from_step": 0, "status": status}]
    return [a.as_json() for a in run.attempts]


class FolderChoice(Refused):
    """The checkpoint folder holds checkpoints and the submit said neither resume nor new
    folder: the caller asks (headless: exit 2 naming both flags; the wizard: a prompt). Its
    fields are its args, so it crosses the wizard's worker link (a pickle) whole."""

    def __init__(self, folder: str, newest: int, count: int, fresh: str, max_steps: int) -> None:
        super().__init__(folder, newest, count, fresh, max_steps)

    @property
    def folder(self) -> str:
        return str(self.args[0])

    @property
    def newest(self) -> int:
        return int(self.args[1])

    @property
    def count(self) -> int:
        return int(self.args[2])

    @property
    def fresh(self) -> str:
        return str(self.args[3])

    @property
    def max_steps(self) -> int:
        return int(self.args[4])

    @property
    def finished(self) -> bool:
        """Resuming would train no step: NeMo-RL loops while total_steps < grpo.max_num_steps."""
        return self.newest >= self.max_steps

    def __str__(self) -> str:
        found = (f"{self.folder} on the Lustre volume already holds {self.count} checkpoint"
                 f"{'s' if self.count != 1 else ''}, the newest step_{self.newest}")
        if self.finished:
            return (f"{found} (MAX_STEPS is {self.max_steps}: that run is finished): pass --new-folder"
                    f" to start a new run in {self.fresh}, or raise MAX_STEPS and pass --resume")
        return (f"{found}: pass --resume to continue from step {self.newest}, or --new-folder to"
                f" start a new run in {self.fresh}")


@dataclass(frozen=True)
class FolderPlan:
    folder: str
    why: str = ""                   # a line for the notes; "" when there is nothing to say
    resume_from: int | None = None  # the step NeMo-RL resumes from; None for a new run


def checkpoint_dir_for(cfg: RLConfig, jobs: list[JobRecord], volume: Volume, *, resume: bool = False,
                       new_folder: bool = False) -> FolderPlan:
    """Where the run's checkpoints go, decided from what the volume holds (plan/checkpoints.py:
    NeMo-RL resumes from whatever step_N the folder holds, so the local records cannot decide).

    The folder in question is the newest recorded job's, when it is one of env.sh's
    CHECKPOINT_DIR family (CHECKPOINT_DIR or CHECKPOINT_DIR-N), else CHECKPOINT_DIR itself (a
    new machine, or env.sh names another folder now). Holding no step_N, a new run goes there.
    Holding some: `resume` continues from the newest, `new_folder` takes the first of the family
    the volume does not hold and no recorded job used, and neither raises FolderChoice.
    `resume` refuses when there is nothing to resume (a run that would quietly start again at
    step 1) or when the newest step already reaches MAX_STEPS (a run that would train nothing)."""
    base = cfg.checkpoint_dir
    last = jobs[-1].checkpoint_dir if jobs else None
    current = volume.folder(last if last and in_family(last, base) else base)
    fresh = volume.fresh({j.checkpoint_dir for j in jobs})
    newest, count = current.newest, len(current.steps)
    if resume:
        if newest is None:
            raise Refused(f"--resume: {current.path} holds no step_N checkpoint on the Lustre volume,"
                          " so there is nothing to resume; run `rltui submit` without --resume to"
                          " start a new run")
        if newest >= cfg.max_steps:
            raise Refused(f"--resume: {current.path} already holds step_{newest} and MAX_STEPS is"
                          f" {cfg.max_steps}, so NeMo-RL would train no step; raise MAX_STEPS in"
                          f" env.sh, or pass --new-folder to start a new run in {fresh}")
        return FolderPlan(current.path, f"resuming from step_{newest} in {current.path} (the newest"
                          f" of {count} on the Lustre volume)", newest)
    if newest is None:
        quiet = current.path == base and not new_folder
        return FolderPlan(current.path, "" if quiet else f"new run: checkpoints go to {current.path}"
                          " (it holds no checkpoint on the Lustre volume)")
    if not new_folder:
        raise FolderChoice(current.path, newest, count, fresh, cfg.max_steps)
    return FolderPlan(fresh, f"new run: checkpoints go to {fresh} ({current.path} keeps its"
                      f" step_{newest}; --resume continues that one)")


@dataclass
class Submitted:
    job_id: str
    job_dir: Path
    checkpoint_dir: str
    notes: list[str] = field(default_factory=list)
    resume_from: int | None = None  # the step NeMo-RL resumes from; None for a new run


async def submit_job(ctx: Context, *, resume: bool, recover: bool = True,
                     new_folder: bool = False, down_after: str | None = None,
                     max_cost_usd: float | None = None) -> Submitted:
    """Write the job folder (run script, runtime env, .rayignore) and submit it to Ray's job
    API through the dashboard; HF_TOKEN is required only where the job downloads the model.
    With `recover`, a supervisor on the cluster then watches it and resubmits it after a
    preemption (plan/supervision.py); without, the job is on its own, as `ray job submit` is.
    The checkpoint folder is chosen from what the Lustre volume holds (checkpoint_dir_for); an
    existing one with checkpoints and neither `resume` nor `new_folder` raises FolderChoice.
    `down_after` ("gpus") and `max_cost_usd` put a budget guard in the supervisor: its account
    and pools are made ready first (plan/guard.py), so a guard that cannot be had is refused
    before the job goes in."""
    from .. import manifests
    from ..cloud.errors import CloudError
    from ..cloud.rayjobs import RayJobs, new_submission_id
    from .supervision import start_supervisor

    cfg = ctx.cfg
    problems = submit_problems(cfg, ctx.endpoints.downloads_models)
    if problems:
        raise Refused("\n".join(str(p) for p in problems))
    guard, guard_note = None, ""
    if down_after is not None or max_cost_usd is not None:
        if not recover:
            flag = "--down-after" if down_after is not None else "--max-cost"
            raise Refused(f"{flag}: the budget guard runs in the job's supervisor, which --no-recover leaves"
                          " out: drop one of them")
        from .guard import prepare_guard

        guard, guard_note = await prepare_guard(ctx, down_after=down_after, max_cost_usd=max_cost_usd)
    jobs = job_records(ctx)
    plan = checkpoint_dir_for(cfg, jobs, await ask_volume(ctx, cfg.checkpoint_dir), resume=resume,
                              new_folder=new_folder)
    checkpoint_dir, why = plan.folder, plan.why
    run_cfg = cfg.model_copy(update={"checkpoint_dir": checkpoint_dir})
    job_dir = ctx.jobs_dir / time.strftime("%Y%m%d-%H%M%S")
    job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, text in manifests.job_files(run_cfg).items():
        path = write_private(job_dir / name, text)
        if name == manifests.RUN_SCRIPT_FILE:
            path.chmod(0o700)
    # The Secret as env.sh has it now: the job reads its tokens from the Secret's files, and
    # its runtime env names that Secret by fingerprints, so the run waits until the pod has it.
    from .steps_kube import apply_job_secret
    await apply_job_secret(await ctx.kube(), cfg)
    url = await ctx.dashboard()
    runtime_env = manifests.runtime_env(run_cfg, fingerprints=True)
    metadata = {"rltui_checkpoint_dir": checkpoint_dir}
    submitted_at = time.time()
    job_id = await RayJobs(url).submit(job_dir, runtime_env=runtime_env, metadata=metadata,
                                       submission_id=new_submission_id())
    notes = [why] if why else []
    supervised = False
    if recover:
        try:
            started = await start_supervisor(ctx, job_id, manifests.job_files(run_cfg), entrypoint=ENTRYPOINT,
                                             runtime_env=runtime_env, metadata=metadata,
                                             submitted_at=submitted_at, guard=guard)
            supervised = True
            if guard_note:
                notes.append(guard_note + ("" if started.running else "; on once the supervisor runs"))
            if started.running:
                notes.append("recovery is on: a supervisor on the cluster resubmits it after a preemption"
                             " (from the newest checkpoint); --no-recover submits without one")
            else:  # its objects exist: it takes over once its pod runs
                notes.append(f"recovery is NOT on yet: the job's supervisor does not run ({started.why});"
                             " it takes over once its pod runs (`rltui status` says when)")
        except CloudError as exc:
            notes.append(f"the job runs WITHOUT recovery: its supervisor could not be made ({exc.message})"
                         + ("; nor the budget guard, which runs in it" if guard else ""))
    remember_job(ctx, JobRecord(job_id, checkpoint_dir, str(job_dir), submitted_at, supervised))
    return Submitted(job_id, job_dir, checkpoint_dir, notes, plan.resume_from)


ENTRYPOINT = "bash run_nemo_rl.sh"  # what RayJobs.submit runs by default, as the codelab does


async def supervised_run(ctx: Context, job_id: str) -> RunState | None:
    """The supervised run `job_id` belongs to (as its first attempt or a later one), or None."""
    from .supervision import run_state

    for record in reversed(job_records(ctx)):
        if record.supervised and (job_id == record.id or job_id.startswith(record.id + "-a")):
            try:
                return await run_state(ctx, record.id)
            except Exception:  # noqa: BLE001 - the cluster may be gone: then the run is unknown
                return None
    return None


async def resolve_job_id(ctx: Context, jobs_api: Any, wanted: str | None) -> str:
    """The job asked for, else the newest this machine submitted, else the newest Ray knows. One
    asked for that is neither this machine's nor Ray's is Refused (exit 2) naming those that are."""
    if wanted:
        if _record_for(ctx, wanted) is not None:
            return wanted
        every = await jobs_api.list()
        if any(j.submission_id == wanted for j in every):
            return wanted
        ids = [str(j.submission_id) for j in every if "rltui_probe" not in j.metadata]
        raise Refused(f"no job {wanted} on this Ray cluster; its jobs, oldest first: {', '.join(ids)}"
                      if ids else f"no job {wanted} on this Ray cluster, which has none: run `rltui submit`")
    known = last_job_id(ctx)
    if known:
        return known
    # Not rltui's own checks of the volume (plan/checkpoints.py): they are deleted once read.
    listed = sorted((j for j in await jobs_api.list() if "rltui_probe" not in j.metadata),
                    key=lambda j: j.start_time_ms or 0)
    if not listed:
        raise Refused("no job has been submitted to this cluster: run `rltui submit`")
    return str(listed[-1].submission_id)


async def follow_logs(ctx: Context, on_text: Callable[[str], Any], job_id: str | None = None) -> str:
    """Stream a job's log text to `on_text` until it ends; returns its final status. A
    supervised run is followed across its attempts until the supervisor says it is over. The
    run's summary (rltui/runs.py) is kept as the text goes by, and written at the end."""
    from ..cloud.rayjobs import RayJobs
    from .supervision import follow_run

    jobs_api = RayJobs(await ctx.dashboard())
    wanted = await resolve_job_id(ctx, jobs_api, job_id)
    run = await supervised_run(ctx, wanted)
    rec = recorder(ctx, wanted, run.status if run is not None else None)
    final: str | None = None

    def recorded(text: str) -> Any:
        if rec is not None:
            rec.feed(text)
        return on_text(text)

    try:
        if run is not None:
            final = await follow_run(ctx, jobs_api, run, wanted, recorded)
            run = await supervised_run(ctx, wanted) or run  # its attempts, as they ended
        else:
            final = str(await jobs_api.follow(wanted, recorded))
        return final
    finally:  # also when interrupted: the steps seen so far are kept
        if rec is not None:
            rec.finish(final, _attempts(run, wanted, final) if final else None,
                       events=run.events if run is not None else None)


async def job_logs(ctx: Context, job_id: str | None = None) -> str:
    """A job's log; for a supervised run asked for by its id (the default), every attempt's log
    that Ray still has, each after a marked line."""
    from ..cloud.errors import CloudError
    from ..cloud.rayjobs import RayJobs
    from .supervision import separator

    jobs_api = RayJobs(await ctx.dashboard())
    wanted = await resolve_job_id(ctx, jobs_api, job_id)
    run = await supervised_run(ctx, wanted)
    if run is None or wanted != run.run or len(run.attempts) == 1:
        return str(await jobs_api.logs(wanted))
    parts = []
    for number, attempt in enumerate(run.attempts, 1):
        if number > 1:
            parts.append(separator(number, attempt) + "\n")
        try:
            text = str(await jobs_api.logs(attempt.id))
        except CloudError as exc:
            if exc.code != "NotFound":
                raise
            text = f"(the log of {attempt.id} went with the lost Ray head)\n"
        parts.append(text if text.endswith("\n") or not text else text + "\n")
    return "".join(parts)


async def job_status(ctx: Context, job_id: str | None = None) -> str:
    """The status `logs --follow` ends with, asked now: a supervised run's from its supervisor's
    record (the run's, whichever attempt was asked for, as `follow_logs` returns it), another
    job's from Ray's job API (PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED)."""
    from ..cloud.rayjobs import RayJobs

    jobs_api = RayJobs(await ctx.dashboard())
    wanted = await resolve_job_id(ctx, jobs_api, job_id)
    run = await supervised_run(ctx, wanted)
    if run is not None:
        return run.status
    return str(await jobs_api.status(wanted))


async def job_info(ctx: Context, job_id: str | None = None) -> JobInfo | None:
    from ..cloud.rayjobs import RayJobs

    job_id = job_id or last_job_id(ctx)
    if job_id is None:
        return None
    return await RayJobs(await ctx.dashboard()).info(job_id)


async def job_summary(ctx: Context) -> dict[str, Any] | None:
    """The newest job's id (its latest attempt's), status, training step and attempts: a
    supervised run's from its supervisor's record (known even while the RayCluster recovers),
    another's from Ray and its log."""
    from ..cloud.rayjobs import RayJobs
    from ..joblog import JobLogParser, RunTracker

    known = job_records(ctx)
    if not known:
        return None
    if known[-1].supervised:
        run = await supervised_run(ctx, known[-1].id)
        if run is None:
            return {"id": known[-1].id, "status": "UNKNOWN", "step": None, "total_steps": None,
                    "attempts": [{"id": known[-1].id, "reason": "submitted", "resumed_from_step": 0}]}
        summary: dict[str, Any] = {"id": run.latest.id, "status": run.status, "step": run.step,
                                   "total_steps": run.total_steps, "epoch": run.epoch,
                                   "total_epochs": run.total_epochs, "message": run.message,
                                   "recovery": run.recovery_line(),
                                   "attempts": [a.as_json() for a in run.attempts]}
        if run.events:  # what happened, for `status --json` (oncluster/events.py)
            summary["events"] = run.events
        if run.guard:
            from .guard import guard_summary

            summary["guard"] = guard_summary(run.guard)
        if not run.final:  # recovery is on only while its supervisor runs
            from .supervision import supervisor_running

            sup = await supervisor_running(ctx, known[-1].id, 0.0)
            summary["supervisor"] = "running" if sup.running else f"not running: {sup.why}"
        return summary
    try:
        jobs_api = RayJobs(await ctx.dashboard())
        info = await jobs_api.info(known[-1].id)
        text = await jobs_api.logs(known[-1].id)
    except Exception:  # noqa: BLE001 - the cluster may be gone: the job is unknown, not an error
        return {"id": known[-1].id, "status": "UNKNOWN", "step": None, "total_steps": None,
                "attempts": [{"id": known[-1].id, "reason": "submitted", "resumed_from_step": 0}]}
    parser, tracker = JobLogParser(), RunTracker()
    for ev in parser.feed(text) + parser.flush():
        tracker.update(ev)
    last = tracker.records[-1] if tracker.records else None
    return {"id": info.submission_id, "status": info.status,
            "step": last.step if last else None, "total_steps": last.total_steps if last else None,
            "epoch": last.epoch if last else None, "total_epochs": tracker.total_epochs,
            "attempts": [{"id": info.submission_id, "reason": "submitted", "resumed_from_step": 0}]}


async def stop_jobs(ctx: Context, out: Callable[[str], None]) -> None:
    """Remove the job supervisors (they would resubmit what this stops), then stop every
    running job before teardown; an unreachable cluster or dashboard does not stop down."""
    from ..cloud.rayjobs import RayJobs
    from .supervision import remove_supervisors

    try:
        await remove_supervisors(ctx, out)
    except Exception as exc:  # noqa: BLE001 - teardown goes on; they go with the cluster anyway
        out(f"could not remove the job supervisors ({exc}); going on")
    try:
        jobs_api = RayJobs(await ctx.dashboard())
        for info in await jobs_api.list():
            if not info.terminal:
                out(f"stopping job {info.submission_id} ({info.status})")
                await jobs_api.stop(info.submission_id)
    except Exception as exc:  # noqa: BLE001 - teardown goes on; the RayCluster goes next anyway
        out(f"could not reach the Ray dashboard to stop jobs ({exc}); going on")
