"""The followed job's log as the wizard gets it from its cloud worker (rltui/jobfeed.py): every
step with its final values, every line as a terminal shows it, the saves; in few updates."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rltui.jobfeed import JobFeed, JobUpdate
from rltui.joblog import JobLogParser

DATA = Path(__file__).resolve().parents[1] / "data"
FIELDS = ("loss", "avg_reward", "step_time_s", "checkpoint_s", "val_accuracy")


def chunks(text: str, size: int = 10) -> list[str]:
    """Ray's tail: at most 10 lines a message."""
    lines = text.splitlines(keepends=True)
    return ["".join(lines[i:i + size]) for i in range(0, len(lines), size)]


async def follow(feed: JobFeed, parts: list[str], gap_s: float = 0.0) -> None:
    """What Session.follow_parsed does with each message, then the end."""
    parser, partial = JobLogParser(log_lines=False), [""]
    for n, text in enumerate(parts):
        lines = (partial[0] + text).split("\n")
        partial[0] = lines.pop()
        feed.feed(lines, parser.feed(text), 1000.0 + n)
        if gap_s:
            await asyncio.sleep(gap_s)
    feed.finish()


def test_a_burst_arrives_in_few_updates_with_every_step_and_line():
    text = (DATA / "grpo_noisy.log").read_text()
    truth = json.loads((DATA / "grpo_noisy.expected.json").read_text())["steps"]
    updates: list[JobUpdate] = []

    async def main() -> JobFeed:
        feed = JobFeed(updates.append)
        await follow(feed, chunks(text))   # all in one turn of the loop: a backlog
        return feed

    feed = asyncio.run(main())
    assert len(updates) == 1, "a backlog read at once is one update"
    steps: dict[int, object] = {}
    for update in updates:
        for record in update.records:
            steps[record.step] = record
    assert [s["step"] for s in truth] == sorted(steps)
    for want in truth:
        got = steps[want["step"]]
        assert {f: getattr(got, f) for f in FIELDS} == {f: want[f] for f in FIELDS}
    lines = [line for update in updates for line in update.lines]
    assert len(lines) == text.count("\n")
    assert not any("\x1b" in line or "\r" in line for line in lines), "as a terminal shows them"
    assert updates[-1].saves and [s.step for s in updates[-1].saves] == sorted(
        s["step"] for s in truth if s["checkpoint_s"] is not None)
    assert feed.last is not None and feed.last.step == truth[-1]["step"]


def test_updates_come_at_most_every_50_ms_and_saves_at_most_every_second():
    text = (DATA / "grpo_noisy.log").read_text()
    updates: list[tuple[float, JobUpdate]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        feed = JobFeed(lambda u: updates.append((loop.time(), u)), every_s=0.05)
        await follow(feed, chunks(text), gap_s=0.01)   # ~110 messages over ~1.5 s

    asyncio.run(main())
    times = [t for t, _ in updates]
    assert 10 <= len(updates) <= 40, len(updates)
    assert all(b - a >= 0.04 for a, b in zip(times, times[1:-1])), "the last is the end's"
    with_saves = [t for t, u in updates if u.saves is not None]
    assert with_saves and all(b - a >= 0.95 for a, b in zip(with_saves, with_saves[1:-1]))


def test_a_cancelled_follow_sends_nothing_more():
    updates: list[JobUpdate] = []

    async def main() -> None:
        feed = JobFeed(updates.append, every_s=0.05)
        feed.feed(["one line"], [], 1.0)
        feed.cancel()
        await asyncio.sleep(0.1)

    asyncio.run(main())
    assert updates == []
