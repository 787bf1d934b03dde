"""The on-cluster job supervisor, from rltui's side: start it after a submit, read a run's attempts
from its ConfigMap (outside Ray, whose job table a lost head takes with it), follow a run's logs
across attempts, and remove the supervisors before teardown. What the supervisor itself does is
in rltui/oncluster/supervisor.py; its objects in rltui/manifests_supervisor.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import manifests_supervisor as ms
from ..oncluster.jobstatus import FINAL
from .context import Context

SUPERVISOR_SELECTOR = f"{ms.ROLE_LABEL}={ms.NAME}"


@dataclass(frozen=True)
class Attempt:
    id: str
    reason: str
    resumed_from_step: int
    status: str = ""
    first_step: int | None = None
    last_step: int | None = None
    lost_steps: int | None = None
    recover_s: float | None = None
    ended_reason: str = ""
    # The stall watchdog's record (oncluster/watchdog.py): step, what ("no new step for 4:10
    # (4 x median 1:02)"), silent_s, allowance_s, median_s, k, the log's last lines; None: no stall.
    stalled: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        out = {"id": self.id, "reason": self.reason, "resumed_from_step": self.resumed_from_step,
               "status": self.status, "first_step": self.first_step, "last_step": self.last_step,
               "lost_steps": self.lost_steps, "recover_s": self.recover_s}
        if self.stalled is not None:
            out["stalled"] = {k: v for k, v in self.stalled.items() if k not in ("why", "stop_sent_at")}
        return out

    def stall_line(self) -> str:
        """`stalled at step 7: no new step for 4:10 (4 x median 1:02)`, or "" without a stall."""
        if self.stalled is None:
            return ""
        return f"stalled at step {self.stalled.get('step', '?')}: {self.stalled.get('what') or 'no new step'}"


@dataclass(frozen=True)
class RunState:
    """What the supervisor recorded of one run (its first attempt's id names it)."""

    run: str
    status: str  # RUNNING, RECOVERING, SUCCEEDED, FAILED, STOPPED
    message: str = ""
    step: int | None = None
    total_steps: int | None = None
    epoch: int | None = None  # with total_epochs, only for a run of more than one epoch
    total_epochs: int | None = None
    saved_step: int | None = None
    waiting: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    guard: dict[str, Any] = field(default_factory=dict)  # the budget guard's (oncluster/guard.py)
    # What happened, oldest first (oncluster/events.py): {kind, at, run, attempt, step, text, spend_usd}
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latest(self) -> Attempt:
        return self.attempts[-1]

    @property
    def final(self) -> bool:
        return self.status in FINAL

    def recovery_line(self) -> str:
        """`recovering: ...` while one goes on; a stalled attempt being stopped; else the newest
        recovery: `preempted at step 9, resumed from step 8 in 3:10`, or `stalled at step 7: no
        new step for 4:10 (4 x median 1:02); resumed from step 6 in 0:12`; else ""."""
        if self.status == "RECOVERING":
            return f"recovering: {self.message}" + (f" ({self.waiting})" if self.waiting else "")
        if self.latest.stalled is not None and not self.final:
            return f"{self.latest.stall_line()}; stopping it to resume from step {self.saved_step or 0}"
        for earlier, later in reversed(list(zip(self.attempts, self.attempts[1:], strict=False))):
            at = earlier.last_step if earlier.last_step is not None else "?"
            took = "" if later.recover_s is None else f" in {_clock(later.recover_s)}"
            if earlier.stalled is not None:
                return f"{earlier.stall_line()}; resumed from step {later.resumed_from_step}{took}"
            # The supervisor says "node lost" where the node was no Spot VM (only those are preempted).
            what = "node lost" if earlier.ended_reason.startswith("node lost") else "preempted"
            return f"{what} at step {at}, resumed from step {later.resumed_from_step}{took}"
        return ""


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}" if minutes < 60 else f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


def parse_state(run: str, data: dict[str, str]) -> RunState:
    try:
        state = json.loads(data.get("state.json") or "{}")
    except ValueError:
        state = {}
    attempts = [Attempt(id=str(a.get("id", "")), reason=str(a.get("reason") or ""),
                        resumed_from_step=int(a.get("resumed_from_step") or 0), status=str(a.get("status") or ""),
                        first_step=a.get("first_step"), last_step=a.get("last_step"),
                        lost_steps=a.get("lost_steps"), recover_s=a.get("recover_s"),
                        ended_reason=str(a.get("ended_reason") or ""),
                        stalled=dict(a["stalled"]) if isinstance(a.get("stalled"), dict) else None)
                for a in state.get("attempts") or [] if isinstance(a, dict)]
    return RunState(run=run, status=str(state.get("status") or "RUNNING"), message=str(state.get("message") or ""),
                    step=state.get("step"), total_steps=state.get("total_steps"),
                    epoch=state.get("epoch"), total_epochs=state.get("total_epochs"),
                    saved_step=state.get("saved_step"), waiting=str(state.get("waiting") or ""),
                    attempts=attempts or [Attempt(run, "submitted", 0)],
                    guard=dict(state["guard"]) if isinstance(state.get("guard"), dict) else {},
                    events=[dict(e) for e in state.get("events") or [] if isinstance(e, dict)])


