"""cloud/detached.py: a long tool outlives whoever started it, is found again by PID and
identity, is never started twice, and is stopped only while it is still itself.

Real processes only (a small Python "tool", `sleep`); starters in other processes are real
interpreters, so the re-attach and the lock are tested across processes as rltui meets them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rltui.cloud.detached import Detached, Record, is_live

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

# A tool that prints `n` numbered lines, `gap` seconds apart, then exits with `code`.
TOOL = """import sys, time
n, gap, code = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    print(f"line {i}", flush=True)
    time.sleep(gap)
print("ERROR: the last thing it said", file=sys.stderr, flush=True)
sys.exit(code)
"""

# Another process starts the tool, prints its record as JSON and whether it started, and exits
# at once (or is killed): the tool must go on.
STARTER = """import json, sys
from pathlib import Path
from rltui.cloud.detached import Detached
from dataclasses import asdict
folder, argv = Path(sys.argv[1]), sys.argv[2:]
rec, started = Detached(folder, "tool").start(argv, "create", dict(__import__("os").environ))
print(json.dumps({"started": started, **asdict(rec)}), flush=True)
"""


def tool_argv(tmp_path: Path, n: int = 5, gap: float = 0.1, code: int = 0) -> list[str]:
    script = tmp_path / "tool.py"
    script.write_text(TOOL)
    return [sys.executable, str(script), str(n), str(gap), str(code)]


def start_elsewhere(folder: Path, argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", STARTER, str(folder), *argv], env=ENV,
                         capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def spawn(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, env=ENV, stdout=subprocess.PIPE, text=True)


def wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        time.sleep(0.05)
    raise AssertionError(f"PID {pid} still runs")


async def test_started_detached_its_lines_stream_and_its_exit_code_is_ours(tmp_path):
    tool = Detached(tmp_path / "state", "tool")
    rec, started = tool.start(tool_argv(tmp_path, n=3, gap=0.05, code=3), "create", ENV)
    assert started
    assert os.getsid(rec.pid) == rec.pid, "a session of its own: no SIGHUP from our terminal"
    assert os.readlink(f"/proc/{rec.pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{rec.pid}/fd/1") == rec.log, "a log file, never a pipe"
    data = json.loads(tool.record_path.read_text())
    assert {"pid", "start_ticks", "cmdline", "argv", "verb", "log", "started_at"} <= set(data)
    assert data["pid"] == rec.pid and data["verb"] == "create"
    assert tool.record_path.stat().st_mode & 0o777 == 0o600
    seen: list[str] = []
    outcome = await tool.attach(rec, seen.append, offset=rec.log_offset)
    assert outcome.returncode == 3 and not outcome.attached
    assert seen == ["line 0", "line 1", "line 2", "ERROR: the last thing it said"]
    assert outcome.error_line() == "ERROR: the last thing it said"
    assert tool.live() is None, "ended: no live record"


async def test_a_second_start_while_it_runs_returns_the_running_one(tmp_path):
    tool = Detached(tmp_path, "tool")
    first, started = tool.start(tool_argv(tmp_path, n=20), "create", ENV)
    second, again = tool.start(tool_argv(tmp_path, n=20), "create", ENV)
    assert started and not again and second.pid == first.pid
    await tool.stop(first)


async def test_reattached_from_another_process_streams_from_now_and_the_code_is_unknown(tmp_path):
    folder = tmp_path / "state"
    info = start_elsewhere(folder, tool_argv(tmp_path, n=12, gap=0.1, code=0))
    assert info["started"]
    # Its starter has exited; the tool has not.
    tool = Detached(folder, "tool")
    rec = tool.live()
    assert rec is not None and rec.pid == info["pid"]
    await asyncio.sleep(0.35)
    seen: list[str] = []
    outcome = await tool.attach(rec, seen.append, attached=True)
    assert outcome.returncode is None and outcome.attached
    assert seen[-1] == "ERROR: the last thing it said"
    assert "line 11" in seen and "line 0" not in seen, "from where the log was, not from its start"
    assert tool.live() is None


async def test_the_tool_survives_a_sigkill_of_its_starter(tmp_path):
    folder = tmp_path / "state"
    starter = spawn([sys.executable, "-c", STARTER + "import time; time.sleep(60)\n",
                     str(folder), *tool_argv(tmp_path, n=10, gap=0.1)])
    assert starter.stdout is not None
    info = json.loads(starter.stdout.readline())
    starter.kill()
    starter.wait()
    tool = Detached(folder, "tool")
    rec = tool.live()
    assert rec is not None and rec.pid == info["pid"]
    outcome = await tool.attach(rec, None, attached=True)
    log = Path(rec.log).read_text()
    assert "line 9" in log and outcome.returncode is None, "it finished by itself"


async def test_a_dead_pid_is_finished(tmp_path):
    tool = Detached(tmp_path, "tool")
    rec, _ = tool.start(tool_argv(tmp_path, n=0), "create", ENV)
    await tool.attach(rec)
    assert not is_live(rec) and tool.live() is None
    assert tool.read() == rec, "the record stays, for the log's path"
    assert await tool.stop(rec) is False


async def test_a_pid_now_held_by_another_program_is_finished_and_never_signalled(tmp_path):
    sleeper = spawn(["sleep", "30"])
    try:
        ticks = int(Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        tool = Detached(tmp_path, "tool")
        xpk = ["xpk", "cluster", "create", "--cluster=c"]
        for start_ticks, cmdline in ((ticks - 1, ["sleep", "30"]),      # another start time
                                     (ticks, xpk)):                       # another program
            fake = Record(pid=sleeper.pid, start_ticks=start_ticks, cmdline=cmdline, argv=xpk,
                          verb="create", log=str(tmp_path / "x.log"), log_offset=0,
                          started_at=time.time())
            tool._write(fake)
            assert tool.live() is None
            assert await tool.stop(fake) is False
        assert sleeper.poll() is None, "sleep was not touched"
        # And a new start is allowed: the record was not a live one.
        rec, started = tool.start(tool_argv(tmp_path, n=0), "create", ENV)
        assert started and rec.pid != sleeper.pid
        await tool.attach(rec)
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_stop_ends_its_process_group_and_kills_one_that_ignores_sigint_and_sigterm(tmp_path):
    script = tmp_path / "stubborn.py"
    script.write_text("import signal, subprocess, time\n"
                      "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                      "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                      "child = subprocess.Popen(['sleep', '60'])\n"
                      "print(child.pid, flush=True)\n"
                      "time.sleep(60)\n")
    tool = Detached(tmp_path, "tool")
    rec, _ = tool.start([sys.executable, str(script)], "create", ENV)
    deadline = time.monotonic() + 10
    while not Path(rec.log).read_text().strip() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    grandchild = int(Path(rec.log).read_text().split()[0])
    t0 = time.monotonic()
    assert await tool.stop(rec, grace_s=0.3, term_s=0.3) is True
    assert 0.5 < time.monotonic() - t0 < 5, "SIGKILL after SIGINT's and SIGTERM's waits"
    assert not is_live(rec)
    wait_gone(grandchild, timeout=0.5)  # sleep got the group's SIGINT


# A "gcluster -> terraform" stand-in: the leader (Python, like xpk) starts a child in its process
# group that, like Terraform, shuts down gracefully on SIGINT (it takes `linger` seconds, then
# writes how it ended) and dies at once on SIGTERM (the default action).
GRACEFUL = """import signal, sys, time
from pathlib import Path
out, linger = Path(sys.argv[1]), float(sys.argv[2])
def interrupted(signum, frame):
    time.sleep(linger)
    out.write_text("graceful")
    sys.exit(0)
