"""The stall watchdog's decisions (rltui/oncluster/watchdog.py), on a fake clock: the median of
the driver's own step times times k, the floor, saves and validations as progress, never armed
before an attempt's first step, and a stall record that holds no secret the log printed."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from rltui import manifests_supervisor as ms
from rltui.config import parse_config
from rltui.oncluster.supervisor import ANSI
from rltui.oncluster.watchdog import STALL_FLOOR_MIN_S, STALL_FLOOR_S, STALL_K, Watchdog

DATA = Path(__file__).resolve().parents[1] / "data"
T0 = 1_000_000.0
BAR = "=" * 25


def step(dog: Watchdog, n: int, at: float, took: float | None = None, total: int = 20) -> None:
    """Step n's header at `at`; with `took`, its timing table (Total step time) at at + took."""
    dog.line("", at)
    dog.line(f"{BAR} Step {n}/{total} {BAR}", at)
    dog.line("▶ Generating responses for batch of size 256...", at)
    if took is not None:
        dog.line("⏱️  Timing:", at + took)
        dog.line(f"  • Total step time: {took:.2f}s", at + took)


def test_not_armed_before_the_first_step_however_long_the_model_loads() -> None:
    dog = Watchdog(k=4, floor_s=60)
    dog.line("▶ Setting up model and training...", T0)
    assert dog.verdict(T0 + 10 * 3600) is None          # hours of loading: no step yet
    step(dog, 1, T0 + 10 * 3600)
    assert dog.verdict(T0 + 20 * 3600) is None          # step 1 runs: no step time to judge by
    step(dog, 1, T0, took=60.0)
    assert dog.armed


def test_k_times_the_median_step_time_then_stalled() -> None:
    dog = Watchdog(k=4, floor_s=60)
    t = T0
    for n, took in enumerate([50.0, 70.0, 60.0, 400.0, 55.0], 1):   # one slow step: the median holds
        step(dog, n, t, took)
        t += took
    assert dog.median_s() == 60.0
    step(dog, 6, t)
    assert dog.verdict(t + 4 * 60 - 1) is None
    stall = dog.verdict(t + 4 * 60 + 1)
    assert stall is not None and stall["step"] == 6 and stall["median_s"] == 60.0
    assert stall["why"] == "stalled at step 6: no new step for 4:01 (4 x median 1:00)"


def test_the_floor_when_steps_are_short() -> None:
    dog = Watchdog(k=4, floor_s=600)
    step(dog, 1, T0, took=1.0)
    step(dog, 2, T0 + 1)
    assert dog.verdict(T0 + 1 + 599) is None
    stall = dog.verdict(T0 + 1 + 601)
    assert stall is not None and "(the floor, 10:00)" in stall["what"]


def test_a_save_and_a_validation_are_progress() -> None:
    dog = Watchdog(k=4, floor_s=60)
    step(dog, 1, T0, took=100.0)
    step(dog, 2, T0 + 100)
    dog.line("▶ Starting validation at step 2...", T0 + 100 + 350)     # 350 s into the step
    assert dog.verdict(T0 + 100 + 700) is None                          # 350 s since the validation
    dog.line("Saving checkpoint for step 2...", T0 + 100 + 700)
    assert dog.verdict(T0 + 100 + 1050) is None                         # 350 s into the save
    stall = dog.verdict(T0 + 100 + 700 + 401)
    assert stall is not None and stall["phase"] == "save"
    assert stall["what"] == "no new step for 6:41 while saving its checkpoint (4 x median 1:40)"


def test_a_worker_line_is_not_the_driver_going_on() -> None:
    """Ray forwards worker lines with their actor's prefix: a driver stuck in a collective still
    gets them, so they count for nothing."""
    dog = Watchdog(k=4, floor_s=60)
    step(dog, 1, T0, took=10.0)
    step(dog, 2, T0 + 10)
    dog.line("(MegatronPolicyWorker[rank=0] pid=2210, ip=10.8.0.11) Saving checkpoint for step 99...", T0 + 45)
    dog.line("(MegatronPolicyWorker[rank=0] pid=2210, ip=10.8.0.11) ========== Step 3/20 ==========", T0 + 45)
    assert dog.verdict(T0 + 10 + 61) is not None


def test_a_long_save_is_judged_by_the_longest_save_before_it() -> None:
    """On a slow volume a save outlasts a step: k x the longest earlier save, not the median."""
    dog = Watchdog(k=4, floor_s=60)
    step(dog, 1, T0, took=30.0)
    dog.line("Saving checkpoint for step 2...", T0 + 30)
    dog.line("  • checkpointing: 300.00s (90.9%)", T0 + 330)
    step(dog, 3, T0 + 330, took=30.0)
    dog.line("Saving checkpoint for step 4...", T0 + 360)
    assert dog.verdict(T0 + 360 + 4 * 300 - 1) is None     # 20 min: 4 x the 5-min save
    stall = dog.verdict(T0 + 360 + 4 * 300 + 1)
    assert stall is not None and "4 x the longest save, 5:00" in stall["what"]


