"""When each checkpoint save happened, from the job log as it arrives. Pure core: stdlib only.

NeMo-RL v0.4.0 prints no timestamps and no "saved" line. In `grpo_train`
(NVIDIA-NeMo/RL, nemo_rl/algorithms/grpo.py) a save is

    with timer.time("checkpointing"):
        print(f"Saving checkpoint for step {total_steps + 1}...", flush=True)
        ... the save ...

inside the step's `total_step_time` timer, and the step's timing table (with `checkpointing`
and `Total step time`) is printed after it. So a save starts when its `Saving checkpoint` line
is printed and lasts its step's `checkpointing` seconds (the parser's CheckpointSaveStarted
and CheckpointEvent; sandbox/rltui_sandbox/grpo_demo/trainer.py prints the same).

A printed line reaches us through Ray's log tail (ray dashboard/modules/job: batches of up to
10 lines, `file_tail_iterator`; one second of sleep when the file has nothing new,
`JobManager.LOG_TAIL_SLEEP_S = 1`): a live line arrives within about a second of its print, so
its arrival time (`arrived`, stamped where the text arrives) is its moment. A backlog (the
follower's first delivery on a job that has been running: many steps within milliseconds) has
no true arrival time. Its times are worked out backwards:

- each step's end is `Total step time` after the previous one's (a chain of offsets `u`);
- a line was printed no later than it arrived, and neither was anything before it, so for an
  event at offset `u_i`: printed(i) <= u_i + min over later arrivals j of (arrived_j - u_j);
- the estimate is that latest consistent time. A chunk's arrival is credited to the newest
  step end in it (the partial step after it lasted an unknown time >= 0: an estimate may be
  late by up to that partial step until the next live step end refines it).

A save whose estimate is more than ARRIVAL_TOLERANCE_S before its arrival is `estimated`.
A save still running at the end of a backlog keeps its arrival (an upper bound) and is
`estimated` when it arrived in the follower's first burst (chunks less than BURST_GAP_S
apart). A rerun of a step (resume after a preemption) starts a new chain; an older chain ends
no later than the newer one began.

The Ray job's own times (JobDetails start_time/end_time, ms since the epoch: ray
dashboard/modules/job/common.py `JobInfo`; `job_times`) bound a backlog read after the fact.
Its arrival says nothing then: read minutes after the end, every save came out minutes late.
- A job's steps all ended before the job did, so `end_time` is an arrival after its last step
  end: a line that arrived after its job ended is dated backwards from `end_time` instead.
  That is the chosen estimate: after the last step grpo_train returns and the driver exits
  (seconds), while before step 1 lie the cluster, vLLM and policy setup (minutes; NeMo-RL
  v0.4.0 examples/run_grpo_math.py `setup` then `grpo_train`).
- Forward from `start_time` by the summed step times is the floor: no save is dated before it.
A job (each attempt of a supervised run is one) starts a chain of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import pairwise
from typing import NamedTuple

from .joblog import CheckpointEvent, CheckpointSaveStarted, StepStarted, TimingTable

ARRIVAL_TOLERANCE_S = 2.0  # twice Ray's tail sleep: live lines arrive within it
BURST_GAP_S = 0.5          # a caught-up tail waits 1 s between deliveries; a backlog does not


class Save(NamedTuple):
    """One checkpoint save: when it started (epoch seconds) and how long it took. A tuple,
    not a frozen dataclass: a backlog revises every save's estimate each second, and the
    wizard unpickles them; a tuple builds several times faster (docs/decisions/wizard-latency.md)."""

    step: int
    started: float
    seconds: float | None      # its step's `checkpointing` timer; None while it runs
    path: str | None = None
    estimated: bool = False    # `started` was worked out backwards, not seen arriving

    @property
    def ended(self) -> float | None:
        return None if self.seconds is None else self.started + self.seconds


class _Entry:
    __slots__ = ("arrived", "burst", "first", "path", "save", "seconds", "step", "u")

    def __init__(self, step: int, arrived: float, burst: bool) -> None:
        self.step, self.arrived, self.burst = step, arrived, burst
        self.u: float | None = None      # its offset on the chain, once its step has ended
        self.first = 0                   # its bound: min of the chain's anchors from this one
        self.seconds: float | None = None
        self.path: str | None = None
        self.save: Save | None = None    # the last answer, reused while it holds


class _Job:
    """The Ray job a chain's lines came from, and its times (epoch seconds) as last told."""

    __slots__ = ("end", "id", "start")

    def __init__(self, job_id: str, start: float | None, end: float | None) -> None:
        self.id, self.start, self.end = job_id, start, end


