"""Ray jobs over `ray.job_submission.JobSubmissionClient` (the codelab's `ray job submit`).

The client's methods are blocking (requests, no timeout of their own): each runs in a thread
under a deadline. Its constructor already does HTTP (a version check), so it is built lazily.

Following logs exactly once: every tail WebSocket starts again from the beginning of the job's
log (the dashboard re-reads the log file from offset 0), so the characters already delivered
are counted and skipped on each new connection; when a connection ends or drops, the status is
re-checked and the tail reconnects unless the job is over; a final `get_job_logs` delivers any
text the last connection did not carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import secrets
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .errors import CloudError, classify, retry

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

T = TypeVar("T")

log = logging.getLogger(__name__)

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
# A job submission uploads the working dir: allow for that; other calls are small.
SUBMIT_TIMEOUT_S = 300.0
CALL_TIMEOUT_S = 30.0
# What the client loads when first used (bench/log_pane.py imports these before its feed).
CLIENT_MODULES = ("ray.job_submission",)


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
        return self.status in TERMINAL


def _status_text(status: Any) -> str:
    return str(getattr(status, "value", status))


def _info(details: Any) -> JobInfo:
    return JobInfo(
        submission_id=details.submission_id or details.job_id or "",
        status=_status_text(details.status),
        entrypoint=details.entrypoint or "",
        message=details.message or "",
        start_time_ms=details.start_time,
        end_time_ms=details.end_time,
        metadata=dict(details.metadata or {}),
        driver_exit_code=getattr(details, "driver_exit_code", None),
    )


def _job_error(exc: BaseException, what: str, job_id: str | None = None) -> CloudError:
    """The job API's failures: RuntimeError("Request failed with status code N: ...")."""
    text = str(exc)
    if isinstance(exc, RuntimeError) and "status code" in text:
        if "already exists" in text:
            return CloudError(f"{what}: a job with submission id {job_id} already exists; choose"
                              " another id, or follow it with `rltui logs`", transient=False,
                              code="AlreadyExists")
        if "status code 404" in text or "does not exist" in text:
            return CloudError(f"{what}: no job {job_id} on this Ray cluster", transient=False,
                              code="NotFound")
        transient = any(f"status code {code}" in text for code in (429, 500, 502, 503, 504))
        return CloudError(f"{what}: {text.splitlines()[0][:300]}", transient=transient,
                          code="RayJobApi")
    if isinstance(exc, RuntimeError) and "WebSocket" in text:
        return CloudError(f"{what}: {text[:300]}", transient=True, code="TailDropped")
    return classify(exc, what)


def new_submission_id() -> str:
    """Chosen here, not by the server, so that a retried submission stays one job."""
    return f"rltui-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


