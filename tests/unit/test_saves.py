"""When each save happened, from log lines as they arrive: live, as a backlog, across a rerun.

The log is NeMo-RL v0.4.0's format (the parts the timeline reads) with a known print time per
line; the real JobLogParser turns each delivered chunk into events.
"""

from __future__ import annotations

import pytest

from rltui.joblog import JobLogParser
from rltui.saves import Save, SaveTimeline, merge

T0 = 1_760_000_000.0
LAG = 0.3       # a live line arrives this long after its print (Ray's tail polls each second)
STEP_S = 60.0
SAVES = {2: 20.0, 4: 25.0, 6: 18.0, 8: 30.0}   # step -> checkpointing seconds


def step_lines(step: int, start: float, total: int = 8) -> list[tuple[float, str]]:
    """(print time, line) of one step: a save (if any) just before the end, then its timing."""
    ckpt = SAVES.get(step)
    length = STEP_S + (ckpt or 0.0)
    end = start + length
    lines = [(start, f"========================= Step {step}/{total} ========================="),
             (start, "▶ Preparing batch..."), (start + 5, "▶ Training policy...")]
    if ckpt:
        lines.append((end - ckpt, f"Saving checkpoint for step {step}..."))
    lines += [(end, "⏱️  Timing:"), (end, f"  • Total step time: {length:.2f}s")]
    if ckpt:
        lines.append((end, f"  • checkpointing: {ckpt:.2f}s ({100 * ckpt / length:.1f}%)"))
    lines += [(end, f"  • generation: {STEP_S * 0.4:.2f}s (40.0%)"), (end, "")]
    return lines


def run_log(steps: range, start: float = T0) -> tuple[list[tuple[float, str]], dict[int, float]]:
    """Lines of the given steps back to back, and each save's true start."""
    lines, starts, t = [], {}, start
    for step in steps:
        part = step_lines(step, t)
        lines += part
        starts.update((step, p) for p, text in part if text.startswith("Saving"))
        t = part[-1][0]
    return lines, starts


def deliver(timeline: SaveTimeline, parser: JobLogParser, lines: list[tuple[float, str]],
            arrived: float | None = None, chunk: int = 10) -> None:
    """Live (each line at its print + LAG) or, with `arrived`, as a backlog: 10-line chunks
    1 ms apart, as Ray's file_tail_iterator sends what is already in the file."""
    if arrived is None:
        for printed, text in lines:
            timeline.feed(parser.feed(text + "\n"), printed + LAG)
        return
    for i in range(0, len(lines), chunk):
        text = "".join(t + "\n" for _, t in lines[i:i + chunk])
        timeline.feed(parser.feed(text), arrived + i / chunk * 0.001)


def test_live_saves_start_when_their_line_arrives_and_last_their_timer():
    timeline, parser = SaveTimeline(), JobLogParser()
    lines, starts = run_log(range(1, 9))
    deliver(timeline, parser, lines)
    saves = timeline.saves()
    assert [s.step for s in saves] == [2, 4, 6, 8]
    for s in saves:
        assert s.started == starts[s.step] + LAG and not s.estimated
        assert s.seconds == SAVES[s.step]


def test_a_save_in_progress_has_its_start_and_no_duration_yet():
    timeline, parser = SaveTimeline(), JobLogParser()
    lines, starts = run_log(range(1, 5))
    deliver(timeline, parser, lines[:-5])  # cut inside step 4's save
    (*_, last) = timeline.saves()
    assert last == Save(4, starts[4] + LAG, None, None, estimated=False)
    assert last.ended is None


