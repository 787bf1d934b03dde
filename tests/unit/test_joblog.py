"""rltui.joblog: the NeMo-RL v0.4.0 GRPO log parser and the per-step tracker."""

from __future__ import annotations

import re
import time
import tracemalloc
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.joblog import (
    MAX_BLOCK_ITEMS,
    MAX_LINE_CHARS,
    CheckpointDirectory,
    CheckpointEvent,
    CheckpointPruned,
    CheckpointSaveStarted,
    DataloaderLoaded,
    EpochStarted,
    Event,
    JobLogParser,
    LoggedData,
    LogLine,
    PerformanceMetrics,
    PhaseStarted,
    RunEnded,
    RunTracker,
    StepStarted,
    TimingEntry,
    TimingTable,
    TrainingResults,
    ValidationResults,
    ValidationStarted,
)

NOISY_LOG = (Path(__file__).parent.parent / "data" / "grpo_noisy.log").read_bytes().decode("utf-8")
W = "(MegatronPolicyWorker[rank=3] pid=2213, ip=10.8.0.11) "
CKPT = "/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1"


def parse(*chunks: str) -> list[Event]:
    parser = JobLogParser()
    events = [e for chunk in chunks for e in parser.feed(chunk)]
    return events + parser.flush()


def typed(events: list[Event], cls: type | None = None) -> list[Event]:
    return [e for e in events if not isinstance(e, LogLine) and (cls is None or isinstance(e, cls))]


def lines(events: list[Event]) -> list[LogLine]:
    return [e for e in events if isinstance(e, LogLine)]


STEP_BLOCKS = """\
========================= Step 4/20 =========================
▶ Training policy...
Saving checkpoint for step 4...
Logged data to logs/exp_001/train_data_step3.jsonl

📊 Training Results:
  • Loss: 0.0123
  • Avg Reward: 0.4567
  • Mean Generation Length: 1234.5678

⏱️  Timing:
  • Total step time: 512.25s
  • generation: 200.00s (39.0%)
  • checkpointing: 111.37s (21.7%)
  • prepare_for_generation/transfer_and_update_weights: 12.64s (2.5%)

🔍 Performance Metrics:
  • Mean Total Tokens per Sample: 1118.16
  • Throughputs (per GPU):
    - E2E (Samples/sec/gpu): 0.01
    - E2E (Tokens/sec/gpu): 1469.62
  • Throughputs (per Group):
    - E2E (Samples/sec): 0.74
  • Training FLOPS: 42317.55 TFLOPS (661.21 TFLOPS per rank)
  • Training Model Floating Point Utilization: 29.39%
"""


# ------------------------------------------------------------------ lines
def test_ray_prefix_repeat_suffix_and_ansi_are_split_off() -> None:
    text = (
        "\x1b[36m(MegatronPolicyWorker[rank=3] pid=1, ip=10.0.0.1)\x1b[0m saved\x1b[32m"
        " [repeated 63x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to"
        " disable log deduplication, or see https://docs.ray.io/x.html for more options.)\x1b[0m\n"
        "(raylet) WARNING: 8 workers (see issue 3644).\n"
        "(raylet, ip=10.8.0.13) spilled\n"
        "(autoscaler +2m13s) Tip: use `ray status`\n"
        "(pid=4410) plain task\n"
        "\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x1b[1;31mred\x1b[0m\n"
        "(not a prefix) kept\n"
    )
    assert lines(parse(text)) == [
        LogLine("saved", "MegatronPolicyWorker[rank=3] pid=1, ip=10.0.0.1", 63),
        LogLine("WARNING: 8 workers (see issue 3644).", "raylet"),
        LogLine("spilled", "raylet, ip=10.8.0.13"),
        LogLine("Tip: use `ray status`", "autoscaler +2m13s"),
        LogLine("plain task", "pid=4410"),
        LogLine("link red", None),
        LogLine("(not a prefix) kept", None),
    ]


def test_carriage_returns_end_lines_and_crlf_is_one_newline() -> None:
    assert [l.text for l in lines(parse("a\rb\r\nc\n\nd"))] == ["a", "b", "c", "", "d"]
    # "\r" and "\n" of one "\r\n" arriving in different chunks still make one newline.
    assert [l.text for l in lines(parse("a\r", "\nb\r", "", "\n"))] == ["a", "b"]
    assert [l.text for l in lines(parse("a\r", "b\n"))] == ["a", "b"]


def test_progress_bar_updates_after_a_bare_cr_keep_the_worker_source() -> None:
    bar = "(VllmGenerationWorker pid=3301) Processed prompts:   0%|\rProcessed prompts: 100%|\n"
    assert [(l.text, l.source) for l in lines(parse(bar, "next\n"))] == [
        ("Processed prompts:   0%|", "VllmGenerationWorker pid=3301"),
        ("Processed prompts: 100%|", "VllmGenerationWorker pid=3301"),
        ("next", None),
    ]


