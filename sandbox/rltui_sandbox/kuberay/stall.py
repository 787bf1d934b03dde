"""A stalled job, as `rltui sandbox stall` makes one: the job's driver process frozen with SIGSTOP,
nothing else touched (no pod, no node, no Ray process but the driver). Ray then still says the
job is RUNNING and the driver prints nothing more, which is what a hung NCCL collective or a
wedged save looks like from outside; only a watchdog on the log (rltui's supervisor) notices.

The driver is found as Ray's own job API names it: the sandbox's Ray heads are real local Ray
2.46.0 heads, and GET /api/jobs/ answers a list of JobDetails whose `driver_info` is "The driver
related to this job. For jobs submitted via the Ray Jobs API, it is the last driver launched by
that job submission, or None if there is no driver", with `pid`: "The PID of the worker process
the driver is using" (a string) (ray 2.46.0 dashboard/modules/job/pydantic_models.py DriverInfo,
JobDetails). A driver appears there once the entrypoint's process has connected to Ray
(NeMo-RL's init_ray, ray.init(address="auto"); the GRPO demo does the same, grpo_demo/driver.py).
The job is the one RUNNING job of all the sandbox's heads, or the one named; the PID must be a
process of that head's (a descendant of its `ray start` process), so nothing else is ever stopped.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import urllib.request
from typing import Any, Iterable

from rltui_sandbox.rayhead import RayHead, descendants


def _jobs(head: RayHead) -> list[dict[str, Any]]:
    with urllib.request.urlopen(head.dashboard_url + "/api/jobs/", timeout=10) as resp:
        found = json.loads(resp.read() or b"[]")
    return [j for j in found if isinstance(j, dict)] if isinstance(found, list) else []


def _choose(found: list[tuple[RayHead, dict[str, Any]]], job: str | None) -> tuple[RayHead, dict[str, Any]]:
    """The job to stall: LookupError for none, ValueError for one that cannot be (one line each)."""
    if job:
        named = [(h, j) for h, j in found if j.get("submission_id") == job]
        if not named:
            ids = ", ".join(str(j.get("submission_id")) for _h, j in found if j.get("submission_id")) or "none"
            raise LookupError(f"no job {job} on the sandbox's Ray heads; their jobs: {ids}")
        head, details = named[-1]
        if details.get("status") != "RUNNING":
            raise ValueError(f"job {job} is {details.get('status')}, not RUNNING: only a running driver can stall")
        return head, details
    running = [(h, j) for h, j in found if j.get("status") == "RUNNING" and j.get("type") == "SUBMISSION"]
    if not running:
        raise LookupError("no job is RUNNING on the sandbox's Ray heads: submit one first (`rltui submit`)")
    if len(running) > 1:
        ids = ", ".join(str(j.get("submission_id")) for _h, j in running)
        raise ValueError(f"{len(running)} jobs are RUNNING ({ids}): name one with --job")
    return running[0]


def _freeze(heads: list[RayHead], job: str | None) -> dict[str, Any]:
    found = [(head, details) for head in heads for details in _jobs(head)]
    head, details = _choose(found, job)
    submission = str(details.get("submission_id"))
    pid_text = str((details.get("driver_info") or {}).get("pid") or "")
    if not pid_text.isdigit():
        raise LookupError(f"job {submission} has no driver connected to Ray yet (its JobDetails has no"
                          " driver_info): try again once it prints its first lines")
    pid = int(pid_text)
    if pid not in descendants(head.pid):
        raise LookupError(f"the driver of job {submission} (pid {pid}) is not a process of the sandbox's Ray head")
    os.kill(pid, signal.SIGSTOP)
    return {"job": submission, "pid": pid, "status": details.get("status"),
            "message": f"froze the driver of job {submission} (pid {pid}) with SIGSTOP: Ray still says RUNNING,"
                       " no pod changed"}


async def stall(heads: Iterable[RayHead], job: str | None = None) -> dict[str, Any]:
    """Freeze the driver of the one RUNNING job (or `job`) of `heads`; what was done. LookupError
    (no such job or driver) or ValueError (not running, or more than one running)."""
    alive = [h for h in heads if h.alive()]
    if not alive:
        raise LookupError("no Ray head runs in the sandbox: `rltui up` makes the RayCluster")
    return await asyncio.to_thread(_freeze, alive, job)
