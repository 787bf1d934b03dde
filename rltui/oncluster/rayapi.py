"""Ray's job API as the on-cluster supervisor calls it: reads over REST (a missing job is a 404),
submits with Ray's own job client (which packages and uploads the working dir as `ray job
submit` does), and follows a job's log over Ray's WebSocket tail. Runs on the Ray image's Python
(3.9 or newer), beside supervisor.py in the supervisor's ConfigMap.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import tempfile
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

try:  # in the package (rltui's tests), or beside this file in the ConfigMap's folder (the pod)
    from .kubeapi import Trouble, fetch_json
except ImportError:
    from kubeapi import Trouble, fetch_json  # type: ignore[import-not-found,no-redef]

log = logging.getLogger("rltui-supervisor")

SUBMIT_DEADLINE_S = 300.0  # a submit uploads a few KB: longer means the head is gone
FINGERPRINTS_ENV = "RLTUI_SECRET_FINGERPRINTS"  # rltui/manifests.py: the run script's Secret check


class Ray:
    """Reads over Ray's job REST API (a missing job is a 404); submits with Ray's own job client,
    which packages and uploads the working dir as `ray job submit` does."""

    def __init__(self, address: str) -> None:
        self.address = address.rstrip("/")

    def _get(self, path: str) -> dict[str, Any] | None:
        return fetch_json(urllib.request.Request(self.address + path), f"Ray job API {path}")

    def answers(self) -> bool:
        try:
            return self._get("/api/version") is not None
        except Trouble:
            return False

    def job(self, job_id: str) -> dict[str, Any] | None:
        return self._get(f"/api/jobs/{urllib.parse.quote(job_id)}")

    def jobs(self) -> list[dict[str, Any]]:
        """Every job the head knows: GET /api/jobs/ answers a JSON list of JobDetails (ray 2.46.0
        dashboard/modules/job/job_head.py list_jobs); Trouble when it does not answer."""
        what = "Ray job API /api/jobs/"
        try:
            with urllib.request.urlopen(urllib.request.Request(self.address + "/api/jobs/"), timeout=30) as resp:
                found = json.loads(resp.read() or b"[]")
        except (OSError, ValueError) as exc:
            raise Trouble(f"{what}: {type(exc).__name__}") from None
        return [j for j in found if isinstance(j, dict)] if isinstance(found, list) else []

    def tail(self, job_id: str) -> LogTail:
        return LogTail(self.address, job_id)

    def stop(self, job_id: str) -> None:
        """POST /api/jobs/<id>/stop (ray 2.46.0 dashboard/modules/job/job_head.py)."""
        fetch_json(urllib.request.Request(f"{self.address}/api/jobs/{urllib.parse.quote(job_id)}/stop",
                                          data=b"", method="POST"), f"stop {job_id}")

    def submit(self, job_id: str, spec: dict[str, Any], files: dict[str, str]) -> None:
        """Submit with Ray's client, bounded: Ray 2.46.0's client calls `requests` with no timeout
        (dashboard/modules/dashboard_sdk.py), so a head gone mid-submit would block forever.
        Past the deadline the process exits and the Deployment restarts it; the attempt, saved
        as SUBMITTED, is then submitted again with the same id (or found there)."""
        done = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                self._submit(job_id, spec, files)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                failure.append(exc)
            finally:
                done.set()
        threading.Thread(target=run, name=f"submit-{job_id}", daemon=True).start()
        if not done.wait(SUBMIT_DEADLINE_S):
            log.error("submit of %s did not answer in %.0f s: exiting to be restarted", job_id, SUBMIT_DEADLINE_S)
            os._exit(1)
        if failure:
            raise failure[0]

    def _submit(self, job_id: str, spec: dict[str, Any], files: dict[str, str]) -> None:
        from ray.job_submission import JobSubmissionClient  # in the image; slow to import: here

        with tempfile.TemporaryDirectory(prefix="rltui-job-") as folder:
            for name, text in files.items():
                path = Path(folder) / name
                path.write_text(text)
                if name.endswith(".sh"):
                    path.chmod(0o700)
            runtime_env = dict(spec.get("runtime_env") or {}, working_dir=folder)
            # The first submit's Secret fingerprints: the Secret may have changed since, and the
            # run script would then wait for files that never come. A resubmit takes it as it is.
            env_vars = {k: v for k, v in (runtime_env.get("env_vars") or {}).items() if k != FINGERPRINTS_ENV}
            if "env_vars" in runtime_env:
                runtime_env["env_vars"] = env_vars
            try:
                client = JobSubmissionClient(self.address)
                existing = {j.submission_id for j in client.list_jobs()}
                if job_id in existing:
                    return  # a submit whose answer was lost: it is there already
                client.submit_job(entrypoint=spec["entrypoint"], runtime_env=runtime_env,
                                  submission_id=job_id, metadata=dict(spec.get("metadata") or {}))
            except Exception as exc:  # noqa: BLE001 - Ray's client raises RuntimeError, requests' errors
                raise Trouble(f"submit {job_id}: {exc}") from None


class LogTail:
    """One job's log as Ray's WebSocket tail sends it, read in a thread; `take()` returns what
    arrived since the last call. The tail starts at the log's beginning, so after a broken
    connection the text already taken is skipped when it comes again (the log only grows).
    It ends when Ray closes it (the job is over) or `stop()`."""

    RETRY_S = 2.0

    def __init__(self, address: str, job_id: str) -> None:
        self.address, self.job_id = address, job_id
        self._chunks: queue.Queue[tuple[int, str]] = queue.Queue()
        self._stop = threading.Event()
        self.done = threading.Event()
        self._session = 0  # which connection a chunk came from
        self._taken = 0  # characters handed out, over all connections
        self._seen: dict[int, int] = {}  # connection -> characters received on it
        self._live = 0  # the connection that has sent its first chunk and not ended (0: none)
        threading.Thread(target=self._run, name=f"tail-{job_id}", daemon=True).start()

    def _run(self) -> None:
        import asyncio

        while not self._stop.is_set():
            self._session += 1
            try:
                ended = asyncio.run(self._follow(self._session))
                self._live = 0
                if ended:
                    self.done.set()  # the stream ended with the job: its log is complete
                    return
            except Exception as exc:  # noqa: BLE001 - Ray's client raises RuntimeError, aiohttp's errors
                self._live = 0
                if self._session < 4 or self._session % 10 == 0:  # not every retry while a head is down
                    log.info("log tail of %s: %s", self.job_id, str(exc).splitlines()[0] if str(exc) else exc)
            self._stop.wait(min(self.RETRY_S * 2 ** min(self._session - 1, 4), 30.0))

    async def _follow(self, session: int) -> bool:
        """Follow until the stream ends; True when the job is over. Ray 2.46.0's tail_job_logs
        ends quietly on any close, a dropped connection included (dashboard/modules/job/sdk.py),
        so the job's status says whether the log is complete or the tail must reconnect."""
        from ray.job_submission import JobSubmissionClient  # in the image; slow to import: here

        client = JobSubmissionClient(self.address)
        async for text in client.tail_job_logs(self.job_id):
            if self._stop.is_set():
                return False
            self._live = session  # the tail starts with the whole log, so a live one says so at once
            self._chunks.put((session, text))
        return bool(client.get_job_status(self.job_id).is_terminal())

    @property
    def live(self) -> bool:
        """Whether a connection is up and has delivered: while it is not, the log's silence says
        nothing about the driver's (the stall watchdog waits; watchdog.py)."""
        return self._live != 0 and self._live == self._session

    def take(self) -> str:
        out: list[str] = []
        while True:
            try:
                session, text = self._chunks.get_nowait()
            except queue.Empty:
                return "".join(out)
            # Every connection starts at the log's first character: this chunk is the log's
            # [start, start + len) and only what lies past what was taken is new.
            start = self._seen.get(session, 0)
            self._seen[session] = start + len(text)
            if start + len(text) > self._taken:
                fresh = text[max(0, self._taken - start):]
                out.append(fresh)
                self._taken += len(fresh)

    def stop(self) -> None:
        self._stop.set()
