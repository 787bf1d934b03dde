"""Long tools (xpk) started detached: they outlive rltui, a lost terminal and a SIGKILL.

Cloud Shell drops sessions; an `xpk cluster create` takes most of an hour and must not die
with the terminal, nor be started twice. So the tool runs in a session of its own
(`start_new_session`: no controlling terminal, so no SIGHUP when the terminal goes; POSIX
setsid(2)), reads /dev/null, and writes into a log file opened O_APPEND, never a pipe whose
reader can die. Beside the log, in the tool's own folder, a record (JSON, mode 0600, written
atomically) says who runs:

    {"pid", "start_ticks", "cmdline", "argv", "verb", "log", "log_offset", "started_at"}

A PID alone names a process only while it lives: Linux reuses PIDs. The record counts as
live only while /proc/<pid> exists, is not a zombie, and its start time (field 22 of
/proc/<pid>/stat, clock ticks since boot; proc(5)) and its command line (/proc/<pid>/cmdline)
are those read right after the start. A PID now held by another program is that program's,
and the tool is finished. The command line may legitimately change once more after our read
(an interpreter re-exec, e.g. `#!/usr/bin/env python3`), which keeps our arguments at its end:
that counts as the same process.

Stdlib only (this is an adapter; nothing here asks the cloud). Killing is by process group
(the tool leads its session, so its PGID is its PID) and only while the identity holds.

Stopping waits for the whole group, not for xpk alone. `xpk cluster create` runs gcluster, which
runs Terraform and its provider plugins, all in xpk's process group (none of them makes a group
of its own). A signal to xpk's PID alone, or waiting for xpk alone, leaves Terraform running:
Python's xpk dies at once, while Terraform shuts down gracefully, and terraform-provider-google
(v7.40.0) then persists the GKE operation it was waiting on into the state so that the next run
resumes it ("Persisting %s so this operation can be resumed":
google/services/container/resource_container_cluster.go:3204-3210 on `config.Context.Done()`,
resource_container_node_pool.go:891-897 the same). Starting `xpk cluster delete`, or a second
create, against the same local Terraform state before that ends races the first one. So `stop`
sends SIGINT to the group first (Terraform's graceful interrupt; Python raises
KeyboardInterrupt), waits until no process of the group is left, at most STOP_GRACE_S reference
seconds (scaled by the Detached's `time_scale`, Endpoints.time_scale: a sandbox runs faster),
then SIGTERM (STOP_TERM_S), then SIGKILL. A group is left when `killpg(pgid, 0)` says
ProcessLookupError, or when every member /proc lists with that process group (field 5 of
/proc/<pid>/stat) is a zombie: orphans are reparented to PID 1, and a PID 1 that does not reap
(a container's init, this machine's) leaves them as zombies in the group for good; a zombie runs
nothing. The group's ID stays the tool's while any member lives: "A process group ID shall not
be reused by the system until the process group lifetime ends" (POSIX.1-2017 Base Definitions, chapter 4, "Process ID
Reuse" section; Linux keeps the number allocated while a task uses it as its PGID: kernel/pid.c
__change_pid frees a struct pid only when no task holds it for any pid type).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO

Line = Callable[[str], None]

POLL_S = 0.05          # how often a log is read while the tool runs
ERROR_TAIL = 200       # lines kept from a run for quoting its last error
# How long `stop` waits for the group after each signal, in reference seconds (x time_scale):
# Terraform's graceful interrupt waits for the requests in flight and writes the state; minutes.
STOP_GRACE_S = 300.0   # after SIGINT
STOP_TERM_S = 60.0     # after SIGTERM
STOP_KILL_S = 10.0     # after SIGKILL (real seconds: the kernel's, not the cloud's)
STOP_FLOOR_S = 0.5     # the shortest wait, whatever the scale
STOP_POLL_S = 0.1      # how often the group is looked for while it stops


@dataclass(frozen=True)
class Record:
    pid: int
    start_ticks: int
    cmdline: list[str]
    argv: list[str]
    verb: str
    log: str
    log_offset: int
    started_at: float

    @property
    def tool(self) -> str:
        return Path(self.argv[0]).name if self.argv else "?"

    def since(self) -> str:
        """HH:MM local time of the start, for messages."""
        return time.strftime("%H:%M", time.localtime(self.started_at))

    def describe(self) -> str:
        """`xpk cluster create (PID 4242, running since 09:12)`."""
        words = " ".join(self.argv[1:3]) if self.argv[1:2] == ["cluster"] else self.verb
        return f"{self.tool} {words} (PID {self.pid}, running since {self.since()})"


@dataclass
class Outcome:
    """How a run ended: `returncode` is None when we were not its parent (re-attached), so
    nobody here can know it; the cloud then decides. `lines` are the last lines it wrote."""
    record: Record
    returncode: int | None
    lines: list[str] = field(default_factory=list)
    attached: bool = False       # True: an already running copy, not one we started

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def error_line(self) -> str:
        """The tool's own last error, for quoting to the user (never to decide anything)."""
        lines = [ln.rstrip() for ln in self.lines if ln.strip()]
        starts = [i for i, ln in enumerate(lines) if ln.startswith("ERROR")]
        if not starts:
            end = "exit code unknown" if self.returncode is None else f"exit code {self.returncode}"
            return (lines or [end])[-1].strip()
        first = starts[-1]
        rest = [ln.strip() for ln in lines[first + 1:first + 4] if ln.startswith(" ")]
        return " ".join([lines[first].strip(), *rest])


