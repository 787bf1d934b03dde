"""Provision: the step graph as a list, what runs together, the selected step's output and
its equivalent command; run, retry, skip.

Renders the app's `plan` (PlanView) and appends `run_event` lines of the selected step.
Until the user picks a step, the selection follows the action: a failed step, else the first
running one.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Log, Static

from ..plan.runner import LINES_KEPT, RunEvent, RunResult, StepView
from ..plan.step import StepState
from ..plan.view import PlanView, fmt_s, on_gke
from ..widgets.steps import ACTIVE, StepsView, short_title
from .base import WizardScreen, stylesheet

S = StepState
FLUSH_S = 0.1                      # output lines reach the pane in batches
STALE_S = 15.0                     # shown again after this long: probe the plan again
LOG_REBUILD_AT = 4 * LINES_KEPT    # the pane keeps at most this many lines, then restarts
_RETRY = frozenset({S.FAILED, S.INTERRUPTED, S.BLOCKED})
_DOWN = frozenset({S.DESTROYING, S.DESTROYED, S.ABSENT})


def critical_path_text(plan: PlanView, titles: dict[str, str], elapsed_s: float = 0.0) -> str:
    """ "ready in about 14 min · critical path: xpk cluster create → Addons → RayCluster ready" """
    states = [s.state for s in plan.steps]
    if any(s in _DOWN for s in states):   # the runner's last run was a teardown
        return ("tearing down (Teardown, F10)" if plan.running else
                "the last run was a teardown: ctrl+r creates everything again")
    if plan.eta_s is None:
        when = "once this run ends, " if plan.running else ""
        return (f"a failed step blocks the RayCluster: {when}retry (ctrl+r) re-probes and "
                "continues, or skip it (ctrl+k)")
    if plan.eta_s <= 0 and not plan.running:
        return "everything is ready" if states else ""
    path = " → ".join(short_title(titles.get(n, n)) for n in plan.critical_path)
    left = max(0.0, plan.eta_s - (elapsed_s if plan.running else 0.0))
    minutes = "under a minute" if left < 60 else f"about {math.ceil(left / 60)} min"
    gke = on_gke(left, plan.time_scale)
    if gke:
        minutes += f" here (~{gke} on GKE)"
    if plan.running:
        when = f"ready in {minutes}"
    elif all(s is S.PENDING for s in states):
        when = f"a run takes {minutes}"
    else:
        when = f"{minutes} left: ctrl+r continues"
    return f"{when} · critical path: {path}" if path else when


class OutputLog(Log):
    """The selected step's output. It follows the newest line, also when its size changes
    (below 110 columns its height comes from the steps' list above it, laid out after the
    first lines may already have been written: they showed the first line, not the newest)."""

    def on_resize(self) -> None:
        if self.auto_scroll:
            self.scroll_end(animate=False, immediate=True, x_axis=False)


class ProvisionScreen(WizardScreen):
    CSS_PATH = stylesheet(__file__)
    MODE = "provision"
    TITLE = "Provision"
    AUTO_FOCUS = "#steps"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "run / retry", priority=True),
        Binding("ctrl+k", "skip", "skip step", priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.plan: PlanView | None = None
        self._lines: dict[str, deque[str]] = {}
        self._pending: list[str] = []       # lines of the selected step not yet in the pane
        self._shown = 0                     # lines in the pane since its last rebuild
        self._follow = True                 # selection follows the run until the user picks
        self._plan_at = time.monotonic()
        self._now = self._plan_at
        self._probed_at = self._plan_at     # the app probed when it opened

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="provision-body"):
            with Vertical(id="provision-left"):
                with VerticalScroll(id="steps-scroll", can_focus=False):
                    yield StepsView(id="steps", empty="The plan appears here once env.sh is "
                                    "valid (Configure, F3).")
                yield Static("", id="critical-path")
                with Horizontal(id="provision-actions"):
                    yield Button("Run (ctrl+r)", id="run", variant="primary")
                    yield Button("Skip selected (ctrl+k)", id="skip")
            with Vertical(id="provision-right"):
                yield Static("Output", id="output-title")
                yield OutputLog(id="output", highlight=False)
                yield Static("equivalent command", id="command-title")
                yield Static("", id="command")

    def on_mount(self) -> None:
        bus = self.wizard.bus
        bus.plan.subscribe(self, self._on_plan)
        bus.run_event.subscribe(self, self._on_run_event)
        bus.run_result.subscribe(self, self._on_run_result)
        self.set_interval(FLUSH_S, self._flush)
        self.set_interval(StepsView.TICK_S, self._tick)
        self._refresh_actions()

    def on_screen_resume(self) -> None:
        # Shown again after a while: ask the cloud what exists (a dozen calls, so not on every
        # switch; not during a run: its states are newer).
        if self.plan is not None and not self.plan.running and self.wizard.session is not None \
                and time.monotonic() - self._probed_at > STALE_S:
            self._probed_at = time.monotonic()
            self.wizard.probe_plan()

    def pane_text(self) -> tuple[str, list[str]] | None:
        """ctrl+o / ctrl+y: the selected step's output, then its equivalent command."""
        steps = self.query_one(StepsView)
        view = steps.view(steps.selected)
        if view is None:
            return None
        lines = list(self._lines.get(view.name, ()))
        lines += ["", "equivalent command:", view.command or "(nothing to run)"]
        return f"{view.title}: output and equivalent command", lines

    def copy_text(self) -> tuple[str, str] | None:
        """ctrl+y here copies the selected step's equivalent command (what the codelab runs)."""
        steps = self.query_one(StepsView)
        view = steps.view(steps.selected)
        if view is None or not view.command:
            return None
        return f"the equivalent command of {view.title}", view.command

    # --- data in ---

    def _on_plan(self, plan: PlanView) -> None:
        self.plan, self._plan_at = plan, time.monotonic()
        self._now = self._plan_at
        steps = self.query_one(StepsView)
        steps.set_steps(plan.steps)
        for view in plan.steps:
            # The runner's lines are the truth up to this plan (events arrive in order).
            mine = self._lines.get(view.name, ())
            self._lines[view.name] = deque(view.lines, maxlen=LINES_KEPT)
            if view.name == steps.selected and len(view.lines) < len(mine):
                self._show_output(view.name)   # a new run started over
        if self._follow:
            target = self._follow_target(plan.steps)
            if target is not None and target != steps.selected:
                steps.select(target)
        if steps.selected is None and plan.steps:
            steps.select(plan.steps[0].name)
        self._show_selected_meta()
        self._show_critical_path()
        self._refresh_actions()

    @staticmethod
    def _follow_target(views: tuple[StepView, ...]) -> str | None:
        tests: tuple[Callable[[StepView], bool], ...] = (lambda v: v.state is S.FAILED,
                                                          lambda v: v.state in ACTIVE)
        for wanted in tests:
            hit = next((v.name for v in views if wanted(v)), None)
            if hit is not None:
                return hit
        return None

    def _on_run_event(self, event: RunEvent) -> None:
        if event.kind != "line" or event.line is None:
            return
        self._lines.setdefault(event.step, deque(maxlen=LINES_KEPT)).append(event.line)
        if event.step == self.query_one(StepsView).selected:
            self._pending.append(event.line)

    def _on_run_result(self, result: RunResult) -> None:
        if result.mode != "up":
            return
        if self.plan is not None:   # the last plan was published while the run was still busy
            self.plan = replace(self.plan, running=False)
            self._show_critical_path()
        if result.ok:
            self.query_one("#critical-path", Static).update("everything is ready: the RayCluster "
                                                            "answers (F7 submits the job)")
        self._refresh_actions()

    # --- selection and the output pane ---

    def on_steps_view_selected(self, message: StepsView.Selected) -> None:
        if message.by_user:
            self._follow = False
        self._show_output(message.name)
        self._show_selected_meta()
        self._refresh_actions()

    def _show_output(self, name: str) -> None:
        log = self.query_one("#output", Log)
        log.clear()
        lines = list(self._lines.get(name, ()))
        if lines:
            log.write_lines(lines)
        self._pending, self._shown = [], len(lines)

    def _flush(self) -> None:
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        if self._shown + len(batch) > LOG_REBUILD_AT:
            selected = self.query_one(StepsView).selected
            if selected is not None:
                self._show_output(selected)   # the kept tail already holds this batch
            return
        self.query_one("#output", Log).write_lines(batch)
        self._shown += len(batch)

    def _show_selected_meta(self) -> None:
        steps = self.query_one(StepsView)
        view = steps.view(steps.selected)
        title = self.query_one("#output-title", Static)
        command = self.query_one("#command", Static)
        if view is None:
            title.update("Output")
            command.update("")
            return
        status = "streaming" if view.state in ACTIVE else view.state.value
        attempt = f", attempt {view.attempts}" if view.attempts > 1 else ""
        head = f"{view.title}  ({status}{attempt})"
        scale = self.plan.time_scale if self.plan is not None else 1.0
        shown = view.elapsed_s if view.elapsed_s > 0 else view.expected_s
        gke = on_gke(shown, scale)
        if gke:
            what = "took" if view.elapsed_s > 0 else "expected"
            here = fmt_s(shown) if shown >= 1 else "under a second"
            head += f"  {what} {here} here ~ {gke} on GKE"
        # A row cuts a long message: here it is whole (a running step's too, when its note
        # under the row is cut: "exists, not ready yet: ..." says what the run waits for).
        if view.message and view.state not in (S.DONE, S.DESTROYED) and \
                (view.state not in ACTIVE or not steps.note_fits(view.message)):
            head += f"\n{view.message}"
        title.update(head)
        title.set_class(view.state in (S.FAILED, S.BLOCKED), "failed")
        command.update(view.command or "(nothing to run: rltui checks this itself)")

    # --- the clock ---

    def _tick(self) -> None:
        self._now = time.monotonic()
        if self.plan is not None and self.plan.running:
            self._show_critical_path()

    def _show_critical_path(self) -> None:
        if self.plan is None:
            return
        titles = {v.name: v.title for v in self.plan.steps}
        text = critical_path_text(self.plan, titles, max(0.0, self._now - self._plan_at))
        self.query_one("#critical-path", Static).update(text)

    # --- actions ---

    def _refresh_actions(self) -> None:
        running = bool(self.plan and self.plan.running)
        retry = bool(self.plan and any(v.state in _RETRY for v in self.plan.steps))
        run = self.query_one("#run", Button)
        run.label = "Running…" if running else ("Retry (ctrl+r)" if retry else "Run (ctrl+r)")
        run.disabled = running or self.plan is None
        steps = self.query_one(StepsView)
        view = steps.view(steps.selected)
        skip = self.query_one("#skip", Button)
        skip.disabled = running or view is None
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("run", "skip"):
            if self.plan is None or self.plan.running:
                return None   # shown, greyed: a run is going (starting another would cancel it)
            if action == "skip" and self.query_one(StepsView).selected is None:
                return None
        return True

    def action_run(self) -> None:
        """Run, or retry after a failure: every run re-probes and continues."""
        if self.plan is None or self.plan.running:
            return
        self._start()

    def action_skip(self) -> None:
        """Run without the selected step: it and every step that needs it are left out."""
        name = self.query_one(StepsView).selected
        if self.plan is None or self.plan.running or name is None:
            return
        self._start(skip=frozenset({name}))

    def _start(self, **run: frozenset[str]) -> None:
        """Start the run; with unsaved Configure edits only once the user chose: a run
        provisions what env.sh holds, which silently was not what the form showed."""
        from .configure import ConfigureScreen
        from .run_prompt import RUN_SAVED, SAVE_AND_RUN, RunWithUnsavedEdits

        form = self.wizard.built_screen("configure")
        edits = list(form.changes()) if isinstance(form, ConfigureScreen) else []
        if not isinstance(form, ConfigureScreen) or not edits:
            self.wizard.start_provision(**run)
            return

        def answered(answer: str | None) -> None:
            if answer == RUN_SAVED or (answer == SAVE_AND_RUN and form.action_save()):
                self.wizard.start_provision(**run)

        self.app.push_screen(RunWithUnsavedEdits(edits, form.problems()), answered)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            self.action_run()
        elif event.button.id == "skip":
            self.action_skip()
