"""Every job's summary, kept under the state folder: what `rltui runs` lists and compares, and
what the Metrics screen overlays as the previous run.

Pure core: the standard library only (no pydantic, asyncio or rich: `rltui runs` needs no env.sh,
no sandbox and no cloud client). A summary is one JSON file per run,
`runs/<project>/<cluster>/summaries/<run id>.json` under the state folder (beside jobs.json,
which `retire_jobs` moves aside after a teardown: the summaries stay where they are), written
atomically (rltui/atomic.py), mode 0600. It holds no secret: the config is an allow-list of
RLConfig's fields (CONFIG_FIELDS), never HF_TOKEN or WANDB_API_KEY.

When a summary is written (plan/jobs.py, the one code path both faces use):
- `submit_job`: the run is recorded at once, status PENDING, with its config;
- `follow_logs` (headless `rltui logs --follow`, the wizard's follower) and `record_log`
  (headless `rltui logs`): a Recorder folds the log through the real parser (joblog.py's
  JobLogParser and RunTracker) and writes the steps at most every FLUSH_S seconds, then once
  more with the final status and, for a supervised run, its attempts and its events (preempted,
  stalled, resumed, ..., each with the spend at that moment: rltui/oncluster/events.py) as its
  supervisor recorded them, the events merged by (kind, at) so a re-read adds none twice;
- `retire_jobs` (after `down` removed the RayCluster): a run whose end no face saw becomes
  UNKNOWN, as `job_summary` calls a job whose cluster is gone.
A run is named by its first attempt's submission id (a supervised run's later attempts are
`<id>-a2`, ...: rltui/oncluster/supervisor.py).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomic import write_private
from .joblog import JobLogParser, RunTracker, TimingTable, TrainingStep
from .oncluster.jobstatus import FINAL
from .statedir import state_root

VERSION = 1
FLUSH_S = 5.0   # while following: the steps reach the file at most this often, and at the end
SUMMARIES = "summaries"
# RLConfig's fields that describe a run (never a secret: HF_TOKEN and WANDB_API_KEY are not here).
CONFIG_FIELDS = ("model_name", "num_nodes", "gpus_per_node", "device_type", "max_steps",
                 "generations_per_prompt", "prompts_per_step", "global_batch_size", "dataset",
                 "checkpoint_enabled", "checkpoint_period", "checkpoint_keep_top_k",
                 "lustre_capacity", "lustre_throughput", "zone")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")   # a run id that can name a file


def config_of(cfg: Any) -> dict[str, Any]:
    """The run's settings from an RLConfig (read by attribute: no pydantic here)."""
    return {name: getattr(cfg, name) for name in CONFIG_FIELDS if hasattr(cfg, name)}


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass
class StepSummary:
    step: int                        # the global step (NeMo-RL's number in saves)
    reward: float | None = None      # "Avg Reward"
    step_time_s: float | None = None  # "Total step time"
    checkpoint_s: float | None = None  # the step's `checkpointing` timer, when it saved
    loss: float | None = None

    @classmethod
    def of(cls, r: TrainingStep) -> StepSummary:
        return cls(r.global_step, r.avg_reward, r.step_time_s, r.checkpoint_s, r.loss)


@dataclass
class RunSummary:
    id: str
    project: str
    cluster: str
    started_at: float               # when it was submitted (epoch seconds)
    status: str = "PENDING"
    config: dict[str, Any] = field(default_factory=dict)
    checkpoint_dir: str = ""
    supervised: bool = False
    attempts: list[dict[str, Any]] = field(default_factory=list)
    total_steps: int | None = None
    steps: list[StepSummary] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # the supervisor's, oldest first
    note: str = ""
    updated_at: float = 0.0

    @property
    def final_reward(self) -> float | None:
        return next((s.reward for s in reversed(self.steps) if s.reward is not None), None)

    @property
    def final(self) -> bool:
        return self.status in FINAL

    def as_json(self) -> dict[str, Any]:
        return {"version": VERSION, "id": self.id, "project": self.project, "cluster": self.cluster,
                "started": iso(self.started_at), "started_at": self.started_at, "status": self.status,
                "config": self.config, "checkpoint_dir": self.checkpoint_dir,
                "supervised": self.supervised, "attempts": self.attempts,
                "total_steps": self.total_steps, "steps": [vars(s) for s in self.steps],
                "events": self.events, "note": self.note, "updated": iso(self.updated_at or time.time())}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        steps = [StepSummary(int(s["step"]), s.get("reward"), s.get("step_time_s"),
                             s.get("checkpoint_s"), s.get("loss")) for s in data.get("steps") or []]
        return cls(id=str(data["id"]), project=str(data.get("project") or ""),
                   cluster=str(data.get("cluster") or ""), started_at=float(data["started_at"]),
                   status=str(data.get("status") or "UNKNOWN"), config=dict(data.get("config") or {}),
                   checkpoint_dir=str(data.get("checkpoint_dir") or ""),
                   supervised=bool(data.get("supervised")), attempts=list(data.get("attempts") or []),
                   total_steps=data.get("total_steps"), steps=steps, note=str(data.get("note") or ""),
                   events=[dict(e) for e in data.get("events") or [] if isinstance(e, dict)])

    def row(self) -> dict[str, Any]:
        """What `rltui runs --json` prints per run."""
        return {"id": self.id, "started": iso(self.started_at), "status": self.status,
                "steps": len(self.steps), "final_reward": self.final_reward,
                "attempts": max(1, len(self.attempts))}


