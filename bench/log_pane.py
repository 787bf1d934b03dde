"""The log pane under a burst: 1,000,000 NeMo-RL lines at 20,000 lines/s into the real app.

The real wizard (`rltui --sandbox`, a sandbox in a temp folder) runs in tmux (120x40) in a
process of its own, started as `log_pane.py --app`; its cloud worker (rltui/cloudworker.py,
where the wizard's Session runs its cloud calls) is started as `log_pane.py --worker`. The one
difference from `rltui --sandbox` is the log follower. `Session.follow_logs(on_text)` is the
seam: in the worker, the real follower (plan/jobs.py -> cloud/rayjobs.py `RayJobs.follow`)
calls `on_text` once per message of Ray's tail WebSocket. Here a feeder calls the same
`on_text` with the same chunking: Ray's dashboard sends a job's log in chunks of at most 10
lines or 20,000 characters (ray/dashboard/modules/job/utils.py `file_tail_iterator`,
MAX_CHUNK_LINE_LENGTH / MAX_CHUNK_CHAR_LENGTH, Ray 2.x), one WebSocket message each
(job_head.py `tail_job_logs`). Everything after `on_text` (the worker's parser and its JobFeed,
`Session.follow_job`: the run tracker, the saves, an update at most every 0.1 s; the socket;
the wizard's message bus, Monitor screen and pane) is the app's own. Before the first
line the feeder imports what the real follower loads for its clients
(`rayjobs.CLIENT_MODULES`, and the Kubernetes client of the dashboard's port-forward), so the
worker's figure counts them. Ray's real tail cannot deliver this rate, hence the seam.

The lines come from tests/data/make_noisy_log.py's generator (NeMo-RL v0.4.0 GRPO output as
`ray job submit` tails it), run for as many steps as fill 1,000,000 lines. The generator's own
record of each step (loss, reward, step time, save time, validation accuracy) is the truth:
the app's published step records must hold every step with the same values ("kept up").

Figures: peak RSS of the wizard's process, the one the user started and whose event loop
answers the keys (VmHWM, /proc/PID/status), goal <= 120 MB (the worker's peak is printed
beside it, and the sum); and the time from a key sent (tmux `send-keys`) to its effect on the
screen (tmux `capture-pane`, polled every millisecond), goal p95 <= 30 ms. The keys: PageUp
(the pane pauses: its bar shows "paused") and End (it follows again: "following"),
alternated during the feed. Both tmux commands go through one control-mode client
(bench/tmuxctl.py: 0.4 ms a capture); `--instrument spawn` runs a tmux process for each, as
this bench did before (5.8 ms a capture, a key's own process start counted in its figure).

    .venv/bin/python bench/log_pane.py [--lines 1000000] [--rate 20000] [--instrument spawn]

Where the time goes, inside the app (these hooks slow it a little): LOG_PANE_SLOW=out.json
writes every loop callback over LOG_PANE_SLOW_MS (5) with what it ran, out.renders.json (the
renders by widget), out.marks.json (each key read, acted on, written; each frame) and
out.keys.json (each key sent and seen here); LOG_PANE_KEYPROF=1 adds a profile of the keys'
frames. TEXTUAL_* variables reach the app (TEXTUAL_FPS=240: Textual's frame cap).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WIDTH, HEIGHT = 120, 40
CHUNK_LINES = 10  # Ray's file_tail_iterator: at most 10 lines per WebSocket message
KEY_TIMEOUT_S = 5.0
TICK_S = 0.01
MAX_FEED_S = 600.0  # 12x the 50 s asked: the bench ends within 15 minutes
SOCKET = f"rltui-bench-logpane-{os.getpid()}"
FIELDS = ("loss", "avg_reward", "step_time_s", "checkpoint_s", "val_accuracy")


# ------------------------------------------------------------------ the input and its truth
def _digest(values: Any) -> int:
    """A step's values in 4 bytes, the same in both processes (hash(None) is not, on 3.11)."""
    return zlib.crc32(repr(tuple(values)).encode())