class _Chain:
    """The steps of one uninterrupted run: offsets from `Total step time`s.

    An entry's bound is min(arrived_j - u_j) over the anchors made after its step ended. The
    chain keeps the anchors' values in order and each entry the index of its first one, so an
    anchor costs O(1) and saves() resolves every bound with one suffix minimum (walking the
    entries on each anchor was quadratic in a backlog: docs/decisions/wizard-latency.md)."""

    __slots__ = ("anchors", "best", "entries", "fresh", "job", "last_step", "pending", "u")

    def __init__(self, job: _Job | None = None) -> None:
        self.job = job                      # the Ray job it ran in, when the follower knows it
        self.u = 0.0                        # offset of the newest step end
        self.best = math.inf                # min(arrived - u) over all its anchors: its origin
        self.last_step: int | None = None
        self.entries: list[_Entry] = []
        self.pending: _Entry | None = None  # the save whose step has not ended yet
        self.anchors: list[float] = []
        self.fresh = False                  # an entry's step ended since the last anchor kept

    def anchor(self, arrived: float) -> None:
        value = arrived - self.u
        if value < self.best:
            self.best = value
        if not self.fresh and self.anchors and self.anchors[-1] <= value:
            return  # every entry's bound is already at most the last value: this one is moot
        self.anchors.append(value)
        self.fresh = False

    def ended(self, entry: _Entry) -> None:
        """The entry's step ended: its bound takes the anchors from now on."""
        entry.first = len(self.anchors)
        self.fresh = True

    def bounds(self) -> list[float]:
        """suffix[i] = min(anchors[i:]); suffix[len] = inf."""
        suffix = [math.inf] * (len(self.anchors) + 1)
        low = math.inf
        for i in range(len(self.anchors) - 1, -1, -1):
            low = min(low, self.anchors[i])
            suffix[i] = low
        return suffix


