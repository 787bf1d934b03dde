"""Deterministic data for the Metrics screen: one GRPO run of 20 steps seen by Monitoring.

Three saves (steps 6, 12, 18) write a 1.45 TB checkpoint each; the write rate of every
one-minute period is what those saves put into it, so the spikes sit under the saves.
"""

from __future__ import annotations

import math

from rltui.cloud.monitoring import Point
from rltui.joblog import TrainingStep
from rltui.saves import Save
from rltui.seam import GpuMetrics, LustreInstance, LustreMetrics

AT = 1_760_000_000.0              # the poll: "now" on the time axis
PERIOD = 60
POINTS = 30
CAPACITY_GIB = 9000
GIB = 1024 ** 3
CKPT_BYTES = 1.45e12
CKPT_DIR = "/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1"
SAVES = {6: 241.3, 12: 188.8, 18: 176.5}   # step -> checkpoint seconds
TOTAL_STEPS = 20


def step_time(step: int) -> float:
    return 52.0 + 3.0 * math.sin(step) + SAVES.get(step, 0.0)


def step_ends() -> dict[int, float]:
    """Each step's end, the last one 30 s before the poll."""
    ends, t = {}, AT - 30.0
    for step in range(TOTAL_STEPS, 0, -1):
        ends[step] = t
        t -= step_time(step)
    return ends


def save_windows() -> list[tuple[float, float, float]]:
    """(start, end, bytes per second) of each save: it ends with its step."""
    ends = step_ends()
    return [(ends[s] - secs, ends[s], CKPT_BYTES / secs) for s, secs in SAVES.items()]


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def metrics(points: int = POINTS, period: int = PERIOD) -> LustreMetrics:
    ts = [AT - (points - 1 - i) * period for i in range(points)]
    write, read, used = [], [], []
    for t in ts:
        saved = sum(_overlap(t - period, t, s0, s1) * rate for s0, s1, rate in save_windows())
        write.append(Point(t, 1.5e8 + saved / period))
        start = min(step_ends().values()) - step_time(1)
        loading = _overlap(t - period, t, start - 200, start) * 2.1e9  # model load before step 1
        read.append(Point(t, 4.0e7 + loading / period))
        done = sum(min(1.0, _overlap(-math.inf, t, s0, s1) / (s1 - s0))
                   for s0, s1, _ in save_windows())
        kept = min(done, 2.0)  # keep_top_k=2 prunes the oldest after the third save
        used.append(Point(t, 150 * GIB + kept * CKPT_BYTES))
    return LustreMetrics(AT, period, tuple(read), tuple(write), tuple(used), CAPACITY_GIB)


def gpu(points: int = POINTS, period: int = PERIOD, workers: int = 8) -> GpuMetrics:
    """GKE's duty cycle of each worker pod over the same periods: busy (95%) from step 1 on,
    except while a save runs (the GPUs wait for the checkpoint): the dips sit under the spikes."""
    ts = [AT - (points - 1 - i) * period for i in range(points)]
    start = min(step_ends().values()) - step_time(1)
    busy = []
    for t in ts:
        training = _overlap(t - period, t, start, AT - 30.0)
        saving = sum(_overlap(t - period, t, s0, s1) for s0, s1, _ in save_windows())
        busy.append(Point(t, 95.0 * max(0.0, training - saving) / period))
    names = [f"ray-a4-gpu-spot-gpu-worker-group-worker-{i}" for i in range(workers)]
    return GpuMetrics(AT, period, {n: tuple(busy) for n in names},
                      {n: tuple(Point(t, 8 * 0.6 * 180e9) for t in ts) for n in names},
                      {n: tuple(Point(t, 8 * 180e9) for t in ts) for n in names})


def dense_metrics(points: int, phase: float = 0.0) -> LustreMetrics:
    """Many points over the same 30 minutes (a fine alignment period, or a long window)."""
    period = 1800 / points
    ts = [AT - (points - 1 - i) * period for i in range(points)]
    wave = tuple(Point(t, 1e9 * (1.2 + math.sin(i / 37.0 + phase))) for i, t in enumerate(ts))
    return LustreMetrics(AT, period, wave, wave, tuple(Point(t, 200 * GIB) for t in ts), CAPACITY_GIB)


def saves() -> list[Save]:
    """Each save as the app publishes it: it started `seconds` before its step ended."""
    ends = step_ends()
    return [Save(step, ends[step] - secs, secs, f"{CKPT_DIR}/step_{step}")
            for step, secs in SAVES.items()]


def many_saves(count: int = 10, every: float = 170.0, seconds: float = 40.0) -> list[Save]:
    """`count` saves close together in the last 30 minutes, the older half estimated."""
    first = AT - 30 - count * every
    return [Save(2 * (i + 1), first + i * every, seconds, f"{CKPT_DIR}/step_{2 * (i + 1)}",
                 estimated=i < count // 2) for i in range(count)]


JOB_ID = "raysubmit_sampleRun20"
TEARDOWN_S = 2.0   # from step 20's end to the job's end: the driver exits


def job_times() -> tuple[float, float]:
    """The Ray job's start_time and end_time (epoch s): 200 s of model load before step 1 (the
    read spike), the driver's exit after step 20."""
    first = min(step_ends().values()) - step_time(1)
    return first - 200.0, AT - 30.0 + TEARDOWN_S


def job_log() -> str:
    """The run's log as NeMo-RL v0.4.0 prints it: what the save timeline reads of it."""
    out = []
    for step in range(1, TOTAL_STEPS + 1):
        total, saved = step_time(step), SAVES.get(step)
        out += [f"========================= Step {step}/{TOTAL_STEPS} =========================",
                "▶ Training policy..."]
        if saved:
            out.append(f"Saving checkpoint for step {step}...")
        out += ["", "⏱️  Timing:", f"  • Total step time: {total:.2f}s"]
        if saved:
            out.append(f"  • checkpointing: {saved:.2f}s ({100 * saved / total:.1f}%)")
        out += [f"  • generation: {0.4 * total:.2f}s (40.0%)", ""]
    return "\n".join(out) + "\n"


def lustre() -> LustreInstance:
    """The instance as Session.lustre_instance returns it."""
    return LustreInstance("rl-demo-gpu-lustre", found=True, state="ACTIVE",
                          mount_point="10.90.0.2@tcp:/lustre", ip="10.90.0.2",
                          capacity_gib=CAPACITY_GIB, throughput=1000, filesystem="lustre",
                          network="projects/team-rl-sandbox-42/global/networks/ray-a4-gpu-spot-net-0")


def step_records() -> list[TrainingStep]:
    """20 steps, reward rising from about 0.1 to 0.8."""
    out = []
    for step in range(1, TOTAL_STEPS + 1):
        reward = 0.1 + 0.7 * (1 - math.exp(-step / 6)) + 0.03 * math.sin(step * 1.7)
        saved = SAVES.get(step)
        out.append(TrainingStep(step, TOTAL_STEPS, epoch=1, loss=0.05,
                              avg_reward=round(reward, 4),
                              step_time_s=round(step_time(step), 2), checkpoint_s=saved,
                              checkpoint_path=f"{CKPT_DIR}/step_{step}" if saved else None))
    return out