def make_log(path: Path, n_lines: int) -> dict[int, int]:
    """Write n_lines of NeMo-RL output; return {step: hash of its true values}."""
    import random

    sys.path.insert(0, str(ROOT / "tests" / "data"))
    gen = importlib.import_module("make_noisy_log")
    gen.STEPS = steps = n_lines // 54  # about 55 lines a step; the tail is cut below
    rng = random.Random(20250612)
    truth: dict[str, Any] = {"steps": [], "performance": [], "checkpoints": [], "pruned": []}
    out: list[str] = gen.preamble()
    count = sum(c.count("\n") for c in out)
    kept: dict[int, int] = {}
    for s in range(1, steps + 1):
        chunk = gen.step_lines(rng, s, truth)
        lines = sum(c.count("\n") for c in chunk)
        if count + lines > n_lines - 1:
            break
        out += chunk
        count += lines
        t = truth["steps"][-1]
        kept[s] = _digest(t[f] for f in FIELDS)
    out.append("Max number of steps has been reached, stopping training early\n")
    count += 1
    while count < n_lines:
        out.append(gen.worker(gen.RANK0, "[Gloo] Rank 0 is connected to 63 peer ranks"))
        count += 1
    text = "".join(out)
    # The step header says S = steps generated; a cut run is fine (the tracker does not care).
    path.write_text(text, encoding="utf-8", newline="")
    return kept


