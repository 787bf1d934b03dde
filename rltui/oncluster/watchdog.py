"""The stall watchdog: a run whose driver prints no new step for k times its median step time is
STALLED (a hung NCCL collective, a wedged save, a frozen driver: Ray still says RUNNING and the
GPU nodes bill on). Runs beside supervisor.py in the cluster's image: Python 3.9, the standard
library only. The supervisor feeds it the driver's log lines as they arrive and asks it once per
look; on a stall it stops the attempt through Ray's job API and resubmits from the newest
checkpoint (supervisor.py).

What counts as progress, from the driver's own lines (NeMo-RL v0.4.0 nemo_rl/algorithms/grpo.py
grpo_train; the sandbox's GRPO demo prints the same, sandbox/SOURCES.md#nemo-rl-grpo-output):
`===== Step s/S =====` starts a step; inside it `▶ Starting validation at step s...` starts a
validation and `Saving checkpoint for step s...` a save (the save is synchronous, inside the
step's timer); the step's timing table then prints `  • Total step time: Xs` (and
`  • checkpointing: Xs` on a save step), the validation `  • Total validation time: Xs`. Each
of the four marks is progress: the silence is measured from the newest one's arrival. Worker
lines (Ray's `(ActorName pid=...)` prefix) and the `▶` phase lines are not: a driver blocked in
a collective still gets its workers' lines forwarded.

The allowance: max(floor, k x the median of the run's step times), where a step time is the
driver's own `Total step time` (its timer, so a look's timing does not change it). While a save
or a validation runs, the longest earlier one of that kind times k counts too: on a slow volume
a save can outlast a step (the first save of a run has no earlier one: the floor covers it).

When it is armed: only once this attempt printed its first step header AND one step time is
known (this attempt's, or one of the run's earlier attempts' while this supervisor process
remembers them). Before that the driver loads the model and resumes from a checkpoint, which
on a 72B model takes many minutes and has no step to measure against. It is disarmed once the
driver says `Max number of steps has been reached` (the job ends: Ray says so next).

The defaults, from NeMo-RL's real times:
- k = 4: NeMo-RL v0.4's benchmark table (docs/about/performance-summary.md, "Nemo RL v0.4",
  GRPO on OpenMathInstruct-2) has on-policy steps of 97.7 s (Llama 3.1 8B, 16 H100) to 506 s
  (Qwen3-235B, 128 H100); a step's length follows its generations' lengths, so one step may
  take a few times another. Four medians of silence is well past a long step, and on a 72B
  run (steps of minutes) it is still under an hour of GPU nodes billing for nothing.
- floor = 30 min: the first save of a run is judged by it alone, and a 70B checkpoint takes
  about 10 minutes to write (epfLLM/Megatron-LLM issue 69: "about 10 minutes ... to write a 70b
  checkpoint"; NVIDIA-NeMo/RL issue 1208: 6 to 8 minutes per save of Qwen3-30B-A3B with the
  Megatron backend); three such saves' time before a first save is called stalled.
Both are spec.json's `stall_k` and `stall_floor_s` (manifests_supervisor.run_spec scales the
floor by the sandbox's time scale like the supervisor's other waits, but keeps it at least
STALL_FLOOR_MIN_S real seconds, twenty of the sandbox's one-second polls: the log reaches the
supervisor in batches about a second apart (sandbox/SOURCES.md#ray-job-api) and on a loaded
machine a look, a demo step or its fsynced save may come late, which must not read as a stall).

The supervisor's Ray log tail must be connected for a verdict: a tail that is reconnecting is
not the driver's silence (the lines printed meanwhile arrive, as new, once it is back).
The record of a stall keeps the last LOG_TAIL lines as they arrived, each passed through
`scrub`: a Hugging Face token (`hf_...`), a 40-character key (W&B's) and whatever follows a
URL's host are replaced, so no token the job printed by mistake reaches state.json.
"""

from __future__ import annotations

import re
import statistics
from collections import deque
from typing import Any

STALL_K = 4.0
STALL_FLOOR_S = 30 * 60.0
STALL_FLOOR_MIN_S = 20.0  # real seconds, whatever the time scale (see above)
LOG_TAIL = 20
KEEP_TIMES = 50  # the newest step times the median is taken over

# A driver line has no Ray prefix; worker lines start with "(ActorName pid=...)".
STEP_LINE = re.compile(r"^\s*=+ Step (\d+)/(\d+) =+\s*$")
EPOCH_LINE = re.compile(r"^\s*=+ Epoch (\d+)/(\d+) =+\s*$")
SAVE_LINE = re.compile(r"^Saving checkpoint for step (\d+)\.\.\.")
END_LINE = re.compile(r"^(Max number of steps|Timeout) has been reached, stopping training early")
VALIDATION_LINE = re.compile(r"^▶\ufe0f? Starting validation at step (\d+)")
STEP_TIME = re.compile(r"^\s+• Total step time: ([0-9.]+)s\s*$")
SAVE_TIME = re.compile(r"^\s+• checkpointing: ([0-9.]+)s")
VALIDATION_TIME = re.compile(r"^\s+• Total validation time: ([0-9.]+)s")
_SECRETS = (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), re.compile(r"\b[A-Za-z0-9]{40}\b"))
_URL_TAIL = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s?#]+)[^\s]*", re.I)


