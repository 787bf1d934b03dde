"""The wizard's engine: env.sh, the plan, the adapters, behind one object. No Textual here.

The app calls these coroutines from workers and publishes what they return on its signals;
screens only render what they receive and ask the app for actions. Quitting the app never
stops cloud operations: they run in the cloud, and reopening re-probes and resumes watching.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from .config import ConfigError, Problem, RLConfig, parse_config
from .envfile import EnvFile, EnvFileError


@dataclass(frozen=True)
class Check:
    """One preflight check: passed, or the fix."""
    name: str
    ok: bool
    detail: str = ""
    fix: str = ""


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
    def __init__(self, env_path: Path, endpoints_factory: Callable[[], Any]) -> None:
        self.env_path = Path(env_path)
        self._endpoints_factory = endpoints_factory
        self._endpoints: Any = None
        self.env: EnvFile | None = None
        self.cfg: RLConfig | None = None
        self.problems: list[Problem] = []
        self.load_error: str = ""
        self._ctx: Any = None
        self._runner: Any = None
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
        self._ctx = self._runner = None  # a new config means a new plan

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
    def endpoints(self) -> Any:
        if self._endpoints is None:
            self._endpoints = self._endpoints_factory()
        return self._endpoints

    @property
    def label(self) -> str:
        return self.endpoints.label

    def context(self) -> Any:
        if self.cfg is None:
            raise ConfigError(self.problems or [Problem("env.sh", "not loaded")])
        if self._ctx is None:
            from .plan.context import Context

            self._ctx = Context(self.cfg, self.endpoints)
        return self._ctx

    def runner(self, listener: Callable[[Any], None] | None = None) -> Any:
        """The one runner of this config; `listener` (given by up/down) receives its events."""
        if self._runner is None:
            from .headless import make_runner

            self._runner = make_runner(self.context(), listener or (lambda ev: None))
        elif listener is not None:
            self._runner.listener = listener
        return self._runner

    async def up(self, listener: Callable[[Any], None], targets: set[str] | None = None) -> Any:
        return await self.runner(listener).up(targets)

    async def down(self, listener: Callable[[Any], None]) -> Any:
        from .headless import stop_jobs

        await stop_jobs(self.context(), listener)
        return await self.runner(listener).down()

    async def inventory(self) -> list[Any]:
        from .plan.inventory import collect

        return await collect(self.context())

    async def preflight(self) -> list[Check]:
        import shutil

        checks = [Check("env.sh", self.cfg is not None,
                        f"{len(self.problems)} problem(s)" if self.problems else str(self.env_path),
                        "fix the fields on the Configure screen" if self.problems else "")]
        env = self.endpoints.subprocess_env()
        checks += await self._auth_checks()
        for tool in ("xpk", "gcloud", "kubectl"):
            found = shutil.which(tool, path=env.get("PATH"))
            checks.append(Check(f"{tool} on PATH", bool(found), found or "",
                                "" if found else (f"pip install {tool}" if tool == "xpk" else
                                                  f"install {tool} (Cloud Shell has it)")))
        # xpk 1.16.0 exits 1 ("Failed to find gcloud credential directory") without it
        # (xpk src/xpk/commands/cluster_gcluster.py check_gcloud_authenticated).
        config_dir = self.endpoints.xpk_gcloud_dir(env)
        checks.append(Check("gcloud config (for xpk)", config_dir.is_dir(),
                            str(config_dir), "" if config_dir.is_dir() else
                            "gcloud auth application-default login (it creates the folder)"))
        if self.cfg is not None:
            try:
                from .plan.codelab import APIS

                missing = set(APIS) - await self.context().network.enabled_apis()
                short = sorted(api.removesuffix(".googleapis.com") for api in missing)
                checks.append(Check("APIs enabled", not missing,
                                    ("off: " + ", ".join(short)) if short else "all four",
                                    "the Provision screen enables them" if missing else ""))
            except Exception as exc:  # noqa: BLE001 - shown as a failed check with its reason
                checks.append(Check("project reachable", False, str(exc)[:200],
                                    "gcloud auth application-default login"))
        return checks

    async def _auth_checks(self) -> list[Check]:
        """gcloud's signed-in account, and Application Default Credentials."""
        import asyncio
        import json

        from .cloud.tools import run_tool

        checks = []
        try:
            res = await run_tool(["gcloud", "auth", "list", "--format=json"], self.endpoints,
                                 timeout_s=30)
            accounts = [a.get("account", "") for a in json.loads(res.stdout or "[]")
                        if a.get("status") == "ACTIVE"] if res.ok else []
            checks.append(Check("gcloud auth", bool(accounts), ", ".join(accounts),
                                "" if accounts else "gcloud auth login"))
        except Exception as exc:  # noqa: BLE001 - no gcloud: the tool check below says so
            checks.append(Check("gcloud auth", False, str(exc)[:120], "install gcloud, then gcloud auth login"))
        # The same check in both modes: the endpoints' ADC (Google's, or the sandbox's file).
        try:
            await asyncio.to_thread(self.endpoints.credentials)
            checks.append(Check("Application Default Credentials", True, "found"))
        except Exception:  # noqa: BLE001 - DefaultCredentialsError and friends
            checks.append(Check("Application Default Credentials", False, "not found",
                                "gcloud auth application-default login"))
        return checks

    # --- job ---

    def job_files(self, resume: bool = False) -> dict[str, str]:
        from . import manifests

        assert self.cfg is not None
        return manifests.job_files(self.cfg)

    async def submit(self, resume: bool) -> str:
        from .headless import submit

        ids: list[str] = []
        await submit(self.cfg, self.endpoints, resume=resume, out=ids.append, err=lambda _l: None)
        return ids[-1]

    def last_job_id(self) -> str | None:
        from .headless import job_records

        jobs = job_records(self.context())
        return jobs[-1].id if jobs else None

    async def follow_logs(self, on_text: Callable[[str], Any], job_id: str | None = None) -> str:
        from .cloud.rayjobs import RayJobs

        jobs = RayJobs(await self.context().dashboard())
        job_id = job_id or self.last_job_id()
        if job_id is None:
            raise LookupError("no job submitted yet")
        return await jobs.follow(job_id, on_text)

    async def job_info(self, job_id: str | None = None) -> Any:
        from .cloud.rayjobs import RayJobs

        job_id = job_id or self.last_job_id()
        if job_id is None:
            return None
        return await RayJobs(await self.context().dashboard()).info(job_id)

    # --- monitor ---

    async def pod_events(self) -> AsyncIterator[Any]:
        kube = await self.context().kube()
        async for event in kube.watch("pods", label_selector=f"ray.io/cluster={self.cfg.cluster_name}"):
            yield event

    async def kube_events(self) -> list[dict[str, Any]]:
        kube = await self.context().kube()
        return await kube.events()

    # --- metrics ---

    async def lustre_metrics(self, minutes: float = 30.0) -> dict[str, Any]:
        from .cloud.monitoring import MonitoringAdapter

        ctx = self.context()
        mon = ctx._get("monitoring", lambda: MonitoringAdapter(self.endpoints, self.cfg.project_id))
        # One reference minute per point (Lustre samples every 60 s); a sandbox running faster
        # aligns on shorter periods.
        period = max(1, int(round(60 * self.endpoints.time_scale)))
        instance = self.cfg.lustre_instance_id
        out: dict[str, Any] = {"at": time.time(), "period_s": period}
        out.update(await mon.throughput(instance, minutes=minutes, period_s=period))
        out["used"] = await mon.used_bytes(instance, minutes=minutes, period_s=period)
        out["capacity_gib"] = self.cfg.lustre_capacity
        return out

    async def close(self) -> None:
        if self._ctx is not None:
            await self._ctx.close()