signal.signal(signal.SIGINT, interrupted)
(out.parent / "ready").write_text("")
time.sleep(120)
"""
LEADER = """import subprocess, sys, time
child = subprocess.Popen([sys.executable] + sys.argv[1:])
print(child.pid, flush=True)
time.sleep(120)
"""


async def _start_group(tmp_path: Path, tool: Detached, linger: float):
    (tmp_path / "graceful.py").write_text(GRACEFUL)
    (tmp_path / "leader.py").write_text(LEADER)
    ended = tmp_path / "ended"
    rec, _ = tool.start([sys.executable, str(tmp_path / "leader.py"), str(tmp_path / "graceful.py"),
                         str(ended), str(linger)], "create", ENV)
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    child = int(Path(rec.log).read_text().split()[0])
    assert os.getpgid(child) == rec.pid, "the child is in the tool's process group"
    return rec, child, ended


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def test_stop_interrupts_the_whole_group_and_waits_for_its_graceful_end(tmp_path):
    """xpk dies at once; Terraform (its child) takes its time to persist the operation: stop
    returns only once the child has ended, by its own SIGINT handling (not SIGTERM's death)."""
    tool = Detached(tmp_path, "tool")
    rec, child, ended = await _start_group(tmp_path, tool, linger=1.0)
    t0 = time.monotonic()
    assert await tool.stop(rec) is True
    assert time.monotonic() - t0 >= 0.9, "it waited for the child's graceful end"
    assert not _running(child), "no process of the group is left when stop returns"
    assert ended.read_text() == "graceful", "the child ended by SIGINT's shutdown, not killed"


@pytest.mark.parametrize("held", ["ignored", "blocked"])
async def test_started_by_a_process_that_ignores_or_blocks_sigint_the_tool_still_stops_gracefully(tmp_path, held):
    """rltui run from a script in the background ignores SIGINT (POSIX: asynchronous lists
    without job control), and exec keeps an ignored signal, as a child keeps its starter's
    signal mask: the tool must not inherit either, or stop's SIGINT does nothing and xpk is
    killed by SIGTERM after the whole grace."""
    tool = Detached(tmp_path, "tool", time_scale=0.01)  # a 3 s grace: SIGTERM would follow soon
    before = signal.getsignal(signal.SIGINT)
    if held == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    try:
        rec, child, ended = await _start_group(tmp_path, tool, linger=0.2)
    finally:
        signal.signal(signal.SIGINT, before)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    t0 = time.monotonic()
    assert await tool.stop(rec) is True
    assert time.monotonic() - t0 < 2.5, "the leader died of SIGINT, not of SIGTERM after the grace"
    assert ended.read_text() == "graceful"


async def test_stop_ends_what_is_left_of_a_group_whose_leader_is_gone(tmp_path):
    """The leader died alone (a SIGKILL to its PID): its group still runs Terraform. stop
    interrupts that rest and waits for it; the PID is still reserved by the group."""
    tool = Detached(tmp_path, "tool")
    rec, child, ended = await _start_group(tmp_path, tool, linger=0.3)
    os.kill(rec.pid, signal.SIGKILL)
    wait_gone(rec.pid)
    assert await tool.stop(rec) is True
    assert not _running(child) and ended.read_text() == "graceful"


async def test_the_wait_after_each_signal_scales_with_the_time_scale(tmp_path):
    """A child that ignores SIGINT and SIGTERM: at time_scale 1 stop would wait minutes before
    SIGKILL; at 1/1000 (a fast sandbox) the waits are STOP_GRACE_S/1000 and STOP_TERM_S/1000,
    floored at STOP_FLOOR_S."""
    from rltui.cloud import detached

    stubborn = GRACEFUL.replace("signal.signal(signal.SIGINT, interrupted)",
                                "signal.signal(signal.SIGINT, signal.SIG_IGN);"
                                " signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    tool = Detached(tmp_path, "tool", time_scale=0.001)
    (tmp_path / "graceful.py").write_text(stubborn)
    (tmp_path / "leader.py").write_text(LEADER)
    rec, _ = tool.start([sys.executable, str(tmp_path / "leader.py"), str(tmp_path / "graceful.py"),
                         str(tmp_path / "ended"), "0"], "create", ENV)
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    child = int(Path(rec.log).read_text().split()[0])
    t0 = time.monotonic()
    assert await tool.stop(rec) is True
    took = time.monotonic() - t0
    expected = (max(detached.STOP_FLOOR_S, detached.STOP_GRACE_S * 0.001)
                + max(detached.STOP_FLOOR_S, detached.STOP_TERM_S * 0.001))
    assert expected - 0.1 < took < expected + 3
    assert not _running(child), "SIGKILL ended it"


async def test_cancelling_the_attach_leaves_the_tool_running(tmp_path):
    tool = Detached(tmp_path, "tool")
    rec, _ = tool.start(tool_argv(tmp_path, n=30, gap=0.05), "create", ENV)
    task = asyncio.create_task(tool.attach(rec, None))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tool.live() == rec
    outcome = await tool.attach(rec, None)   # still ours: reaped, with its code
    assert outcome.returncode == 0


def test_two_processes_starting_at_once_start_one_copy(tmp_path):
    folder = tmp_path / "state"
    argv = tool_argv(tmp_path, n=20, gap=0.1)
    starters = [subprocess.Popen([sys.executable, "-c", STARTER, str(folder), *argv], env=ENV,
                                 stdout=subprocess.PIPE, text=True) for _ in range(4)]
    answers = [json.loads(p.communicate(timeout=30)[0]) for p in starters]
    assert sum(a["started"] for a in answers) == 1
    assert len({a["pid"] for a in answers}) == 1
    pid = answers[0]["pid"]
    os.killpg(pid, signal.SIGTERM)
    wait_gone(pid)
