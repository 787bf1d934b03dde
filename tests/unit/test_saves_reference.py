"""SaveTimeline gives the same answers as the walk it replaced (issue 13: the walk over every
entry on each anchor was quadratic in a backlog), on long random event streams: live steps,
backlogs, reruns, a step without `Total step time`, saves without a timer, late paths."""

from __future__ import annotations

import math
import random
from itertools import pairwise

from rltui.joblog import (CheckpointEvent, CheckpointSaveStarted, StepStarted, TimingEntry,
                          TimingTable)
from rltui.saves import ARRIVAL_TOLERANCE_S, BURST_GAP_S, Save, SaveTimeline


# ---- the reference: rltui/saves.py before issue 13's change, verbatim in its logic
class _RefEntry:
    def __init__(self, step: int, arrived: float, burst: bool) -> None:
        self.step, self.arrived, self.burst = step, arrived, burst
        self.u: float | None = None
        self.bound = math.inf
        self.seconds: float | None = None
        self.path: str | None = None


class _RefChain:
    def __init__(self) -> None:
        self.u, self.best = 0.0, math.inf
        self.last_step: int | None = None
        self.entries: list[_RefEntry] = []
        self.pending: _RefEntry | None = None

    def anchor(self, arrived: float) -> None:
        value = arrived - self.u
        self.best = min(self.best, value)
        for entry in reversed(self.entries):
            if entry.u is None:
                continue
            if entry.bound <= value:
                break
            entry.bound = value


class Reference:
    def __init__(self) -> None:
        self.chains = [_RefChain()]
        self.last: float | None = None
        self.in_burst = True

    def feed(self, events: list[object], arrived: float) -> None:
        if self.last is not None and arrived - self.last >= BURST_GAP_S:
            self.in_burst = False
        self.last = arrived
        chain, changed, ended = self.chains[-1], False, False
        for ev in events:
            if isinstance(ev, StepStarted):
                if chain.last_step is not None and ev.global_step <= chain.last_step:
                    chain = _RefChain()
                    self.chains.append(chain)
                chain.last_step = ev.global_step
            elif isinstance(ev, CheckpointSaveStarted):
                chain.pending = _RefEntry(ev.step, arrived, self.in_burst)
                chain.entries.append(chain.pending)
                changed = True
            elif isinstance(ev, TimingTable):
                if ev.total_step_time is None:
                    chain = _RefChain()
                    self.chains.append(chain)
                    continue
                chain.u += ev.total_step_time
                ended = True
                pending, chain.pending = chain.pending, None
                seconds = ev.seconds("checkpointing")
                if pending is not None and seconds is not None:
                    pending.u, pending.seconds = chain.u - seconds, seconds
            elif isinstance(ev, CheckpointEvent):
                entry = next((e for e in reversed(chain.entries) if e.step == ev.step), None)
                if entry is not None:
                    entry.path, entry.seconds = ev.path, ev.seconds
                    changed = True
        if ended or changed:
            chain.anchor(arrived)
            for newer, older in pairwise(reversed(self.chains)):
                if not math.isfinite(newer.best):
                    break
                older.anchor(newer.best)

    def saves(self) -> list[Save]:
        out: dict[int, Save] = {}
        for chain in self.chains:
            for e in chain.entries:
                if e.u is None:
                    out[e.step] = Save(e.step, e.arrived, e.seconds, e.path, estimated=e.burst)
                    continue
                started = min(e.arrived, e.u + e.bound)
                out[e.step] = Save(e.step, started, e.seconds, e.path,
                                   estimated=e.arrived - started > ARRIVAL_TOLERANCE_S)
        return [out[k] for k in sorted(out)]


# ---- a random job log, as events per delivered chunk
def stream(rng: random.Random, steps: int) -> list[tuple[list[object], float]]:
    """(events, arrival) per chunk: the steps print on a clock (a save at its step's end
    minus its timer); live, a chunk arrives up to 1.5 s after its print, in a backlog a few
    ms after the previous chunk. Reruns resume from an older step; the odd table has no
    total or no timer; some chunks merge several prints."""
    out: list[tuple[list[object], float]] = []
    clock = arrival = 1_760_000_000.0
    step, backlog = 1, rng.random() < 0.5
    for _ in range(steps):
        if rng.random() < 0.05:
            backlog = not backlog
            if backlog:
                clock += rng.uniform(0, 600)  # the tail was away: what ran since is a backlog
        if rng.random() < 0.03:
            step = max(1, step - rng.randint(1, 5))  # a rerun: resumed from an older step
            clock += rng.uniform(0, 300)
        length = rng.uniform(1.0, 120.0)
        saving = rng.random() < 0.4
        ckpt = rng.uniform(0.5, length / 2) if saving else None
        prints: list[tuple[float, list[object]]] = [(clock, [StepStarted(step, steps)])]
        end = clock + length
        if ckpt is not None:
            prints.append((end - ckpt, [CheckpointSaveStarted(step)]))
        entries = [TimingEntry("generation", length / 3, None)]
        if ckpt is not None and rng.random() < 0.9:
            entries.append(TimingEntry("checkpointing", ckpt, None))
        table: list[object] = [TimingTable(None if rng.random() < 0.02 else length,
                                           tuple(entries))]
        if ckpt is not None and rng.random() < 0.8:
            table.append(CheckpointEvent(step, f"/ckpt/step_{step}", ckpt))
        prints.append((end, table))
        if rng.random() < 0.3:  # one delivery holds several prints
            prints = [(end, [ev for _, chunk in prints for ev in chunk])]
        for printed, chunk in prints:
            if backlog:
                arrival += rng.uniform(0.0, 0.003)
            else:
                arrival = max(arrival, printed + rng.uniform(0.0, 1.5))
            out.append((chunk, arrival))
        clock = end
        step += 1
    return out


def test_the_timeline_answers_as_the_walk_it_replaced_on_long_random_streams():
    for seed in range(6):
        rng = random.Random(seed)
        timeline, reference = SaveTimeline(), Reference()
        for i, (events, arrived) in enumerate(stream(rng, 1500)):
            timeline.feed(events, arrived)
            reference.feed(events, arrived)
            if i % 97 == 0:
                assert timeline.saves() == reference.saves(), (seed, i)
        final = timeline.saves()
        assert final == reference.saves(), seed
        assert len(final) > 100 and any(s.estimated for s in final) and \
            any(not s.estimated for s in final)  # both kinds were exercised


def test_an_unchanged_save_is_the_same_object_on_the_next_call():
    rng = random.Random(7)
    timeline = SaveTimeline()
    for events, arrived in stream(rng, 300):
        timeline.feed(events, arrived)
    first, second = timeline.saves(), timeline.saves()
    assert first == second and all(a is b for a, b in zip(first, second))
