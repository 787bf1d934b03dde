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
    assert [s.step for s in updates[-1].changed_saves] == sorted(
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
    with_saves = [t for t, u in updates if u.changed_saves]
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


def test_each_save_is_sent_when_it_changed_and_together_they_are_every_save():
    """Updates carry the saves new or revised since the one before: the wizard keeps them by
    step, and what it has at the end is what the timeline says; an unchanged save is not sent
    again."""
    text = (DATA / "grpo_noisy.log").read_text()
    updates: list[JobUpdate] = []

    async def main() -> JobFeed:
        feed = JobFeed(updates.append, every_s=0.01)
        await follow(feed, chunks(text), gap_s=0.001)
        return feed

    import rltui.jobfeed as jobfeed

    every_s, jobfeed.SAVES_EVERY_S = jobfeed.SAVES_EVERY_S, 0.01
    try:
        feed = asyncio.run(main())
    finally:
        jobfeed.SAVES_EVERY_S = every_s
    known: dict[int, object] = {}
    for update in updates:
        for save in update.changed_saves:
            assert known.get(save.step) != save, f"step {save.step} sent again unchanged"
            known[save.step] = save
    assert [known[k] for k in sorted(known)] == feed.timeline.saves()
    assert len([u for u in updates if u.changed_saves]) >= 5


def test_a_long_list_of_revisions_waits_a_second_for_each_budget_of_them(monkeypatch):
    """A backlog revises every save with each step it reads: after n revisions the next
    ones wait n / SAVES_PER_S seconds (at least SAVES_EVERY_S), so the wizard's loop spends a
    bounded share of each second taking them in."""
    import rltui.jobfeed as jobfeed

    monkeypatch.setattr(jobfeed, "SAVES_EVERY_S", 0.05)
    monkeypatch.setattr(jobfeed, "SAVES_PER_S", 20)
    text = (DATA / "grpo_noisy.log").read_text()
    updates: list[tuple[float, JobUpdate]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        feed = JobFeed(lambda u: updates.append((loop.time(), u)), every_s=0.01)
        parser, partial = JobLogParser(log_lines=False), [""]
        for text_part in chunks(text):   # a backlog: every chunk arrives at the same moment
            lines = (partial[0] + text_part).split("\n")
            partial[0] = lines.pop()
            feed.feed(lines, parser.feed(text_part), 1000.0)
            await asyncio.sleep(0.003)
        feed.finish()

    asyncio.run(main())
    with_saves = [(t, len(u.changed_saves)) for t, u in updates if u.changed_saves]
    assert len(with_saves) >= 3
    for (t0, n), (t1, _) in zip(with_saves, with_saves[1:-1]):   # the last is the end's
        assert t1 - t0 >= max(0.05, n / 20) - 0.01, (t1 - t0, n)


class _FinishedJobApi:
    """Ray's job API (GET /api/jobs/{id}, its /logs) for one job that is over: its JobDetails,
    start_time and end_time in ms since the epoch, and its whole log."""

    def __init__(self, job_id: str, start_s: float, end_s: float, log: str) -> None:
        self.job_id, self.log = job_id, log
        self.details = {"submission_id": job_id, "status": "SUCCEEDED", "entrypoint": "bash x.sh",
                        "start_time": int(start_s * 1000), "end_time": int(end_s * 1000)}

    async def call(self, method: str, path: str, **_: object) -> tuple[int, dict]:
        if (method, path) == ("GET", f"/api/jobs/{self.job_id}"):
            return 200, self.details
        if (method, path) == ("GET", f"/api/jobs/{self.job_id}/logs"):
            return 200, {"logs": self.log}
        raise AssertionError(f"not asked of a finished job: {method} {path}")


class _FollowingSession:
    """Session.follow_job as the cloud worker runs it, over RayJobs.follow of one job."""

    def __init__(self, api: _FinishedJobApi) -> None:
        self.api = api

    async def follow_logs(self, on_text, job_id=None) -> str:
        from rltui.cloud.rayjobs import RayJobs

        jobs = RayJobs("http://ray.invalid")
        jobs._rest = self.api  # type: ignore[assignment]
        return await jobs.follow(self.api.job_id, on_text)

    from rltui.session import Session

    follow_parsed = Session.follow_parsed
    follow_job = Session.follow_job


def test_a_finished_jobs_log_read_90_s_later_is_dated_within_the_job():
    """The wizard opened after the job ended: the log arrives now, the saves are dated by the
    job's start_time/end_time (told by RayJobs.follow) and their steps' timers."""
    import time

    from tests.unit.test_saves import run_log

    end = time.time() - 90.0
    lines, starts = run_log(range(1, 9), start=end - 3.0 - 8 * 60.0 - 93.0)
    assert abs(lines[-1][0] - (end - 3.0)) < 1e-6
    start = lines[0][0] - 150.0   # the setup before step 1
    api = _FinishedJobApi("raysubmit_done", start, end, "".join(t + "\n" for _, t in lines))
    updates: list[JobUpdate] = []

    final, last = asyncio.run(_FollowingSession(api).follow_job(updates.append))
    assert final == "SUCCEEDED" and last is not None and last.step == 8
    saves = {s.step: s for u in updates for s in u.changed_saves}
    assert sorted(saves) == [2, 4, 6, 8]
    for s in saves.values():
        assert start <= s.started and s.ended is not None and s.ended <= end + 1e-3, s
        assert 0 <= s.started - starts[s.step] <= 3.0 + 2e-3 and s.estimated
