"""Named timers like NeMo-RL's, and pacing that stretches each phase to a share of a step."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Callable, Iterator

from .activity import Activity

# Share of a paced step each phase lasts at least (roughly a 70B GRPO step's profile).
PHASE_SHARES = {
    "data_processing": 0.02,
    "prepare_for_generation/total": 0.08,
    "prepare_for_generation/transfer_and_update_weights": 0.05,
    "generation": 0.42,
    "reward_calculation": 0.02,
    "logprob_inference_prep": 0.03,
    "policy_and_reference_logprobs": 0.12,
    "training_prep": 0.03,
    "policy_training": 0.26,
    "total_validation_time": 0.30,
}


class Timer:
    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)

    @contextmanager
    def time(self, label: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[label] += time.perf_counter() - start

    def reset(self) -> None:
        self.totals.clear()


TICK_S = 0.1  # a long sleep is cut into slices this long, `tick` called between them


class Pacer:
    """Sleeps at the end of a phase until it has lasted its share of `step_seconds`, calling
    `tick()` (the driver's check of its actors' nodes) at least every TICK_S meanwhile."""

    def __init__(self, step_seconds: float, tick: Callable[[], None] | None = None) -> None:
        self.step_seconds = max(0.0, step_seconds)
        self.tick = tick

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        budget = PHASE_SHARES.get(label, 0.0) * self.step_seconds
        while (left := budget - (time.perf_counter() - start)) > 0:
            if self.tick is not None:
                self.tick()
            time.sleep(min(left, TICK_S))


@contextmanager
def timed_phase(timer: Timer, pacer: Pacer, label: str, activity: Activity | None = None) -> Iterator[None]:
    """A NeMo-RL timer's phase; the GPUs count as busy for all of it (activity.py)."""
    if activity is not None:
        activity.enter()
    try:
        with timer.time(label), pacer.phase(label):
            yield
    finally:
        if activity is not None:
            activity.leave()