class SaveTimeline:
    """feed() the parser's events of each delivered chunk with its arrival; saves() says when
    each save started. `version` changes whenever an answer of saves() may have."""

    def __init__(self, tolerance_s: float = ARRIVAL_TOLERANCE_S,
                 burst_gap_s: float = BURST_GAP_S) -> None:
        self.tolerance_s, self.burst_gap_s = tolerance_s, burst_gap_s
        self._job: _Job | None = None
        self._chains = [_Chain()]
        self._last_arrival: float | None = None
        self._in_burst = True
        self.version = 0

    def feed(self, events: Iterable[object], arrived: float) -> bool:
        """The events parsed from one chunk that arrived at `arrived`; True if saves changed."""
        if self._last_arrival is not None and arrived - self._last_arrival >= self.burst_gap_s:
            self._in_burst = False
        self._last_arrival = arrived
        chain, changed, ended = self._chains[-1], False, False
        for ev in events:
            if isinstance(ev, StepStarted):
                step = ev.global_step
                if chain.last_step is not None and step <= chain.last_step:
                    chain = self._new_chain()
                chain.last_step = step
            elif isinstance(ev, CheckpointSaveStarted):
                chain.pending = _Entry(ev.step, arrived, self._in_burst)
                chain.entries.append(chain.pending)
                changed = True
            elif isinstance(ev, TimingTable):
                if ev.total_step_time is None:
                    chain = self._new_chain()  # an offset unknown: nothing links across it
                    continue
                chain.u += ev.total_step_time
                ended = True
                pending, chain.pending = chain.pending, None
                seconds = ev.seconds("checkpointing")
                if pending is not None and seconds is not None:
                    pending.u, pending.seconds = chain.u - seconds, seconds
                    chain.ended(pending)
            elif isinstance(ev, CheckpointEvent):
                entry = next((e for e in reversed(chain.entries) if e.step == ev.step), None)
                if entry is not None:
                    entry.path, entry.seconds = ev.path, ev.seconds
                    changed = True
        if ended or changed:
            chain.anchor(arrived)
            self._bound_older_chains()
            changed = True
        if changed:
            self.version += 1
        return changed

    def job_times(self, job_id: str, start: float | None, end: float | None) -> bool:
        """The Ray job whose lines come next, with its start and (once over) end time, epoch
        seconds; True if saves changed. Another job's lines (a supervised run's next
        attempt) start a chain of their own: nothing links across a resubmission."""
        job = self._job
        if job is None or job.id != job_id:
            self._job = _Job(job_id, start, end)
            chain = self._chains[-1]
            if chain.last_step is None and not chain.entries and chain.u == 0.0:
                chain.job = self._job  # nothing read yet: this job's
            else:
                self._new_chain()
            return False
        if (job.start, job.end) == (start, end):
            return False
        job.start, job.end = start, end
        changed = any(c.job is job and c.entries for c in self._chains)
        if changed:
            self.version += 1
        return changed

    def _new_chain(self) -> _Chain:
        chain = _Chain(self._job)
        self._chains.append(chain)
        return chain

    def _bound_older_chains(self) -> None:
        """An older run ended before the next one began (at its offset 0)."""
        for newer, older in pairwise(reversed(self._chains)):
            if not math.isfinite(newer.best):
                return
            older.anchor(newer.best)  # the newer run's origin, as an arrival after older's end

    def saves(self) -> list[Save]:
        """Every save seen, oldest first; a step saved again (a rerun) keeps its newest. An
        answer that did not change is the same Save object as last time."""
        out: dict[int, Save] = {}
        tolerance = self.tolerance_s
        for chain, cap in zip(self._chains, self._origin_caps(), strict=True):
            suffix = chain.bounds()
            job = chain.job
            end = job.end if job is not None else None
            start = job.start if job is not None else None
            for e in chain.entries:
                old = e.save
                # Read after its job ended: the job's end bounds it, not the late arrival.
                late = end is not None and e.arrived > end
                if e.u is None:
                    started = min(e.arrived, end) if late and end is not None else e.arrived
                    estimated = e.burst or e.arrived - started > tolerance
                else:
                    started = min(e.arrived, e.u + min(suffix[e.first], cap if late else math.inf))
                    if start is not None and started < e.arrived:  # never before its job ran
                        started = min(e.arrived, max(started, start + e.u))
                    estimated = e.arrived - started > tolerance
                if old is None or old.started != started or old.seconds != e.seconds or \
                        old.path != e.path or old.estimated != estimated:
                    old = e.save = Save(e.step, started, e.seconds, e.path, estimated=estimated)
                out[e.step] = old
        return [out[k] for k in sorted(out)]

    def _origin_caps(self) -> list[float]:
        """Per chain, the latest its offset 0 can be by the job ends: its steps all ended
        before its job did, and before the next chain began (newest first, carried back)."""
        caps: list[float] = []
        later = math.inf  # the latest the next chain began
        for chain in reversed(self._chains):
            end = chain.job.end if chain.job is not None and chain.job.end is not None else math.inf
            cap = min(later, end) - chain.u
            caps.append(cap)
            later = min(cap, chain.best)
        caps.reverse()
        return caps


def merge(known: dict[int, Save], new: Iterable[Save]) -> dict[int, Save]:
    """The saves of a new delivery over those already shown: a time seen arriving is kept
    over an estimate of the same save (a second follower replays the log as a backlog)."""
    out = dict(known)
    for save in new:
        old = out.get(save.step)
        if old is not None and not old.estimated and save.estimated and \
                save.seconds in (None, old.seconds):
            out[save.step] = old._replace(path=save.path or old.path)
            continue
        out[save.step] = save
    return out
