"""The wizard's Session, with its cloud work in a process of its own (rltui/cloudworker.py).

Why a second process: the Google clients, grpc and the Kubernetes client are heavy imports
(docs/decisions/import-cost.md), and their calls and watches decode protobuf and JSON on
the same GIL the terminal's keys wait for. The wizard keeps textual, rich and rltui's pure
core; the worker imports the clients and runs the real `Session` (plan, inventory, jobs,
watches, port-forward), unchanged. One code path: the worker *is* the in-process Session,
driven over a socket; headless commands and the tests' harnesses use it directly.

What stays here: env.sh (read, validated, written: its problems are shown before any cloud
call), the endpoints (built once, here: a sandbox is started here, and the worker gets the
same value), the plan's graph (skips), and local records (the newest job, a detached xpk).
What a call returns is rltui's own values (Resource, Check, RunResult, KubeEvent, dicts):
nothing Google's crosses, so nothing Google's is imported to read it.

The link: length-prefixed pickles over a socketpair (both ends are this package; nothing else
can connect). Frames: to the worker ("init", env_path, endpoints, generation), ("call", id,
name, args, kwargs, generation), ("cancel", id), ("close",); back ("event", id, payload) for a
callback's argument, ("item", id, value) for an async iterator's, ("ok", id, value),
("err", id, exception). The worker's stdout and stderr go to a log file, never the terminal.
Stdlib only: this module is on the wizard's path.
"""

from __future__ import annotations

import asyncio
import itertools
import pickle
import socket
import struct
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from .session import Session

if TYPE_CHECKING:
    from .cloud.endpoints import Endpoints
    from .cloud.rayjobs import JobInfo
    from .cost import Estimate
    from .jobfeed import JobUpdate
    from .joblog import TrainingStep
    from .plan.inventory import Resource
    from .plan.pods import KubeEvent
    from .plan.preflight import Check
    from .plan.runner import RunEvent, RunResult
    from .plan.view import PlanView
    from .seam import GpuMetrics, LustreInstance, LustreMetrics

P = ParamSpec("P")
R = TypeVar("R")
E = TypeVar("E")

HEADER = struct.Struct(">I")
LOG_LIMIT_BYTES = 5 * 1024 * 1024   # the worker's log starts again past this
CLOSE_WAIT_S = 5.0


class Callback:
    """Stands for a callback argument: the worker passes a function that sends an "event"."""


async def read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    return pickle.loads(await reader.readexactly(size))


def write_frame(writer: asyncio.StreamWriter, frame: Any) -> None:
    data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(HEADER.pack(len(data)) + data)


def worker_argv(fd: int) -> list[str]:
    """How the worker starts (a bench replaces this to feed its own log lines)."""
    return [sys.executable, "-m", "rltui.cloudworker", str(fd)]


def worker_log() -> Path:
    from .statedir import state_root

    return state_root() / "cloudworker.log"


class WorkerGone(Exception):
    """The worker process ended while a call waited on it."""


@dataclass
class _Call:
    future: asyncio.Future[Any]
    on_event: Callable[[Any], Any] | None = None
    queue: asyncio.Queue[tuple[str, Any]] | None = None
    done: bool = False


