"""The one backoff rltui waits by, for a cloud call's retries (cloud/errors.retry) and for a
step's (plan/runner.RetryPolicy): exponential from `base_s`, capped at `cap_s`, jittered so
that many clients do not retry in step (AWS Architecture Blog, "Exponential Backoff And
Jitter": full jitter for calls; half fixed, half random for steps, which should not retry at
once)."""

from __future__ import annotations

import random


def delay_s(attempt: int, base_s: float, cap_s: float, rng: random.Random, *, floor: float = 0.0) -> float:
    """The wait after failed attempt `attempt` (1-based). `floor` is the fixed fraction of the
    ceiling (0: full jitter; 0.5: half fixed, half jittered)."""
    ceiling = min(cap_s, base_s * 2.0 ** (attempt - 1))
    return ceiling * floor + rng.uniform(0.0, ceiling * (1.0 - floor))