def scrub(line: str) -> str:
    line = _URL_TAIL.sub(r"\1/…", line)
    for pattern in _SECRETS:
        line = pattern.sub("<redacted>", line)
    return line[:300]


def clock_text(seconds: float) -> str:
    """4:10, or 1:02:03 past an hour."""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}" if minutes < 60 else f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


class Watchdog:
    """One run's watchdog: `begin` at each attempt, `line` for each of its log lines as it
    arrives (with the arrival time), `verdict` once per look."""

    def __init__(self, k: float = STALL_K, floor_s: float = STALL_FLOOR_S) -> None:
        self.k, self.floor_s = float(k), float(floor_s)
        self.step_times: deque[float] = deque(maxlen=KEEP_TIMES)  # the run's, across attempts
        self.longest = {"save": 0.0, "validation": 0.0}
        self.lines: deque[str] = deque(maxlen=LOG_TAIL)
        self.begin()

    def begin(self) -> None:
        """A new attempt: not armed until its first step."""
        self.step: int | None = None  # run-wide, as saves print it (supervisor.py `Progress`)
        self.epoch: int | None = None
        self.phase = ""  # step, save, validation: what the newest mark started
        self.since: float | None = None  # the newest mark's arrival
        self.ended = False
        self.lines.clear()

    def configure(self, spec: dict[str, Any]) -> None:
        self.k = float(spec.get("stall_k") or STALL_K)
        self.floor_s = float(spec.get("stall_floor_s") or STALL_FLOOR_S)

    def line(self, line: str, now: float) -> None:
        self.lines.append(scrub(line))
        m = STEP_LINE.match(line)
        if m:
            step, per_epoch = int(m.group(1)), int(m.group(2))
            self.step = (self.epoch - 1) * per_epoch + step if self.epoch else step
            self.phase, self.since = "step", now
            return
        m = EPOCH_LINE.match(line)
        if m:
            self.epoch = int(m.group(1))
            return
        if SAVE_LINE.match(line):
            self.phase, self.since = "save", now
        elif VALIDATION_LINE.match(line):
            self.phase, self.since = "validation", now
        elif END_LINE.match(line):
            self.ended = True
        elif (m := STEP_TIME.match(line)) and self.step is not None:
            self.step_times.append(float(m.group(1)))
            self.phase, self.since = "step", now  # the step is over: the next header is due
        elif m := SAVE_TIME.match(line):
            self.longest["save"] = max(self.longest["save"], float(m.group(1)))
        elif m := VALIDATION_TIME.match(line):
            self.longest["validation"] = max(self.longest["validation"], float(m.group(1)))

    def median_s(self) -> float | None:
        return statistics.median(self.step_times) if self.step_times else None

    @property
    def armed(self) -> bool:
        return self.step is not None and self.since is not None and bool(self.step_times) and not self.ended

    def allowance(self) -> tuple[float, str]:
        """The silence allowed now, and why, in words: `4 x median 1:02`."""
        median = self.median_s() or 0.0
        limit, why = self.floor_s, f"the floor, {clock_text(self.floor_s)}"
        if self.k * median > limit:
            limit, why = self.k * median, f"{self.k:g} x median {clock_text(median)}"
        longest = self.longest.get(self.phase, 0.0)
        if self.k * longest > limit:
            what = "save" if self.phase == "save" else "validation"
            limit, why = self.k * longest, f"{self.k:g} x the longest {what}, {clock_text(longest)}"
        return limit, why

    def verdict(self, now: float) -> dict[str, Any] | None:
        """The stall, as the attempt records it, or None (not armed, or not silent long enough)."""
        if not self.armed or self.since is None:
            return None
        silent = now - self.since
        limit, why = self.allowance()
        if silent <= limit:
            return None
        doing = {"save": " while saving its checkpoint", "validation": " while validating"}.get(self.phase, "")
        what = f"no new step for {clock_text(silent)}{doing} ({why})"
        return {"at": round(now, 3), "step": self.step, "phase": self.phase, "silent_s": round(silent, 1),
                "allowance_s": round(limit, 1), "median_s": self.median_s(), "k": self.k,
                "floor_s": self.floor_s, "what": what, "why": f"stalled at step {self.step}: {what}",
                "log_tail": list(self.lines)}
