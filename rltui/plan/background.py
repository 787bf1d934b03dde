"""The detached operation (an `xpk cluster create` or `delete` that outlives rltui) as both
faces see it: `running` for status and the wizard's start, `stop_background` before a teardown.

The process and its record are cloud/detached.py's; this only names them for the faces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .context import Context

__all__ = ["Background", "interrupted_line", "running", "running_in", "stop_background"]


@dataclass(frozen=True)
class Background:
    tool: str
    verb: str
    pid: int
    started_at: float
    log: str
    described: str          # "xpk cluster create (PID 4242, running since 09:12)"

    def as_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "verb": self.verb, "pid": self.pid,
                "started_at": self.started_at, "log": self.log}


def running(ctx: Context) -> Background | None:
    """The live detached operation of this cluster's xpk folder, or None. No cloud call."""
    return running_in(ctx.xpk_dir)


def running_in(xpk_dir: Path) -> Background | None:
    """The same for a folder (the wizard asks before its endpoints exist)."""
    from ..cloud.detached import Detached

    rec = Detached(xpk_dir, "xpk").live()
    return None if rec is None else _of(rec)


def _of(rec: Any) -> Background:
    return Background(rec.tool, rec.verb, rec.pid, rec.started_at, rec.log, rec.describe())


def interrupted_line(bg: Background) -> str:
    """What a face prints when it stops while the tool goes on."""
    return (f"{bg.tool} keeps running in the background (PID {bg.pid}); `rltui up` re-attaches,"
            " `rltui down --yes` stops it")


async def stop_background(ctx: Context, out: Callable[[str], Any]) -> Background | None:
    """Before a teardown: stop a detached create (by PID, while it is still that process). A
    detached delete is what the teardown wants: it is left running and the teardown's xpk step
    re-attaches to it. Returns what was running, if anything."""

    tool = ctx.xpk()   # stop's bounds scale with the cloud's clock
    rec = tool.live()
    if rec is None:
        return None
    bg = _of(rec)
    if rec.verb == "delete":
        out(f"{rec.describe()} is already deleting: the teardown re-attaches to it")
        return bg
    out(f"stopping {rec.describe()} before tearing down")
    await tool.stop(rec)
    return bg
