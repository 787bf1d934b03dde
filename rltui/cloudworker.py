"""The wizard's cloud worker: the real Session, driven over a socket by rltui/remote.py.

`python -m rltui.cloudworker FD`: FD is this end of the wizard's socketpair. The first frame
names env.sh, the endpoints (built by the wizard: one sandbox, one set of addresses) and the
config's generation; each "call" frame runs one Session coroutine (or async iterator) as a
task of its own, so a slow call never holds up another, and a "cancel" cancels it as the
wizard's own worker was cancelled. A generation newer than ours means env.sh was saved or
reloaded: it is read again before the call. A closed socket (the wizard ended, however it
ended) cancels what runs, closes the Session's connections (port-forward, watches) and ends.

Callbacks: `up`'s and `down`'s listener events travel with the plan's view after the event
(what the Provision screen draws); `follow_logs`'s text is merged per turn of the loop (a
burst of Ray's 10-line chunks becomes one frame, as toolong merges log lines), and
`follow_job` sends the updates its JobFeed merged (rltui/jobfeed.py: at most one each 0.1 s,
parsed and tracked here). Errors cross
as rltui's CloudError (or a builtin exception), never as a Google or Kubernetes class: the
wizard shows their message and decides nothing from a type it does not load.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import pickle
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .remote import REMOTE_METHODS, Callback, read_frame, write_frame
from .session import Session

log = logging.getLogger("rltui.cloudworker")

# Calls whose answer comes with the plan's view after it (the runner's states changed).
VIEWED = frozenset({"up", "down", "probe_plan"})
VIEW_KINDS = frozenset({"state", "note", "progress"})


def portable(exc: BaseException) -> BaseException:
    """What the wizard can unpickle without the cloud clients: rltui's or a builtin exception
    as it is, anything else as the CloudError `classify` makes of it (its advice included)."""
    from .cloud.errors import CloudError, classify

    if type(exc).__module__.split(".")[0] in ("builtins", "rltui"):
        try:
            back = pickle.loads(pickle.dumps(exc))
            if type(back) is type(exc) and str(back) == str(exc):
                return exc
        except Exception:  # noqa: BLE001 - not picklable as it is: classified below
            pass
    err = classify(exc)
    return CloudError(err.message, transient=err.transient, code=err.code)


class Worker:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.session: Session | None = None
        self.generation = 0
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def send(self, kind: str, cid: int, value: Any) -> None:
        try:
            write_frame(self.writer, (kind, cid, value))
        except Exception as exc:  # noqa: BLE001 - a value that cannot cross: say what it was
            log.exception("call %s: its %s could not be sent", cid, kind)
            from .cloud.errors import CloudError

            write_frame(self.writer, ("err", cid, CloudError(
                f"internal: the cloud worker could not send a {type(value).__name__} ({exc})",
                transient=False)))

    def _view(self) -> Any:
        assert self.session is not None
        return self.session.plan_view() if self.session.cfg is not None else None

    def _callback(self, cid: int, name: str) -> tuple[Callable[[Any], None], Callable[[], None]]:
        """The function a Session call gets for its callback, and what flushes it."""
        if name == "follow_job":  # its updates are merged already (rltui/jobfeed.py)
            return (lambda update: self.send("event", cid, update)), (lambda: None)
        if name == "follow_logs":
            pending: list[str] = []

            def flush() -> None:
                if pending:
                    batch = "".join(pending)
                    pending.clear()
                    self.send("event", cid, batch)

            def on_text(text: str) -> None:
                if not pending:
                    asyncio.get_running_loop().call_soon(flush)
                pending.append(text)
            return on_text, flush

        def on_event(event: Any) -> None:
            kind = getattr(event, "kind", None)
            self.send("event", cid, (event, self._view() if kind in VIEW_KINDS else None))
        return on_event, lambda: None

    async def run(self, cid: int, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                  generation: int) -> None:
        session = self.session
        assert session is not None
        flush: Callable[[], None] = lambda: None  # noqa: E731
        try:
            if name not in REMOTE_METHODS:
                raise ValueError(f"not a remote Session call: {name}")
            if generation != self.generation:
                session.load_env()
                self.generation = generation
            if any(isinstance(a, Callback) for a in args):
                callback, flush = self._callback(cid, name)
                args = tuple(callback if isinstance(a, Callback) else a for a in args)
            result = getattr(session, name)(*args, **kwargs)
            if inspect.isasyncgen(result):
                try:
                    async for item in result:
                        self.send("item", cid, item)
                        await self.writer.drain()  # a wizard that reads slowly slows the watch
                finally:
                    await result.aclose()  # now, not when collected: its watch ends with it
                value = None
            else:
                value = await result
            flush()
            self.send("ok", cid, (value, self._view()) if name in VIEWED else value)
        except asyncio.CancelledError:
            pass  # the wizard cancelled it: it wants no answer
        except Exception as exc:  # noqa: BLE001 - every failure goes back to its caller
            flush()
            log.info("call %s %s failed: %s", cid, name, exc,
                     exc_info=type(exc).__module__.split(".")[0] not in ("builtins", "rltui"))
            self.send("err", cid, portable(exc))
        finally:
            self.tasks.pop(cid, None)

    async def serve(self, reader: asyncio.StreamReader) -> None:
        _, env_path, endpoints, self.generation = await read_frame(reader)
        self.session = Session(Path(env_path), lambda: endpoints)
        try:
            while True:
                try:
                    kind, cid, *rest = await read_frame(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                if kind == "call":
                    name, args, kwargs, generation = rest
                    self.tasks[cid] = asyncio.create_task(self.run(cid, name, args, kwargs, generation))
                elif kind == "cancel" and cid in self.tasks:
                    self.tasks[cid].cancel()
                elif kind == "close":
                    break
        finally:
            for task in list(self.tasks.values()):
                task.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            await self.session.close()


async def _main(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    try:
        await Worker(writer).serve(reader)
    finally:
        writer.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m rltui.cloudworker FD (started by the wizard)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(name)s %(message)s")
    asyncio.run(_main(int(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
