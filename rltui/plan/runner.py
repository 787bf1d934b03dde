"""Runs the step graph concurrently: up (probe, then apply) and down (probe, then destroy).

A step starts as soon as its own needs are met, so independent branches overlap (the Lustre
chain runs while xpk still builds node pools). The cloud is the truth: every attempt probes
first, so a rerun after a crash continues and never creates a second copy of anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rltui.backoff import delay_s
from rltui.plan.graph import closure as _closure
from rltui.plan.graph import destroy_needs as _destroy_needs
from rltui.plan.graph import topo as _topo
from rltui.plan.graph import validate as _validate
from rltui.plan.progress import ProgressStore, RunRecord, StepProgress
from rltui.plan.step import Kept, PermanentError, Probe, Step, StepOutput, StepState, TransientError, kept_words
from rltui.plan.step import describe as _describe

if TYPE_CHECKING:
    from rltui.plan.context import Context

log = logging.getLogger(__name__)

LINES_KEPT = 500
OVERRUN_FLOOR = 0.1   # a step past its expected time: assume a tenth of it is still left

S = StepState
_OK = {"up": frozenset({S.DONE, S.EXISTED}),
       "down": frozenset({S.DESTROYED, S.ABSENT, S.SKIPPED})}
_ACTIVE = frozenset({S.RUNNING, S.DESTROYING})


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter. `classify` adds transient kinds the plan cannot know
    (gRPC UNAVAILABLE, HTTP 429/5xx) without this package importing those libraries."""
    attempts: int = 4
    base_s: float = 2.0
    cap_s: float = 60.0
    rng: random.Random = field(default_factory=random.Random)
    classify: Callable[[BaseException], bool] | None = None

    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, PermanentError):
            return False
        if isinstance(exc, (TransientError, ConnectionError, TimeoutError)):
            return True
        return bool(self.classify and self.classify(exc))

    def delay_s(self, attempt: int) -> float:
        """The wait after failed attempt `attempt` (1-based): half fixed, half jittered."""
        return delay_s(attempt, self.base_s, self.cap_s, self.rng, floor=0.5)


@dataclass(frozen=True)
class RunEvent:
    step: str
    title: str
    state: StepState
    at: float                      # wall clock
    elapsed_s: float
    expected_s: float
    message: str = ""
    progress: float | None = None
    line: str | None = None
    kind: str = "state"            # "state", "note", "progress" or "line"


@dataclass(frozen=True)
class StepView:
    name: str
    title: str
    state: StepState
    elapsed_s: float
    expected_s: float
    message: str
    progress: float | None
    lines: tuple[str, ...]
    needs: tuple[str, ...]
    command: str
    attempts: int


@dataclass(frozen=True)
class RunResult:
    mode: str                      # "up" or "down"
    ok: bool
    states: dict[str, StepState]   # the steps this run covered
    messages: dict[str, str]
    elapsed_s: float

    @property
    def failed(self) -> list[str]:
        return [n for n, s in self.states.items() if s is S.FAILED]

    @property
    def blocked(self) -> list[str]:
        return [n for n, s in self.states.items() if s is S.BLOCKED]


@dataclass(eq=False)
class _Track:
    step: Step
    state: StepState = S.PENDING
    message: str = ""
    progress: float | None = None
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=LINES_KEPT))
    started: float | None = None        # monotonic, first RUNNING
    finished: float | None = None
    started_at: float | None = None     # wall clock, for the progress file
    finished_at: float | None = None
    active_since: float | None = None   # last entry into RUNNING/DESTROYING, for the ETA
    attempts: int = 0
    holding: bool = False
    applied: bool = False               # apply/destroy was called: a later probe sees our work


