"""Named timers like NeMo-RL's, and pacing that stretches each phase to a share of a step."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator

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


class Pacer:
    """Sleeps at the end of a phase until it has lasted its share of `step_seconds`."""

    def __init__(self, step_seconds: float) -> None:
        self.step_seconds = max(0.0, step_seconds)

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        budget = PHASE_SHARES.get(label, 0.0) * self.step_seconds
        left = budget - (time.perf_counter() - start)
        if left > 0:
            time.sleep(left)


@contextmanager
def timed_phase(timer: Timer, pacer: Pacer, label: str) -> Iterator[None]:
    with timer.time(label), pacer.phase(label):
        yield