# --- /proc: who a PID is now ------------------------------------------------------------------

def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start ticks) of /proc/<pid>/stat, or None when no such process. The command
    name (field 2) is in parentheses and may hold spaces: fields are counted after the last ')'."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    rest = raw[raw.rfind(")") + 2:].split()
    return rest[0], int(rest[19])          # field 3 is rest[0]; field 22 is rest[19]


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]


def _same_cmdline(now: list[str], rec: Record) -> bool:
    if now == rec.cmdline:
        return True
    tail = rec.argv[1:]
    return bool(now) and len(now) >= len(tail) and now[len(now) - len(tail):] == tail


def is_live(rec: Record) -> bool:
    """The recorded process still runs: present, not a zombie, same start time and command."""
    st = _stat(rec.pid)
    if st is None or st[0] in ("Z", "X", "x"):
        return False
    return st[1] == rec.start_ticks and _same_cmdline(_cmdline(rec.pid), rec)


# --- the folder: record, log, lock -----------------------------------------------------------

# Children started by this process: only these can be reaped (waitpid) and give an exit code.
_children: dict[int, subprocess.Popen[bytes]] = {}


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_signals_held() -> bool:
    """Whether `stop`'s signals would not reach the tool: ignored here (exec keeps an ignored
    disposition, signal(7)) or blocked in this thread (a child inherits the mask and keeps it
    across execve; the vfork path restores the calling thread's)."""
    ignored = any(signal.getsignal(s) == signal.SIG_IGN for s in _STOP_SIGNALS)
    return ignored or bool(set(_STOP_SIGNALS) & signal.pthread_sigmask(signal.SIG_BLOCK, []))


def _default_stop_signals() -> None:
    """In the child before exec: `stop`'s signals back to their default action, unblocked."""
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