# ------------------------------------------------------------------ the app's processes
def run_worker(feed: Path, result: Path, rate: float, fd: str) -> int:
    """The wizard's cloud worker (rltui/cloudworker.py) with the feeder as its log follower."""
    from rltui import cloudworker
    from rltui.cloud import rayjobs
    from rltui.session import Session

    async def follow_logs(self: Any, on_text: Callable[[str], Any], job_id: str | None = None) -> str:
        for name in (*rayjobs.CLIENT_MODULES, "kubernetes.client"):
            importlib.import_module(name)  # what the real follower and its port-forward load
        t0 = time.monotonic()
        sent = 0
        with feed.open("rb") as f:  # binary: lines end at \n only (progress bars hold \r)
            while True:
                # The lines due by now, at most one tick's worth: then the loop gets a turn,
                # so a feed the app cannot keep up with shows as a rate below the one asked.
                due = min(int((time.monotonic() - t0) * rate) - sent, int(rate * TICK_S))
                chunks = 0
                for _ in range(max(1, -(-due // CHUNK_LINES))):
                    chunk = b"".join(f.readline() for _ in range(CHUNK_LINES)).decode()
                    if not chunk:
                        break
                    on_text(chunk)  # what RayJobs.follow does with each tail message
                    sent += chunk.count("\n")
                    chunks += 1
                if not chunks or time.monotonic() - t0 > MAX_FEED_S:
                    break  # the end, or an app so far behind that the bench must end
                await asyncio.sleep(max(0.0, sent / rate - (time.monotonic() - t0)))
        result.write_text(json.dumps({  # noqa: ASYNC240 - once, at the end
            "feed_s": time.monotonic() - t0, "lines": sent,
            "worker_peak_mb": _status(os.getpid(), "VmHWM")}))
        return "SUCCEEDED"

    Session.follow_logs = follow_logs  # type: ignore[method-assign]
    return cloudworker.main([fd])


def run_app(feed: Path, result: Path, rate: float) -> int:
    """`rltui --sandbox`, its worker started as `log_pane.py --worker` (the feeder inside)."""
    from rltui import remote
    from rltui.cli import main

    worker_result = result.with_name("worker.json")
    remote.worker_argv = lambda fd: [sys.executable, str(Path(__file__).resolve()), "--rate", str(rate),
                                     "--worker", str(feed), str(worker_result), str(fd)]
    remote_follow = remote.RemoteSession.follow_job

    async def follow_job(self: Any, on_update: Callable[..., Any], job_id: str | None = None) -> Any:
        from textual._context import active_app

        app = active_app.get()
        seen: dict[int, int] = {}

        def on_records(records: list[Any]) -> None:
            for record in records:
                seen[record.global_step] = _digest(getattr(record, f) for f in FIELDS)

        app.bus.step_records.subscribe(app, on_records)
        rss_before = _status(os.getpid(), "VmRSS")
        final = await remote_follow(self, on_update, job_id)   # the feed, through the worker
        await asyncio.sleep(1.0)  # the last flush (0.1 s) and the screens' handlers
        loaded = sorted({m.split(".")[0] for m in sys.modules} | {".".join(m.split(".")[:3])
                         for m in sys.modules if m.startswith("google.cloud.")})
        result.write_text(json.dumps({  # noqa: ASYNC240 - once, at the end
            **json.loads(worker_result.read_text()), "seen": seen,  # noqa: ASYNC240
            "modules": loaded, "rss_before_mb": rss_before}))
        return final

    remote.RemoteSession.follow_job = follow_job  # type: ignore[method-assign]
    argv = ["--sandbox", "--env", str(ROOT / "assets" / "sandbox.env.sh")]
    if os.environ.get("LOG_PANE_SLOW"):
        _trace_slow_callbacks(Path(os.environ["LOG_PANE_SLOW"]))
    if not os.environ.get("LOG_PANE_PROFILE"):
        return main(argv)
    import cProfile

    with cProfile.Profile() as prof:  # where the app's time goes: LOG_PANE_PROFILE=out.prof
        code = main(argv)
    prof.dump_stats(os.environ["LOG_PANE_PROFILE"])
    return code


def _trace_slow_callbacks(out: Path, over_s: float = float(os.environ.get("LOG_PANE_SLOW_MS", "5")) / 1000) -> None:
    """LOG_PANE_SLOW=out.json: every loop callback that held the loop over 5 ms, with what it ran."""
    import atexit
    from asyncio import events

    slow: list[tuple[float, float, str]] = []
    run = events.Handle._run

    def timed(self: Any) -> None:
        t0 = time.perf_counter()
        run(self)
        dt = time.perf_counter() - t0
        if dt > over_s:
            slow.append((t0, dt, _what(self)))

    def _what(handle: Any) -> str:
        task = getattr(handle._callback, "__self__", None)
        coro = task.get_coro() if isinstance(task, asyncio.Task) else None
        if coro is None:
            return repr(handle)[:200]
        owner = getattr(coro, "cr_frame", None) and coro.cr_frame.f_locals.get("self")
        name = type(owner).__name__ if owner is not None else "-"
        if name == "Timer":
            name += " " + getattr(owner._callback, "__qualname__", repr(owner._callback))
        return f"{coro.__qualname__} of {name}"

    from textual.message_pump import MessagePump

    dispatch = MessagePump._dispatch_message

    async def timed_dispatch(self: Any, message: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await dispatch(self, message)
        finally:
            dt = time.perf_counter() - t0
            if dt > over_s:
                slow.append((t0, dt, f"message {type(message).__name__} to {type(self).__name__}"))

    MessagePump._dispatch_message = timed_dispatch  # type: ignore[method-assign]
    flush = MessagePump._flush_next_callbacks

    async def timed_flush(self: Any) -> None:
        from collections import Counter

        names = Counter(getattr(c.callback.func, "__qualname__", "?") for c in self._next_callbacks)
        t0 = time.perf_counter()
        await flush(self)
        dt = time.perf_counter() - t0
        if dt > over_s:
            slow.append((t0, dt, f"callbacks of {type(self).__name__}: "
                         + ", ".join(f"{n} x{c}" for n, c in names.most_common(4))))

    MessagePump._flush_next_callbacks = timed_flush  # type: ignore[method-assign]
    from collections import Counter

    from textual._styles_cache import StylesCache

    renders: Counter[str] = Counter()
    render_time: Counter[str] = Counter()
    render_widget = StylesCache.render_widget

    def counted(self: Any, widget: Any, crop: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return render_widget(self, widget, crop)
        finally:
            name = f"{type(widget).__name__}#{widget.id}" if widget.id else type(widget).__name__
            renders[name] += 1
            render_time[name] += time.perf_counter() - t0

    StylesCache.render_widget = counted  # type: ignore[method-assign]
    from textual import _compositor
    from textual.app import App

    def timed_as(name: str, fn: Any) -> Any:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                renders["=" + name] += 1
                render_time["=" + name] += time.perf_counter() - t0
        return timed_call

    _compositor.Compositor.render_partial_update = timed_as(  # type: ignore[method-assign]
        "render_partial_update", _compositor.Compositor.render_partial_update)
    _compositor.ChopsUpdate.render_segments = timed_as(  # type: ignore[method-assign]
        "render_segments", _compositor.ChopsUpdate.render_segments)
    App._display = timed_as("display", App._display)  # type: ignore[method-assign]

    # A key's way through the app: read by the driver's input thread, acted on, written out.
    from textual import events as ev
    from textual.drivers._writer_thread import WriterThread
    from textual.drivers.linux_driver import LinuxDriver

    from rltui.widgets.logpane import BoundedLog

    marks: list[tuple[str, float]] = []
    process = LinuxDriver.process_message

    def read(self: Any, message: Any) -> None:
        if isinstance(message, ev.Key):
            marks.append(("read " + message.key, time.monotonic()))
        process(self, message)

    LinuxDriver.process_message = read  # type: ignore[method-assign]
    def marked(name: str) -> Callable[[Any], Any]:
        act = getattr(BoundedLog, name)

        def acted(self: Any) -> Any:
            marks.append((name, time.monotonic()))  # the next frame is the key's
            return act(self)
        return acted

    for action in ("action_page_up", "action_scroll_end"):
        setattr(BoundedLog, action, marked(action))
    put = WriterThread.write

    def wrote(self: Any, text: str) -> None:
        marks.append(("write", time.monotonic()))
        put(self, text)

    WriterThread.write = wrote  # type: ignore[method-assign]
    from textual.screen import Screen

    update = Screen._on_timer_update

    import cProfile

    keyprof = cProfile.Profile()

    def frame(self: Any) -> None:
        marks.append(("frame", time.monotonic()))
        after_key = bool(os.environ.get("LOG_PANE_KEYPROF")) and len(marks) > 1 and \
            marks[-2][0].startswith("action_")
        if after_key:
            keyprof.enable()
        update(self)
        if after_key:
            keyprof.disable()
        marks.append(("framed", time.monotonic()))

    if os.environ.get("LOG_PANE_KEYPROF"):  # and a profile of the keys' frames
        atexit.register(lambda: keyprof.dump_stats(str(out.with_suffix(".keyframes.prof"))))

    Screen._on_timer_update = frame  # type: ignore[method-assign]
    atexit.register(lambda: out.with_suffix(".marks.json").write_text(json.dumps(marks)))
    atexit.register(lambda: out.with_suffix(".renders.json").write_text(json.dumps(
        {k: (renders[k], render_time[k]) for k in renders})))

    events.Handle._run = timed  # type: ignore[method-assign]
    atexit.register(lambda: out.write_text(json.dumps(slow)))


def _status(pid: int, key: str) -> float:
    """A /proc/PID/status figure in MB (VmRSS: now; VmHWM: the peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


# ------------------------------------------------------------------ the bench
def _tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True,
                          check=check).stdout


CTL: list[Any] = []   # the TmuxControl client, once the session exists
SENT: list[tuple[str, float, float]] = []  # each key: sent, seen (LOG_PANE_SLOW)


def _screen() -> str:
    if not CTL:   # --instrument spawn
        return _tmux("capture-pane", "-p", "-t", "app")
    return str(CTL[0].screen())


def _send(*keys: str, literal: bool = False) -> None:
    if not CTL:
        _tmux("send-keys", "-t", "app", *(["-l"] if literal else []), *keys)
    else:
        CTL[0].send(*keys, literal=literal)


def _wait_for(pred: Callable[[str], bool], timeout_s: float) -> float:
    poll_s = 0.001 if CTL else 0.004
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if pred(_screen()):
            return time.monotonic() - t0
        time.sleep(poll_s)
    raise TimeoutError(_screen())


def _log_state(screen: str) -> str:
    """The pane's bar: 'following', 'paused ...' or 'waiting ...' (JobLogPane._show_state)."""
    for line in screen.splitlines():
        if "Job log" in line:
            return line
    return ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=20_000.0)
    ap.add_argument("--instrument", choices=("control", "spawn"), default="control")
    ap.add_argument("--app", nargs=2, metavar=("FEED", "RESULT"), help=argparse.SUPPRESS)
    ap.add_argument("--worker", nargs=3, metavar=("FEED", "RESULT", "FD"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return run_worker(Path(args.worker[0]), Path(args.worker[1]), args.rate, args.worker[2])
    if args.app:
        return run_app(Path(args.app[0]), Path(args.app[1]), args.rate)

    from rltui_sandbox import manage

    with tempfile.TemporaryDirectory(prefix="rltui-bench-", dir="/tmp") as tmp:
        feed, result, sbx = Path(tmp) / "feed.log", Path(tmp) / "result.json", Path(tmp) / "sbx"
        truth = make_log(feed, args.lines)
        env = {**{k: v for k, v in os.environ.items() if k.startswith(("LOG_PANE_", "TEXTUAL_"))},
               "RLTUI_SANDBOX_DIR": str(sbx), "XDG_STATE_HOME": f"{tmp}/state",
               "TERM": "xterm-256color", "COLORTERM": "truecolor", "PYTHONPATH": str(ROOT)}
        manage.start(root=sbx)
        argv = [sys.executable, str(Path(__file__).resolve()), "--rate", str(args.rate),
                "--app", str(feed), str(result)]
        subprocess.run(["tmux", "-L", SOCKET, "new-session", "-d", "-s", "app", "-x", str(WIDTH),
                        "-y", str(HEIGHT), *[a for k, v in env.items() for a in ("-e", f"{k}={v}")],
                        "env", "-u", "COLUMNS", "-u", "LINES", *argv], check=True, cwd=tmp)
        keys: dict[str, list[float]] = {"PageUp": [], "End": []}
        try:
            pid = int(_tmux("display-message", "-p", "-t", "app", "#{pane_pid}").strip())
            if args.instrument == "control":
                from tmuxctl import TmuxControl

                CTL.append(TmuxControl(SOCKET, "app"))
            _wait_for(lambda s: "SANDBOX" in s, 30)
            time.sleep(3)  # the boot worker: env.sh, the endpoints, preflight, inventory
            _send("F8")
            _wait_for(lambda s: "Job log" in s, 10)
            _send("C-p")
            time.sleep(0.5)
            _send("follow the job", literal=True)
            time.sleep(0.5)
            _send("Enter")
            _wait_for(lambda s: "following" in _log_state(s), 20)
            time.sleep(1)
            while not result.exists():
                for key, word in (("PageUp", "paused"), ("End", "following")):
                    t0 = time.monotonic()
                    _send(key)
                    try:
                        _wait_for(lambda s, w=word: w in _log_state(s), KEY_TIMEOUT_S)
                    except TimeoutError:
                        if result.exists():
                            break  # the feed ended: the pane is idle, no figure of the burst
                    keys[key].append(time.monotonic() - t0)  # a timeout counts as 5 s
                    SENT.append((key, t0, time.monotonic()))
                    time.sleep(0.2)
            peak = _status(pid, "VmHWM")
            _send("C-q")  # quit as a user would (a profile is written)
            deadline = time.monotonic() + 20
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            for ctl in CTL:
                ctl.close()
            _tmux("kill-server", check=False)
            manage.stop(sbx)
        out = json.loads(result.read_text())
    if os.environ.get("LOG_PANE_SLOW"):
        Path(os.environ["LOG_PANE_SLOW"]).with_suffix(".keys.json").write_text(json.dumps(SENT))
    seen = {int(k): v for k, v in out["seen"].items()}
    lost = [s for s, h in truth.items() if seen.get(s) != h]
    print(f"fed {out['lines']:,} lines in {out['feed_s']:.1f} s "
          f"({out['lines'] / out['feed_s']:,.0f} lines/s; asked {args.rate:,.0f})")
    print(f"steps in the input: {len(truth):,}; published with the input's values: "
          f"{len(truth) - len(lost):,}; lost or wrong: {len(lost)}"
          + (f" (first {lost[:5]})" if lost else ""))
    ms = {k: sorted(v * 1000 for v in vals) for k, vals in keys.items()}
    every = sorted(x for v in ms.values() for x in v)
    def p95(vals: list[float]) -> float:
        return vals[max(0, -(-95 * len(vals) // 100) - 1)]  # nearest rank

    for key, vals in ms.items():
        print(f"{key}: n={len(vals)} p50 {statistics.median(vals):.0f} ms "
              f"p95 {p95(vals):.0f} ms max {vals[-1]:.0f} ms")
    print(f"the wizard's RSS before the feed {out['rss_before_mb']:.0f} MB; its packages: "
          + " ".join(m for m in out["modules"] if not m.startswith("_")))
    print(f"its cloud worker's peak RSS (the clients, the follower): {out['worker_peak_mb']:.0f} MB; "
          f"both: {peak + out['worker_peak_mb']:.0f} MB")
    print(f"log_pane_peak_rss_mb: {peak:.0f} (<= 120)")
    print(f"log_pane_key_p95_ms: {p95(every):.0f} (<= 30)")
    return 0 if not lost else 1


if __name__ == "__main__":
    sys.exit(main())
