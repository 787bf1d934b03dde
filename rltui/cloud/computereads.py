"""The Compute Engine reads of an inventory (plan/inventory.py), in a process of their own.

A headless `rltui status` is one short Python process whose time is mostly CPU: importing the
clients it asks (grpc, google-cloud-container, -lustre, -service-usage, kubernetes) and
google-cloud-compute, whose message classes alone take 0.55 s (proto-plus builds some 2,200
classes in types/compute.py). On two cores, a child forked before the event loop starts imports
Compute and makes these reads while the parent imports and asks the others; nothing is cached,
every answer is the cloud's of this run. The child uses the same adapter (network.py),
and sends back plain copies of the client's messages (`plain`: the same field names, maps as
dicts, lists as lists), which the inventory reads as it reads the messages themselves; an error
comes back as the CloudError it was. Where there is no fork, the fork fails (a process
limit), or the child ends without an answer, the reads run in the parent as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import logging
import os
import pickle
import signal
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

# Loaded first thing in `rltui status`, before its fork: nothing here imports more than the
# standard library until used (the clients' shared base just before the fork, the rest after).
if TYPE_CHECKING:
    from ..config import RLConfig
    from .endpoints import Endpoints
    from .network import NetworkAdapter

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


async def read(net: NetworkAdapter, region: str, address_name: str) -> ComputeReads:
    """Every Compute list and get the inventory needs, at once."""
    import asyncio

    networks, address, routers, nat_ips, firewalls, subnets = await asyncio.gather(
        net.networks(), net.address(address_name), net.routers(region),
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
    """A child forked at construction, first thing in the command (one thread, nothing heavy
    loaded yet): it imports Compute's clients while this process reads env.sh and loads its
    own, then waits for `ask(cfg, endpoints)` and makes the reads. `result()` collects them
    inside the event loop; `close()` ends a child whose answer is no longer wanted (never
    asked: bad input, an error before the cloud was asked)."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self._answer: int | None = None   # the child's answer, read here
        self._ask: int | None = None      # the question, written here
        if not hasattr(os, "fork"):
            return
        # What both sides import (google-auth and its requests transport, api-core, protobuf,
        # proto-plus), once, before the fork: with both processes busy on two cores, importing
        # it twice cost wall time (docs/decisions/import-cost.md).
        for shared in ("google.api_core.exceptions", "google.auth.transport.requests", "proto"):
            importlib.import_module(shared)

        stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        try:
            answer_r, answer_w = os.pipe()
            ask_r, ask_w = os.pipe()
        except OSError:   # out of file descriptors: read in this process
            return
        # A stop signal between the fork and the child's own handlers would run this
        # process's code in the child: held until each side is ready for it.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
        try:
            pid = os.fork()
        except OSError:   # EAGAIN (a process limit), ENOMEM: read in this process
            for fd in (answer_r, answer_w, ask_r, ask_w):
                os.close(fd)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            return
        if pid == 0:  # the child: never returns
            _child((answer_r, ask_w), ask_r, answer_w, held)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        os.close(answer_w)
        os.close(ask_r)
        self.pid, self._answer, self._ask = pid, answer_r, ask_w

    def ask(self, cfg: RLConfig, endpoints: Endpoints) -> None:
        """What to read, for which project, through which endpoints (without their loaded
        credentials: the child loads its own)."""
        if self._ask is None:
            return
        fd, self._ask = self._ask, None
        question = pickle.dumps((dataclasses.replace(endpoints), cfg.project_id, cfg.region,
                                 cfg.address_name))
        try:
            _write_all(fd, question)
        except OSError:   # the child is gone: result() reads here
            pass
        finally:
            os.close(fd)

    async def result(self, here: Callable[[], Awaitable[ComputeReads]]) -> ComputeReads:
        """The child's reads (or its CloudError, raised here); `here()`'s when it gave none."""
        import asyncio

        from .errors import CloudError

        if self._answer is not None and self._ask is None:
            fd, self._answer = self._answer, None
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
        return await here()

    def close(self) -> None:
        for fd in (self._answer, self._ask):
            if fd is not None:
                os.close(fd)
        self._answer = self._ask = None
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
def forked() -> Iterator[Forked]:
    reads = Forked()
    try:
        yield reads
    finally:
        reads.close()


def _child(parents: tuple[int, int], ask: int, fd: int, held: set[Any]) -> None:
    """Import, wait for the question, read, send one pickled answer down `fd`, and leave
    without the parent's exit handlers (they belong to the parent: its output, its temporary
    folders). No question (the parent closed its end): leave at once."""
    code = 0
    # A process of a second or so that ends with os._exit: the collector's passes over the
    # message classes it builds only slowed its import (docs/decisions/import-cost.md).
    gc.disable()
    try:
        for end in parents:
            os.close(end)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        import asyncio

        from .errors import CloudError
        from .imports import compute_types

        try:
            # The messages first (most of the import); each service's client is imported by
            # the thread that calls it, so the first calls are under way while the last
            # services load (cloud/imports.py takes them one at a time).
            compute_types()
            question = _read_all(ask)
            if not question:
                return
            endpoints, project, region, address_name = pickle.loads(question)
            reads = asyncio.run(_read_closing(endpoints, project, region, address_name))
            answer: tuple[Any, ...] = ("ok", plain_reads(reads))
        except CloudError as exc:  # pickled with its fields (CloudError.__reduce__)
            answer = ("error", exc)
        except BaseException as exc:  # noqa: BLE001 - anything else: the parent reads itself
            answer = ("crash", f"{type(exc).__name__}: {exc}")
        _write_all(fd, pickle.dumps(answer))
    except BaseException:  # noqa: BLE001 - nothing may escape into the parent's code
        code = 1
    finally:
        os._exit(code)


async def _read_closing(endpoints: Endpoints, project: str, region: str,
                        address_name: str) -> ComputeReads:
    from .network import NetworkAdapter

    return await read(NetworkAdapter(endpoints, project), region, address_name)


def plain_reads(reads: ComputeReads) -> ComputeReads:
    return ComputeReads(*(plain(getattr(reads, f)) for f in ComputeReads.__dataclass_fields__))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int) -> bytes:
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)