@dataclass(frozen=True)
class Detached:
    """One tool's detached runs in one folder (xpk: its state folder, ctx.xpk_dir).
    `time_scale`: real seconds per reference second (Endpoints.time_scale), for `stop`'s bounds."""
    folder: Path
    tool: str = "xpk"
    time_scale: float = 1.0

    @property
    def record_path(self) -> Path:
        return self.folder / f"rltui-{self.tool}.json"

    def log_path(self, verb: str) -> Path:
        return self.folder / f"rltui-{self.tool}-{verb}.log"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """flock(2) on a file beside the record: two rltui processes check-and-start in turn."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / f"rltui-{self.tool}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)                # closing releases the lock

    def read(self) -> Record | None:
        """The record as written (live or not), None when missing or unreadable."""
        try:
            data = json.loads(self.record_path.read_text(encoding="utf-8"))
            return Record(**{k: data[k] for k in Record.__dataclass_fields__})
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def live(self) -> Record | None:
        """The running operation, or None (no record, or its process is gone or another's)."""
        rec = self.read()
        if rec is None:
            return None
        child = _children.get(rec.pid)
        if child is not None and child.poll() is not None:
            return None               # ours, and just reaped: finished
        return rec if is_live(rec) else None

    def _write(self, rec: Record) -> None:
        tmp = self.record_path.with_name(f".{self.record_path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(asdict(rec), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.record_path)

    def start(self, argv: Sequence[str], verb: str, env: Mapping[str, str],
              cwd: Path | None = None) -> tuple[Record, bool]:
        """Start `argv` detached, unless an operation already runs in this folder: then return
        that one's record and False (never a second copy). Returns (record, started)."""
        with self._locked():
            running = self.live()
            if running is not None:
                return running, False
            log = self.log_path(verb)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                offset = os.fstat(fd).st_size
                # rltui started from a script in the background ignores SIGINT (POSIX:
                # asynchronous lists without job control); the tool would too, and stop's
                # graceful SIGINT do nothing for the whole grace. preexec_fn (fork, not vfork)
                # only then: it is the documented hazard with threads.
                reset = _default_stop_signals if _stop_signals_held() else None
                proc = subprocess.Popen(list(argv), cwd=str(cwd or self.folder), env=dict(env),
                                        stdin=subprocess.DEVNULL, stdout=fd,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        close_fds=True, preexec_fn=reset)
            finally:
                os.close(fd)
            # Popen returns once exec succeeded (its error pipe closes on exec), so these are
            # the new program's own.
            st = _stat(proc.pid)
            rec = Record(pid=proc.pid, start_ticks=st[1] if st else -1,
                         cmdline=_cmdline(proc.pid) or list(argv), argv=list(argv), verb=verb,
                         log=str(log), log_offset=offset, started_at=time.time())
            _children[proc.pid] = proc
            self._write(rec)
            return rec, True

    def _ended(self, rec: Record) -> tuple[bool, int | None]:
        child = _children.get(rec.pid)
        if child is not None:
            code = child.poll()
            if code is not None:
                _children.pop(rec.pid, None)
                return True, code
            return False, None
        return not is_live(rec), None

    async def attach(self, rec: Record, on_line: Line | None = None, *,
                     offset: int | None = None, deadline: float | None = None,
                     attached: bool = False) -> Outcome:
        """Stream the log's new lines to `on_line` (from `offset`, else from where the log ends
        now) until the process ends. Our own child is reaped and gives its exit code; another
        process's (re-attached) is None. Past `deadline` (time.time()), TimeoutError: the
        caller decides whether to stop() it. Cancelling this never touches the process."""
        kept: list[str] = []
        partial = b""

        def emit(chunk: bytes, final: bool) -> None:
            nonlocal partial
            data = partial + chunk
            parts = data.split(b"\n")
            partial = b"" if final else parts.pop()
            for raw in parts:
                if final and not raw:
                    continue
                text = raw.decode(errors="replace").rstrip("\r")
                kept.append(text)
                del kept[:-ERROR_TAIL]
                if on_line:
                    on_line(text)

        with _open_log(Path(rec.log), offset) as f:
            while True:
                done, code = self._ended(rec)
                chunk = f.read()
                if done:
                    emit(chunk + f.read(), final=True)
                    return Outcome(rec, code, kept, attached)
                if chunk:
                    emit(chunk, final=False)
                if deadline is not None and time.time() > deadline:
                    raise TimeoutError(f"{rec.describe()} still runs")
                await asyncio.sleep(POLL_S)

    async def stop(self, rec: Record, *, grace_s: float | None = None,
                   term_s: float | None = None) -> bool:
        """Stop the run's whole process group (see the module docstring): SIGINT, then wait until
        no process of the group is left, at most `grace_s` (default STOP_GRACE_S x time_scale);
        then SIGTERM and `term_s` (STOP_TERM_S x time_scale); then SIGKILL and STOP_KILL_S.
        Only while the identity holds: the leader is still the recorded process, or it has ended
        and its group (which keeps its PID from reuse) still runs. True when something ran."""
        scale = max(self.time_scale, 0.0)
        grace = max(STOP_FLOOR_S, STOP_GRACE_S * scale) if grace_s is None else grace_s
        term = max(STOP_FLOOR_S, STOP_TERM_S * scale) if term_s is None else term_s
        self._ended(rec)               # reap our own child if it already ended
        if not _ours(rec) or not _group_alive(rec.pid):
            return False
        for sig, wait_s in ((signal.SIGINT, grace), (signal.SIGTERM, term),
                            (signal.SIGKILL, STOP_KILL_S)):
            if not _signal_group(rec.pid, sig):
                return True            # gone between the look and the signal
            until = time.monotonic() + wait_s
            while True:
                self._ended(rec)       # a zombie leader of ours is reaped, not waited for
                if not _group_alive(rec.pid):
                    return True
                if time.monotonic() > until:
                    break
                await asyncio.sleep(STOP_POLL_S)
        return True                    # past SIGKILL: only processes in uninterruptible sleep


def _open_log(path: Path, offset: int | None) -> BinaryIO:
    """The log at `offset`, or at its end now (a local file: reading it does not block)."""
    try:
        f: BinaryIO = open(path, "rb")  # the caller's `with` closes it
    except FileNotFoundError:
        return open(os.devnull, "rb")
    f.seek(0 if offset is None else offset, os.SEEK_END if offset is None else os.SEEK_SET)
    return f


def _ours(rec: Record) -> bool:
    """The recorded run may be signalled: its leader is still that process (live, or a zombie
    with its start time), or no process holds its PID any more (its group's members may still
    run: the PID stays reserved while they do). A PID now another program's is never ours."""
    st = _stat(rec.pid)
    if st is None:
        return True
    if st[1] != rec.start_ticks:
        return False                   # the PID was reused: its group ended before
    return st[0] in ("Z", "X", "x") or _same_cmdline(_cmdline(rec.pid), rec)


def _members(pgid: int) -> list[int]:
    """The processes in process group `pgid` that are not zombies (field 5 of
    /proc/<pid>/stat is the process group; proc(5))."""
    out: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        rest = raw[raw.rfind(")") + 2:].split()
        if len(rest) > 2 and int(rest[2]) == pgid and rest[0] not in ("Z", "X", "x"):
            out.append(int(entry))
    return out


def _group_alive(pgid: int) -> bool:
    """Some process of the group still runs (zombies do not: see the module docstring)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True                    # members we may not signal: alive all the same
    return bool(_members(pgid))


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)           # it leads its own session: its group is its PID
    except ProcessLookupError:
        return False
    return True
