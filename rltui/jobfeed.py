"""The followed job's log as the screens use it: lines, step records, checkpoints and saves,
handed on in updates at most every UPDATE_EVERY_S (0.1 s). No Textual here.

Where it runs: in the wizard's cloud worker (Session.follow_job there; rltui/cloudworker.py),
beside the parser, so that a burst costs the wizard's process only what it shows. Fed the
parser's events, the wizard unpickled, tracked and timed ~450,000 events in a 1M-line burst
(about a third of its time); now it gets the newest version of each step that
changed, the checkpoints, the lines as a terminal shows them, and the saves that changed.

The followed Ray job's start and end times reach it from RayJobs.follow (cloud/rayjobs.py
FOLLOWED_JOB, set here for the follower's task: Session.follow_parsed and plan.jobs pass only
text), before the job's text and again once it is over; the saves of a log read after the
fact are dated by them (rltui/saves.py), not by when the text arrived.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .joblog import CheckpointEvent, RunTracker, TrainingStep, terminal_lines

if TYPE_CHECKING:
    from .cloud.rayjobs import JobInfo
    from .saves import Save

UPDATE_EVERY_S = 0.1  # half the wizard's 0.2 s log flush: an update never waits a whole one
SAVES_EVERY_S = 1.0    # saves() walks every save of the job
# A backlog revises every save's estimate with each step it reads (rltui/saves.py): thousands
# of saves a second held the wizard's loop to unpickle and show (docs/decisions/wizard-latency.md).
# A long list of revisions waits a second for each SAVES_PER_S of them.
SAVES_PER_S = 2000


@dataclass
class JobUpdate:
    """What the log brought since the last update."""

    lines: list[str] = field(default_factory=list)        # complete lines, as a terminal shows them
    records: list[TrainingStep] = field(default_factory=list)  # each changed step's newest version
    checkpoints: list[CheckpointEvent] = field(default_factory=list)
    changed_saves: list[Save] = field(default_factory=list)  # new or revised since the last one


class JobFeed:
    """Feed it what Session.follow_parsed delivers; it calls `on_update` with a JobUpdate at
    most every `every_s` (and once more at `finish`); the saves that changed at most every
    SAVES_EVERY_S, or a second for each SAVES_PER_S of them the last time."""

    def __init__(self, on_update: Callable[[JobUpdate], Any], every_s: float = UPDATE_EVERY_S) -> None:
        from .cloud.rayjobs import FOLLOWED_JOB
        from .saves import SaveTimeline

        self.on_update, self.every_s = on_update, every_s
        self.tracker = RunTracker()
        self.timeline = SaveTimeline()
        self._lines: list[str] = []
        self._records: dict[int, TrainingStep] = {}
        self._checkpoints: list[CheckpointEvent] = []
        self._saves_version, self._saves_at, self._saves_wait_s = 0, 0.0, 0.0
        self._sent_saves: dict[int, Save] = {}   # by step, as last sent
        self._sent_at = 0.0
        self._timer: asyncio.TimerHandle | None = None        # the next update
        self._saves_timer: asyncio.TimerHandle | None = None  # changed saves, when due
        self._listening = FOLLOWED_JOB.set(self.job_info)      # the job times, from its follow

    @property
    def last(self) -> TrainingStep | None:
        return self.tracker.records[-1] if self.tracker.records else None

    def feed(self, lines: list[str], events: list[Any], arrived: float) -> None:
        """One delivery: its complete lines, the parser's events, when it arrived."""
        if lines:
            self._lines.extend(terminal_lines(lines))
        self.timeline.feed(events, arrived)
        for ev in events:
            record = self.tracker.update(ev)
            if record is not None:  # its newest version goes, in the order steps changed
                self._records.pop(record.global_step, None)
                self._records[record.global_step] = record
            if isinstance(ev, CheckpointEvent):
                self._checkpoints.append(ev)
        self._schedule(self.every_s)

    def job_info(self, info: JobInfo) -> None:
        """The followed job as Ray's job API says it now (its start_time/end_time in ms)."""
        def seconds(ms: int | None) -> float | None:
            return None if ms is None else ms / 1000.0

        if self.timeline.job_times(info.submission_id, seconds(info.start_time_ms),
                                   seconds(info.end_time_ms)):
            self._schedule(self.every_s)

    def finish(self) -> None:
        """The log ended: what is left, and the saves as they ended."""
        self.cancel()
        self._send(final=True)

    def cancel(self) -> None:
        """Nothing more is sent."""
        for timer in (self._timer, self._saves_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._saves_timer = None
        from .cloud.rayjobs import FOLLOWED_JOB

        with suppress(ValueError, RuntimeError):  # made in another context, or reset already
            FOLLOWED_JOB.reset(self._listening)

    def _schedule(self, delay_s: float) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._due)

    def _due(self) -> None:
        self._timer = None
        self._send(final=False)

    def _saves_due(self) -> None:
        self._saves_timer = None
        self._schedule(max(0.0, self.every_s - (time.monotonic() - self._sent_at)))

    def _send(self, final: bool) -> None:
        saves: list[Save] = []
        if self.timeline.version != self._saves_version:
            wait_s = self._saves_wait_s - (time.monotonic() - self._saves_at)
            if final or wait_s <= 0:
                self._saves_version, self._saves_at = self.timeline.version, time.monotonic()
                saves = self._changed_saves()
                self._saves_wait_s = max(SAVES_EVERY_S, len(saves) / SAVES_PER_S)
            elif self._saves_timer is None:  # changed saves are never held past their wait
                self._saves_timer = asyncio.get_running_loop().call_later(wait_s, self._saves_due)
        if not (self._lines or self._records or self._checkpoints or saves):
            return
        update = JobUpdate(self._lines, list(self._records.values()), self._checkpoints, saves)
        self._lines, self._records, self._checkpoints = [], {}, []
        self._sent_at = time.monotonic()
        self.on_update(update)

    def _changed_saves(self) -> list[Save]:
        """The saves new or revised since the last send (saves() hands the same object for an
        answer that did not change), oldest first."""
        sent, changed = self._sent_saves, []
        for save in self.timeline.saves():
            if sent.get(save.step) is not save:
                sent[save.step] = save
                changed.append(save)
        return changed