def test_a_new_attempt_is_armed_at_its_first_step_with_the_runs_median() -> None:
    dog = Watchdog(k=4, floor_s=60)
    step(dog, 1, T0, took=60.0)
    step(dog, 2, T0 + 60)
    dog.begin()                                   # resubmitted: it loads the model again
    assert dog.verdict(T0 + 5000) is None
    step(dog, 3, T0 + 5000)
    assert dog.verdict(T0 + 5000 + 239) is None
    assert dog.verdict(T0 + 5000 + 241) is not None  # the run's median: armed at once


def test_the_end_of_training_disarms_it() -> None:
    dog = Watchdog(k=4, floor_s=60)
    step(dog, 1, T0, took=10.0)
    dog.line("Max number of steps has been reached, stopping training early", T0 + 10)
    assert dog.verdict(T0 + 3600) is None


def test_the_noisy_log_median_is_the_drivers_own_step_times() -> None:
    """NeMo-RL v0.4.0's lines as `ray job submit` tails them (colour codes, worker lines, a fake
    step header in the text): the median is that of the steps' Total step time."""
    expected = json.loads((DATA / "grpo_noisy.expected.json").read_text())
    dog = Watchdog()
    for raw in (DATA / "grpo_noisy.log").read_text().split("\n"):
        dog.line(ANSI.sub("", raw).rstrip("\r"), T0)
    times = [s["step_time_s"] for s in expected["steps"]]
    assert dog.median_s() == statistics.median(times)
    assert dog.longest["save"] == max(s["checkpoint_s"] for s in expected["steps"] if s["checkpoint_s"])


def test_the_stall_record_keeps_the_last_lines_without_secrets() -> None:
    dog = Watchdog(k=1, floor_s=1)
    step(dog, 1, T0, took=1.0)
    step(dog, 2, T0 + 1)
    token, key = "hf_" + "S3cr3tT0ken" * 3, "a1" * 20
    dog.line(f"HF_TOKEN={token} WANDB_API_KEY={key}", T0 + 1)
    dog.line("posting to https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX?x=1", T0 + 1)
    for n in range(30):
        dog.line(f"line {n}", T0 + 1)
    stall = dog.verdict(T0 + 10)
    assert stall is not None and len(stall["log_tail"]) == 20 and stall["log_tail"][-1] == "line 29"
    dog.lines.clear()
    dog.line(f"HF_TOKEN={token} WANDB_API_KEY={key}", T0 + 1)
    dog.line("posting to https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX?x=1", T0 + 1)
    text = json.dumps(dog.verdict(T0 + 10), ensure_ascii=False)
    assert token not in text and key not in text and "XXXXsecretXXXX" not in text and "B000" not in text
    assert "https://hooks.slack.com/…" in text


def test_spec_json_carries_k_and_the_floor_scaled_like_the_other_waits() -> None:
    cfg, job = parse_config({"PROJECT_ID": "team-rl-sandbox-42"}), "rltui-20261201-093000-ab12cd"
    real = ms.run_spec(cfg, job, entrypoint="x", runtime_env={}, metadata={}, submitted_at=1.0)
    fast = ms.run_spec(cfg, job, entrypoint="x", runtime_env={}, metadata={}, submitted_at=1.0, time_scale=1 / 60)
    faster = ms.run_spec(cfg, job, entrypoint="x", runtime_env={}, metadata={}, submitted_at=1.0, time_scale=1 / 300)
    assert (real["stall_k"], real["stall_floor_s"]) == (STALL_K, STALL_FLOOR_S)
    assert fast["stall_floor_s"] == round(STALL_FLOOR_S / 60, 3)       # 30 s: above the minimum
    assert faster["stall_floor_s"] == STALL_FLOOR_MIN_S                 # 6 s would be below it
    dog = Watchdog()
    dog.configure(faster)
    assert (dog.k, dog.floor_s) == (STALL_K, STALL_FLOOR_MIN_S)


def test_a_stall_in_the_second_epoch_names_the_step_as_the_saves_do() -> None:
    """NeMo-RL's header restarts each epoch; its saves print the run-wide step (grpo.py)."""
    dog = Watchdog(k=1, floor_s=1)
    dog.line(f"{BAR} Epoch 1/2 {BAR}", T0)
    step(dog, 20, T0, took=1.0)
    dog.line(f"{BAR} Epoch 2/2 {BAR}", T0 + 1)
    step(dog, 3, T0 + 1)
    stall = dog.verdict(T0 + 10)
    assert stall is not None and stall["step"] == 23 and stall["why"].startswith("stalled at step 23:")
