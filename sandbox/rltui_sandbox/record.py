"""The sandbox's own record: every operation it ran, on the reference clock, and a counter per
API method. Benchmarks and tests read it (GET /_sandbox/record on the daemon's HTTP app, i.e.
`<kube_api>/_sandbox/record`, or the file named `record` in `rltui sandbox status --json`,
`<root>/record.json`) instead of guessing from their side of the wire.

Who writes it: every gRPC method through add_service (grpc_util.guard gives the daemon's server
this record), every Compute REST method as `compute:<resource>.<method>`, and the World's
operations (`world.record`): compute.<collection>.<verb>, serviceusage.enable/batchEnable, ...

Reference seconds are real seconds since the sandbox started times its speed: at speed 300 a
real second is five reference minutes, which is how the latency profile's minutes were scaled.

    {"speed": 300.0, "started_at": 1764580000.0,
     "calls": {"grpc:Lustre/CreateInstance": 1, "compute:networks.get": 12, ...},
     "operations": [{"id": 1, "kind": "lustre.create", "target": "projects/p/.../instances/i",
                     "start_ref_s": 61.2, "end_ref_s": 781.0, "error": null,
                     "agent": "grpc-python-asyncio/1.85.3 ... rltui/0.1 gl-python/3.11.7 ..."}, ...]}

An operation that models a phase of the latency profile with no API call of its own (xpk's
networks, a pod's start, the Service Networking peering) names that phase in `key` (e.g.
{"kind": "xpk.networks", "key": "xpk_networks", ...}), so a benchmark's critical path explains
that time instead of counting it as unexplained; one that stands for REAL time the sandbox
spends and nothing models (the local Ray head's start) says `"real": true`, and a benchmark
counts it as real time.

Every operation also says who asked for it: `"agent"`, the caller's user agent as the surface
received it, read from AGENT when the operation starts (an operation a timer finishes later
keeps it). Cloud Audit Logs keep the same thing as AuditLog.requestMetadata.
callerSuppliedUserAgent ("The user agent of the caller. This information is not authenticated
and should be treated accordingly", google/cloud/audit/audit_log.proto in googleapis/googleapis;
its examples: `google-api-python-client/1.4.0`, `Cloud SDK Command Line Tool apitools-client/1.0
gcloud/0.9.62`). The surfaces set it around each call with `Record.acting_as(caller_agent(...))`:
grpc_util from the call's metadata, rest_util.RestApi and rest_compute from the HTTP headers.
"" is the cloud's own work (GKE's auto-upgrade, the World's timers and its event subscribers).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FILE = "record.json"

# The user agent of the caller the current call serves ("" for the cloud's own work); see above.
AGENT: contextvars.ContextVar[str] = contextvars.ContextVar("rltui_sandbox_agent", default="")


def caller_agent(user_agent: str | None, api_client: str | None = None) -> str:
    """The agent to record for a call: its `user-agent` (HTTP header or gRPC metadata) as
    received, then its `x-goog-api-client` when that says something more. The Google client
    libraries put a caller's ClientInfo(user_agent=...) only in x-goog-api-client
    (google/api_core/gapic_v1/client_info.py to_grpc_metadata; the REST transports send the same
    header). Seen here: google-cloud-container 2.67 over gRPC sends user-agent
    `grpc-python-asyncio/1.85.3 grpc-c/58.0.0 (linux; chttp2)` and x-goog-api-client
    `rltui/9.9 gl-python/3.11.7 grpc/1.85.3 gax/2.44.0`; google-cloud-compute 1.57 over REST sends
    User-Agent `python-requests/2.34.2` and the same x-goog-api-client. Without it a library
    caller would be anonymous. Whether Google's own callerSuppliedUserAgent includes
    x-goog-api-client is not verified. gcloud's User-Agent already names it
    (`google-cloud-sdk gcloud/528.0.0 command/gcloud.compute.addresses.create ...`)."""
    agent = (user_agent or "").strip()
    extra = (api_client or "").strip()
    if extra and extra not in agent:
        agent = f"{agent} {extra}".strip()
    return agent


class Record:
    """Thread-safe: the gRPC services, the REST routes and the World all write to it."""

    def __init__(self, path: Path | None, speed: float, started_at: float | None = None) -> None:
        self.path = Path(path) if path else None
        self.speed = float(speed)
        self.started_at = time.time() if started_at is None else started_at
        self._calls: Counter[str] = Counter()
        self._ops: list[dict[str, Any]] = []
        self._open: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._dirty_at = 0.0
        if self.path is not None and self.path.exists():
            self._load()

    def ref_now(self) -> float:
        """Reference seconds since the sandbox started."""
        return round((time.time() - self.started_at) * self.speed, 3)

    @staticmethod
    @contextlib.contextmanager
    def acting_as(agent: str) -> Iterator[None]:
        """Within the block, operations started are recorded with `agent` (AGENT set, then reset)."""
        token = AGENT.set(agent)
        try:
            yield
        finally:
            AGENT.reset(token)

    def count(self, method: str) -> None:
        """One call of an API method, e.g. "grpc:Lustre/GetInstance" or "compute:networks.get"."""
        with self._lock:
            self._calls[method] += 1
        self._maybe_save()

    def start(self, kind: str, target: str, **data: Any) -> int:
        """An operation began (kind like "gke.update_cluster"); returns its id for `end`."""
        with self._lock:
            op = {"id": len(self._ops) + 1, "kind": kind, "target": target,
                  "start_ref_s": self.ref_now(), "end_ref_s": None, "error": None, "agent": AGENT.get(), **data}
            self._ops.append(op)
            self._open[op["id"]] = op
        self._save()
        return int(op["id"])

    @contextlib.contextmanager
    def operation(self, kind: str, target: str, *, failed: str = "cancelled",
                  **data: Any) -> Iterator[None]:
        """`start` on entry, `end` on exit: with error `failed` when the block raised (a
        cancelled wait, a process that did not start)."""
        op_id = self.start(kind, target, **data)
        error: str | None = failed
        try:
            yield
            error = None
        finally:
            self.end(op_id, error)

    def span(self, kind: str, target: str, start_ref_s: float, **data: Any) -> None:
        """An operation that began at `start_ref_s` (already past) and ends now, e.g. the time
        between a GKE operation's DONE and Terraform's next poll that saw it."""
        with self._lock:
            end = self.ref_now()
            self._ops.append({"id": len(self._ops) + 1, "kind": kind, "target": target,
                              "start_ref_s": min(round(start_ref_s, 3), end), "end_ref_s": end,
                              "error": None, "agent": AGENT.get(), **data})
        self._save()

    def last_end(self, target_prefix: str) -> float | None:
        """The latest end (reference s) of a finished operation whose target starts with
        `target_prefix`, or None."""
        with self._lock:
            ends = [op["end_ref_s"] for op in self._ops
                    if op["end_ref_s"] is not None and op["target"].startswith(target_prefix)]
        return max(ends) if ends else None

    def end(self, op_id: int, error: str | None = None) -> None:
        with self._lock:
            op = self._open.pop(op_id, None)
            if op is None:
                return
            op["end_ref_s"], op["error"] = self.ref_now(), error
        self._save()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"speed": self.speed, "started_at": self.started_at,
                    "ref_now_s": self.ref_now(), "calls": dict(sorted(self._calls.items())),
                    "operations": [dict(op) for op in self._ops]}

    # --- persistence: a restarted daemon keeps counting where it left off ---

    def _maybe_save(self) -> None:
        now = time.monotonic()
        if now - self._dirty_at > 0.5:  # counters are frequent: write at most twice a second
            self._dirty_at = now
            self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        data = json.dumps(self.snapshot(), indent=1)
        tmp = self.path.with_name(self.path.name + f".{threading.get_ident()}.tmp")
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, self.path)

    def flush(self) -> None:
        self._save()

    def add_route(self, app: Any) -> None:
        """Serve `GET /_sandbox/record` (this snapshot, JSON) on an aiohttp app."""
        from aiohttp import web

        async def handle(_request: Any) -> Any:
            return web.json_response(self.snapshot(), headers={"Cache-Control": "no-store"})

        app.router.add_get("/_sandbox/record", handle)

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))  # type: ignore[union-attr]
        except (OSError, ValueError):
            return
        self.started_at = float(data.get("started_at", self.started_at))
        self._calls.update(data.get("calls", {}))
        self._ops = list(data.get("operations", []))
        self._open = {op["id"]: op for op in self._ops if op.get("end_ref_s") is None}