@dataclass(frozen=True)
class SupervisorStart:
    """Whether the run's supervisor runs (its Deployment Available), else why not, in a line."""

    running: bool
    why: str = ""


async def start_supervisor(ctx: Context, job_id: str, files: dict[str, str], *, entrypoint: str,
                           runtime_env: dict[str, Any], metadata: dict[str, str],
                           submitted_at: float, guard: dict[str, Any] | None = None) -> SupervisorStart:
    """Apply the supervisor's objects for the run whose first attempt is `job_id`, then wait
    (bounded) until its Deployment is Available: recovery is on only once its pod runs.
    `guard`: the budget guard's settings (plan/guard.py), which the supervisor then runs."""
    spec = ms.run_spec(ctx.cfg, job_id, entrypoint=entrypoint, runtime_env=runtime_env, metadata=metadata,
                       submitted_at=submitted_at, time_scale=ctx.endpoints.time_scale, guard=guard)
    kube = await ctx.kube()
    await apply_notify_secret(kube, ctx.cfg)
    for obj in ms.supervisor_objects(ctx.cfg, job_id, spec, files):
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == ms.run_configmap(job_id):
            if await kube.get("configmaps", obj["metadata"]["name"]) is not None:
                continue  # a re-run of the same submit: never overwrite the supervisor's record
        await kube.apply(obj)
    return await supervisor_running(ctx, job_id, max(5.0, ms.START_WAIT_S * ctx.endpoints.time_scale))


async def apply_notify_secret(kube: Any, cfg: Any) -> None:
    """NOTIFY_WEBHOOK as env.sh has it now, into the supervisors' Secret (mounted in their pods
    only: manifests_supervisor.NOTIFY_VOLUME); deleted when env.sh sets none, so a webhook taken
    out of env.sh gets no more posts. Built in memory; only its labels are read back."""
    secret = ms.notify_secret(cfg)
    if secret is not None:
        await kube.apply(secret)
        return
    found = await kube.get("secrets", ms.NOTIFY_SECRET)
    labels = ((found or {}).get("metadata") or {}).get("labels") or {}
    if found is not None and labels.get(ms.ROLE_LABEL) == ms.NAME:  # rltui's own, by its mark
        await kube.delete("secrets", ms.NOTIFY_SECRET, wait=False)


async def supervisor_running(ctx: Context, job_id: str, timeout_s: float) -> SupervisorStart:
    """Wait up to `timeout_s` (0: look once) for the run's supervisor Deployment to be
    Available (its Available condition True: apps/v1 DeploymentStatus), else say why its pod
    does not run from the pod's own status (the scheduler's PodScheduled message, a waiting
    container's reason), never from error text."""
    kube = await ctx.kube()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    selector = f"{ms.ROLE_LABEL}={ms.NAME},{ms.RUN_LABEL}={ms.run_key(job_id)}"
    while True:
        dep = await kube.get("deployments", ms.deployment_name(job_id))
        if dep is None:
            return SupervisorStart(False, f"its Deployment {ms.deployment_name(job_id)} is gone")
        if any(c.get("type") == "Available" and c.get("status") == "True"
               for c in (dep.get("status") or {}).get("conditions") or []):
            return SupervisorStart(True)
        if loop.time() > deadline:
            pods = await kube.list("pods", selector)
            return SupervisorStart(False, pending_reason(pods) or "its Deployment is not Available")
        await asyncio.sleep(max(0.5, min(5.0, 10.0 * ctx.endpoints.time_scale)))


def pending_reason(pods: list[dict[str, Any]]) -> str:
    """Why the supervisor's pod does not run, from its status: unscheduled (the scheduler's
    message), a container waiting (reason: message), or its phase."""
    if not pods:
        return "no supervisor pod exists yet"
    pod = pods[0]
    name, status = pod["metadata"]["name"], pod.get("status") or {}
    scheduled: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    if scheduled.get("status") == "False":
        return f"pod {name} is Pending: {scheduled.get('message') or scheduled.get('reason') or 'not scheduled'}"
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            tail = f": {waiting['message']}" if waiting.get("message") else ""
            return f"pod {name} is waiting: {waiting['reason']}{tail}"
    return f"pod {name} is {status.get('phase') or 'Pending'}, not Ready"