def test_every_line_gives_one_logline_before_its_typed_events() -> None:
    events = parse(NOISY_LOG)
    assert len(lines(events)) == len(re.split(r"\r\n|\r|\n", NOISY_LOG))  # the cut last line too
    assert isinstance(events[0], LogLine)
    for before, after in zip(events, events[1:]):
        if isinstance(after, StepStarted):  # a line's own event follows its LogLine directly
            assert isinstance(before, LogLine) and before.text.startswith("=====")


def test_unknown_lines_pass_through_as_loglines_only() -> None:
    text = "Runtime env is setting up.\nRunning entrypoint for job raysubmit_x: bash run.sh\n  • Loss: 1.0\n"
    assert typed(parse(text)) == []


def test_a_line_is_capped_at_64_kib_and_the_next_line_still_parses() -> None:
    events = parse("x" * 100_000, "y" * 100_000 + "\n" + "========================= Step 1/2 =====\n")
    assert [len(l.text) for l in lines(events)] == [MAX_LINE_CHARS, len("========================= Step 1/2 =====")]
    assert typed(events) == [StepStarted(1, 2)]


def test_memory_stays_flat_on_an_endless_line() -> None:
    parser, chunk = JobLogParser(), "z" * 65536
    tracemalloc.start()
    try:
        for _ in range(256):  # 16 MiB without a newline
            parser.feed(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    assert len(lines(parser.flush())[0].text) == MAX_LINE_CHARS


def test_an_endless_block_keeps_bounded_state() -> None:
    text = "📊 Training Results:\n  • Loss: 0.1000\n" + "  • Noise: 1.0\n" * 20_000 + "\n"
    [r] = typed(parse(text), TrainingResults)
    assert r.loss == 0.1 and len(r.values) == MAX_BLOCK_ITEMS


def test_pathological_lines_parse_in_linear_time() -> None:
    bad = [" " * 65536, " /tmp_step_1" * 6000, "[repeated 3x across cluster] x" * 2200,
           "(" + "a " * 32000, "Removing checkpoint " + "x due to being outside top-" * 2400 + "q",
           "\x1b]" * 30000, "\x1b[" * 30000, "▶ " + "." * 65000, "  • " + "a" * 65000]
    start = time.perf_counter()
    parse(*(line + "\n" for line in bad))
    assert time.perf_counter() - start < 3.0  # quadratic regexes would take minutes


# ------------------------------------------------------------- per event type
def test_epoch_step_and_phases() -> None:
    events = typed(parse(
        "========================= Epoch 2/3 =========================\n"
        "========================= Step 5/20 =========================\n"
        "▶ Preparing batch...\n▶ Generating responses for batch of size 2048...\n"
        "▶ Processing rewards...,\n▶ Training policy...\n"
    ))
    assert events == [
        EpochStarted(2, 3), StepStarted(5, 20, 2), PhaseStarted("Preparing batch"),
        PhaseStarted("Generating responses", 2048), PhaseStarted("Processing rewards"),
        PhaseStarted("Training policy"),
    ]
    assert events[1].global_step == 25  # epoch 2 step 5 of 20 per epoch


def test_training_timing_and_performance_blocks() -> None:
    events = typed(parse(STEP_BLOCKS))
    training = typed(events, TrainingResults)[0]
    assert (training.loss, training.avg_reward, training.mean_generation_length) == (0.0123, 0.4567, 1234.5678)
    assert training.avg_filtered_reward is None
    table = typed(events, TimingTable)[0]
    assert table.total_step_time == 512.25
    assert table.entries == (
        TimingEntry("generation", 200.0, 39.0), TimingEntry("checkpointing", 111.37, 21.7),
        TimingEntry("prepare_for_generation/transfer_and_update_weights", 12.64, 2.5),
    )
    perf = typed(events, PerformanceMetrics)[0]  # closed by flush: nothing follows it
    assert (perf.mean_total_tokens_per_sample, perf.samples_per_sec_per_gpu, perf.tokens_per_sec_per_gpu,
            perf.tflops, perf.tflops_per_rank, perf.mfu_percent) == (1118.16, 0.01, 1469.62, 42317.55, 661.21, 29.39)
    assert ("E2E (Samples/sec)", 0.74) in perf.values


def test_block_is_emitted_right_after_the_line_that_ends_it() -> None:
    events = parse("📊 Training Results:\n  • Loss: 0.5000\n  • Avg Reward: 0.2500\n\n⏱️  Timing:\n")
    kinds = [type(e).__name__ + (":" + e.text if isinstance(e, LogLine) else "") for e in events]
    assert kinds.index("TrainingResults") == kinds.index("LogLine:") + 1


def test_dynamic_sampling_rewards_and_extra_bullets() -> None:
    results = typed(parse(
        "\n📊 Training Results:\n  • Loss: -0.0100\n  • Generation KL Error: 0.0012\n"
        "  • Avg Filtered Reward: 0.7000\n  • Avg Total Reward: 0.4000\n  • Mean Generation Length: 900.0000\n"
    ), TrainingResults)
    assert len(results) == 1
    r = results[0]
    assert (r.loss, r.avg_reward, r.avg_filtered_reward) == (-0.01, 0.4, 0.7)
    assert ("Generation KL Error", 0.0012) in r.values


def test_a_worker_line_inside_a_block_does_not_break_it() -> None:
    text = ("📊 Training Results:\n  • Loss: 0.0100\n"
            f"{W}[Rank 3] step 3 | Loss: 0.9 \n"
            "(VllmGenerationWorker pid=1) 10%|\r50%|\r100%|\n"
            "  • Avg Reward: 0.3000\n  • Mean Generation Length: 5.0000\n\n")
    [r] = typed(parse(text), TrainingResults)
    assert (r.loss, r.avg_reward, r.mean_generation_length) == (0.01, 0.3, 5.0)


def test_an_unprefixed_foreign_line_ends_a_block() -> None:
    [r] = typed(parse("📊 Training Results:\n  • Loss: 0.0100\nWARNING something\n  • Avg Reward: 0.3000\n"),
                TrainingResults)
    assert (r.loss, r.avg_reward) == (0.01, None)


def test_validation_belongs_to_the_named_step_and_ends_at_its_timing() -> None:
    events = parse(
        "▶ Starting validation at step 10...\n\n📊 Validation Results:\n    • Accuracy: 0.4167\n"
        "    • Average response length: 1029.7 tokens\n    • Samples processed: 256\n\n"
        "  ⏱️  Validation Timing:\n    • Total validation time: 104.28s\nSaving checkpoint for step 10...\n"
    )
    assert typed(events) == [ValidationStarted(10), ValidationResults(10, 0.4167, 1029.7, 256, 104.28),
                             CheckpointSaveStarted(10)]
    # Emitted with its last line, not one line later.
    assert events.index(typed(events)[1]) == events.index(LogLine("    • Total validation time: 104.28s")) + 1


def test_startup_saves_pruning_logged_data_and_end() -> None:
    events = typed(parse(
        f"📊 Using log directory: logs/exp_001\n📊 Using checkpoint directory: {CKPT}/\n"
        "  ✓ Training dataloader loaded with 40315 samples\n"
        f"Removing checkpoint {CKPT}/step_6 due to being outside top-2\n"
        "Logged data to logs/exp_001/train_data_step9.jsonl\n"
        "Max number of steps has been reached, stopping training early\n"
        "Timeout has been reached, stopping training early"  # no newline: flush emits it
    ))
    assert events == [
        CheckpointDirectory(CKPT), DataloaderLoaded(40315), CheckpointPruned(f"{CKPT}/step_6", 2, 6),
        LoggedData("logs/exp_001/train_data_step9.jsonl"), RunEnded("max_steps"), RunEnded("timeout"),
    ]


def test_checkpoint_event_gets_the_checkpointing_seconds_of_its_save() -> None:
    events = typed(parse(f"📊 Using checkpoint directory: {CKPT}\n" + STEP_BLOCKS))
    assert CheckpointEvent(4, f"{CKPT}/step_4", 111.37) in events
    assert events.index(CheckpointEvent(4, f"{CKPT}/step_4", 111.37)) == \
        events.index(typed(events, TimingTable)[0]) + 1


def test_checkpoint_dir_comes_from_worker_tmp_step_paths_when_startup_is_missing() -> None:
    worker = f"{W}saving checkpoint at iteration 4 to {CKPT}/tmp_step_4/policy/weights in torch_dist format\n"
    events = typed(parse(STEP_BLOCKS.replace("▶ Training policy...\n", "▶ Training policy...\n" + worker)))
    assert CheckpointDirectory(CKPT, from_worker=True) in events
    assert CheckpointEvent(4, f"{CKPT}/step_4", 111.37) in events
    assert CheckpointEvent(4, None, 111.37) in typed(parse(STEP_BLOCKS))  # directory unknown


def test_a_save_without_checkpointing_timer_gives_no_checkpoint_event() -> None:
    events = typed(parse(STEP_BLOCKS.replace("  • checkpointing: 111.37s (21.7%)\n", "")))
    assert typed(events, CheckpointSaveStarted) and not typed(events, CheckpointEvent)


# ------------------------------------------------------------- distractors
def test_worker_lines_in_driver_formats_start_nothing() -> None:
    text = "".join(W + line + "\n" for line in [
        "========================= Step 3/20 =========================",
        "Saving checkpoint for step 3...", "Max number of steps has been reached, stopping training early",
        "📊 Training Results:", "  • Loss: 0.1", "▶ Training policy...",
        f"Removing checkpoint {CKPT}/step_2 due to being outside top-2",
    ])
    assert typed(parse(text)) == []


def test_driver_lines_that_merely_mention_step_or_loss_start_nothing() -> None:
    text = (
        "+ uv run python examples/run_grpo_math.py grpo.max_num_steps=20 checkpointing.save_period=2\n"
        "UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`.\n"
        "Step 1/3: Let x be the number of apples.\n  • Loss: 9.9999\n  Loss: 0.5\n"
        "== Step 3/20 of the proof ==\n========================= Step 3/20 ========================= x\n"
        "saving checkpoint for step 3...\nSaving checkpoint for step 3\n"
    )
    assert typed(parse(text)) == []


# ------------------------------------------------------------- properties
def _chunks(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted(set(c % (len(text) + 1) for c in cuts)), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0), max_size=60))
def test_any_chunking_of_the_noisy_log_gives_the_same_events(cuts: list[int]) -> None:
    assert parse(*_chunks(NOISY_LOG, cuts)) == parse(NOISY_LOG)


