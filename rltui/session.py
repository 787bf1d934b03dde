"""The wizard's Session: env.sh, the engine (plan/), the adapters, behind one object. No Textual here.

The app calls these coroutines from workers and publishes what they return on its signals;
screens only render what they receive and ask the app for actions. Quitting the app never
stops cloud operations: they run in the cloud, and reopening re-probes and resumes watching.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import ConfigError, Problem, RLConfig, parse_config
from .envfile import EnvFile, EnvFileError
from .plan.preflight import Check
from .seam import LustreInstance

if TYPE_CHECKING:
    import asyncio

    from .cloud.endpoints import Endpoints
    from .cloud.rayjobs import JobInfo
    from .cost import Estimate, Prices
    from .jobfeed import JobUpdate
    from .joblog import TrainingStep
    from .plan.background import Background
    from .plan.context import Context
    from .plan.inventory import Resource
    from .plan.pods import KubeEvent
    from .plan.runner import RunEvent, Runner, RunResult
    from .plan.view import PlanView
    from .seam import GpuMetrics, LustreMetrics

    Listener = Callable[[RunEvent], None]

__all__ = ["Check", "ConfigState", "Session"]


@dataclass(frozen=True)
class ConfigState:
    """env.sh as the Configure and Job screens show it: values, how they are written, problems.

    Secret values are not here: only whether each is set.
    """
    env_path: str
    values: dict[str, str]
    expressions: dict[str, str]          # e.g. NETWORK_NAME -> "${CLUSTER_NAME}-net-0"
    problems: tuple[Problem, ...]
    secrets_set: dict[str, bool]
    load_error: str = ""


class Session:
    def __init__(self, env_path: Path, endpoints_factory: Callable[[], Endpoints]) -> None:
        self.env_path = Path(env_path)
        self._endpoints_factory = endpoints_factory
        self._endpoints: Endpoints | None = None
        self.env: EnvFile | None = None
        self.cfg: RLConfig | None = None
        self.problems: list[Problem] = []
        self.load_error: str = ""
        self._ctx: Context | None = None
        self._runner: Runner | None = None
        self._prices: asyncio.Future[Prices] | None = None  # the cost meter's, read once (cost)
        self.load_env()

    # --- env.sh ---

    def load_env(self) -> None:
        """(Re)read env.sh; a missing file starts from the codelab's template values."""
        self.problems, self.load_error = [], ""
        try:
            self.env = EnvFile.read(self.env_path) if self.env_path.exists() else EnvFile()
        except EnvFileError as exc:
            self.env, self.load_error = EnvFile(), str(exc)
        self._revalidate()

    def values(self) -> dict[str, str]:
        return self.env.values() if self.env else {}

    def _revalidate(self) -> None:
        try:
            self.cfg = parse_config(self.values())
            self.problems = []
        except ConfigError as exc:
            self.cfg, self.problems = None, exc.problems
        self._ctx = self._runner = self._prices = None  # a new config means a new plan (and prices)

    def config_state(self) -> ConfigState:
        from .config import ENV_FIELDS, SECRET_FIELDS

        values = self.values()
        shown = {k: v for k, v in values.items() if k not in SECRET_FIELDS}
        if self.cfg is not None:  # fill defaults for what env.sh leaves out
            shown = {**self.cfg.env_values(), **shown}
        exprs = {}
        for name in ENV_FIELDS:
            expr = self.env.expression(name) if self.env else None
            if expr and "${" in expr:
                exprs[name] = expr
        from .config import PLACEHOLDER

        def is_set(name: str) -> bool:
            raw = values.get(name, "").strip()
            return bool(raw) and not PLACEHOLDER.match(raw)

        return ConfigState(str(self.env_path), shown, exprs, tuple(self.problems),
                           {k: is_set(k) for k in SECRET_FIELDS}, self.load_error)

    def save_env(self, values: dict[str, str]) -> Path:
        """Write the form's values into env.sh (0600, comments and order kept)."""
        assert self.env is not None
        self.env.update({k: v for k, v in values.items() if v is not None})
        path = self.env.write(self.env_path)
        self._revalidate()
        return path

    # --- endpoints and plan ---

    @property
    def endpoints(self) -> Endpoints:
        if self._endpoints is None:
            self._endpoints = self._endpoints_factory()
        return self._endpoints

    @property
    def downloads_models(self) -> bool | None:
        """Whether a submitted job downloads the model (so needs HF_TOKEN); None until the
        endpoints are built (building them may start a sandbox: never on a screen's behalf)."""
        return None if self._endpoints is None else bool(self._endpoints.downloads_models)

    @property
    def label(self) -> str:
        return self.endpoints.label

    def context(self) -> Context:
        if self.cfg is None:
            raise ConfigError(self.problems or [Problem("env.sh", "not loaded")])
        if self._ctx is None:
            from .plan.context import Context

            self._ctx = Context(self.cfg, self.endpoints)
        return self._ctx

    def runner(self, listener: Listener | None = None) -> Runner:
        """The one runner of this config; `listener` (given by up/down) receives its events."""
        if self._runner is None:
            from .plan.wiring import make_runner

            self._runner = make_runner(self.context(), listener or (lambda ev: None))
        elif listener is not None:
            self._runner.listener = listener
        return self._runner

    def plan_view(self) -> PlanView:
        """The plan as the Provision screen draws it: steps, critical path, ETA (no I/O)."""
        from .plan.view import plan_view

        return plan_view(self.runner(), self.endpoints.time_scale)

    async def up(self, listener: Listener, targets: set[str] | None = None) -> RunResult:
        """The plan; refused at once, before anything is created, without xpk on PATH."""
        from .plan.preflight import xpk_missing
        from .plan.step import PermanentError

        missing = xpk_missing(self.endpoints)
        if missing:
            raise PermanentError(missing)
        return await self.runner(listener).up(targets)

    async def down(self, listener: Callable[[RunEvent | str], None], export_to: str | None = None) -> RunResult:
        """Teardown; `listener` hears the runner's events and, first, lines about a detached xpk
        create it stopped and about stopped jobs. With `export_to` the checkpoints are exported
        there (plan/export.py) once the jobs are stopped, and waited for: a failed export raises
        before anything is deleted."""
        from .plan.background import stop_background
        from .plan.jobs import retire_jobs, stop_jobs
        from .plan.notices import announce_teardown

        if export_to is not None:  # refused before anything is stopped (plan/export.py)
            from .plan.export import ready_to_export

            await ready_to_export(self.context(), export_to)
        await stop_background(self.context(), listener)
        await stop_jobs(self.context(), listener)
        if export_to is not None:
            from .plan.export import export_checkpoints

            listener((await export_checkpoints(self.context(), export_to, out=listener)).line())
        result = await self.runner(listener).down()
        state = result.states.get("raycluster")
        retire_jobs(self.context(), None if state is None else state.value)
        announced = await announce_teardown(self.context(), result)  # NOTIFY_WEBHOOK's torn_down
        if announced:
            listener(announced)
        return result

    async def probe_plan(self) -> None:
        """Ask the cloud which steps' objects exist (no change made): the plan's states as of
        now, for a screen opened on an earlier deployment."""
        await self.runner().probe_all()

    def background(self) -> Background | None:
        """The detached xpk still running for this config (it outlives the wizard), or None.
        Reads a local record and /proc only: cheap enough for a key press."""
        if self.cfg is None:
            return None
        from .plan.background import running_in

        if self._ctx is not None:
            return running_in(self._ctx.xpk_dir)
        from .plan.folders import xpk_subdir
        from .statedir import state_root

        return running_in(state_root() / xpk_subdir(self.cfg.project_id, self.cfg.cluster_name))

    async def inventory(self) -> list[Resource]:
        from .plan.inventory import collect

        return await collect(self.context())

    async def cost(self, resources: list[Resource]) -> Estimate | None:
        """The cost meter's estimate of what exists (None: no prices). The prices are read once
        and shared: an inventory newer than a slow first read (the catalog's Compute Engine
        SKUs take several pages) waits on the same read instead of starting it again; a failed
        or day-old one is read again."""
        import asyncio
        from datetime import UTC, datetime

        from .cost import CACHE_TTL
        from .plan.inventory import cost, prices

        read = self._prices
        if read is None or (read.done() and (read.cancelled() or read.exception() is not None or
                                             datetime.now(UTC) - datetime.fromisoformat(read.result().as_of)
                                             > CACHE_TTL)):
            read = self._prices = asyncio.ensure_future(prices(self.context()))
        return await cost(self.context(), resources, read)

    async def preflight(self) -> list[Check]:
        from .plan.preflight import preflight

        ctx = self.context() if self.cfg is not None else None
        return await preflight(self.env_path, self.cfg, self.problems, self.endpoints, ctx)

    # --- job ---

    def job_files(self, resume: bool = False) -> dict[str, str]:
        from . import manifests

        assert self.cfg is not None
        return manifests.job_files(self.cfg)

    async def submit(self, resume: bool, new_folder: bool = False) -> str:
        """The job's id. A checkpoint folder already holding checkpoints on the Lustre volume,
        with neither `resume` nor `new_folder`, raises plan.jobs.FolderChoice: the wizard asks."""
        from .plan.jobs import submit_job

        return (await submit_job(self.context(), resume=resume, new_folder=new_folder)).job_id

    def last_job_id(self) -> str | None:
        from .plan.jobs import last_job_id

        return last_job_id(self.context())

    def last_job_supervised(self) -> bool:
        """Whether the newest job has a supervisor on the cluster (a local record: no call)."""
        from .plan.jobs import job_records

        jobs = job_records(self.context())
        return bool(jobs) and jobs[-1].supervised

    async def follow_logs(self, on_text: Callable[[str], Any], job_id: str | None = None) -> str:
        from .plan.jobs import Refused, follow_logs

        try:
            return await follow_logs(self.context(), on_text, job_id)
        except Refused:
            raise LookupError("no job submitted yet") from None

    async def follow_parsed(self, on_batch: Callable[[list[str], list[Any], float], Any],
                            job_id: str | None = None) -> str:
        """follow_logs, parsed where the text arrives: for each delivery, its complete lines,
        the parser's events (joblog.JobLogParser, no LogLine: the lines are the lines) and
        when it arrived (a save's moment, rltui/saves.py). In the wizard this runs in its
        cloud worker, so the parse of a burst uses the worker's core, not the keys' one."""
        import time

        from .joblog import JobLogParser

        parser = JobLogParser(log_lines=False)
        partial = [""]

        def on_text(text: str) -> None:
            arrived = time.time()
            lines = (partial[0] + text).split("\n")
            partial[0] = lines.pop()
            on_batch(lines, parser.feed(text), arrived)

        final = await self.follow_logs(on_text, job_id)
        if partial[0]:
            on_batch([partial[0]], [], time.time())
        return final

    async def follow_job(self, on_update: Callable[[JobUpdate], Any],
                         job_id: str | None = None) -> tuple[str, TrainingStep | None]:
        """follow_parsed, tracked where it is parsed (rltui/jobfeed.py): `on_update` gets the
        new lines, the steps they changed, the checkpoints and the saves, at most every 0.1 s.
        Returns the final status and the last step record."""
        import asyncio

        from .jobfeed import JobFeed

        feed = JobFeed(on_update)
        try:
            final = await self.follow_parsed(feed.feed, job_id)
        except asyncio.CancelledError:
            feed.cancel()  # its caller went on (a new job): nothing more of this one
            raise
        except BaseException:
            feed.finish()  # what was read before the failure is shown
            raise
        feed.finish()
        return final, feed.last

    async def job_summary(self) -> dict[str, Any] | None:
        """The newest job's status, step and attempts (a supervised run's from its record)."""
        from .plan.jobs import job_summary

        return await job_summary(self.context())

    async def job_info(self, job_id: str | None = None) -> JobInfo | None:
        from .plan.jobs import job_info

        return await job_info(self.context(), job_id)

    # --- monitor ---

    async def pod_events(self) -> AsyncIterator[KubeEvent]:
        ctx = self.context()
        kube = await ctx.kube()
        async for event in kube.watch("pods", label_selector=f"ray.io/cluster={ctx.cfg.cluster_name}"):
            yield event

    async def kube_events(self) -> AsyncIterator[list[dict[str, Any]]]:
        """The namespace's Kubernetes Events, oldest first, on every change (a watch)."""
        from .plan.pods import event_lists

        kube = await self.context().kube()
        async for events in event_lists(kube.watch("events")):
            yield events

    async def raycluster_events(self) -> AsyncIterator[dict[str, Any]]:
        """The config's RayCluster as a watch sees it: the object on every change, {} while
        there is none (deleted, or not created yet)."""
        ctx = self.context()
        kube = await ctx.kube()
        async for event in kube.watch("rayclusters",
                                      field_selector=f"metadata.name={ctx.cfg.cluster_name}"):
            if event.type == "DELETED" or (event.type == "SYNCED" and not event.obj.get("count")):
                yield {}
            elif event.type != "SYNCED":
                yield event.obj

    async def dashboard(self) -> str:
        """The Ray dashboard's address (the context's port-forward, opened once)."""
        return await self.context().dashboard()

    async def pod_log(self, name: str, tail_lines: int = 500) -> AsyncIterator[str]:
        """A pod's container log: its last lines, then new text until its container ends."""
        kube = await self.context().kube()
        async for text in kube.pod_log(name, follow=True, tail_lines=tail_lines):
            yield text

    async def describe_pod(self, name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The pod (None once gone) and its Events (involvedObject.name=NAME), as kubectl
        describe fetches them."""
        kube = await self.context().kube()
        return await kube.get("pods", name), await kube.events(name)

    async def delete_pod(self, name: str) -> None:
        """Delete a pod (KubeRay then creates a replacement); returns once the API accepted it."""
        kube = await self.context().kube()
        await kube.delete("pods", name, wait=False)

    # --- metrics ---

    async def lustre_metrics(self, minutes: float = 30.0) -> LustreMetrics:
        from .plan.metrics import lustre_metrics

        return await lustre_metrics(self.context(), minutes)

    async def gpu_metrics(self, minutes: float = 30.0) -> GpuMetrics:
        from .plan.metrics import gpu_metrics

        return await gpu_metrics(self.context(), minutes)

    async def lustre_instance(self) -> LustreInstance:
        """The Lustre instance as the Metrics panel shows it, from google-cloud-lustre's
        Instance (state, mount_point `IP@tcp:/FS` - what the PV's `ip` attribute is cut from -,
        capacity_gib, per_unit_storage_throughput, network); `found=False` when absent."""
        from .manifests import lustre_ip

        ctx = self.context()
        instance_id = ctx.cfg.lustre_instance_id
        inst = await ctx.lustre.get(instance_id)
        if inst is None:
            return LustreInstance(instance_id, found=False)
        return LustreInstance(instance_id, found=True, state=inst.state.name,
                              mount_point=inst.mount_point,
                              ip=lustre_ip(inst.mount_point) if inst.mount_point else "",
                              capacity_gib=int(inst.capacity_gib),
                              throughput=int(inst.per_unit_storage_throughput),
                              filesystem=inst.filesystem, network=inst.network)

    async def close(self) -> None:
        if self._ctx is not None:
            await self._ctx.close()