def test_a_backlog_is_dated_backwards_from_its_arrival_with_the_step_times():
    """Reopened at the end of step 6: every save of steps 2..6 arrives within 4 ms."""
    timeline, parser = SaveTimeline(), JobLogParser()
    lines, starts = run_log(range(1, 9))
    cut = next(i for i, (_, t) in enumerate(lines) if " Step 7/" in t)
    backlog, live = lines[:cut + 2], lines[cut + 2:]
    opened = lines[cut + 1][0] + 4.0  # 4 s into step 7
    deliver(timeline, parser, backlog, arrived=opened)
    early = {s.step: s for s in timeline.saves()}
    assert sorted(early) == [2, 4, 6]
    for step, s in early.items():
        assert s.estimated
        # Late by at most the 4 s of step 7 that had run (and the 1 ms chunks), never early.
        assert 0 <= s.started - starts[step] <= 4.01
    # The first live step end fixes the offset to within the live lag.
    deliver(timeline, parser, live)
    late = {s.step: s for s in timeline.saves()}
    for step in (2, 4, 6):
        assert abs(late[step].started - starts[step]) <= LAG + 1e-6 and late[step].estimated
    assert late[8].started == starts[8] + LAG and not late[8].estimated


def test_a_save_running_when_the_backlog_arrives_is_marked_estimated():
    timeline, parser = SaveTimeline(), JobLogParser()
    lines, starts = run_log(range(1, 5))
    saving = next(i for i, (_, t) in enumerate(lines) if t == "Saving checkpoint for step 4...")
    opened = starts[4] + 10.0
    deliver(timeline, parser, lines[:saving + 1], arrived=opened)
    (*_, last) = timeline.saves()
    assert last.step == 4 and last.seconds is None and last.estimated
    assert abs(last.started - opened) < 0.01  # an upper bound until its step's timing arrives
    # Its timing table arrives live: the start is its end minus its timer.
    deliver(timeline, parser, lines[saving + 1:])
    (*_, last) = timeline.saves()
    assert abs(last.started - (starts[4] + LAG)) < 1e-6 and last.seconds == 25.0
    assert last.estimated  # 10 s before it arrived: worked out, not seen


def test_a_rerun_starts_a_new_chain_and_bounds_the_old_one():
    """Attempt 1 ran steps 1..4, attempt 2 resumed at step 3 later: both in one backlog."""
    timeline, parser = SaveTimeline(), JobLogParser()
    first, starts1 = run_log(range(1, 5))
    gap = 300.0  # the preemption and the resubmit
    second, starts2 = run_log(range(3, 7), start=first[-1][0] + gap)
    opened = second[-1][0] + 1.0
    deliver(timeline, parser, first + second, arrived=opened)
    saves = {s.step: s for s in timeline.saves()}
    assert sorted(saves) == [2, 4, 6]
    assert 0 <= saves[6].started - starts2[6] <= 1.01
    assert 0 <= saves[4].started - starts2[4] <= 1.01  # the rerun's save of step 4 wins
    # Attempt 1's save of step 2: no later than attempt 2 began, so at most the gap late.
    assert 0 <= saves[2].started - starts1[2] <= gap + 1.01


def test_merge_keeps_a_seen_time_over_a_later_estimate():
    seen = {2: Save(2, T0, 20.0, "/l/step_2")}
    again = [Save(2, T0 - 3.0, 20.0, "/l/step_2", estimated=True), Save(4, T0 + 90, None)]
    merged = merge(seen, again)
    assert merged[2] == seen[2] and merged[4].seconds is None
    # A save that did not end before now ends.
    assert merge(merged, [Save(4, T0 + 90, 25.0)])[4].ended == T0 + 115


def test_version_changes_only_with_the_saves():
    timeline, parser = SaveTimeline(), JobLogParser()
    assert not timeline.feed(parser.feed("▶ Preparing batch...\n"), T0)
    v = timeline.version
    timeline.feed(parser.feed("Saving checkpoint for step 1...\n"), T0 + 1)
    assert timeline.version == v + 1


# --- a backlog dated by the Ray job's own times (JobDetails start_time / end_time) ---------------

SETUP_S = 150.0    # cluster, vLLM and policy setup before step 1 (NeMo-RL: minutes)
TEARDOWN_S = 3.0   # after the last step: grpo_train returns, the driver exits


