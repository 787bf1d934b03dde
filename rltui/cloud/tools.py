"""xpk and gcloud as subprocesses: argv lists, streamed output, a timeout, never a shell."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .endpoints import Endpoints
from .errors import CloudError

Line = Callable[[str], None]


@dataclass(frozen=True)
class ToolResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def error_line(self) -> str:
        """The tool's own last error, for quoting to the user (never to decide anything).
        gcloud prints `ERROR: (gcloud.x) ...` and often continues on ` - ...` lines."""
        lines = [ln.rstrip() for ln in self.stderr.splitlines() if ln.strip()]
        starts = [i for i, ln in enumerate(lines) if ln.startswith("ERROR")]
        if not starts:
            return (lines or [f"exit code {self.returncode}"])[-1].strip()
        first = starts[-1]
        rest = [ln.strip() for ln in lines[first + 1:first + 4] if ln.startswith(" ")]
        return " ".join([lines[first].strip(), *rest])


async def run_tool(argv: Sequence[str], endpoints: Endpoints, *, cwd: Path | None = None,
                   on_line: Line | None = None, timeout_s: float | None = 300.0) -> ToolResult:
    """Run `argv` (a list: never a shell string), streaming each output line to `on_line`."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=str(cwd) if cwd else None, env=endpoints.subprocess_env(),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    out: list[str] = []
    err: list[str] = []

    async def pump(stream: asyncio.StreamReader, sink: list[str]) -> None:
        while True:
            raw = await stream.readline()
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip("\r\n")
            sink.append(line)
            if on_line:
                on_line(line)

    assert proc.stdout is not None and proc.stderr is not None  # both are PIPEs
    gathered = asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err), proc.wait())
    try:
        await asyncio.wait_for(gathered, timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        # A pump may still end with an error once cancelled (its app gone): read it, so that
        # asyncio does not print "_GatheringFuture exception was never retrieved" at exit.
        gathered.add_done_callback(lambda f: f.cancelled() or f.exception())
        # Our child, in its own session: end it and its children by PID, never by name.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise CloudError(f"{argv[0]} {' '.join(argv[1:3])} did not finish within"
                         f" {timeout_s:.0f} s", transient=True, code="Timeout") from None
    return ToolResult(tuple(argv), proc.returncode or 0, "\n".join(out), "\n".join(err))