@dataclass
class CloudLink:
    """The worker process and the socket to it; started on the first call, again after a crash."""

    init: Callable[[], tuple[Any, ...]]             # the "init" frame, built when (re)started
    _proc: subprocess.Popen[bytes] | None = None
    _writer: asyncio.StreamWriter | None = None
    _reader: asyncio.Task[None] | None = None
    _calls: dict[int, _Call] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _starting: asyncio.Lock | None = None
    _closed: bool = False   # close() began: no worker is started again

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    async def _ensure(self) -> asyncio.StreamWriter:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._writer is not None:
                return self._writer
            if self._closed:  # a call from a screen still polling while the wizard closes
                raise WorkerGone("the cloud worker was closed with the wizard")
            ours, self._proc = _spawn()
            reader, writer = await asyncio.open_unix_connection(sock=ours)
            write_frame(writer, ("init", *self.init()))
            self._writer = writer
            self._reader = asyncio.create_task(self._read(reader, self._proc))
            return writer

    async def _read(self, reader: asyncio.StreamReader, proc: subprocess.Popen[bytes]) -> None:
        try:
            while True:
                kind, cid, value = await read_frame(reader)
                call = self._calls.get(cid)
                if call is None or call.done:
                    continue  # cancelled here: its late answers are dropped
                if kind == "event" and call.on_event is not None:
                    try:
                        call.on_event(value)
                    except Exception as exc:  # noqa: BLE001 - the caller's own failure ends its call
                        self._finish(cid, call, exc)
                        self._send_cancel(cid)
                elif call.queue is not None:
                    call.queue.put_nowait((kind, value))
                elif kind == "ok":
                    self._finish(cid, call, None, value)
                elif kind == "err":
                    self._finish(cid, call, value)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            # The calls this worker had, taken now: a call made from here on starts a new one
            # (_ensure), and must not be failed with this one's end.
            lost, self._writer = list(self._calls.items()), None
            code = await _exit_code(proc)
            gone = WorkerGone(f"the cloud worker process ended (exit code {code}): its log is "
                              f"{worker_log()}; the next action starts it again")
            for cid, call in lost:
                self._finish(cid, call, gone)

    def _finish(self, cid: int, call: _Call, error: BaseException | None, value: Any = None) -> None:
        if call.done:
            return
        call.done = True
        if call.queue is not None:
            call.queue.put_nowait(("err", error) if error is not None else ("ok", value))
        elif not call.future.done():
            if error is not None:
                call.future.set_exception(error)
            else:
                call.future.set_result(value)

    def _send_cancel(self, cid: int) -> None:
        if self._writer is not None and not self._writer.is_closing():
            write_frame(self._writer, ("cancel", cid, None))

    async def call(self, name: str, *args: Any, generation: int, on_event: Callable[[Any], Any] | None = None,
                   **kwargs: Any) -> Any:
        writer = await self._ensure()
        cid = next(self._ids)
        call = self._calls[cid] = _Call(asyncio.get_running_loop().create_future(), on_event)
        write_frame(writer, ("call", cid, name, args, kwargs, generation))
        try:
            return await call.future
        finally:
            if not call.done:  # cancelled by the caller: the worker stops it too
                call.done = True
                self._send_cancel(cid)
            self._calls.pop(cid, None)

    async def stream(self, name: str, *args: Any, generation: int, **kwargs: Any) -> AsyncIterator[Any]:
        writer = await self._ensure()
        cid = next(self._ids)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        call = self._calls[cid] = _Call(asyncio.get_running_loop().create_future(), queue=queue)
        write_frame(writer, ("call", cid, name, args, kwargs, generation))
        try:
            while True:
                kind, value = await queue.get()
                if kind == "item":
                    yield value
                elif kind == "err":
                    raise value
                else:
                    return
        finally:
            if not call.done:  # the caller stopped iterating (or was cancelled)
                call.done = True
                self._send_cancel(cid)
            self._calls.pop(cid, None)

    async def close(self) -> None:
        """Ask the worker to close its connections and end; stop it if it does not. A call
        made from here on fails (WorkerGone) instead of starting a new worker: one started
        while the wizard closed was never closed, and this waited on it for ever."""
        self._closed = True
        proc, writer = self._proc, self._writer
        if writer is not None and not writer.is_closing():
            write_frame(writer, ("close", None, None))
            try:
                await writer.drain()
            except ConnectionError:
                pass
            writer.close()
        if proc is not None and proc.poll() is None:
            try:
                await asyncio.to_thread(proc.wait, CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.terminate()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)


