"""The contract every codelab step implements; the runner (runner.py) drives it.

No cloud library is imported here: a step's methods reach the cloud through the opaque `ctx`
the runner passes through, so the TUI and the headless CLI both import this quickly.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..cloud.errors import CloudError  # stdlib only at import, like this module

if TYPE_CHECKING:
    from .context import Context


log = logging.getLogger(__name__)


class StepState(StrEnum):
    PENDING = "pending"
    WAITING = "waiting"          # needs not met, or a lock is held by another step
    RUNNING = "running"
    DONE = "done"
    EXISTED = "existed"          # the probe found it already there: apply() was not called
    FAILED = "failed"
    BLOCKED = "blocked"          # a need failed (or, for down, a step that must go first failed)
    SKIPPED = "skipped"          # not requested, or kept on down (Step.destroyable False)
    INTERRUPTED = "interrupted"  # was running when the run was cancelled (Ctrl-C)
    DESTROYING = "destroying"
    DESTROYED = "destroyed"
    ABSENT = "absent"            # down: nothing to destroy

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({StepState.DONE, StepState.EXISTED, StepState.FAILED, StepState.BLOCKED,
                       StepState.SKIPPED, StepState.INTERRUPTED, StepState.DESTROYED,
                       StepState.ABSENT})


@dataclass(frozen=True)
class Probe:
    """What the cloud says about a step's object: the truth, not a local file."""
    exists: bool
    ready: bool = True
    detail: str = ""
    reapply: bool = False   # there and usable, yet every run applies it again (the Secret)


