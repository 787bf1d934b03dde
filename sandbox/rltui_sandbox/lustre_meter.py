"""Measure the I/O on the sandbox's Lustre folders, as Cloud Monitoring would report it.

Each Managed Lustre instance of the sandbox is a local folder. The meter keeps, per instance,
cumulative bytes written and read and the bytes in use, sampled every `interval_s` seconds
(the daemon: 60 reference seconds, Cloud Monitoring's sample period for Lustre, i.e. 60/speed
real seconds), per emulated storage target as Cloud Monitoring reports them:

- targets: 4 Object Storage Targets `<fs>-OST0000`..`<fs>-OST0003` and one Metadata Target
  `<fs>-MDT0000` (Lustre's target naming, `<fsname>-OST<index in 4 hex digits>`). A file's
  data lives on one OST chosen by a hash of its inode number (as a one-stripe Lustre file has
  one object on one OST; a rename keeps it there). The OST count is the sandbox's choice:
  Google does not document how many targets an instance has;
- capacity: the provisioned capacity split evenly over the OSTs; the MDT's own capacity is
  NOT documented by Google: the sandbox gives it 1/64 of the instance and 4 KiB per inode used;
  inodes: one per 2 KiB of MDT (Lustre's default MDT inode ratio) and one per MiB on an OST
  (an assumption); free bytes = capacity - the files' bytes on that target; "available"
  (to non-root users) equals free here: the sandbox reserves nothing for root;
- operations ("samples"): one per started MiB moved per file (Lustre's 1 MiB bulk RPC; an
  approximation), and metadata operations named as Lustre's md_stats counts them (mknod,
  unlink, mkdir, rmdir, rename, open, close);

- written: found by scanning the tree (a new file counts its size, a grown file its growth, a
  rewritten file - inode changed, or mtime changed without growth - its full size; renames
  and deletions count nothing);
- read: Linux inotify on every directory; a file closed-after-read (IN_CLOSE_NOWRITE after
  at least one IN_ACCESS) counts its size. Without inotify, reads stay 0 (logged once);
- used: the sum of the files' apparent sizes (st_size, not st_blocks: the same figure on any
  local filesystem, and what the demo job wrote).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import hashlib
import logging
import os
import struct
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

InstanceKey = tuple[str, str, str]
"""(project, location, instance_id), the labels of a lustre.googleapis.com/Instance."""

# Full resolution for the last hour, then one point a minute for 24 hours.
RECENT_S = 3600.0
OLDER_STEP_S = 60.0
OLDER_POINTS = 1440

# inotify(7) constants.
_IN_ACCESS = 0x00000001
_IN_CLOSE_NOWRITE = 0x00000010
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_IN_ISDIR = 0x40000000
_WATCH_MASK = _IN_ACCESS | _IN_CLOSE_NOWRITE | _IN_CREATE | _IN_MOVED_TO | _IN_ONLYDIR
_EVENT = struct.Struct("iIII")


N_OSTS = 4
MIB = 1024**2
MDT_SHARE = 64  # the MDT gets 1/64 of the capacity (an assumption, see the module docstring)
MDT_INODE_BYTES = 2048  # Lustre manual: default MDT inode ratio, one inode per 2 KiB
OST_INODE_BYTES = MIB  # an assumption
MDT_BYTES_PER_INODE_USED = 4096


class TargetSample(NamedTuple):
    """One storage target's counters at a sample (cumulative ones since tracking began)."""

    target: str  # e.g. lustre-OST0002, lustre-MDT0000
    component: str  # "ost" or "mdt", the metrics' `component` label
    written_bytes: int
    read_bytes: int
    write_ops: int
    read_ops: int
    capacity_bytes: int
    free_bytes: int
    inodes_maximum: int
    inodes_free: int
    metadata_ops: tuple[tuple[str, int], ...] = ()  # MDT only: (operation, cumulative count)
    connected_clients: int = 0


class MeterPoint(NamedTuple):
    """One sample: wall-clock seconds and the instance's cumulative counters at that time."""

    t: float
    written_bytes: int
    read_bytes: int
    used_bytes: int
    targets: tuple[TargetSample, ...] = ()


class _FileState(NamedTuple):
    ino: int
    size: int
    mtime_ns: int


def ost_of(ino: int) -> int:
    """The OST index holding a file's data: a stable hash of its inode number."""
    return int.from_bytes(hashlib.blake2b(ino.to_bytes(8, "little"), digest_size=2).digest(), "big") % N_OSTS