async def run_state(ctx: Context, job_id: str) -> RunState | None:
    """The run `job_id` started (its first attempt's id), or None when it has no supervisor."""
    kube = await ctx.kube()
    cm = await kube.get("configmaps", ms.run_configmap(job_id))
    if cm is None:
        return None
    return parse_state(job_id, cm.get("data") or {})


async def follow_run(ctx: Context, jobs_api: Any, state: RunState, start: str,
                     on_text: Callable[[str], Any], poll_s: float = 2.0) -> str:
    """Every attempt's log from `start` on, each line once, a marked line before each later
    attempt; returns the run's final status (once the supervisor says it is final)."""
    from ..cloud.errors import CloudError

    ids = [a.id for a in state.attempts]
    index = ids.index(start) if start in ids else 0
    tail = {"newline": True}

    async def say(text: str) -> None:
        tail["newline"] = text.endswith("\n") if text else tail["newline"]
        result = on_text(text)
        if asyncio.iscoroutine(result):
            await result

    while True:
        attempt = state.attempts[index]
        if index > 0 or start != ids[0]:
            await say(("" if tail["newline"] else "\n") + separator(index + 1, attempt) + "\n")
        ended = ""
        while True:
            try:
                ended = str(await jobs_api.follow(attempt.id, say))
            except CloudError as exc:
                if exc.code == "NotFound" and await _not_accepted_yet(ctx, state.run, attempt.id):
                    await asyncio.sleep(poll_s)  # recorded before Ray has it: Ray accepts it soon
                    continue
                if exc.code != "NotFound":
                    await say(("" if tail["newline"] else "\n") + f"(the log of {attempt.id} stopped: {exc.message})\n")
                else:
                    await say(f"(the log of {attempt.id} went with the lost Ray head)\n")
            break
        waiting = ""
        while True:
            fresh = await run_state(ctx, state.run)
            if fresh is None:
                return "UNKNOWN"
            state = fresh
            if len(state.attempts) > index + 1:
                index += 1
                break
            if state.final:
                if state.message:
                    await say(("" if tail["newline"] else "\n") + f"rltui supervisor: {state.message}\n")
                return state.status
            if state.waiting and state.waiting != waiting:  # what a recovery waits for, as it changes
                waiting = state.waiting
                await say(("" if tail["newline"] else "\n") + f"rltui supervisor: {waiting}\n")
            if ended in FINAL:
                # Only the supervisor writes a final status: with none running, Ray's word is the last.
                sup = await supervisor_running(ctx, state.run, 0.0)
                if not sup.running:
                    await say(("" if tail["newline"] else "\n") + "rltui: the job's supervisor does not run"
                              f" ({sup.why}): {attempt.id} ended {ended}, and nothing will resubmit it\n")
                    return ended
            await asyncio.sleep(poll_s)


async def _not_accepted_yet(ctx: Context, run: str, attempt_id: str) -> bool:
    """The supervisor saves an attempt as SUBMITTED before Ray has it, and as PENDING once Ray
    accepted it (rltui/oncluster/supervisor.py): a NotFound meanwhile is not a lost log."""
    fresh = await run_state(ctx, run)
    if fresh is None or fresh.final:
        return False
    return any(a.id == attempt_id and a.status == "SUBMITTED" for a in fresh.attempts)


def separator(number: int, attempt: Attempt) -> str:
    why = f": {attempt.reason}" if attempt.reason and attempt.reason != "submitted" else ""
    return (f"──── attempt {number} ({attempt.id}){why}; resumes from step {attempt.resumed_from_step} ────")


async def remove_supervisors(ctx: Context, out: Callable[[str], None]) -> None:
    """Before teardown: the supervisors first (they would resubmit what teardown stops), each gone
    before this returns, then their Roles, bindings and ConfigMaps."""
    kube = await ctx.kube()
    for dep in await kube.list("deployments", SUPERVISOR_SELECTOR):
        name = dep["metadata"]["name"]
        out(f"removing the job supervisor {name}")
        await kube.delete("deployments", name, timeout_s=120.0)
    # The Deployment goes first and its pods after it (Background propagation): wait until no
    # supervisor pod is left, so none resubmits what teardown stops next.
    deadline = asyncio.get_running_loop().time() + 120.0
    while asyncio.get_running_loop().time() < deadline:
        if not await kube.list("pods", SUPERVISOR_SELECTOR):
            break
        await asyncio.sleep(1.0)
    for kind in ("rolebindings", "roles", "clusterrolebindings", "clusterroles", "configmaps", "secrets"):
        for obj in await kube.list(kind, SUPERVISOR_SELECTOR):
            await kube.delete(kind, obj["metadata"]["name"], wait=False)
    if await kube.get("serviceaccounts", ms.NAME) is not None:
        await kube.delete("serviceaccounts", ms.NAME, wait=False)