# --- files -----------------------------------------------------------------------------------

def summary_path(run_dir: Path, run_id: str) -> Path:
    if not _ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} cannot name a file")
    return run_dir / SUMMARIES / f"{run_id}.json"


def read(run_dir: Path, run_id: str) -> RunSummary | None:
    try:
        return RunSummary.from_json(json.loads(summary_path(run_dir, run_id).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(run_dir: Path, summary: RunSummary) -> Path:
    path = summary_path(run_dir, summary.id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    summary.updated_at = time.time()
    return write_private(path, json.dumps(summary.as_json(), indent=1))


def all_runs(root: Path | None = None) -> list[RunSummary]:
    """Every summary under the state folder, oldest first; an unreadable file is skipped."""
    found: list[RunSummary] = []
    for path in ((root or state_root()) / "runs").glob(f"*/*/{SUMMARIES}/*.json"):
        try:
            found.append(RunSummary.from_json(json.loads(path.read_text())))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(found, key=lambda r: (r.started_at, r.id))


def merge_steps(old: Iterable[StepSummary], new: Iterable[StepSummary]) -> list[StepSummary]:
    """By global step; a step the newer log has replaces the older one (a resumed attempt reruns
    the steps after its checkpoint), steps only the older has stay (a follow from a later
    attempt does not see the earlier ones)."""
    steps = {s.step: s for s in old}
    steps.update((s.step, s) for s in new)
    return [steps[k] for k in sorted(steps)]


def merge_events(old: Iterable[dict[str, Any]], new: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's events from both, each once by (kind, at), oldest first: the supervisor's record
    is read again at every follow's end, and holds the earlier events too."""
    merged = {(str(e.get("kind")), float(e.get("at") or 0)): e for e in old}
    merged.update(((str(e.get("kind")), float(e.get("at") or 0)), e) for e in new)
    return [merged[k] for k in sorted(merged, key=lambda k: (k[1], k[0]))]


def retire(run_dir: Path, run_ids: Iterable[str]) -> None:
    """After a teardown removed the RayCluster: a run whose end was not seen is UNKNOWN now."""
    for run_id in run_ids:
        summary = read(run_dir, run_id) if _ID.fullmatch(run_id) else None
        if summary is not None and not summary.final:
            summary.status = "UNKNOWN"
            summary.note = "the RayCluster was deleted before rltui saw this run end"
            write(run_dir, summary)


class Recorder:
    """Folds a run's log text into its summary through joblog's parser and tracker, and writes
    the summary at most every FLUSH_S seconds (after a step's timing table) and at `finish`."""

    def __init__(self, run_dir: Path, base: RunSummary, clock: Any = time.monotonic) -> None:
        self.run_dir, self.summary, self.clock = run_dir, base, clock
        self.parser, self.tracker = JobLogParser(), RunTracker()
        self._written = clock()
        self._dirty = False
        self.error: OSError | None = None

    def feed(self, text: str) -> None:
        for ev in self.parser.feed(text):
            self.tracker.update(ev)
            self._dirty = self._dirty or isinstance(ev, TimingTable)
        if self._dirty and self.clock() - self._written >= FLUSH_S:
            self.flush()

    def flush(self, status: str | None = None, attempts: list[dict[str, Any]] | None = None,
              events: list[dict[str, Any]] | None = None) -> Path | None:
        """Write the summary as it stands; None when the file could not be written (a full disk
        must not stop the log being followed: `error` says why)."""
        records = self.tracker.records
        self.summary.steps = merge_steps(self.summary.steps, (StepSummary.of(r) for r in records))
        if records:
            self.summary.total_steps = records[-1].total_steps
            if self.summary.status == "PENDING":   # it logs its steps: it runs
                self.summary.status = "RUNNING"
        if status:
            self.summary.status = status
        if attempts:
            self.summary.attempts = attempts
        if events:
            self.summary.events = merge_events(self.summary.events, events)
        self._written, self._dirty = self.clock(), False
        try:
            return write(self.run_dir, self.summary)
        except OSError as exc:
            self.error = exc
            return None

    def finish(self, status: str | None, attempts: list[dict[str, Any]] | None = None,
               events: list[dict[str, Any]] | None = None) -> Path | None:
        for ev in self.parser.flush():
            self.tracker.update(ev)
        return self.flush(status, attempts, events)


# --- choosing and printing -------------------------------------------------------------------

class UnknownRun(LookupError):
    """An id that names no run, or more than one: a usage error for `rltui runs compare`."""


def resolve(runs: list[RunSummary], wanted: str) -> RunSummary:
    """The run `wanted` names: its id, else the one id it begins."""
    exact = [r for r in runs if r.id == wanted]
    if exact:
        return exact[-1]
    matches = [r for r in runs if r.id.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UnknownRun(f"{wanted!r}: no such run (`rltui runs` lists them)")
    raise UnknownRun(f"{wanted!r}: ambiguous, it begins {len(matches)} runs: "
                     + ", ".join(r.id for r in matches))


def previous(runs: list[RunSummary], current: str | None) -> RunSummary | None:
    """The newest run with a reward that is not `current` (a run id or one of its attempts')."""
    for run in reversed(runs):
        if current and (current == run.id or current.startswith(run.id + "-a")):
            continue
        if any(s.reward is not None for s in run.steps):
            return run
    return None


def _num(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _local(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def list_lines(runs: list[RunSummary]) -> list[str]:
    """`rltui runs`: one line per run, oldest first."""
    if not runs:
        return [f"no runs recorded yet under {state_root() / 'runs'} (`rltui submit` records one)"]
    width = max(len("run"), *(len(r.id) for r in runs))
    lines = [f"{'run':<{width}}  {'started':<16}  {'status':<10}  {'steps':>7}  {'reward':>8}"
             f"  {'tries':>5}  cluster"]
    for r in runs:
        steps = f"{len(r.steps)}/{r.total_steps}" if r.total_steps else str(len(r.steps))
        lines.append(f"{r.id:<{width}}  {_local(r.started_at):<16}  {r.status:<10}  {steps:>7}"
                     f"  {_num(r.final_reward, '.4f'):>8}  {max(1, len(r.attempts)):>5}"
                     f"  {r.project}/{r.cluster}")
    return lines


def compare_lines(a: RunSummary, b: RunSummary) -> list[str]:
    """`rltui runs compare A B`: reward and step time per step, A's beside B's."""
    lines = [f"A  {a.id}  {_local(a.started_at)}  {a.status}  {a.project}/{a.cluster}",
             f"B  {b.id}  {_local(b.started_at)}  {b.status}  {b.project}/{b.cluster}"]
    changed = sorted(k for k in set(a.config) | set(b.config) if a.config.get(k) != b.config.get(k))
    for key in changed:
        lines.append(f"   {key}: A {a.config.get(key, '-')}, B {b.config.get(key, '-')}")
    by_a, by_b = {s.step: s for s in a.steps}, {s.step: s for s in b.steps}
    lines += ["", f"{'step':>4}  {'A reward':>9}  {'B reward':>9}  {'Δ reward':>9}"
                  f"  {'A step s':>9}  {'B step s':>9}"]
    for k in sorted(set(by_a) | set(by_b)):
        sa, sb = by_a.get(k), by_b.get(k)
        ra, rb = sa.reward if sa else None, sb.reward if sb else None
        delta = rb - ra if ra is not None and rb is not None else None
        lines.append(f"{k:>4}  {_num(ra, '.4f'):>9}  {_num(rb, '.4f'):>9}  {_num(delta, '+.4f'):>9}"
                     f"  {_num(sa.step_time_s if sa else None, '.1f'):>9}"
                     f"  {_num(sb.step_time_s if sb else None, '.1f'):>9}")
    if not by_a and not by_b:
        lines.append("(neither run has logged a step yet)")
    return lines