class Runner:
    def __init__(self, steps: list[Step], ctx: Context, *, progress: ProgressStore | None = None,
                 listener: Callable[[RunEvent], None] | None = None,
                 retry: RetryPolicy | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self._steps = {s.name: s for s in steps}
        self._order = [s.name for s in steps]
        self._deps = {"up": {s.name: tuple(s.needs) + tuple(s.alongside) for s in steps},
                      "down": {s.name: _destroy_needs(s, steps) + tuple(s.destroy_after)
                               for s in steps}}
        # Down-mode dependencies that must settle first whatever their outcome.
        self._soft = {"up": {}, "down": {s.name: frozenset(s.destroy_after) for s in steps}}
        _validate(steps, self._deps)
        self._ctx = ctx
        self._store = progress
        self.listener = listener  # who hears RunEvents; the TUI re-points it per run
        self._retry = retry or RetryPolicy()
        self._clock = clock
        self._wall = wall
        self._tracks = {n: _Track(s) for n, s in self._steps.items()}
        self._locks: dict[str, asyncio.Lock] = {}
        self._holders: dict[str, str] = {}
        self._settled: dict[str, asyncio.Future[StepState]] = {}
        self._mode = "up"
        self._plan: list[str] = list(self._order)
        self._record: RunRecord | None = None
        self._busy = False

    @property
    def steps(self) -> list[Step]:
        return [self._steps[n] for n in self._order]

    def targets_without(self, skipped: Iterable[str]) -> set[str]:
        """The up targets when the user skips `skipped`: a skipped step takes every step that
        needs it (directly or not) along."""
        dropped, changed = set(skipped), True
        while changed:
            before = len(dropped)
            dropped |= {name for name, needs in self._deps["up"].items() if set(needs) & dropped}
            changed = len(dropped) != before
        return set(self._order) - dropped

    def order(self, mode: str) -> list[Step]:
        """The steps in the order `mode` ("up" or "down") runs them, one after another (the
        runner itself starts each as soon as its dependencies settle); down skips the steps
        it leaves alone."""
        names = _topo(self._order, self._deps[mode])
        return [self._steps[n] for n in names if mode == "up" or self._steps[n].destroyable]

    @property
    def busy(self) -> bool:
        return self._busy

    async def up(self, targets: set[str] | None = None) -> RunResult:
        return await self._run("up", targets)

    async def down(self, targets: set[str] | None = None) -> RunResult:
        return await self._run("down", targets)

    async def probe_all(self, timeout_s: float = 8.0) -> dict[str, StepState]:
        """Ask the cloud what exists, without creating or deleting anything: what a screen shows
        on open (reopened after a quit, the plan must not read "pending" for what is there).
        Each step's own probe runs concurrently, bounded by `timeout_s`; a probe that cannot
        answer yet (its cluster does not exist, say) leaves the step pending with the reason.
        Not while a run is going: that run's states are fresher than any probe."""
        if self._busy:
            return {n: t.state for n, t in self._tracks.items()}

        async def one(name: str) -> tuple[str, Probe | BaseException]:
            try:
                return name, await asyncio.wait_for(self._steps[name].probe(self._ctx), timeout_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a probe that cannot answer: not known yet
                return name, exc

        answers = dict(await asyncio.gather(*(one(n) for n in self._order)))
        if self.busy:       # a run started while we asked: its states win
            return {n: t.state for n, t in self._tracks.items()}
        self._mode, self._plan = "up", list(self._order)
        self._tracks = {n: _Track(s) for n, s in self._steps.items()}
        for name, answer in answers.items():
            tr = self._tracks[name]
            if isinstance(answer, BaseException):
                tr.message = f"not known yet: {_describe(answer)}"
            elif answer.exists and answer.ready:
                tr.state, tr.message = S.EXISTED, answer.detail or "already there"
                tr.progress = 1.0
            elif answer.exists:
                tr.message = f"exists, not ready yet: {answer.detail}" if answer.detail else \
                    "exists, not ready yet"
            else:
                tr.message = answer.detail or "not there yet"
            self._emit(tr, "state")
        # A connection step has nothing in the cloud to find: it is "there" once it connects
        # (what a watching screen does anyway), after the steps it needs were found.
        for name in _topo(self._order, self._deps["up"]):
            step, tr = self._steps[name], self._tracks[name]
            if not step.connects or self.busy or \
                    any(self._tracks[d].state is not S.EXISTED for d in step.needs):
                continue
            out = StepOutput(keep=1)
            try:
                await asyncio.wait_for(step.apply(self._ctx, out), timeout_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - shown as not connected yet
                tr.message = f"not connected yet: {_describe(exc)}"
            else:
                tr.state, tr.message, tr.progress = S.EXISTED, out.last_note or "connected", 1.0
            self._emit(tr, "state")
        return {n: t.state for n, t in self._tracks.items()}

    # ---- the run ----------------------------------------------------------------------
    async def _run(self, mode: str, targets: set[str] | None) -> RunResult:
        if self._busy:
            raise RuntimeError("a run is already in progress on this Runner")
        unknown = sorted(set(targets or ()) - set(self._steps))
        if unknown:
            raise ValueError(f"unknown step(s): {', '.join(unknown)}")
        wanted = _closure(targets if targets is not None else self._order, self._deps[mode])
        if mode == "up":  # what another command makes is not up's (Step.made_by_up)
            wanted = {n for n in wanted if self._steps[n].made_by_up}
        self._busy = True
        try:
            return await self._run_plan(mode, wanted)
        finally:
            self._busy = False

    async def _run_plan(self, mode: str, wanted: set[str]) -> RunResult:
        self._mode = mode
        self._plan = [n for n in self._order if n in wanted]
        loop = asyncio.get_running_loop()
        self._settled = {n: loop.create_future() for n in self._plan}
        self._tracks = {n: _Track(s) for n, s in self._steps.items()}
        t0, now = self._clock(), self._wall()
        self._record = RunRecord(mode=mode, outcome="running", started_at=now, updated_at=now)
        for name in self._order:
            if name not in wanted:
                self._set_state(self._tracks[name], S.SKIPPED,
                                self._steps[name].up_words if mode == "up" and not self._steps[name].made_by_up
                                else "not part of this run", save=False)
        self._save()
        tasks = [asyncio.create_task(self._step_task(self._tracks[n], mode), name=f"step:{n}")
                 for n in self._plan]
        try:
            if tasks:
                await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)   # let each step clean up and record itself
            self._finish("interrupted")
            raise
        states = {n: self._tracks[n].state for n in self._plan}
        ok = all(s in _OK[mode] for s in states.values())
        self._finish("ok" if ok else "failed")
        messages = {n: self._tracks[n].message for n in self._plan}
        return RunResult(mode, ok, states, messages, self._clock() - t0)

    async def _step_task(self, tr: _Track, mode: str) -> None:
        try:
            if await self._wait_for_needs(tr, mode):
                if mode == "down" and not tr.step.destroyable:
                    self._set_state(tr, *await self._kept(tr))
                else:
                    once = self._up_once if mode == "up" else self._down_once
                    state, message = await self._attempts(tr, once)
                    self._set_state(tr, state, message)
        except asyncio.CancelledError:
            if tr.state in _ACTIVE or (tr.state is S.WAITING and tr.started is not None):
                self._set_state(tr, S.INTERRUPTED, "interrupted: run it again to continue")
            elif not tr.state.terminal:
                self._set_state(tr, S.PENDING, "not started: the run was interrupted")
            raise
        except Exception as exc:   # a bug in the runner itself: fail this step, not the run
            log.exception("step %s crashed the runner", tr.step.name)
            self._set_state(tr, S.FAILED, _describe(exc))
        finally:
            fut = self._settled[tr.step.name]
            if not fut.done():
                fut.set_result(tr.state)

    async def _kept(self, tr: _Track) -> tuple[StepState, str]:
        """What became of a step down leaves alone (Step.kept), in words that are true."""
        settled = {d: self._settled[d].result() for d in self._deps["down"][tr.step.name]}
        return await kept_words(tr.step, self._ctx, settled)

    def _title(self, step: Step) -> str:   # down names what a row deletes (Step.down_title)
        return step.down_title() if self._mode == "down" else step.title

    async def _wait_for_needs(self, tr: _Track, mode: str) -> bool:
        deps = self._deps[mode][tr.step.name]
        while True:
            settled = {d: self._settled[d].result() for d in deps if self._settled[d].done()}
            soft = self._soft[mode].get(tr.step.name, frozenset())
            bad = [d for d, st in settled.items() if st not in _OK[mode] and d not in soft]
            if bad:
                first = self._steps[bad[0]]
                self._set_state(tr, S.BLOCKED,
                                f"blocked: {self._title(first)} {settled[bad[0]].value}")
                return False
            along = tr.step.alongside if mode == "up" else ()
            waiting = [d for d in deps if d not in settled and d not in along]
            if not waiting:
                return True
            titles = ", ".join(self._title(self._steps[d]) for d in waiting)
            self._set_state(tr, S.WAITING, f"waits: {titles}")
            await asyncio.wait([self._settled[d] for d in waiting],
                               return_when=asyncio.FIRST_COMPLETED)

    async def _attempts(self, tr: _Track, once: Callable[[_Track, StepOutput],
                                                          Awaitable[tuple[StepState, str]]]
                        ) -> tuple[StepState, str]:
        policy = self._retry
        attempts = max(1, min(policy.attempts, tr.step.max_attempts or policy.attempts))
        for attempt in range(1, attempts + 1):
            tr.attempts = attempt
            out = StepOutput(lambda kind, value: self._on_output(tr, kind, value),
                             keep=LINES_KEPT)
            try:
                return await once(tr, out)
            except asyncio.CancelledError:
                raise
            except PermanentError as exc:
                return S.FAILED, _describe(exc)
            except Kept as exc:    # down: there, but not rltui's (Step.destroy)
                return S.SKIPPED, str(exc)
            except Exception as exc:
                if not policy.is_transient(exc):
                    log.warning("step %s failed", tr.step.name, exc_info=exc)
                    return S.FAILED, _describe(exc)
                if attempt >= attempts:
                    return S.FAILED, (f"gave up after {attempt} attempts: {_describe(exc)}. "
                                      "Run it again to continue; finished steps are kept.")
                wait = (exc.retry_after_s if isinstance(exc, TransientError)
                        and exc.retry_after_s is not None else policy.delay_s(attempt))
                self._set_message(tr, f"attempt {attempt}/{attempts} failed: "
                                      f"{_describe(exc)}; retrying in {wait:.1f} s")
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def _up_once(self, tr: _Track, out: StepOutput) -> tuple[StepState, str]:
        self._set_state(tr, S.RUNNING, "checking what exists")
        probe = await tr.step.probe(self._ctx)
        out.probe = probe
        if probe.exists and probe.ready and not probe.reapply:
            return (S.DONE if tr.applied else S.EXISTED), (probe.detail or "already there")
        doing = (f"exists, not ready yet: {probe.detail}" if probe.exists
                 else probe.detail or "creating")
        self._set_message(tr, doing)
        async with self._locked(tr, S.RUNNING, doing):
            tr.applied = True
            await tr.step.apply(self._ctx, out)
        return S.DONE, "done"

    async def _down_once(self, tr: _Track, out: StepOutput) -> tuple[StepState, str]:
        self._set_state(tr, S.RUNNING, "checking what exists")
        probe = await tr.step.down_probe(self._ctx)
        out.probe = probe
        if not probe.exists:
            return (S.DESTROYED if tr.applied else S.ABSENT), (probe.detail or "nothing to delete")
        async with self._locked(tr, S.DESTROYING, "deleting"):
            tr.applied = True
            self._set_state(tr, S.DESTROYING, "deleting")   # not the probe's (up) words
            said = await tr.step.destroy(self._ctx, out)
        return S.DESTROYED, said or "deleted"

    @contextlib.asynccontextmanager
    async def _locked(self, tr: _Track, active: StepState, doing: str) -> AsyncIterator[None]:
        """Take the step's locks in name order (no deadlock); WAITING names the holder."""
        async with contextlib.AsyncExitStack() as stack:
            for name in sorted(set(tr.step.locks)):
                lock = self._locks.setdefault(name, asyncio.Lock())
                if lock.locked():
                    holder = self._holders.get(name)
                    holder = self._title(self._steps[holder]) if holder else "another step"
                    self._set_state(tr, S.WAITING, f"waits for {name}: held by {holder}")
                await stack.enter_async_context(lock)
                self._holders[name] = tr.step.name
                stack.callback(self._holders.pop, name, None)
            if tr.state is S.WAITING:
                self._set_state(tr, active, doing)
            tr.holding = True
            try:
                yield
            finally:
                tr.holding = False

    # ---- state, events, persistence -------------------------------------------------
    def _expected(self, tr: _Track, mode: str | None = None) -> float:
        step = tr.step
        if (mode or self._mode) == "down":
            if not step.destroyable:
                return 0.0
            if step.destroy_expected_s is not None:
                return float(step.destroy_expected_s)
        return float(step.expected_s)

    def _elapsed(self, tr: _Track) -> float:
        if tr.started is None:
            return 0.0
        return (tr.finished if tr.finished is not None else self._clock()) - tr.started

    def _set_state(self, tr: _Track, state: StepState, message: str, *, save: bool = True) -> None:
        if state is tr.state:
            self._set_message(tr, message)
            return
        now = self._clock()
        if state in _ACTIVE:
            if tr.started is None:
                tr.started, tr.started_at = now, self._wall()
            if tr.state not in _ACTIVE:
                tr.active_since = now
        if state.terminal:
            tr.finished, tr.finished_at = now, self._wall()
            if state in _OK[self._mode] and tr.progress is not None:
                tr.progress = 1.0
        tr.state, tr.message = state, message
        self._emit(tr, "state")
        if save:
            self._save()

    def _set_message(self, tr: _Track, message: str) -> None:
        if message != tr.message:
            tr.message = message
            self._emit(tr, "note")

    def _on_output(self, tr: _Track, kind: str, value: Any) -> None:
        if kind == "line":
            tr.lines.append(value)
            self._emit(tr, "line", line=value)
        elif kind == "progress":
            tr.progress = value
            self._emit(tr, "progress")
        elif kind == "note":
            self._set_message(tr, value)

    def _emit(self, tr: _Track, kind: str, line: str | None = None) -> None:
        if self.listener is None:
            return
        event = RunEvent(tr.step.name, self._title(tr.step), tr.state, self._wall(),
                         self._elapsed(tr), self._expected(tr), tr.message, tr.progress, line,
                         kind)
        try:
            self.listener(event)
        except Exception:
            log.exception("run listener failed on %s", event)

    def _save(self) -> None:
        if self._store is None or self._record is None:
            return
        rec = self._record
        rec.updated_at = self._wall()
        rec.steps = {n: StepProgress(t.state, t.step.title, t.started_at, t.finished_at,
                                   t.attempts, t.message) for n, t in self._tracks.items()}
        try:
            self._store.save(rec)
        except OSError as exc:   # informational file: never fail a run over it
            log.warning("cannot save progress to %s: %s", self._store.path, exc)

    def _finish(self, outcome: str) -> None:
        if self._record is not None:
            self._record.outcome = outcome
            self._save()

    # ---- what a UI asks ------------------------------------------------------------
    def snapshot(self) -> list[StepView]:
        return [StepView(n, t.step.title, t.state, self._elapsed(t), self._expected(t),
                         t.message, t.progress, tuple(t.lines), tuple(t.step.needs),
                         t.step.command(), t.attempts)
                for n in self._order for t in (self._tracks[n],)]

    def critical_path(self, mode: str | None = None) -> list[str]:
        """The chain of unfinished steps that decides when the run ends, first to last.
        `mode` ("up"/"down") other than the current run's: a whole fresh run of that kind."""
        return self._forecast(mode)[1]

    def eta_s(self, mode: str | None = None) -> float | None:
        """Seconds until the current (or last) run ends: 0.0 when it has; None if a failure
        means it cannot. `mode` as for critical_path()."""
        return self._forecast(mode)[0]

    def _forecast(self, mode: str | None) -> tuple[float | None, list[str]]:
        """Simulate the rest of the run: steps start when needs finish and locks are free,
        longest remaining tail first; running steps count what is left of their expected time."""
        fresh = mode is not None and mode != self._mode
        mode = mode or self._mode
        if mode not in _OK:
            raise ValueError(f"mode must be 'up' or 'down', not {mode!r}")
        plan = [n for n in self._order if mode == "down" or self._steps[n].made_by_up] if fresh else self._plan
        tracks = {n: _Track(self._steps[n]) for n in plan} if fresh else self._tracks
        deps, ok, now = self._deps[mode], _OK[mode], self._clock()
        dead: set[str] = set()
        for n in _topo(plan, deps):
            if tracks[n].state in (S.FAILED, S.BLOCKED) or any(d in dead for d in deps[n]):
                dead.add(n)
        finish = {n: 0.0 for n in plan if tracks[n].state in ok}
        todo = [n for n in plan if n not in finish and n not in dead]
        rem = {n: self._remaining(tracks[n], now, mode) for n in todo}
        tail: dict[str, float] = {}
        for n in reversed(_topo(todo, deps)):
            after = [tail[m] for m in todo if n in deps[m] and m in tail]
            tail[n] = rem[n] + max(after, default=0.0)
        locks = {n: sorted(set(self._steps[n].locks)) for n in todo}
        busy: dict[str, str] = {}
        released: dict[str, tuple[float, str]] = {}
        active: dict[str, float] = {}
        pred: dict[str, str | None] = {}
        for n in todo:
            if tracks[n].state in _ACTIVE:
                active[n], pred[n] = rem[n], None
                if tracks[n].holding:
                    busy.update((lk, n) for lk in locks[n])
        waiting = sorted((n for n in todo if n not in active),
                         key=lambda n: (-tail[n], self._order.index(n)))
        t = 0.0
        while waiting or active:
            for n in list(waiting):
                if all(d in finish for d in deps[n]) and not any(lk in busy for lk in locks[n]):
                    cands = [(finish[d], d) for d in deps[n]]
                    cands += [released[lk] for lk in locks[n] if lk in released]
                    at, who = max(cands, default=(0.0, None))
                    pred[n] = who if at > 0 else None
                    active[n] = t + rem[n]
                    busy.update((lk, n) for lk in locks[n])
                    waiting.remove(n)
            if not active:
                break
            t = min(active.values())
            for n in [n for n, end in active.items() if end <= t]:
                del active[n]
                finish[n] = t
                for lk in locks[n]:
                    if busy.get(lk) == n:
                        del busy[lk]
                        released[lk] = (t, n)
        ends = [(finish[n], -self._order.index(n), n) for n in todo if n in finish]
        eta = max((e[0] for e in ends), default=0.0)
        path: list[str] = []
        cur = max(ends)[2] if ends and eta > 0 else None
        while cur is not None:
            path.append(cur)
            cur = pred.get(cur)
        path = [n for n in reversed(path) if rem.get(n, 0.0) > 0]
        return (None if dead else eta), path

    def _remaining(self, tr: _Track, now: float, mode: str) -> float:
        expected = self._expected(tr, mode)
        if tr.state in _ACTIVE:
            ran = now - (tr.active_since if tr.active_since is not None else now)
            return max(expected - ran, OVERRUN_FLOOR * expected)
        return expected