def test_a_finished_jobs_backlog_read_90_s_after_it_ended_lies_within_its_run():
    """The wizard opened after the job: its whole log arrives at once, 90 s after the end.
    Every save is dated from the job's end time back by the step times, not from the read."""
    timeline, parser = SaveTimeline(), JobLogParser()
    lines, starts = run_log(range(1, 9))
    start, end = T0 - SETUP_S, lines[-1][0] + TEARDOWN_S
    timeline.job_times("raysubmit_done", start, end)
    deliver(timeline, parser, lines, arrived=end + 90.0)
    saves = timeline.saves()
    assert [s.step for s in saves] == [2, 4, 6, 8]
    for s in saves:
        assert start <= s.started and s.ended is not None and s.ended <= end, s
        assert 0 <= s.started - starts[s.step] <= TEARDOWN_S + 1e-6 and s.estimated


def test_a_save_cut_off_by_the_jobs_end_is_no_later_than_the_end():
    timeline, parser = SaveTimeline(), JobLogParser()
    lines, starts = run_log(range(1, 5))
    saving = next(i for i, (_, t) in enumerate(lines) if t == "Saving checkpoint for step 4...")
    end = starts[4] + 5.0   # the job failed during step 4's save
    timeline.job_times("raysubmit_failed", T0 - SETUP_S, end)
    deliver(timeline, parser, lines[:saving + 1], arrived=end + 90.0)
    (*_, last) = timeline.saves()
    assert last.step == 4 and last.seconds is None and last.started == end and last.estimated


def test_live_lines_keep_their_arrival_when_the_job_times_are_known():
    timeline, parser = SaveTimeline(), JobLogParser()
    lines, starts = run_log(range(1, 9))
    timeline.job_times("raysubmit_live", T0 - SETUP_S, None)
    deliver(timeline, parser, lines)
    timeline.job_times("raysubmit_live", T0 - SETUP_S, lines[-1][0] + TEARDOWN_S)  # it ended
    for s in timeline.saves():
        assert s.started == starts[s.step] + LAG and not s.estimated


def test_a_backlog_of_a_running_job_is_never_dated_before_the_job_began():
    """Reopened mid-run, with the Ray head's clock 10 s ahead of ours: the arrival dates the
    saves (late by at most the 4 s of step 7 that ran), but never before Ray's start_time plus
    the steps that came before each."""
    timeline, parser = SaveTimeline(), JobLogParser()
    lines, starts = run_log(range(1, 9))
    cut = next(i for i, (_, t) in enumerate(lines) if " Step 7/" in t)
    start = T0 + 10.0   # step 1 began at T0 on our clock: at once, on the head's
    timeline.job_times("raysubmit_running", start, None)
    deliver(timeline, parser, lines[:cut + 2], arrived=lines[cut + 1][0] + 4.0)
    for s in timeline.saves():  # the step times before each save: its start from T0
        assert s.estimated and s.started == pytest.approx(start + starts[s.step] - T0)


def test_each_attempt_of_a_run_is_dated_by_its_own_job():
    """A supervised run read after the fact: attempt 2 (its own Ray job) resumed at step 3."""
    timeline, parser = SaveTimeline(), JobLogParser()
    first, starts1 = run_log(range(1, 5))
    gap = 300.0
    second, starts2 = run_log(range(3, 7), start=first[-1][0] + gap)
    end1, end2 = first[-1][0] + TEARDOWN_S, second[-1][0] + TEARDOWN_S
    read = end2 + 90.0
    timeline.job_times("rltui-run", T0 - SETUP_S, end1)
    deliver(timeline, parser, first, arrived=read)
    timeline.job_times("rltui-run-a2", second[0][0] - SETUP_S, end2)
    deliver(timeline, parser, second, arrived=read + 0.01)
    saves = {s.step: s for s in timeline.saves()}
    assert 0 <= saves[2].started - starts1[2] <= TEARDOWN_S + 1e-6 and saves[2].ended <= end1
    for step in (4, 6):
        assert 0 <= saves[step].started - starts2[step] <= TEARDOWN_S + 1e-6
