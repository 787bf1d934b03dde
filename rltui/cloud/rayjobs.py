"""Ray jobs over Ray's own REST Job API (cloud/rayrest.py), as `ray job submit` talks to it.

Not `ray.job_submission.JobSubmissionClient`: importing it is heavy in memory and time for
the wizard's process (docs/decisions/import-cost.md); rayrest.py speaks its protocol over aiohttp, read from ray
2.60.0's sdk.py and dashboard_sdk.py, and answered the same by the cluster's Ray 2.46.0 (the
nemo-rl v0.4.0 image's; rayrest.py says where they differ). Every call runs under a deadline;
connection trouble and 429/5xx are retried with jittered backoff.

A duplicate submission id is refused by Ray with HTTP 500 (job_head.py `submit_job` turns the
agent's 400 "already exists" into 500, in 2.46.0 as in 2.60.0) and a traceback as the body: that is not a structured
answer, so `submit` asks GET /api/jobs/{id} before its first POST (200: it exists, a clear
permanent AlreadyExists) and after a failed POST (200: the POST took effect, the job is ours).

Following logs exactly once: every tail WebSocket starts again from the beginning of the job's
log (the dashboard re-reads the log file from offset 0), so the characters already delivered
are counted and skipped on each new connection; when a connection ends or drops (a head that
died can close it normally), the status is re-checked and the tail reconnects unless the job
is over; a final GET of the logs delivers any text the last connection did not carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from ..oncluster.jobstatus import FINAL
from .errors import CloudError, classify, retry
from .rayrest import RayApiError, RayRest, TailDropped

T = TypeVar("T")

log = logging.getLogger(__name__)

# A job submission uploads the working dir: allow for that; other calls are small.
SUBMIT_TIMEOUT_S = 300.0
CALL_TIMEOUT_S = 30.0
# What the client loads when first used (bench/log_pane.py imports these before its feed).
CLIENT_MODULES = ("aiohttp",)
TRANSIENT_STATUS = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class JobInfo:
    submission_id: str
    status: str
    entrypoint: str = ""
    message: str = ""
    start_time_ms: int | None = None
    end_time_ms: int | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    driver_exit_code: int | None = None

    @property
    def terminal(self) -> bool:
        return self.status in FINAL


# Told each JobInfo `follow` reads (before the job's text, and again once it is over): the
# follower's job feed (rltui/jobfeed.py) dates a backlog by the job's start_time/end_time.
# Set in the follower's task, as the calls between it and `follow` pass only the text.
FOLLOWED_JOB: ContextVar[Callable[[JobInfo], Any] | None] = ContextVar("followed_job",
                                                                       default=None)


def _info(details: Mapping[str, Any]) -> JobInfo:
    """A JobDetails answer (ray/dashboard/modules/job/pydantic_models.py `JobDetails`)."""
    return JobInfo(
        submission_id=details.get("submission_id") or details.get("job_id") or "",
        status=str(details.get("status") or ""),
        entrypoint=details.get("entrypoint") or "",
        message=details.get("message") or "",
        start_time_ms=details.get("start_time"),
        end_time_ms=details.get("end_time"),
        metadata=dict(details.get("metadata") or {}),
        driver_exit_code=details.get("driver_exit_code"),
    )


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status of a job API answer or of a refused WebSocket handshake."""
    if isinstance(exc, RayApiError):
        return exc.status
    if type(exc).__name__ == "WSServerHandshakeError":  # aiohttp: the status the server answered
        return cast("int", getattr(exc, "status", None))
    return None


def _job_error(exc: BaseException, what: str, job_id: str | None = None,
               address: str = "") -> CloudError:
    """Sorted by HTTP status and exception type, never by the answer's wording."""
    if isinstance(exc, CloudError):
        return exc
    status = _http_status(exc)
    if status == 404:
        return CloudError(f"{what}: no job {job_id} on this Ray cluster", transient=False,
                          code="NotFound")
    if status in (401, 403):
        return CloudError(f"{what}: the Ray dashboard refused the request (HTTP {status}): set"
                          " RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the cluster's token, with"
                          " RAY_AUTH_MODE=token", transient=False, code="RayAuth")
    if status is not None:
        text = exc.text if isinstance(exc, RayApiError) else str(exc)
        last = text.strip().splitlines()[-1][:300] if text.strip() else ""
        return CloudError(f"{what}: Ray job API answered HTTP {status}: {last}",
                          transient=status in TRANSIENT_STATUS, code="RayJobApi")
    if isinstance(exc, TailDropped):
        return CloudError(f"{what}: {exc}", transient=True, code="TailDropped")
    if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
        # aiohttp's connection errors are OSError subclasses (ClientOSError, ClientConnectorError).
        return CloudError(f"{what}: connection problem: Failed to connect to Ray at address"
                          f" {address}: {exc}", transient=True, code=type(exc).__name__)
    return classify(exc, what)