def test_lines_ending_in_lf_only_parse_as_the_same_lines_ending_in_crlf() -> None:
    """Chunks without a "\r" take the parser's split path, others its regex path (issue 13):
    the same lines give the same events either way, and without LogLines when asked."""
    text = NOISY_LOG.replace("\r\n", "\n").replace("\r", "\n")
    events = parse(*_chunks(text, list(range(0, len(text), 997))))
    assert events == parse(text.replace("\n", "\r\n")) and len(typed(events)) > 100
    quiet = JobLogParser(log_lines=False)
    assert [e for chunk in _chunks(text, [5, 4000]) for e in quiet.feed(chunk)] + \
        quiet.flush() == typed(events)


# Characters the parser cares about, plus anything; and real lines in any order.
SIGNIFICANT = st.sampled_from(list("\r\n \t()[]=/:.%-•▶✓📊⏱️🔍\x1b\x07\\0123456789sStepLo"))
NOISE = st.text(alphabet=SIGNIFICANT | st.characters(), max_size=300)
FRAGMENTS = st.sampled_from(NOISY_LOG.splitlines(keepends=True)[300:420]) | NOISE


@settings(max_examples=400, deadline=None)
@given(st.lists(FRAGMENTS, max_size=30), st.lists(st.integers(min_value=0), max_size=20))
def test_arbitrary_text_never_crashes_and_chunking_never_matters(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    events = parse(text)
    assert all(len(l.text) <= MAX_LINE_CHARS for l in lines(events))
    assert parse(*_chunks(text, cuts)) == events
    tracker = RunTracker()
    for event in events:
        tracker.update(event)


# ------------------------------------------------------------------ tracker
def fold(text: str) -> RunTracker:
    tracker = RunTracker()
    for event in parse(text):
        tracker.update(event)
    return tracker


def test_tracker_folds_a_step_into_one_record() -> None:
    tracker = fold(f"📊 Using checkpoint directory: {CKPT}\n" + STEP_BLOCKS)
    [record] = tracker.records
    assert (record.step, record.total_steps, record.loss, record.avg_reward, record.step_time_s,
            record.checkpoint_s, record.val_accuracy) == (4, 20, 0.0123, 0.4567, 512.25, 111.37, None)
    assert (record.tokens_per_sec_per_gpu, record.mfu_percent, record.checkpoint_path) == \
        (1469.62, 29.39, f"{CKPT}/step_4")
    assert tracker.checkpoints == [CheckpointEvent(4, f"{CKPT}/step_4", 111.37)]
    assert tracker.current == record and tracker.phase == "Training policy"


def test_tracker_puts_validation_on_the_named_step_across_epochs() -> None:
    tracker = fold(
        "▶ Starting validation at step 0...\n📊 Validation Results:\n    • Accuracy: 0.1000\n"
        "    • Total validation time: 1.00s\n"  # val_at_start: before any step, no record
        "========================= Epoch 1/2 =========================\n"
        "========================= Step 5/5 =========================\n"
        "========================= Epoch 2/2 =========================\n"
        "========================= Step 1/5 =========================\n"
        "▶ Starting validation at step 6...\n📊 Validation Results:\n    • Accuracy: 0.5000\n"
        "    • Total validation time: 9.00s\n"
    )
    assert [(r.epoch, r.step, r.global_step, r.val_accuracy) for r in tracker.records] == \
        [(1, 5, 5, None), (2, 1, 6, 0.5)]
    assert tracker.total_epochs == 2
