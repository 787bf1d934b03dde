"""`rltui up / submit / logs / status / down`: the engine's operations (plan/) as plain lines.

Each prints (for scripts and CI) and returns an exit code: 0 done, 1 the cloud said no or
something is left, 2 bad input. What they do lives in plan/: provisioning and teardown in
runner/steps, submit and logs in plan/jobs, the inventory in plan/inventory.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config import RLConfig
from .plan.background import interrupted_line, running, stop_background
from .plan.context import Context
from .plan.jobs import Refused, follow_logs, job_logs, job_status, record_log, retire_jobs, stop_jobs, submit_job
from .plan.view import fmt_s
from .plan.wiring import make_runner

if TYPE_CHECKING:
    from .cloud.computereads import Forked
    from .cloud.endpoints import Endpoints
    from .plan.runner import RunEvent

__all__ = ["EventPrinter", "Refused", "check", "down", "export", "logs", "status", "submit", "up"]


class EventPrinter:
    """One line per state change and note: `  0:42  Lustre instance   running   0:02 / 12:00`."""

    def __init__(self, out: Callable[[str], None], verbose: bool = False) -> None:
        self.out, self.verbose, self.t0 = out, verbose, time.monotonic()

    def __call__(self, ev: RunEvent) -> None:
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


def _ask_where(question: str) -> str:
    if not sys.stdin.isatty():
        raise Refused("down: where to export the checkpoints needs an answer: run in a terminal, or"
                      " pass --yes with --export-to gs://BUCKET/PREFIX or --no-export")
    return input(f"{question} ").strip()


# --- up ---------------------------------------------------------------------------------------

async def up(cfg: RLConfig, endpoints: Endpoints, *, yes: bool, verbose: bool,
             out: Callable[[str], None] = print) -> int:
    from .plan.preflight import xpk_missing

    missing = xpk_missing(endpoints)   # before anything is created or even asked
    if missing:
        out(f"error: {missing}")
        return 1
    ctx = Context(cfg, endpoints)
    runner = make_runner(ctx, EventPrinter(out, verbose))
    out(f"Plan for {cfg.cluster_name} in {cfg.project_id} ({endpoints.label}):")
    made = {step.name for step in runner.steps if step.made_by_up}
    for view in (v for v in runner.snapshot() if v.name in made):
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
    except asyncio.CancelledError:
        # ctrl+c, SIGTERM, SIGHUP (cli.py): a detached xpk goes on; say how to come back.
        bg = running(ctx)
        if bg is not None:
            out(interrupted_line(bg))
        raise
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


# --- up --check -------------------------------------------------------------------------------

async def check(cfg: RLConfig, endpoints: Endpoints, env_path: str, *,
                out: Callable[[str], None] = print) -> int:
    """`up --check`: every check (plan/preflight.py, plan/checks.py), one line each with its fix;
    nothing is created or enabled. 0 when none failed (unknown ones are listed), else 1."""
    from pathlib import Path

    from .plan.preflight import preflight

    ctx = Context(cfg, endpoints)
    try:
        checks = await preflight(Path(env_path), cfg, [], endpoints, ctx)
    finally:
        await ctx.close()
    out(f"Checks for {cfg.cluster_name} in {cfg.project_id} ({endpoints.label}); nothing was created:")
    width = min(48, max((len(c.name) for c in checks), default=0))
    for c in checks:
        out(f"  {c.mark:<4} {c.name:<{width}}  {c.detail}")
        if c.ok is not True and c.fix:
            out(f"       fix: {c.fix}")
    failed = [c.name for c in checks if c.failed]
    unknown = sum(c.ok is None for c in checks)
    if failed:
        out(f"cannot run: {len(failed)} failed ({'; '.join(failed)})")
        return 1
    # Unknown says no more than that: an API `up` enables, or one it never does (Cloud Quotas),
    # each line above names where to look.
    out(f"can run: {len(checks) - unknown} passed" + (f", {unknown} unknown (see above)"
                                                       if unknown else ""))
    return 0


# --- submit -----------------------------------------------------------------------------------

async def submit(cfg: RLConfig, endpoints: Endpoints, *, resume: bool, recover: bool = True,
                 follow: bool = False, new_folder: bool = False, down_after: str | None = None,
                 max_cost_usd: float | None = None, out: Callable[[str], None] = print,
                 err: Callable[[str], None] | None = None,
                 write: Callable[[str], None] | None = None) -> int:
    """Submit; print its id. With `follow`, then its log until it ends, as `logs --follow`
    (and as `ray job submit` does by default), on the same connection: one process, one
    port-forward. A checkpoint folder that already holds checkpoints on the Lustre volume
    needs --resume or --new-folder (plan/jobs.py FolderChoice: a Refused, so exit 2).
    `down_after`, `max_cost_usd`: the budget guard (plan/guard.py)."""
    err = err or (lambda line: print(line, file=sys.stderr))
    ctx = Context(cfg, endpoints)
    try:
        done = await submit_job(ctx, resume=resume, recover=recover, new_folder=new_folder,
                                down_after=down_after, max_cost_usd=max_cost_usd)
        for note in done.notes:
            err(note)
        if not follow:
            err(f"submitted from {done.job_dir}; follow it with: rltui logs --follow")
            out(done.job_id)
            return 0
        err(f"submitted from {done.job_dir}; its log follows")
        out(done.job_id)
        return await _follow(ctx, done.job_id, write or _stdout)
    finally:
        await ctx.close()


# --- logs -------------------------------------------------------------------------------------

def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def logs(cfg: RLConfig, endpoints: Endpoints, *, job: str | None, follow: bool,
               write: Callable[[str], None] | None = None) -> int:
    """The job's log, then its status alone on the last line (README: "final status last"),
    with `--follow` or without: the status the job ended with, or the one it has now. Without
    `--follow` the status is asked before the log is read, so a finished status always comes
    after the whole log. Exit 0, or with `--follow` 0 only for SUCCEEDED."""
    write = write or _stdout
    ctx = Context(cfg, endpoints)
    try:
        if not follow:
            now = await job_status(ctx, job)
            text = await job_logs(ctx, job)
            write(text)
            record_log(ctx, job, text, now)   # the run's summary, as `rltui runs` lists it
            write(("" if not text or text.endswith("\n") else "\n") + now + "\n")
            return 0
        return await _follow(ctx, job, write)
    finally:
        await ctx.close()


async def _follow(ctx: Context, job: str | None, write: Callable[[str], None]) -> int:
    """Every line until the job ends, then its final status alone; 0 only for SUCCEEDED."""
    ended = {"newline": True}

    def on_text(text: str) -> None:
        write(text)
        if text:
            ended["newline"] = text.endswith("\n")

    final = await follow_logs(ctx, on_text, job)
    write(("" if ended["newline"] else "\n") + final + "\n")
    return 0 if final == "SUCCEEDED" else 1


# --- status -----------------------------------------------------------------------------------

def _table(rows: list[tuple[str, ...]]) -> list[str]:
    """Indented rows in columns as wide as their widest cell, two spaces apart (as `kubectl get`
    sizes them): a name longer than a fixed width pushed the rest of its row out of line."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)] if rows else []
    return [("  " + "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]])).rstrip()
            for row in rows]


async def status(cfg: RLConfig, endpoints: Endpoints, *, as_json: bool,
                 out: Callable[[str], None] = print, compute: Forked | None = None) -> int:
    from .plan.inventory import collect_with_job, prices

    ctx = Context(cfg, endpoints)
    try:
        # The prices (a day's cache, whole or partial, else the catalog: cloud/billing.py
        # cached_prices) are read while the cloud is asked.
        price_call = asyncio.ensure_future(prices(ctx))
        try:
            # The job is asked for alongside the RayCluster, and shown when the RayCluster exists.
            resources, job = await collect_with_job(ctx, compute)
        except BaseException:
            price_call.cancel()
            raise
        bg = running(ctx)
        cost = await _cost(cfg, price_call, resources)
    finally:
        await ctx.close()
    if as_json:
        out(json.dumps({"resources": [{k: r.as_json()[k] for k in ("kind", "name", "state", "owned",
                                                                   "leak", "detail", "hand_delete")}
                                      for r in resources], "job": job,
                        "background": bg.as_json() if bg else None, "cost": cost}, indent=2))
        return 0
    out(f"{endpoints.label}: project {cfg.project_id}, cluster {cfg.cluster_name}")
    if bg is not None:
        out(f"  running in the background: {bg.described}, log {bg.log}")
    marks = ["LEAK " if r.leak else ("" if r.owned or not r.present else "(not rltui's) ") for r in resources]
    kind_w = max((len(r.kind) for r in resources), default=0)
    for r, line in zip(resources, _table([(r.kind, r.name, r.state, m + r.detail)
                                          for r, m in zip(resources, marks, strict=True)]), strict=True):
        out(line)
        if r.present and not r.owned and not r.leak and r.hand_delete:
            out(f"  {'':<{kind_w}}  to delete it by hand: {r.hand_delete}")
    if job:
        step = f" step {job['step']}/{job['total_steps']}" if job.get("step") else ""
        if step and (job.get("total_epochs") or 0) > 1:  # NeMo-RL's step count restarts each epoch
            step += f" of epoch {job.get('epoch')}/{job['total_epochs']}"
        attempts = job.get("attempts") or []
        tries = f", attempt {len(attempts)}" if len(attempts) > 1 else ""
        out(f"  job {job['id']}: {job['status']}{step}{tries}")
        if job.get("recovery"):
            out(f"    {job['recovery']}")
        if (job.get("guard") or {}).get("line"):
            out(f"    {job['guard']['line']}")
        if str(job.get("supervisor", "running")) != "running":
            out(f"    recovery is NOT on: the supervisor is {job['supervisor']}")
    for line in _cost_lines(cost):
        out(f"  {line}")
    return 0


async def _cost(cfg: RLConfig, price_call: asyncio.Future[Any], resources: list[Any]) -> dict[str, Any]:
    """status's "cost": {"per_hour", "since_created", "currency", "as_of", "unpriced", "notes"}
    (an estimate: rltui/cost.py Estimate.as_json). `unpriced` names the lines that exist and
    that the catalog had no price for (left out of both figures). Prices that cannot be read
    leave per_hour null with the reason, unless nothing priced exists (0)."""
    from .cloud.errors import CloudError
    from .cost import PRICED_KINDS, estimate

    try:
        return estimate(cfg, await price_call, resources).as_json()
    except CloudError as exc:
        exists = any(r.present and not r.leak and r.kind in PRICED_KINDS for r in resources)
        return {"per_hour": None if exists else 0.0, "since_created": None if exists else 0.0,
                "currency": "USD", "as_of": None, "estimate": True, "unpriced": [], "notes": [],
                "error": exc.message}


def _cost_lines(cost: dict[str, Any]) -> list[str]:
    """The cost as status prints it: the figures, then what they leave out, one line each."""
    from .cost import unpriced_text

    out = [_cost_line(cost)]
    if text := unpriced_text(cost.get("unpriced") or ()):
        out.append(f"  {text} (left out of the estimate)")
    out += [f"  ({note})" for note in cost.get("notes") or ()]
    return out


def _cost_line(cost: dict[str, Any]) -> str:
    from .cost import fmt_money

    if cost.get("per_hour") is None:
        return f"cost: unknown ({cost.get('error')})"
    cur = str(cost["currency"])
    return (f"cost (estimate): {fmt_money(cost['per_hour'], cur)}/h now, "
            f"{fmt_money(cost['since_created'], cur)} since created (prices of {cost['as_of']})")


# --- export -----------------------------------------------------------------------------------

async def export(cfg: RLConfig, endpoints: Endpoints, *, to: str, whole: bool = False,
                 out: Callable[[str], None] = print) -> int:
    """`export --to gs://BUCKET/PREFIX`: the run's checkpoint folder (or, `whole`, the file
    system) through Lustre's ExportData (plan/export.py); progress lines, then what was copied."""
    from .plan.export import destination, export_checkpoints

    destination(to)  # a bad --to is exit 2 (Refused) before any call
    ctx = Context(cfg, endpoints)
    try:
        done = await export_checkpoints(ctx, to, whole=whole, out=out)
    finally:
        await ctx.close()
    out(done.line())
    return 0


async def _offer_export(ctx: Context, *, yes: bool, export_to: str | None, no_export: bool,
                        out: Callable[[str], None]) -> str | None:
    """Before a teardown that deletes the Lustre instance: where to export the checkpoints to
    (None: nowhere). Asked in a terminal; with --yes only --export-to exports, and a line says
    what is lost and how to keep it unless --no-export said so."""
    from .plan.export import checkpoint_folder, destination

    if no_export:
        return None
    if export_to is not None:
        return destination(export_to, "--export-to")
    folder = checkpoint_folder(ctx)
    if yes:
        out(f"not exported: the checkpoints in {folder} are deleted with Lustre instance"
            f" {ctx.cfg.lustre_instance_id} (to keep them: down --export-to gs://BUCKET/PREFIX;"
            " to skip this offer: --no-export)")
        return None
    answer = _ask_where(f"Export the checkpoints in {folder} to Cloud Storage before Lustre is deleted?"
                        " gs://BUCKET/PREFIX, or empty to skip:")
    return destination(answer, "the export's destination") if answer else None


# --- down -------------------------------------------------------------------------------------

# What holds what: the objects on the cluster, Lustre (holds the peering), the peering (holds
# the range), the range, then the cluster and the rest of xpk's blueprint (routers hold their
# NAT IPs; rules, subnetworks and all of these hold the networks).
_HAND_ORDER = ("RayCluster", "PersistentVolumeClaim", "PersistentVolume", "Secret",
               "Lustre instance", "VPC peering", "IP range", "GKE node pool", "GKE cluster", "Cloud NAT",
               "Cloud Router", "NAT IP", "Firewall rule", "Subnetwork", "VPC network", "Service account")


def _state_of(result: Any, step: str) -> str | None:
    state = result.states.get(step)
    return None if state is None else str(state.value)


async def down(cfg: RLConfig, endpoints: Endpoints, *, yes: bool, verbose: bool,
               export_to: str | None = None, no_export: bool = False,
               out: Callable[[str], None] = print) -> int:
    from .plan.inventory import collect
    from .plan.notices import announce_teardown

    ctx = Context(cfg, endpoints)
    try:
        before = await collect(ctx)
        present = [r for r in before if r.present]
        bg = running(ctx)
        if not present and bg is None:
            out("nothing of this plan exists; nothing to delete")
            return 0
        out(f"In {cfg.project_id} ({endpoints.label}):")
        for line in _table([(r.kind, r.name, r.state + ("" if r.owned else "  (not rltui's: left alone)"))
                            for r in present]):
            out(line)
        if bg is not None:
            out(f"  running in the background: {bg.described}")
        lustre = any(r.kind == "Lustre instance" and r.present and r.owned for r in present)
        export_to = await _offer_export(ctx, yes=yes, export_to=export_to, no_export=no_export,
                                        out=out) if lustre else None
        if not yes and not _ask(f"Delete what rltui created for {cfg.cluster_name}?"):
            out("nothing deleted")
            return 1
        if export_to is not None:  # refused before anything is stopped (plan/export.py)
            from .plan.export import ready_to_export

            await ready_to_export(ctx, export_to)
        await stop_background(ctx, out)
        if any(r.kind == "RayCluster" and r.present for r in before):
            await stop_jobs(ctx, out)
        if export_to is not None:
            # The jobs are stopped (no save half-written); Lustre is deleted only once it is done.
            from .plan.export import export_checkpoints

            out((await export_checkpoints(ctx, export_to, out=out)).line())
        await ctx.close()
        runner = make_runner(ctx, EventPrinter(out, verbose))
        result = await runner.down()
        retire_jobs(ctx, _state_of(result, "raycluster"))
        after = await collect(ctx)
        announced = await announce_teardown(ctx, result, [f"{r.kind} {r.name}" for r in after
                                                          if r.present and (r.owned or r.leak)])
        if announced:
            out(announced)
    finally:
        await ctx.close()
    left = [r for r in after if r.present and (r.owned or r.leak)]
    foreign = [r for r in after if r.present and not r.owned and not r.leak]
    for name in result.failed:
        out(f"FAILED {name}: {result.messages.get(name, '')}")
    if foreign:
        # Kept, not failed: rltui deletes only what it made (plan/ownership.py). Listed in the
        # order they can be deleted in (each refuses while a later one's user is there).
        out("not rltui's, left alone (still there), in the order they can be deleted:")
        for r in sorted(foreign, key=lambda r: _HAND_ORDER.index(r.kind)
                        if r.kind in _HAND_ORDER else len(_HAND_ORDER)):
            out(f"  {r.kind} {r.name}: {r.state}"
                + (f"; to delete it by hand: {r.hand_delete}" if r.hand_delete else ""))
    if left:
        out("left behind (still billed):")
        for r in left:
            out(f"  {'LEAK ' if r.leak else ''}{r.kind} {r.name}: {r.state}")
        return 1
    if foreign:
        out(f"leak scan: rltui's own are gone from {cfg.project_id}; {len(foreign)} not rltui's"
            f" still there, listed above ({fmt_s(result.elapsed_s)})")
        return 0
    out(f"leak scan: nothing of rltui's left in {cfg.project_id} ({fmt_s(result.elapsed_s)})")
    return 0