def new_submission_id() -> str:
    """Chosen here, not by the server, so that a retried submission stays one job."""
    return f"rltui-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


class RayJobs:
    def __init__(self, dashboard_url: str, *, backoff_s: float = 0.5) -> None:
        self.dashboard_url = dashboard_url.rstrip("/")
        self.backoff_s = backoff_s
        self._rest = RayRest(self.dashboard_url)

    async def _call(self, what: str, fn: Callable[[RayRest], Awaitable[T]], *,
                    job_id: str | None = None, timeout_s: float = CALL_TIMEOUT_S,
                    attempts: int = 6) -> T:
        """await fn(rest) under a deadline; connection trouble and 429/5xx are retried."""

        async def once() -> T:
            try:
                return await asyncio.wait_for(fn(self._rest), timeout_s)
            except CloudError:
                raise
            except Exception as exc:  # noqa: BLE001 - sorted by _job_error
                raise _job_error(exc, what, job_id, self.dashboard_url) from exc

        return await retry(once, what=what, attempts=attempts, base_s=self.backoff_s,
                           timeout_s=None)

    async def _exists(self, job_id: str) -> bool:
        status, _ = await self._rest.call("GET", f"/api/jobs/{job_id}", ok=(200, 404))
        return status == 200

    async def submit(self, job_dir: Path, *, entrypoint: str = "bash run_nemo_rl.sh",
                     runtime_env: Mapping[str, Any] | None = None,
                     submission_id: str | None = None,
                     metadata: Mapping[str, str] | None = None) -> str:
        """Upload `job_dir` as the working dir and start `entrypoint`; returns the submission id."""
        job_id = submission_id or new_submission_id()
        what = f"submit job {job_id}"
        # A few stat calls before a multi-second upload: not worth a thread.
        env = {**(runtime_env or {}), "working_dir": str(Path(job_dir).resolve())}  # noqa: ASYNC240
        if env.get("py_modules"):
            raise CloudError(f"{what}: py_modules are not uploaded by rltui; put the code in the"
                             " job's folder", transient=False, code="Unsupported")
        if await self._call(what, lambda rest: self._exists(job_id), job_id=job_id):
            raise CloudError(f"{what}: a job with submission id {job_id} already exists; choose"
                             " another id, or follow it with `rltui logs`", transient=False,
                             code="AlreadyExists")

        async def submit(rest: RayRest) -> str:
            uploaded = await rest.upload_working_dir(env, SUBMIT_TIMEOUT_S)
            body = {"entrypoint": entrypoint, "submission_id": job_id,
                    "runtime_env": uploaded, "metadata": dict(metadata or {})}
            try:
                _, answer = await rest.call("POST", "/api/jobs/", json_data=body,
                                            timeout_s=SUBMIT_TIMEOUT_S)
            except RayApiError:
                # Absent a moment ago: if it exists now, this POST (or a lost earlier one) made it.
                if await self._exists(job_id):
                    return job_id
                raise
            return str((answer or {}).get("submission_id") or job_id)

        return await self._call(what, submit, job_id=job_id, timeout_s=SUBMIT_TIMEOUT_S)

    async def info(self, job_id: str) -> JobInfo:
        async def get(rest: RayRest) -> JobInfo:
            return _info((await rest.call("GET", f"/api/jobs/{job_id}"))[1] or {})

        return await self._call(f"job {job_id}", get, job_id=job_id)

    async def status(self, job_id: str) -> str:
        """PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED."""
        return (await self.info(job_id)).status

    async def list(self) -> list[JobInfo]:
        """Submitted jobs (not drivers started by hand), oldest first."""
        async def get(rest: RayRest) -> list[Any]:
            return list((await rest.call("GET", "/api/jobs/"))[1] or [])

        jobs = await self._call("list jobs", get)
        infos = [_info(j) for j in jobs if j.get("submission_id")]
        return sorted(infos, key=lambda j: j.start_time_ms or 0)

    async def stop(self, job_id: str) -> bool:
        """Ask the job to stop; False if it had already ended."""
        async def post(rest: RayRest) -> bool:
            return bool(((await rest.call("POST", f"/api/jobs/{job_id}/stop"))[1] or {}).get("stopped"))

        return await self._call(f"stop job {job_id}", post, job_id=job_id)

    async def logs(self, job_id: str) -> str:
        async def get(rest: RayRest) -> str:
            return str(((await rest.call("GET", f"/api/jobs/{job_id}/logs"))[1] or {}).get("logs") or "")

        return await self._call(f"logs of job {job_id}", get, job_id=job_id)

    async def follow(self, job_id: str, on_text: Callable[[str], Any], *,
                     check_s: float = 5.0, give_up_s: float = 300.0) -> str:
        """Deliver the job's log text to `on_text` exactly once, until the job ends; return
        its final status (SUCCEEDED, FAILED or STOPPED).

        `check_s`: how often a silent tail re-checks the status (a server that never closes the
        stream of a finished job). `give_up_s`: how long the dashboard may stay unreachable.
        """
        cursor = _Cursor(on_text)
        status = await self._followed_status(job_id)  # an unknown id fails here, clearly
        failing_since: float | None = None
        attempt = 0
        while status not in FINAL:
            try:
                if await self._tail_once(job_id, cursor, check_s):
                    failing_since, attempt = None, 0
                status = await self._followed_status(job_id)
            except asyncio.CancelledError:
                raise
            except _Delivery as exc:
                raise exc.error from None  # on_text failed (e.g. a closed pipe): not ours to retry
            except Exception as exc:  # noqa: BLE001 - sorted below
                err = _job_error(exc, f"logs of job {job_id}", job_id, self.dashboard_url)
                failing_since = failing_since or time.monotonic()
                if not err.transient or time.monotonic() - failing_since > give_up_s:
                    raise err from exc
                log.info("log tail of %s dropped (%s); reconnecting", job_id, err.message)
            if status not in FINAL:
                await asyncio.sleep(random.uniform(0, min(10.0, self.backoff_s * 2 ** attempt)))
                attempt += 1
        text = await self.logs(job_id)
        try:
            await cursor.offer(text, 0)
        except _Delivery as exc:
            raise exc.error from None
        return status

    async def _followed_status(self, job_id: str) -> str:
        """status(), its JobInfo told to FOLLOWED_JOB's listener (its times, once over its end)."""
        info = await self.info(job_id)
        listener = FOLLOWED_JOB.get()
        if listener is not None:
            listener(info)
        return info.status

    async def _tail_once(self, job_id: str, cursor: _Cursor, check_s: float) -> bool:
        """One tail connection, until it ends or (silent) the job is over; True if it
        carried any text."""
        seen = 0  # characters this connection sent: it starts again at the log's beginning
        tail = cast("AsyncGenerator[str, None]", self._rest.tail(job_id))
        async with contextlib.aclosing(tail) as chunks:
            pending = asyncio.ensure_future(anext(chunks))
            try:
                while True:
                    done, _ = await asyncio.wait({pending}, timeout=check_s)
                    if not done:
                        if await self.status(job_id) in FINAL:
                            return seen > 0  # the final fetch delivers the rest
                        continue
                    try:
                        chunk = pending.result()
                    except StopAsyncIteration:
                        return seen > 0
                    await cursor.offer(chunk, seen)
                    seen += len(chunk)
                    pending = asyncio.ensure_future(anext(chunks))
            finally:
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)


class _Cursor:
    """How many characters of the log `on_text` has had; hands it only what lies beyond."""

    def __init__(self, on_text: Callable[[str], Any]) -> None:
        self.on_text = on_text
        self.delivered = 0

    async def offer(self, chunk: str, start: int) -> None:
        """`chunk` is the log's text from character `start` on."""
        end = start + len(chunk)
        if end <= self.delivered:
            return
        text = chunk[max(0, self.delivered - start):]
        self.delivered = end
        try:
            result = self.on_text(text)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            raise _Delivery(exc) from exc


class _Delivery(Exception):
    """`on_text` raised: the caller's problem, never retried as a connection problem."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error  # what on_text raised, re-raised as it was
