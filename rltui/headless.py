"""`rltui up / submit / logs / status / down`: the plan and the adapters without a screen.

Each prints plain lines (for scripts and CI) and returns an exit code: 0 done, 1 the cloud
said no or something is left, 2 bad input.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from .config import RLConfig, submit_problems
from .envfile import write_private
from .plan.context import Context
from .plan.view import fmt_s


class Refused(Exception):
    """A request rltui will not carry out as asked (exit 2), e.g. submit without HF_TOKEN."""


def endpoints_for(sandbox: bool) -> Any:
    """Google Cloud, or the local sandbox (started if it is not running)."""
    from .cloud.endpoints import Endpoints

    if not sandbox:
        return Endpoints.google()
    from .sandbox import manage

    status = manage.read_status() or manage.start()
    if "tool_env" not in status.info:
        raise manage.SandboxError("the running sandbox was started by an older rltui: restart it "
                                  "(rltui sandbox stop && rltui sandbox start)")
    return Endpoints.sandbox(status.info)


def _retry_policy(endpoints: Any) -> Any:
    from .cloud.errors import CloudError
    from .plan.runner import RetryPolicy

    # Faster sandboxes retry sooner; Google gets the usual 2 s base.
    base = max(0.1, 2.0 * min(1.0, 60.0 * endpoints.time_scale))
    return RetryPolicy(attempts=6, base_s=base, cap_s=60.0 * max(endpoints.time_scale * 60, 0.05),
                       classify=lambda exc: isinstance(exc, CloudError) and exc.transient)


class EventPrinter:
    """One line per state change and note: `  0:42  Lustre instance   running   0:02 / 12:00`."""

    def __init__(self, out: Callable[[str], None], verbose: bool = False) -> None:
        self.out, self.verbose, self.t0 = out, verbose, time.monotonic()

    def __call__(self, ev: Any) -> None:
        kind = getattr(ev, "kind", "state")
        if kind == "progress" or (kind == "line" and not self.verbose):
            return
        since = fmt_s(time.monotonic() - self.t0)
        if kind == "line":
            self.out(f"{since:>7}  {ev.title:<34} | {ev.line}")
            return
        timing = f"{fmt_s(ev.elapsed_s)} / {fmt_s(ev.expected_s)}"
        message = f"  {ev.message}" if ev.message else ""
        self.out(f"{since:>7}  {ev.title:<34} {ev.state.value:<11} {timing:>15}{message}")


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        raise Refused(f"{question} needs an answer: run in a terminal, or pass --yes")
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def _log_to_file(ctx: Context) -> Path:
    """Diagnostics (tracebacks included) go to a private file, never to the terminal."""
    import logging

    ctx.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = ctx.run_dir / "rltui.log"
    root = logging.getLogger("rltui")
    if not any(getattr(h, "baseFilename", None) == str(path) for h in root.handlers):
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        path.chmod(0o600)
    root.setLevel(logging.INFO)
    return path


def make_runner(ctx: Context, printer: Callable[[Any], None]) -> Any:
    from .plan.progress import ProgressStore, progress_path

    _log_to_file(ctx)
    from .plan.runner import Runner
    from .plan.steps import build_plan

    store = ProgressStore(progress_path(ctx.cfg.project_id, ctx.cfg.cluster_name))
    return Runner(build_plan(ctx), ctx, progress=store, listener=printer,
                  retry=_retry_policy(ctx.endpoints))


# --- up ---------------------------------------------------------------------------------------

async def up(cfg: RLConfig, endpoints: Any, *, yes: bool, verbose: bool,
             out: Callable[[str], None] = print) -> int:
    ctx = Context(cfg, endpoints)
    runner = make_runner(ctx, EventPrinter(out, verbose))
    out(f"Plan for {cfg.cluster_name} in {cfg.project_id} ({endpoints.label}):")
    for view in runner.snapshot():
        needs = f"  after {', '.join(view.needs)}" if view.needs else ""
        out(f"  {view.title:<36} about {fmt_s(view.expected_s):>7}{needs}")
    eta = runner.eta_s("up")
    out(f"critical path: {' -> '.join(runner.critical_path('up'))}; about {fmt_s(eta)} if"
        " nothing exists yet")
    if not yes and not _ask(f"Create these in project {cfg.project_id}?"):
        out("nothing done")
        return 1
    try:
        result = await runner.up()
    finally:
        await ctx.close()
    if result.ok:
        out(f"ready in {fmt_s(result.elapsed_s)}: RayCluster {cfg.cluster_name} is ready and its"
            " dashboard answers. Next: rltui submit")
        return 0
    for name in result.failed:
        out(f"FAILED {name}: {result.messages.get(name, '')}")
    if result.blocked:
        out(f"not started (waiting on a failure): {', '.join(result.blocked)}")
    return 1


# --- jobs record ------------------------------------------------------------------------------

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


# --- submit -----------------------------------------------------------------------------------

async def submit(cfg: RLConfig, endpoints: Any, *, resume: bool,
                 out: Callable[[str], None] = print, err: Callable[[str], None] | None = None) -> int:
    from . import manifests
    from .cloud.rayjobs import RayJobs

    err = err or (lambda line: print(line, file=sys.stderr))
    if endpoints.downloads_models:
        problems = submit_problems(cfg)
        if problems:
            raise Refused("\n".join(str(p) for p in problems))
    ctx = Context(cfg, endpoints)
    jobs = job_records(ctx)
    if resume:
        if not jobs:
            raise Refused("--resume: no earlier job of this cluster to resume; run `rltui submit`")
        checkpoint_dir = jobs[-1].checkpoint_dir
        err(f"resuming from the newest checkpoint in {checkpoint_dir}")
    else:
        used = {j.checkpoint_dir for j in jobs}
        checkpoint_dir, n = cfg.checkpoint_dir, 1
        while checkpoint_dir in used:  # a new run must not silently resume an old one
            n += 1
            checkpoint_dir = f"{cfg.checkpoint_dir}-{n}"
        if n > 1:
            err(f"new run: checkpoints go to {checkpoint_dir} (use --resume to continue the last)")
    run_cfg = cfg.model_copy(update={"checkpoint_dir": checkpoint_dir})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    job_dir = ctx.jobs_dir / stamp
    job_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, text in manifests.job_files(run_cfg).items():
        path = write_private(job_dir / name, text)
        if name == manifests.RUN_SCRIPT_FILE:
            path.chmod(0o700)
    try:
        url = await ctx.dashboard()
        job_id = await RayJobs(url).submit(job_dir, runtime_env=manifests.runtime_env(run_cfg),
                                           metadata={"rltui_checkpoint_dir": checkpoint_dir})
    finally:
        await ctx.close()
    jobs.append(JobRecord(job_id, checkpoint_dir, str(job_dir), time.time()))
    save_job_records(ctx, jobs)
    err(f"submitted from {job_dir}; follow it with: rltui logs --follow")
    out(job_id)
    return 0


# --- logs -------------------------------------------------------------------------------------

async def _job_id(ctx: Context, jobs_api: Any, wanted: str | None) -> str:
    if wanted:
        return wanted
    known = job_records(ctx)
    if known:
        return known[-1].id
    listed = sorted(await jobs_api.list(), key=lambda j: j.start_time_ms or 0)
    if not listed:
        raise Refused("no job has been submitted to this cluster: run `rltui submit`")
    return listed[-1].submission_id


async def logs(cfg: RLConfig, endpoints: Any, *, job: str | None, follow: bool,
               write: Callable[[str], None] | None = None) -> int:
    from .cloud.rayjobs import RayJobs

    def default_write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    write = write or default_write
    ctx = Context(cfg, endpoints)
    try:
        jobs_api = RayJobs(await ctx.dashboard())
        job_id = await _job_id(ctx, jobs_api, job)
        if not follow:
            write(await jobs_api.logs(job_id))
            return 0
        ended = {"newline": True}

        def on_text(text: str) -> None:
            write(text)
            ended["newline"] = text.endswith("\n")

        final = await jobs_api.follow(job_id, on_text)
    finally:
        await ctx.close()
    write(("" if ended["newline"] else "\n") + final + "\n")
    return 0 if final == "SUCCEEDED" else 1


# --- status -----------------------------------------------------------------------------------

async def _job_summary(ctx: Context) -> dict[str, Any] | None:
    from .cloud.rayjobs import RayJobs
    from .joblog import JobLogParser, RunTracker

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


async def status(cfg: RLConfig, endpoints: Any, *, as_json: bool,
                 out: Callable[[str], None] = print) -> int:
    from .plan.inventory import collect

    ctx = Context(cfg, endpoints)
    try:
        resources = await collect(ctx)
        ready = any(r.kind == "RayCluster" and r.state == "ready" for r in resources)
        job = await _job_summary(ctx) if ready else None
    finally:
        await ctx.close()
    if as_json:
        out(json.dumps({"resources": [{k: r.as_json()[k] for k in ("kind", "name", "state", "owned",
                                                                   "leak", "detail")}
                                      for r in resources], "job": job}, indent=2))
        return 0
    out(f"{endpoints.label}: project {cfg.project_id}, cluster {cfg.cluster_name}")
    for r in resources:
        mark = "LEAK " if r.leak else ("" if r.owned or not r.present else "(not rltui's) ")
        out(f"  {r.kind:<22} {r.name:<46} {r.state:<11} {mark}{r.detail}")
    if job:
        step = f" step {job['step']}/{job['total_steps']}" if job.get("step") else ""
        out(f"  job {job['id']}: {job['status']}{step}")
    return 0


# --- down -------------------------------------------------------------------------------------

async def stop_jobs(ctx: Context, out: Callable[[str], None]) -> None:
    from .cloud.rayjobs import RayJobs

    try:
        jobs_api = RayJobs(await ctx.dashboard())
        for info in await jobs_api.list():
            if not info.terminal:
                out(f"stopping job {info.submission_id} ({info.status})")
                await jobs_api.stop(info.submission_id)
    except Exception as exc:  # noqa: BLE001 - teardown goes on; the RayCluster goes next anyway
        out(f"could not reach the Ray dashboard to stop jobs ({exc}); going on")


async def down(cfg: RLConfig, endpoints: Any, *, yes: bool, verbose: bool,
               out: Callable[[str], None] = print) -> int:
    from .plan.inventory import collect

    ctx = Context(cfg, endpoints)
    try:
        before = await collect(ctx)
        present = [r for r in before if r.present]
        if not present:
            out("nothing of this plan exists; nothing to delete")
            return 0
        out(f"In {cfg.project_id} ({endpoints.label}):")
        for r in present:
            owner = "" if r.owned else "  (not rltui's: left alone)"
            out(f"  {r.kind:<22} {r.name:<44} {r.state}{owner}")
        if not yes and not _ask(f"Delete what rltui created for {cfg.cluster_name}?"):
            out("nothing deleted")
            return 1
        if any(r.kind == "RayCluster" and r.present for r in before):
            await stop_jobs(ctx, out)
        await ctx.close()
        runner = make_runner(ctx, EventPrinter(out, verbose))
        result = await runner.down()
        after = await collect(ctx)
    finally:
        await ctx.close()
    left = [r for r in after if r.present and (r.owned or r.leak)]
    for name in result.failed:
        out(f"FAILED {name}: {result.messages.get(name, '')}")
    if left:
        out("left behind (still billed):")
        for r in left:
            out(f"  {'LEAK ' if r.leak else ''}{r.kind} {r.name}: {r.state}")
        return 1
    out(f"leak scan: nothing of rltui's left in {cfg.project_id} ({fmt_s(result.elapsed_s)})")
    return 0