def _ops(nbytes: int) -> int:
    return -(-nbytes // MIB) if nbytes > 0 else 0


@dataclass
class _Instance:
    folder: Path
    capacity_gib: int
    filesystem: str = "lustre"
    files: dict[str, _FileState] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    dir_wds: dict[str, int] = field(default_factory=dict)
    written: int = 0
    read: int = 0  # guarded by LustreMeter._events_lock (like the per-OST read counters)
    ost_written: list[int] = field(default_factory=lambda: [0] * N_OSTS)
    ost_write_ops: list[int] = field(default_factory=lambda: [0] * N_OSTS)
    ost_read: list[int] = field(default_factory=lambda: [0] * N_OSTS)
    ost_read_ops: list[int] = field(default_factory=lambda: [0] * N_OSTS)
    md_ops: Counter[str] = field(default_factory=Counter)
    connected_clients: int = 0
    recent: deque[MeterPoint] = field(default_factory=deque)
    older: deque[MeterPoint] = field(default_factory=deque)

    def target_names(self) -> list[str]:
        return [f"{self.filesystem}-OST{i:04X}" for i in range(N_OSTS)] + [f"{self.filesystem}-MDT0000"]


class _Inotify:
    """The few inotify calls the meter needs, through libc (no extra dependency)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._rm = libc.inotify_rm_watch
        self._rm.argtypes = [ctypes.c_int, ctypes.c_int]
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        self.fd = fd

    def add_watch(self, path: str) -> int:
        wd = self._add(self.fd, os.fsencode(path), _WATCH_MASK)
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
        return wd

    def rm_watch(self, wd: int) -> None:
        self._rm(self.fd, wd)  # fails harmlessly when the directory is already gone

    def read_events(self) -> list[tuple[int, int, str]]:
        """(wd, mask, name) of every queued event; [] when none."""
        events: list[tuple[int, int, str]] = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return events
            off = 0
            while off < len(buf):
                wd, mask, _cookie, length = _EVENT.unpack_from(buf, off)
                off += _EVENT.size
                name = buf[off : off + length].split(b"\0", 1)[0]
                off += length
                events.append((wd, mask, os.fsdecode(name)))

    def close(self) -> None:
        os.close(self.fd)


class LustreMeter:
    """Per-instance history of bytes written, read and used in the instances' folders."""

    def __init__(self, interval_s: float = 1.0, *, recent_s: float = RECENT_S,
                 older_step_s: float = OLDER_STEP_S, older_points: int = OLDER_POINTS) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.interval_s = interval_s
        self._recent_s = recent_s
        self._older_step_s = older_step_s
        self._older_points = older_points
        self._instances: dict[InstanceKey, _Instance] = {}
        self._sample_lock = threading.Lock()  # one scan at a time
        self._events_lock = threading.Lock()  # inotify state; held only briefly
        self._history_lock = threading.Lock()
        self._wd_owner: dict[int, tuple[InstanceKey, str]] = {}
        self._pending_reads: set[tuple[int, str]] = set()
        self._inotify: _Inotify | None = None
        try:
            self._inotify = _Inotify()
        except (OSError, AttributeError) as e:
            log.warning("inotify unavailable (%s): Lustre read throughput will be reported as 0", e)

    @property
    def reads_measured(self) -> bool:
        """False when inotify is unavailable and read bytes stay 0."""
        return self._inotify is not None

    # -- instances -------------------------------------------------------------------------

    def track(self, key: InstanceKey, folder: Path, capacity_gib: int, filesystem: str = "lustre", *,
              now: float | None = None) -> None:
        """Start metering `folder` for `key`. Files already there are a baseline, not writes.

        `filesystem` (Instance.filesystem) names the targets, e.g. lustre-OST0000; `now` pins
        the baseline sample's time (tests), default time.time()."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.untrack(key)
        inst = _Instance(folder=folder, capacity_gib=capacity_gib, filesystem=filesystem or "lustre",
                         older=deque(maxlen=self._older_points))
        with self._sample_lock:
            self._scan(key, inst)
            inst.written = 0
            inst.ost_written, inst.ost_write_ops = [0] * N_OSTS, [0] * N_OSTS
            inst.md_ops.clear()
            self._record(inst, time.time() if now is None else now)
            self._instances[key] = inst

    def set_connected_clients(self, key: InstanceKey, clients: int) -> None:
        """The MDT's connected_clients gauge (the sandbox cannot see mounts; 0 unless set)."""
        inst = self._instances.get(key)
        if inst is not None:
            inst.connected_clients = max(0, int(clients))

    def untrack(self, key: InstanceKey) -> None:
        """Stop metering `key` and drop its history (the instance was deleted)."""
        with self._sample_lock:
            inst = self._instances.pop(key, None)
            if inst is None:
                return
            with self._events_lock:
                for wd in inst.dir_wds.values():
                    self._forget_wd(wd)

    def keys(self) -> list[InstanceKey]:
        return list(self._instances)

    def capacity_bytes(self, key: InstanceKey) -> int:
        """Provisioned capacity of `key` in bytes; 0 once untracked."""
        inst = self._instances.get(key)
        return inst.capacity_gib * 1024**3 if inst else 0

    def history(self, key: InstanceKey) -> list[MeterPoint]:
        """Samples of `key`, oldest first ([] if untracked): one a minute beyond the last hour."""
        inst = self._instances.get(key)
        if inst is None:
            return []
        with self._history_lock:
            return [*inst.older, *inst.recent]

    def latest(self, key: InstanceKey) -> MeterPoint | None:
        inst = self._instances.get(key)
        if inst is None:
            return None
        with self._history_lock:
            return inst.recent[-1] if inst.recent else None

    # -- sampling --------------------------------------------------------------------------

    def sample(self, now: float | None = None) -> None:
        """Scan every tracked folder and record one point per instance (blocking).

        `now` (wall-clock seconds, increasing) defaults to time.time(); tests pin it.
        """
        with self._sample_lock:
            self.drain_events()
            now = time.time() if now is None else now
            for key, inst in list(self._instances.items()):
                self._scan(key, inst)
                self._record(inst, now)

    async def run(self) -> None:
        """Sample every `interval_s` until cancelled; scans run in a thread, off the loop."""
        loop = asyncio.get_running_loop()
        if self._inotify is not None:
            # Drain events as they come so new directories get watched within milliseconds.
            loop.add_reader(self._inotify.fd, self.drain_events)
        try:
            next_t = time.monotonic()
            while True:
                await asyncio.to_thread(self.sample)
                next_t += self.interval_s
                delay = next_t - time.monotonic()
                if delay < 0:  # fell behind (huge tree): don't catch up in a burst
                    next_t, delay = time.monotonic(), 0.0
                await asyncio.sleep(delay)
        finally:
            if self._inotify is not None:
                loop.remove_reader(self._inotify.fd)

    def close(self) -> None:
        """Release the inotify descriptor (call after run() has ended)."""
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def _record(self, inst: _Instance, now: float) -> None:
        used = sum(f.size for f in inst.files.values())
        ost_used, ost_objects = [0] * N_OSTS, [0] * N_OSTS
        for f in inst.files.values():
            ost_used[ost_of(f.ino)] += f.size
            ost_objects[ost_of(f.ino)] += 1
        with self._events_lock:
            read = inst.read
            ost_read, ost_read_ops = list(inst.ost_read), list(inst.ost_read_ops)
            md_ops = tuple(sorted(inst.md_ops.items()))
        total = inst.capacity_gib * 1024**3
        mdt_cap = total // MDT_SHARE
        ost_cap = (total - mdt_cap) // N_OSTS
        names = inst.target_names()
        targets = [
            TargetSample(names[i], "ost", inst.ost_written[i], ost_read[i], inst.ost_write_ops[i],
                         ost_read_ops[i], ost_cap, max(0, ost_cap - ost_used[i]),
                         ost_cap // OST_INODE_BYTES, max(0, ost_cap // OST_INODE_BYTES - ost_objects[i]))
            for i in range(N_OSTS)
        ]
        inodes = len(inst.files) + len(inst.dirs)
        targets.append(TargetSample(
            names[-1], "mdt", 0, 0, 0, 0, mdt_cap, max(0, mdt_cap - inodes * MDT_BYTES_PER_INODE_USED),
            mdt_cap // MDT_INODE_BYTES, max(0, mdt_cap // MDT_INODE_BYTES - inodes), md_ops,
            inst.connected_clients))
        point = MeterPoint(now, inst.written, read, used, tuple(targets))
        with self._history_lock:
            inst.recent.append(point)
            # Older points thin out to one a minute: counters are cumulative, so rates over
            # coarser periods stay exact.
            while inst.recent and now - inst.recent[0].t > self._recent_s:
                old = inst.recent.popleft()
                if not inst.older or old.t - inst.older[-1].t >= self._older_step_s:
                    inst.older.append(old)

    def _scan(self, key: InstanceKey, inst: _Instance) -> None:
        files: dict[str, _FileState] = {}
        dirs: list[str] = []
        stack = [str(inst.folder)]
        while stack:
            d = stack.pop()
            dirs.append(d)
            try:
                with os.scandir(d) as it:
                    for e in it:
                        try:
                            if e.is_dir(follow_symlinks=False):
                                stack.append(e.path)
                            elif e.is_file(follow_symlinks=False):
                                st = e.stat(follow_symlinks=False)
                                files[e.path] = _FileState(st.st_ino, st.st_size, st.st_mtime_ns)
                        except FileNotFoundError:
                            continue  # removed while we looked
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue
        changes, md = _changes(inst.files, files)
        for ino, nbytes in changes:
            i = ost_of(ino)
            inst.ost_written[i] += nbytes
            inst.ost_write_ops[i] += _ops(nbytes)
            inst.written += nbytes
        new_dirs = set(dirs[1:])  # the instance's root is not a directory made by a client
        md["mkdir"] += len(new_dirs - inst.dirs)
        md["rmdir"] += len(inst.dirs - new_dirs)
        with self._events_lock:
            inst.md_ops.update({k: v for k, v in md.items() if v})
        inst.dirs = new_dirs
        inst.files = files
        self._sync_watches(key, inst, dirs)

    # -- reads (inotify) -------------------------------------------------------------------

    def _sync_watches(self, key: InstanceKey, inst: _Instance, dirs: list[str]) -> None:
        if self._inotify is None:
            return
        seen = set(dirs)
        with self._events_lock:
            # A directory made after this scan listed its parent is kept (it is watched
            # already, from its IN_CREATE event).
            for d in [d for d in inst.dir_wds if d not in seen and not os.path.isdir(d)]:
                self._forget_wd(inst.dir_wds.pop(d))
            for d in dirs:
                if d not in inst.dir_wds:
                    self._watch(key, inst, d)

    def _watch(self, key: InstanceKey, inst: _Instance, d: str) -> None:
        assert self._inotify is not None
        try:
            wd = self._inotify.add_watch(d)
        except OSError as e:
            if e.errno not in (2, 20):  # ENOENT, ENOTDIR: gone already
                log.warning("cannot watch %s for reads: %s", d, e)
            return
        inst.dir_wds[d] = wd
        self._wd_owner[wd] = (key, d)

    def _forget_wd(self, wd: int) -> None:
        if self._wd_owner.pop(wd, None) is not None and self._inotify is not None:
            self._inotify.rm_watch(wd)
        self._pending_reads = {p for p in self._pending_reads if p[0] != wd}

    def drain_events(self) -> None:
        """Count the reads inotify reported since the last call (cheap; safe from any thread)."""
        with self._events_lock:
            if self._inotify is None:
                return
            for wd, mask, name in self._inotify.read_events():
                self._on_event(wd, mask, name)

    def _on_event(self, wd: int, mask: int, name: str) -> None:
        if mask & _IN_Q_OVERFLOW:
            log.warning("inotify queue overflowed: some Lustre reads were not counted")
            self._pending_reads.clear()
            return
        if mask & _IN_IGNORED:
            self._wd_owner.pop(wd, None)
            return
        owner = self._wd_owner.get(wd)
        if owner is None or not name:
            return
        key, d = owner
        inst = self._instances.get(key)
        if inst is None:
            return
        path = os.path.join(d, name)
        if mask & _IN_ISDIR:
            if mask & (_IN_CREATE | _IN_MOVED_TO):
                self._watch(key, inst, path)
            return  # directory listings are not data reads
        if mask & _IN_ACCESS:
            self._pending_reads.add((wd, name))
        if mask & _IN_CLOSE_NOWRITE and (wd, name) in self._pending_reads:
            self._pending_reads.discard((wd, name))
            try:
                st = os.stat(path)
                size, ino = st.st_size, st.st_ino
            except OSError:
                known = inst.files.get(path)
                size, ino = (known.size, known.ino) if known else (0, 0)
            inst.read += size
            inst.ost_read[ost_of(ino)] += size
            inst.ost_read_ops[ost_of(ino)] += _ops(size)
            inst.md_ops.update({"open": 1, "close": 1})


def _changes(before: dict[str, _FileState], after: dict[str, _FileState]) -> tuple[list[tuple[int, int]], Counter[str]]:
    """(inode, bytes written) per file written between two scans, and the metadata operations."""
    vanished = {f.ino: f for p, f in before.items() if p not in after}
    renamed: set[int] = set()
    out: list[tuple[int, int]] = []
    md: Counter[str] = Counter()
    for path, now in after.items():
        old = before.get(path)
        if old is None or old.ino != now.ino:
            # Same inode under another name: a rename (e.g. a checkpoint's tmp file moved in
            # place), compared with what it was; otherwise brand new or replaced: full size.
            old = vanished.get(now.ino)
            if old is None:
                md["mknod"] += 1
                if now.size:
                    out.append((now.ino, now.size))
                continue
            renamed.add(now.ino)
            md["rename"] += 1
        if now.size > old.size:
            out.append((now.ino, now.size - old.size))
        elif now.mtime_ns != old.mtime_ns and now.size:
            out.append((now.ino, now.size))
    md["unlink"] += sum(1 for f in vanished.values() if f.ino not in renamed)
    return out, md


def _bytes_written(before: dict[str, _FileState], after: dict[str, _FileState]) -> int:
    """Bytes written between two scans of the same tree."""
    return sum(n for _ino, n in _changes(before, after)[0])