def _spawn() -> tuple[socket.socket, subprocess.Popen[bytes]]:
    """The worker process and our end of its socket."""
    ours, theirs = socket.socketpair()
    log_path = worker_log()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    big = log_path.exists() and log_path.stat().st_size > LOG_LIMIT_BYTES
    with theirs, open(log_path, "wb" if big else "ab") as log:
        # Its own session: a hangup or ^C meant for the terminal does not cut a call short;
        # it ends when this socket closes (the wizard gone), after its own cleanup.
        proc = subprocess.Popen(worker_argv(theirs.fileno()), pass_fds=[theirs.fileno()],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    return ours, proc


async def _exit_code(proc: subprocess.Popen[bytes]) -> int | None:
    for _ in range(40):  # the socket closes just before the process ends
        if proc.poll() is not None:
            return proc.returncode
        await asyncio.sleep(0.05)
    return proc.poll()


class RemoteSession(Session):
    """A Session whose cloud calls run in the worker process; the rest is the Session's own."""

    def __init__(self, env_path: Path, endpoints_factory: Callable[[], Endpoints]) -> None:
        self._generation = 0
        self._view: PlanView | None = None
        super().__init__(env_path, endpoints_factory)
        self.link = CloudLink(lambda: (str(self.env_path), self.endpoints, self._generation))

    def _revalidate(self) -> None:
        super()._revalidate()
        self._generation += 1  # the worker reads env.sh again before its next call
        self._view = None

    def plan_view(self) -> PlanView:
        """The worker's newest view of the plan; before it reported one, the local records'."""
        return self._view if self._view is not None else super().plan_view()

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return await self.link.call(name, *args, generation=self._generation, **kwargs)

    async def _ask(self, method: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
        """The Session's own coroutine `method`, run by the worker: its answer is the object the
        in-process Session returns, pickled, so it has the method's type (taken on trust here)."""
        return cast(R, await self._call(method.__name__, *args, **kwargs))

    def _stream(self, method: Callable[P, AsyncIterator[R]], *args: P.args,
                **kwargs: P.kwargs) -> AsyncIterator[R]:
        """The Session's own async iterator `method`, run by the worker (as `_ask`)."""
        return cast(AsyncIterator[R], self.link.stream(method.__name__, *args, generation=self._generation,
                                                       **kwargs))

    # --- the plan: events carry the worker's view of the plan along ---

    def _viewing(self, listener: Callable[[E], None]) -> Callable[[tuple[E, PlanView | None]], None]:
        def on_event(payload: tuple[E, PlanView | None]) -> None:
            event, view = payload
            if view is not None:
                self._view = view
            listener(event)
        return on_event

    async def up(self, listener: Callable[[RunEvent], None], targets: set[str] | None = None) -> RunResult:
        answer = await self._call("up", Callback(), targets, on_event=self._viewing(listener))
        result, self._view = cast("tuple[RunResult, PlanView | None]", answer)
        return result

    async def down(self, listener: Callable[[RunEvent | str], None], export_to: str | None = None) -> RunResult:
        answer = await self._call("down", Callback(), export_to, on_event=self._viewing(listener))
        result, self._view = cast("tuple[RunResult, PlanView | None]", answer)
        return result

    async def probe_plan(self) -> None:
        _, self._view = cast("tuple[None, PlanView | None]", await self._call("probe_plan"))

    async def inventory(self) -> list[Resource]:
        return await self._ask(super().inventory)

    async def cost(self, resources: list[Resource]) -> Estimate | None:
        return await self._ask(super().cost, resources)

    async def preflight(self) -> list[Check]:
        return await self._ask(super().preflight)

    # --- job ---

    async def submit(self, resume: bool, new_folder: bool = False) -> str:
        return await self._ask(super().submit, resume, new_folder)

    async def follow_logs(self, on_text: Callable[[str], Any], job_id: str | None = None) -> str:
        return str(await self._call("follow_logs", Callback(), job_id, on_event=on_text))

    async def follow_job(self, on_update: Callable[[JobUpdate], Any],
                         job_id: str | None = None) -> tuple[str, TrainingStep | None]:
        answer = await self._call("follow_job", Callback(), job_id, on_event=on_update)
        final, last = cast("tuple[str, TrainingStep | None]", answer)
        return str(final), last

    async def job_summary(self) -> dict[str, Any] | None:
        return await self._ask(super().job_summary)

    async def job_info(self, job_id: str | None = None) -> JobInfo | None:
        return await self._ask(super().job_info, job_id)

    # --- monitor and metrics ---

    def pod_events(self) -> AsyncIterator[KubeEvent]:
        return self._stream(super().pod_events)

    def kube_events(self) -> AsyncIterator[list[dict[str, Any]]]:
        return self._stream(super().kube_events)

    def raycluster_events(self) -> AsyncIterator[dict[str, Any]]:
        return self._stream(super().raycluster_events)

    def pod_log(self, name: str, tail_lines: int = 500) -> AsyncIterator[str]:
        return self._stream(super().pod_log, name, tail_lines)

    async def dashboard(self) -> str:
        return await self._ask(super().dashboard)

    async def describe_pod(self, name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        return await self._ask(super().describe_pod, name)

    async def delete_pod(self, name: str) -> None:
        await self._ask(super().delete_pod, name)

    async def lustre_metrics(self, minutes: float = 30.0) -> LustreMetrics:
        return await self._ask(super().lustre_metrics, minutes)

    async def lustre_instance(self) -> LustreInstance:
        return await self._ask(super().lustre_instance)

    async def gpu_metrics(self, minutes: float = 30.0) -> GpuMetrics:
        return await self._ask(super().gpu_metrics, minutes)

    async def close(self) -> None:
        await self.link.close()


# The Session coroutines the worker may run for the wizard (the others are local).
REMOTE_METHODS = frozenset({
    "up", "down", "probe_plan", "inventory", "cost", "preflight", "submit", "follow_logs", "follow_job",
    "job_summary", "job_info", "pod_events", "kube_events", "raycluster_events", "pod_log",
    "dashboard", "describe_pod", "delete_pod", "lustre_metrics", "lustre_instance",
    "gpu_metrics",
})

