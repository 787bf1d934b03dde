"""The wizard: seven screens over the codelab's steps, fed by workers, never blocking a frame.

Screens subscribe to the app's signals (`app.bus`) and ask the app for actions; the app runs
every blocking call in a worker, publishes the results, and handles worker errors in one
place. Without a session (snapshot tests) nothing runs: tests publish deterministic data.

Keys avoid what a browser-based Cloud Shell keeps for itself (ctrl+n/t/w, ctrl+tab,
ctrl+1..9, alt+1..9, F1, F5, F6, F11, F12).
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from .bus import LOG_REPLAY_LINES, Bus
from .oncluster.jobstatus import FINAL, SETTLED
from .screens import PAGES, SCREENS
from .seam import JobStatusUpdate, Notice, WizardSession
from .widgets.chrome import CostInfo, HeaderInfo, JobHeadline
from .widgets.inputframe import INPUT_EVENTS
from .widgets.textual_compat import mark_css_current, screen_stacks

if TYPE_CHECKING:
    from .jobfeed import JobUpdate
    from .joblog import CheckpointEvent, TrainingStep
    from .plan.inventory import Resource
    from .plan.jobs import FolderChoice
    from .plan.runner import RunEvent
    from .saves import Save
    from .session import ConfigState
    from .widgets.textual_compat import CSSPathType


# Batched writes to the log pane (a burst of lines is one message), five a second: each
# redraws every row of the pane, and a key's frame waits behind the one being drawn.
LOG_FLUSH_S = 0.2
SIDE_EVERY_S = 0.5  # the steps, checkpoints and header beside it
FULL_GC_EVERY = 100  # gc.set_threshold's third: young collections between two full ones


def _screen_factory(module: str, cls: str) -> Callable[[], Screen[Any]]:
    def make() -> Screen[Any]:
        screen: Screen[Any] = getattr(importlib.import_module(f"rltui.screens.{module}"), cls)()
        if not any(screen_stacks(screen.app).values()):
            # The first screen: App._init_mode would parse every stylesheet a second time (the
            # new screen's CSS count is behind the app's), though the app's start-up, which
            # set the theme, has one refresh of the CSS pending for the same frame.
            mark_css_current(screen)
        return screen
    return make


_HERE = Path(__file__).parent


class RLTuiApp(App[None]):
    # The chrome, and Start's rules: the first frame needs them. Each other screen loads its
    # own (screens/<name>.tcss) when first built; absolute, as Textual resolves relative paths
    # beside a subclass's module.
    CSS_PATH: ClassVar[CSSPathType | None] = [str(_HERE / "chrome.tcss"), str(_HERE / "screens" / "start.tcss")]
    TITLE = "rltui"
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {
        mode: _screen_factory(module, cls) for mode, _t, module, cls, _k in SCREENS}
    DEFAULT_MODE = "start"
    BINDINGS: ClassVar[list[BindingType]] = [
        *(Binding(key, f"switch_mode('{mode}')", title, show=False, priority=True)
          for mode, title, _m, _c, key in SCREENS),
        Binding("ctrl+q", "quit", "quit", priority=True),
        Binding("[", "page(-1)", "prev"),
        Binding("]", "page(1)", "next"),
        # F1 too: while an input has focus, ? is typed into it (the footer then shows F1).
        Binding("question_mark", "help", "help"),
        Binding("f1", "help", "help", key_display="F1"),
    ]

    def __init__(self, session: WizardSession | None = None, *, header: HeaderInfo | None = None) -> None:
        super().__init__()
        self.session = session   # None: nothing runs (snapshot tests publish what screens show)
        self.bus = Bus(self)
        self.header_info = header or HeaderInfo()
        self._log_buffer: list[str] = []
        self._step_records: dict[int, TrainingStep] = {}   # parsed, not yet published
        self._checkpoints: list[CheckpointEvent] = []
        self._saves: dict[int, Save] = {}   # the followed job's saves by step, as followed
        self._saves_changed = False         # since the last flush
        self._side_at = 0.0   # when steps and checkpoints were last published
        self._job = JobHeadline(lambda job: self.set_header(job=job))   # the header's job
        self.input_at = float("-inf")   # the last key or click (widgets/inputframe.py)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, INPUT_EVENTS) and not event.is_forwarded:
            self.input_at = time.monotonic()
        await super().on_event(event)

    @property
    def live_session(self) -> WizardSession:
        """The session, for what runs only with one (without one, the call fails as a worker's)."""
        if self.session is None:
            raise LookupError("no session: this wizard shows only what is published to it")
        return self.session

    # --- navigation, help, palette ---

    def action_page(self, delta: int) -> None:
        modes = [m for m, _ in PAGES]
        self.switch_mode(modes[(modes.index(self.current_mode) + delta) % len(modes)])

    async def action_quit(self) -> None:
        """ctrl+q. While a detached xpk runs, or a form holds unsaved edits, it asks first in a
        modal that stays until answered (ctrl+q there quits). Quitting never stops xpk."""
        from .screens.quit_prompt import QuitPrompt

        bg = self.session.background() if self.session is not None else None
        unsaved = self.unsaved_forms()
        if isinstance(self.screen, QuitPrompt) or (bg is None and not unsaved):
            self.exit()
            return
        self.push_screen(QuitPrompt(unsaved, bg.described if bg is not None else ""),
                         lambda quit: self.exit() if quit else None)

    def built_screen(self, mode: str) -> Screen[Any] | None:
        """The mode's own screen if it was built yet (modes are built on first visit)."""
        return next(iter(screen_stacks(self).get(mode, [])), None)

    def unsaved_forms(self) -> list[str]:
        """The form screens (Configure, Job) built so far that hold edits not yet saved."""
        titles = dict(PAGES)
        found = [(mode, getattr(self.built_screen(mode), "changes", None)) for mode in ("configure", "job")]
        return [titles[mode] for mode, changes in found if callable(changes) and changes()]

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from getattr(screen, "system_commands", lambda: ())()
        yield from getattr(screen, "pane_commands", lambda: ())()  # screens/base.py
        for mode, title, _m, _c, key in SCREENS:
            yield SystemCommand(f"Go to {title}", f"Switch to the {title} screen ({key.upper()})",
                                partial(self.switch_mode, mode))
        def on_screen(mode: str, action: str) -> Callable[[], object]:
            async def run() -> None:
                await self.switch_mode(mode)
                getattr(self.screen, action)()
            return partial(self.call_later, run)

        actions: list[tuple[str, str, Callable[[], object]]] = [
            ("Provision: run / retry", "Create what is missing; every run re-probes and continues",
             on_screen("provision", "action_run")),
            ("Provision: skip the selected step", "Run without it and every step that needs it",
             on_screen("provision", "action_skip")),
            ("Teardown: delete all", "Only after typing the cluster name on the Teardown screen",
             on_screen("teardown", "action_delete_all")),
            ("Job: submit", "Submit the GRPO job (after the form's checks; ctrl+g on Job)",
             on_screen("job", "submit")),
            ("Job: resubmit to resume", "Resume from the newest checkpoint", on_screen("job", "resubmit")),
            ("Monitor: follow the job's logs", "Tail the Ray job logs", self.follow_logs),
            ("Teardown: ask again", "Ask the cloud what exists now (ctrl+u on Teardown)",
             self.refresh_inventory),
            ("Metrics: refresh now", "Ask Cloud Monitoring for the Lustre and GPU points now", self.poll_metrics),
            ("Preflight: check again", "Re-run the preflight checks", self.run_preflight),
            ("Help", "Keys and screens", self.action_help),
        ]
        for title, help, callback in actions:
            yield SystemCommand(title, help, callback)

    # --- life cycle ---

    def on_mount(self) -> None:
        self.set_interval(LOG_FLUSH_S, self._flush_logs)
        # The header's job from the topics the screens read: the newest answer wins for all.
        self.bus.job_status.subscribe(self, self._job.status)
        self.bus.step_records.subscribe(self, self._job.records)
        if self.session is None:
            return
        # Once the first frame is out: the worker's imports would hold the GIL.
        self.call_after_refresh(self._boot)

    @work(thread=True, exclusive=True, group="boot", exit_on_error=False)
    def _boot(self) -> None:
        """After the first frame: read env.sh, find (or start) the endpoints, ask the cloud."""
        state = self.live_session.config_state()  # the first use builds the Session (cli.py)
        self.call_from_thread(self._show_config, state)
        label = self.live_session.endpoints.label
        self.call_from_thread(self._booted, label)

    def _booted(self, label: str) -> None:
        self.set_header(mode=label)
        self.publish_plan()
        self.run_preflight()
        self.refresh_inventory()
        self.probe_plan()
        self._resume_background()

    def _resume_background(self) -> None:
        """A detached xpk from an earlier rltui still runs: resume its operation (up for a
        create, down for a delete) so Provision or Teardown streams it."""
        bg = self.live_session.background()
        if bg is None:
            return
        mode = "provision" if bg.verb == "create" else "teardown"
        self.switch_mode(mode)
        if mode == "provision":
            self.start_provision()
        else:
            self.start_teardown()
        self.notify(f"re-attached to {bg.described}: its log is {bg.log}", title=mode.title(),
                    timeout=10)

    def set_header(self, **changes: Any) -> None:
        from dataclasses import replace

        self.header_info = replace(self.header_info, **changes)
        self.bus.header.publish(self.header_info)

    def _publish_config(self) -> None:
        self._show_config(self.live_session.config_state())
        self.publish_plan()

    def _show_config(self, state: ConfigState) -> None:
        self.set_header(project=state.values.get("PROJECT_ID", ""),
                        cluster=state.values.get("CLUSTER_NAME", ""))
        self.bus.config.publish(state)

    @property
    def downloads_models(self) -> bool | None:
        """Whether a submitted job downloads the model (so needs HF_TOKEN): the endpoints'
        capability, None while not known (no session, or its endpoints not built yet)."""
        return None if self.session is None else self.session.downloads_models

    def save_config(self, values: dict[str, str]) -> None:
        """Write the form's values (secrets included) to env.sh and republish the config."""
        path = self.live_session.save_env(values)
        self.notify(f"saved {path} (mode 0600)", title="env.sh")
        self._publish_config()

    def reload_config(self) -> None:
        self.live_session.load_env()
        self._publish_config()

    def publish_plan(self) -> None:
        """The plan as the Provision screen draws it: steps, critical path, ETA (no I/O)."""
        if self.session is None or self.session.cfg is None:
            return
        self.bus.plan.publish(self.session.plan_view())

    def _on_run_event(self, event: RunEvent) -> None:
        self.bus.run_event.publish(event)
        if event.kind in ("state", "note", "progress"):
            self.publish_plan()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures surface: a notification, never a traceback."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            message = getattr(error, "message", None) or str(error) or type(error).__name__
            self.notify(message.splitlines()[0][:300], title=event.worker.group or "error",
                        severity="error", timeout=10)
            self.bus.notice.publish(Notice("error", event.worker.group, message))

    # --- workers: each publishes what it learns ---

    @work(exclusive=True, group="preflight", exit_on_error=False)
    async def run_preflight(self) -> None:
        self.bus.preflight.publish(await self.live_session.preflight())

    @work(exclusive=True, group="inventory", exit_on_error=False)
    async def refresh_inventory(self) -> None:
        if self.live_session.cfg is None:
            return  # nothing to look for until env.sh is valid (Configure says what to fix)
        resources = await self.live_session.inventory()
        self.bus.inventory.publish(resources)
        self.refresh_cost(resources)  # the cost meter, then the header's total (Session.cost)
        # Reopened on a running deployment: resume watching it (not while it is being deleted).
        if any(r.kind == "RayCluster" and r.present for r in resources) and \
                not self._busy("teardown"):
            if not self._busy("pods"):
                self.watch_pods()
            last = self.bus.job_status.last
            if self.live_session.last_job_id() and not self._busy("logs") and \
                    (last is None or last.status not in FINAL):
                self.follow_logs()

    @work(exclusive=True, group="cost", exit_on_error=False)
    async def refresh_cost(self, resources: list[Resource]) -> None:
        est = await self.live_session.cost(resources)
        self.set_header(cost=CostInfo.of(est))  # first: Teardown reads it when `cost` comes
        self.bus.cost.publish(est)

    @work(exclusive=True, group="probe", exit_on_error=False)
    async def probe_plan(self) -> None:
        """The plan's states from the cloud's answers (reopened mid-provision, Provision shows
        what exists as done without a key press); never during a run, whose states are newer."""
        if self.live_session.cfg is None or self._busy("provision", "teardown"):
            return
        await self.live_session.probe_plan()
        if not self._busy("provision", "teardown"):
            self.publish_plan()

    def _busy(self, *groups: str) -> bool:
        return any(w.group in groups and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
                   for w in self.workers)

    def start_provision(self, skip: frozenset[str] = frozenset()) -> None:
        """Run the plan, unless a run or a teardown is going (a second call would cancel it)."""
        if self._busy("provision", "teardown"):
            self.notify("a run is in progress: wait for it to end", title="Provision")
            return
        self._provision(skip)

    def start_teardown(self, export_to: str | None = None) -> None:
        """Teardown; with `export_to` (gs://BUCKET/PREFIX/) the checkpoints are exported first."""
        if self._busy("provision", "teardown"):
            self.notify("a run is in progress: wait for it to end", title="Teardown")
            return
        self._teardown(export_to)

    @work(exclusive=True, group="provision", exit_on_error=False)
    async def _provision(self, skip: frozenset[str] = frozenset()) -> None:
        targets = self.live_session.runner(self._on_run_event).targets_without(skip) if skip else None
        result = await self.live_session.up(self._on_run_event, targets)
        self.bus.run_result.publish(result)
        self.publish_plan()
        self.run_preflight()   # Start: APIs enabled, credentials written, by this run
        if result.ok:
            self.notify("RayCluster ready; the dashboard answers", title="Provision")
            self.refresh_inventory()
            self.watch_pods()

    @work(exclusive=True, group="teardown", exit_on_error=False)
    async def _teardown(self, export_to: str | None = None) -> None:
        result = await self.live_session.down(self.bus.teardown_event.publish, export_to)
        self.bus.run_result.publish(result)
        self.publish_plan()
        self.refresh_inventory()
        self.run_preflight()
        if result.states.get("raycluster") is not None and \
                result.states["raycluster"].value in ("destroyed", "absent"):
            self.reset_job(None)   # its jobs went with the RayCluster
            self.forget_cluster()

    def forget_cluster(self) -> None:
        """The RayCluster (and the GKE cluster) are gone: stop watching them (a watch of a
        deleted cluster only retries into errors) and clear what the screens show of them."""
        from .cloud.kube import KubeEvent

        for worker in self.workers:
            if worker.group in ("pods", "raycluster", "dashboard", "kube_events", "pod_log"):
                worker.cancel()
        self.bus.pod_event.history.clear()
        self.bus.pod_event.publish(KubeEvent("RESET", {}))
        self.bus.raycluster.publish({})
        self.bus.kube_events.publish([])

    def reset_job(self, job_id: str | None) -> None:
        """A new job (or none, after teardown): the old one's log, steps and saves leave every
        screen. Streams forget their history so a screen built later does not replay them."""
        for name in ("logs", "run"):
            for worker in self.workers:
                if worker.group == name:
                    worker.cancel()
        self._log_buffer, self._step_records, self._checkpoints = [], {}, []
        for topic in (self.bus.log_lines, self.bus.step_records, self.bus.checkpoints):
            topic.history.clear()
        self._saves, self._saves_changed = {}, False
        self.bus.saves.publish([])   # screens drop the old job's saves on the reset below
        self.bus.job_status.publish(JobStatusUpdate(job_id, "PENDING" if job_id else "", reset=True))

    @work(exclusive=True, group="job", exit_on_error=False)
    async def submit_job(self, resume: bool = False, new_folder: bool = False) -> None:
        from .plan.jobs import FolderChoice

        try:
            job_id = await self.live_session.submit(resume, new_folder)
        except FolderChoice as found:  # the folder holds checkpoints on the volume: ask
            self.ask_checkpoint_folder(found)
            return
        self.notify(f"submitted {job_id}", title="Job")
        self.reset_job(job_id)
        self.follow_logs()

    def ask_checkpoint_folder(self, found: FolderChoice) -> None:
        """Resume from the newest step or start a new run in a fresh folder (a modal; Escape
        submits nothing); the answer submits again, and the volume is asked again."""
        from .screens.checkpoint_prompt import NEW, RESUME, CheckpointPrompt

        def answered(answer: str | None) -> None:
            if answer in (RESUME, NEW):
                self.submit_job(resume=answer == RESUME, new_folder=answer == NEW)

        self.push_screen(CheckpointPrompt(found), answered)

    @work(exclusive=True, group="logs", exit_on_error=False)
    async def follow_logs(self) -> None:
        import gc

        # Once a process, at the first text (the follower's clients exist by then): what lives
        # then (imports, screens, clients) leaves the cyclic collector's scans ("gc.freeze",
        # Python docs, gc module): full collections over it set the keys' p95 in a log burst.
        # Refcounting still frees plain garbage.
        # (get_freeze_count walks the frozen list: asked once here, not per delivery.) And a
        # full collection after 100 young ones, not 10, for the few cycles this process makes
        # (a key that met one waited). Figures: docs/decisions/wizard-latency.md.
        freeze = [not gc.get_freeze_count()]

        def on_update(update: JobUpdate) -> None:
            """The log's news, parsed and tracked where it arrived (the cloud worker's JobFeed,
            rltui/jobfeed.py); published by the next flush."""
            if freeze[0]:
                freeze[0] = False
                gc.freeze()
                young, middle, _ = gc.get_threshold()
                gc.set_threshold(young, middle, FULL_GC_EVERY)
            buffer = self._log_buffer
            buffer.extend(update.lines)
            if len(buffer) > 2 * LOG_REPLAY_LINES:  # a stalled flush: only the newest can show
                del buffer[: len(buffer) - LOG_REPLAY_LINES]
            for record in update.records:  # the newest version of each step
                self._step_records.pop(record.global_step, None)
                self._step_records[record.global_step] = record
            self._checkpoints.extend(update.checkpoints)
            if update.changed_saves:
                for save in update.changed_saves:
                    self._saves[save.step] = save
                self._saves_changed = True

        self._saves, self._saves_changed = {}, False  # this follow's: its worker sends changes
        self.bus.job_status.publish(JobStatusUpdate(self.live_session.last_job_id(), "RUNNING"))
        self.poll_run()
        final, _last = await self.live_session.follow_job(on_update)
        self._flush_logs(final=True)
        self.bus.job_status.publish(JobStatusUpdate(self.live_session.last_job_id(), final))

    @work(exclusive=True, group="run", exit_on_error=False)
    async def poll_run(self) -> None:
        """The supervisor's record of the run (attempts, RECOVERING, the newest recovery, the
        budget guard), until it is final and its guard idle; polls never overlap. A job without
        a supervisor has no record to poll (its status comes from the log follower)."""
        if not self.live_session.last_job_supervised():
            return
        while True:
            try:
                summary = await self.live_session.job_summary()
            except Exception as exc:  # noqa: BLE001 - keep polling; say it once in the notices
                self.bus.notice.publish(Notice("warning", "run", str(exc)[:300]))
                summary = None
            if summary is not None and summary.get("attempts"):
                guard = summary.get("guard") or {}
                self.bus.job_status.publish(JobStatusUpdate(
                    summary["id"], summary["status"], recovery=summary.get("recovery") or "",
                    guard=guard.get("line") or "", guard_short=guard.get("short") or ""))
                if summary["status"] in SETTLED and not guard.get("pending"):
                    return  # nothing left to learn (a budget guard may still be at work)
            await asyncio.sleep(max(2.0, 30.0 * self.live_session.endpoints.time_scale))

    def _flush_logs(self, final: bool = False) -> None:
        """What the follower brought since the last flush: the lines as one batch, at most 5
        times a second (LOG_FLUSH_S); at most twice a second, each changed step once (its newest
        version, in the order steps changed) and the checkpoints, each as one batch, and the
        header. In a burst the strip, the checkpoints and the header repainted with every
        batch of lines, and a key's frame waited behind them, as it did behind a message per
        step (docs/decisions/wizard-latency.md). Nobody reads a
        step count that changes ten times a second."""
        if self._log_buffer:
            batch, self._log_buffer = self._log_buffer, []
            self.bus.log_lines.publish(batch)
        now = time.monotonic()
        if not (final or now - self._side_at >= SIDE_EVERY_S):
            return
        if self._step_records or self._checkpoints:
            self._side_at = now
        if self._step_records:
            records, self._step_records = list(self._step_records.values()), {}
            self.bus.step_records.publish(records)   # the header follows (JobHeadline)
        if self._checkpoints:
            checkpoints, self._checkpoints = self._checkpoints, []
            self.bus.checkpoints.publish(checkpoints)
        if self._saves_changed:
            self._saves_changed = False
            self.bus.saves.publish([self._saves[k] for k in sorted(self._saves)])

    @work(exclusive=True, group="pods", exit_on_error=False)
    async def watch_pods(self) -> None:
        self.watch_kube_events()
        self.watch_raycluster()
        self.find_dashboard()
        self.poll_metrics()  # the pods' GPU use; exclusive, so never twice with Metrics'
        async for event in self.live_session.pod_events():
            self.bus.pod_event.publish(event)

    @work(exclusive=True, group="raycluster", exit_on_error=False)
    async def watch_raycluster(self) -> None:
        """The RayCluster's spec: the pods header counts against its desired size."""
        async for obj in self.live_session.raycluster_events():
            self.bus.raycluster.publish(obj)

    @work(exclusive=True, group="dashboard", exit_on_error=False)
    async def find_dashboard(self) -> None:
        self.bus.dashboard.publish(await self.live_session.dashboard())

    # --- pod actions (Monitor's pods table: logs, describe, delete) ---

    @work(exclusive=True, group="pod_log", exit_on_error=False)
    async def follow_pod_log(self, name: str, sink: Callable[[str], Any],
                             ended: Callable[[str], Any]) -> None:
        """Feed `sink` a pod's log until its container ends or stop_pod_log(); then `ended`
        ("" or what went wrong: the error also goes to the one worker-error handler)."""
        if self.session is None:
            return
        try:
            async for text in self.session.pod_log(name):
                sink(text)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            ended(getattr(exc, "message", None) or str(exc) or type(exc).__name__)
            raise
        ended("")

    def stop_pod_log(self) -> None:
        self.workers.cancel_group(self, "pod_log")

    @work(exclusive=True, group="describe", exit_on_error=False)
    async def describe_pod(self, name: str, sink: Callable[[dict[str, Any] | None, list[dict[str, Any]]], Any],
                           failed: Callable[[str], Any]) -> None:
        """Feed `sink` the pod and its Events, or `failed` what went wrong: the API's words,
        or no answer within poddetail's bound (the call is cancelled then)."""
        from .widgets import poddetail

        if self.session is None:
            return
        bound_s = poddetail.ANSWER_WITHIN_S
        try:
            async with asyncio.timeout(bound_s) as bound:
                answer = await self.session.describe_pod(name)
        except Exception as exc:
            if isinstance(exc, TimeoutError) and bound.expired():
                failed(f"no answer from the API within {bound_s:g} s")
                return
            failed(getattr(exc, "message", None) or str(exc) or type(exc).__name__)
            raise
        sink(*answer)

    @work(group="delete pod", exit_on_error=False)
    async def delete_pod(self, name: str) -> None:
        if self.session is None:
            return
        await self.session.delete_pod(name)
        self.notify(f"{name} deleted: KubeRay creates a replacement; a job running on it sees"
                    " what a preemption looks like", title="Pod deleted", timeout=10)

    @work(exclusive=True, group="kube_events", exit_on_error=False)
    async def watch_kube_events(self) -> None:
        """Recent Kubernetes Events from a watch (one list, then the changes), not a poll."""
        async for batch in self.live_session.kube_events():
            self.bus.kube_events.publish(batch)

    @work(exclusive=True, group="metrics", exit_on_error=False)
    async def poll_metrics(self) -> None:
        """Lustre's points and the pods' GPUs, never overlapping (rltui/metricpoll.py)."""
        from .metricpoll import poll_metrics

        await poll_metrics(self.live_session, self.bus)

    @work(exclusive=True, group="lustre", exit_on_error=False)
    async def poll_lustre(self) -> None:
        """The Lustre instance (state, IP, mount point, capacity, tier) for the Metrics panel,
        now and every reference minute (2 s at least); polls never overlap, and a failed one
        says so in the notices and goes on."""
        while True:
            try:
                self.bus.lustre.publish(await self.live_session.lustre_instance())
            except Exception as exc:  # noqa: BLE001 - keep polling; say it in the notices
                self.bus.notice.publish(Notice("warning", "lustre", str(exc)[:300]))
            await asyncio.sleep(max(2.0, 60.0 * self.live_session.endpoints.time_scale))

    async def on_unmount(self) -> None:
        # Quitting never stops cloud operations; only local connections close.
        if self.session is not None:
            await self.session.close()