class TransientError(Exception):
    """Worth retrying (quota hiccup, operation already running, 503). `retry_after_s` overrides
    the policy's backoff when the service said how long to wait."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PermanentError(Exception):
    """Retrying cannot help. The message tells the user what to do."""


# What the user reads for these is their message: the class is rltui's bookkeeping, and a
# cloud error's message already says what failed and what to do.
_WORDED = (CloudError, PermanentError, TransientError, OSError, TimeoutError)


def describe(exc: BaseException) -> str:
    """An error as a step's row and detail say it: a cloud, network or step error by its
    message alone; anything else is a bug in rltui, and its type is the clue a report needs."""
    text = (getattr(exc, "message", None) if isinstance(exc, CloudError) else None) or str(exc)
    text = text.strip()
    if isinstance(exc, _WORDED):
        return text or ("no answer in time" if isinstance(exc, TimeoutError) else "failed")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Kept(Exception):
    """Raised by destroy(): the object is there but is not rltui's (it lacks rltui's mark:
    plan/ownership.py), so it is left alone. The row ends SKIPPED with the message, which says
    why and gives the command that deletes it by hand: a kept outcome, not a failure."""


class StepOutput:
    """What a running step reports: streamed output lines, a progress fraction, status notes.

    Safe to call from a worker thread (a blocking client in asyncio.to_thread): the call is
    handed to the event loop that created this object. Usable standalone in a step's own
    tests: it keeps the last `keep` lines, the last note and the last progress.
    """

    def __init__(self, sink: Callable[[str, Any], None] | None = None, *, keep: int = 500) -> None:
        self._sink = sink
        self.lines: deque[str] = deque(maxlen=keep)
        self.last_note = ""
        self.fraction: float | None = None
        self.probe: Probe | None = None   # the runner's probe of this attempt, for apply()
        self._thread = threading.get_ident()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    def line(self, text: str) -> None:
        for part in text.rstrip("\n").split("\n"):
            self._post("line", part.rstrip("\r"))

    def progress(self, fraction: float | None) -> None:
        if fraction is not None:
            fraction = min(1.0, max(0.0, float(fraction)))
        self._post("progress", fraction)

    def note(self, text: str) -> None:
        self._post("note", text)

    def _post(self, kind: str, value: Any) -> None:
        if self._loop is not None and threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self._record, kind, value)
        else:
            self._record(kind, value)

    def _record(self, kind: str, value: Any) -> None:
        if kind == "line":
            self.lines.append(value)
        elif kind == "note":
            self.last_note = value
        elif kind == "progress":
            if value == self.fraction:
                return
            self.fraction = value
        if self._sink is not None:
            self._sink(kind, value)


class Step:
    """One codelab step. Subclasses set the class attributes and implement the three methods.

    apply() and destroy() must be idempotent: after a crash the runner probes and calls them
    again, and a transient failure is retried from a fresh probe. apply() returns when the
    object is usable (e.g. the Lustre instance is ACTIVE); raise to fail.
    """

    name: str = ""                                   # stable id, e.g. "lustre_instance"
    title: str = ""                                  # "Lustre instance"
    needs: tuple[str, ...] = ()
    # Up: steps this one runs alongside: part of its closure (up pulls them in; skipping one
    # skips this) and a failure of one blocks it, but it starts without waiting for them.
    alongside: tuple[str, ...] = ()
    locks: tuple[str, ...] = ()                      # e.g. ("gke:PROJECT/CLUSTER",)
    expected_s: float = 0.0                          # reference duration, real seconds
    destroy_expected_s: float | None = None          # default: expected_s
    connects: bool = False   # a local connection (kubeconfig, port-forward): nothing in the cloud
    destroy_needs: tuple[str, ...] | None = None     # default: every step that needs this one
    destroyable: bool = True                         # False: down leaves it (enabled APIs)
    # False: up does not make it (another command does: the budget guard's account, made by
    # `submit`); up skips it with `up_words`, while probing the plan and down still see it.
    made_by_up: bool = True
    up_words: str = ""
    # Down: steps to let finish first, whatever their outcome (a failure does not block this).
    destroy_after: tuple[str, ...] = ()
    max_attempts: int | None = None                  # fewer tries than the runner's policy

    def command(self) -> str:
        """The equivalent CLI command(s) of apply, for display and the equivalent script."""
        return ""

    def down_title(self) -> str:
        """A teardown row's name: what is deleted, by its name ("RayCluster ray-a4-gpu-spot"),
        not the creation step's title. Default: the title."""
        return self.title

    async def kept(self, ctx: Context, settled: dict[str, StepState]) -> tuple[StepState, str]:
        """Down, for a step it does not destroy (`destroyable` False): what became of its
        object, once its down dependencies have settled (`settled`: their states). Returns a
        down state (SKIPPED "kept: why", DESTROYED when another step's delete took it, ABSENT)
        and the words a teardown row shows; it must be true, so a step that can ask the cloud
        does."""
        return StepState.SKIPPED, "kept: rltui does not undo this"

    def down_command(self) -> str:
        """The equivalent CLI command(s) of destroy ("" when down leaves nothing to do)."""
        return ""

    async def probe(self, ctx: Context) -> Probe:
        raise NotImplementedError(f"{type(self).__name__}.probe")

    async def apply(self, ctx: Context, out: StepOutput) -> None:
        raise NotImplementedError(f"{type(self).__name__}.apply")

    async def down_probe(self, ctx: Context) -> Probe:
        """What down has to delete (`exists`); default: the probe. A step whose up probe also
        counts what another step deletes (xpk's networks, for the cluster) says less here."""
        return await self.probe(ctx)

    async def destroy(self, ctx: Context, out: StepOutput) -> str | None:
        """Delete the object; may return the words of its row once deleted (default "deleted"),
        e.g. who deleted it."""
        raise NotImplementedError(f"{type(self).__name__}.destroy")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


async def kept_words(step: Step, ctx: Any, settled: dict[str, StepState]
                     ) -> tuple[StepState, str]:
    """Step.kept, never failing a teardown: a check that could not ask says so."""
    try:
        return await step.kept(ctx, settled)
    except Exception as exc:   # CancelledError is not an Exception: it goes through
        log.warning("%s: could not tell what became of it", step.name, exc_info=exc)
        return StepState.SKIPPED, f"not checked: {describe(exc)}"
