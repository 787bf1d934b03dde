"""The Compute Engine reads of an inventory (plan/inventory.py), in a process of their own.

A headless `rltui status` is one short Python process whose time is mostly CPU: importing the
clients it asks (grpc, google-cloud-container, -lustre, -service-usage, kubernetes) and
google-cloud-compute, whose message classes alone take 0.55 s (proto-plus builds some 2,200
classes in types/compute.py). On two cores, a child forked before the event loop starts imports
Compute and makes these reads while the parent imports and asks the others; nothing is cached,
every answer is the cloud's of this run. The child uses the same adapter (cloud/network.py),
and sends back plain copies of the client's messages (`plain`: the same field names, maps as
dicts, lists as lists), which the inventory reads as it reads the messages themselves; an error
comes back as the CloudError it was. Where there is no fork, the fork fails (a process
limit), or the child ends without an answer, the reads run in the parent as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..cloud.errors import CloudError

if TYPE_CHECKING:
    from ..cloud.endpoints import Endpoints
    from ..config import RLConfig
    from .context import Context

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ComputeReads:
    networks: list[Any]
    address: Any | None      # the IP range (a global address), None when absent
    routers: list[Any]       # the region's Cloud Routers (their NATs inside)
    nat_ips: list[Any]       # the region's addresses
    firewalls: list[Any]
    subnets: list[Any]       # the region's subnetworks

    def network(self, name: str) -> Any | None:
        return next((n for n in self.networks if n.name == name), None)


async def read(ctx: Context) -> ComputeReads:
    """Every Compute list and get the inventory needs, at once."""
    cfg, net = ctx.cfg, ctx.network
    region = cfg.region
    networks, address, routers, nat_ips, firewalls, subnets = await asyncio.gather(
        net.networks(), net.address(cfg.address_name), net.routers(region),
        net.regional_addresses(region), net.firewalls(), net.subnetworks(region))
    return ComputeReads(networks, address, routers, nat_ips, firewalls, subnets)


def plain(value: Any) -> Any:
    """A proto-plus message as a SimpleNamespace of its fields (by proto-plus's attribute
    names, unset ones at their defaults, as reading the message gives them), recursively;
    map fields as dicts, repeated ones as lists. Anything else is returned as it is."""
    meta = getattr(type(value), "meta", None)
    fields = getattr(meta, "fields", None)
    if isinstance(fields, Mapping):
        return SimpleNamespace(**{name: plain(getattr(value, name)) for name in fields})
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [plain(v) for v in value]
    return value


class Forked:
    """`read`, started in a forked child at construction: before the caller's event loop and
    any thread exist (fork copies only the calling thread). `result()` collects it inside the
    loop; `close()` ends a child whose answer is no longer wanted."""

    def __init__(self, cfg: RLConfig, endpoints: Endpoints) -> None:
        self.cfg, self.endpoints = cfg, endpoints
        self.pid: int | None = None
        self._fd: int | None = None
        if not hasattr(os, "fork"):
            return
        stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        try:
            rfd, wfd = os.pipe()
        except OSError:   # out of file descriptors: read in this process
            return
        # A stop signal between the fork and the child's own handlers would run this
        # process's code in the child: held until each side is ready for it.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
        try:
            pid = os.fork()
        except OSError:   # EAGAIN (a process limit), ENOMEM: read in this process
            os.close(rfd)
            os.close(wfd)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            return
        if pid == 0:  # the child: never returns
            _child(cfg, endpoints, rfd, wfd, held)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        os.close(wfd)
        self.pid, self._fd = pid, rfd

    async def result(self, ctx: Context) -> ComputeReads:
        """The child's reads (or its CloudError, raised here); in this process when it gave none."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                data = await asyncio.to_thread(_read_all, fd)
            except asyncio.CancelledError:
                # The reading thread ends when the child does: asyncio.run's exit waits for it.
                self._kill()
                raise
            await asyncio.to_thread(self._reap)
            answer: tuple[Any, ...]
            try:
                answer = pickle.loads(data) if data else ("crash", "no answer")
            except Exception as exc:  # noqa: BLE001 - a cut answer: read here instead
                answer = ("crash", f"unreadable answer: {exc}")
            kind, what = answer
            if kind == "ok" and isinstance(what, ComputeReads):
                return what
            if kind == "error" and isinstance(what, CloudError):
                raise what
            log.warning("Compute reads in a child process: %s; reading here", what)
        return await read(ctx)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._kill()
        self._reap()

    def _kill(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def _reap(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = None


@contextlib.contextmanager
def forked(cfg: RLConfig, endpoints: Endpoints) -> Iterator[Forked]:
    reads = Forked(cfg, endpoints)
    try:
        yield reads
    finally:
        reads.close()


def _child(cfg: RLConfig, endpoints: Endpoints, rfd: int, fd: int, held: set[Any]
           ) -> None:
    """Read, send one pickled answer down `fd`, and leave without the parent's exit handlers
    (they belong to the parent: its output, its temporary folders)."""
    code = 0
    try:
        os.close(rfd)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        try:
            answer: tuple[Any, ...] = ("ok", plain_reads(asyncio.run(_read_closing(cfg, endpoints))))
        except CloudError as exc:  # pickled with its fields (CloudError.__reduce__)
            answer = ("error", exc)
        except BaseException as exc:  # noqa: BLE001 - anything else: the parent reads itself
            answer = ("crash", f"{type(exc).__name__}: {exc}")
        data = pickle.dumps(answer)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:  # noqa: BLE001 - nothing may escape into the parent's code
        code = 1
    finally:
        os._exit(code)


async def _read_closing(cfg: RLConfig, endpoints: Endpoints) -> ComputeReads:
    from .context import Context

    ctx = Context(cfg, endpoints)
    try:
        return await read(ctx)
    finally:
        await ctx.close()


def plain_reads(reads: ComputeReads) -> ComputeReads:
    return ComputeReads(*(plain(getattr(reads, f)) for f in ComputeReads.__dataclass_fields__))


def _read_all(fd: int) -> bytes:
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)