class RayJobs:
    def __init__(self, dashboard_url: str, *, backoff_s: float = 0.5) -> None:
        self.dashboard_url = dashboard_url.rstrip("/")
        self.backoff_s = backoff_s
        self._client: JobSubmissionClient | None = None

    async def _call(self, what: str, fn: Callable[[JobSubmissionClient], T], *,
                    job_id: str | None = None, timeout_s: float = CALL_TIMEOUT_S,
                    attempts: int = 6) -> T:
        """fn(client) in a thread; connection trouble and 5xx are retried with jittered backoff."""

        async def once() -> T:
            try:
                client = await self._get_client()
                return await asyncio.wait_for(asyncio.to_thread(fn, client), timeout_s)
            except CloudError:
                raise
            except Exception as exc:  # noqa: BLE001 - sorted by _job_error
                raise _job_error(exc, what, job_id) from exc

        return await retry(once, what=what, attempts=attempts, base_s=self.backoff_s,
                           timeout_s=None)

    async def _get_client(self) -> JobSubmissionClient:
        if self._client is None:
            def build() -> JobSubmissionClient:
                import logging

                from ray.job_submission import JobSubmissionClient  # ~0.5 s and ~100 MB: lazily

                # Ray's SDK logs every upload and websocket close at INFO on stderr: not ours to print.
                logging.getLogger("ray").setLevel(logging.WARNING)
                return JobSubmissionClient(self.dashboard_url)
            try:
                self._client = await asyncio.wait_for(asyncio.to_thread(build), CALL_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - ConnectionError when unreachable
                raise _job_error(exc, f"Ray dashboard at {self.dashboard_url}") from exc
        return self._client

    async def submit(self, job_dir: Path, *, entrypoint: str = "bash run_nemo_rl.sh",
                     runtime_env: Mapping[str, Any] | None = None,
                     submission_id: str | None = None,
                     metadata: Mapping[str, str] | None = None) -> str:
        """Upload `job_dir` as the working dir and start `entrypoint`; returns the submission id."""
        job_id = submission_id or new_submission_id()
        # A few stat calls before a multi-second upload: not worth a thread.
        env = {**(runtime_env or {}), "working_dir": str(Path(job_dir).resolve())}  # noqa: ASYNC240
        attempt = 0

        def submit(client: JobSubmissionClient) -> str:
            nonlocal attempt
            attempt += 1
            try:
                return client.submit_job(entrypoint=entrypoint, runtime_env=env,
                                         submission_id=job_id, metadata=dict(metadata or {}))
            except RuntimeError as exc:
                # A retry after a lost answer finds the job the first attempt created.
                if attempt > 1 and "already exists" in str(exc):
                    return job_id
                raise

        return await self._call(f"submit job {job_id}", submit, job_id=job_id,
                                timeout_s=SUBMIT_TIMEOUT_S)

    async def info(self, job_id: str) -> JobInfo:
        return _info(await self._call(f"job {job_id}", lambda c: c.get_job_info(job_id),
                                      job_id=job_id))

    async def status(self, job_id: str) -> str:
        """PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED."""
        return (await self.info(job_id)).status

    async def list(self) -> list[JobInfo]:
        """Submitted jobs (not drivers started by hand), oldest first."""
        jobs = await self._call("list jobs", lambda c: c.list_jobs())
        infos = [_info(j) for j in jobs if getattr(j, "submission_id", None)]
        return sorted(infos, key=lambda j: j.start_time_ms or 0)

    async def stop(self, job_id: str) -> bool:
        """Ask the job to stop; False if it had already ended."""
        return bool(await self._call(f"stop job {job_id}", lambda c: c.stop_job(job_id),
                                     job_id=job_id))

    async def logs(self, job_id: str) -> str:
        return await self._call(f"logs of job {job_id}", lambda c: c.get_job_logs(job_id),
                                job_id=job_id)

    async def follow(self, job_id: str, on_text: Callable[[str], Any], *,
                     check_s: float = 5.0, give_up_s: float = 300.0) -> str:
        """Deliver the job's log text to `on_text` exactly once, until the job ends; return
        its final status (SUCCEEDED, FAILED or STOPPED).

        `check_s`: how often a silent tail re-checks the status (a server that never closes the
        stream of a finished job). `give_up_s`: how long the dashboard may stay unreachable.
        """
        cursor = _Cursor(on_text)
        status = await self.status(job_id)  # an unknown id fails here, clearly
        failing_since: float | None = None
        attempt = 0
        while status not in TERMINAL:
            try:
                if await self._tail_once(job_id, cursor, check_s):
                    failing_since, attempt = None, 0
                status = await self.status(job_id)
            except asyncio.CancelledError:
                raise
            except _Delivery as exc:
                raise exc.error from None  # on_text failed (e.g. a closed pipe): not ours to retry
            except Exception as exc:  # noqa: BLE001 - sorted below
                err = _job_error(exc, f"logs of job {job_id}", job_id)
                failing_since = failing_since or time.monotonic()
                if not err.transient or time.monotonic() - failing_since > give_up_s:
                    raise err from exc
                log.info("log tail of %s dropped (%s); reconnecting", job_id, err.message)
            if status not in TERMINAL:
                await asyncio.sleep(random.uniform(0, min(10.0, self.backoff_s * 2 ** attempt)))
                attempt += 1
        text = await self.logs(job_id)
        try:
            await cursor.offer(text, 0)
        except _Delivery as exc:
            raise exc.error from None
        return status

    async def _tail_once(self, job_id: str, cursor: _Cursor, check_s: float) -> bool:
        """One tail connection, until it ends or (silent) the job is over; True if it
        carried any text."""
        client = await self._get_client()
        seen = 0  # characters this connection sent: it starts again at the log's beginning
        # An async generator, which Ray annotates as AsyncIterator[str] (that has no aclose).
        tail = cast("AsyncGenerator[str, None]", client.tail_job_logs(job_id))
        async with contextlib.aclosing(tail) as chunks:
            pending = asyncio.ensure_future(anext(chunks))
            try:
                while True:
                    done, _ = await asyncio.wait({pending}, timeout=check_s)
                    if not done:
                        if await self.status(job_id) in TERMINAL:
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
