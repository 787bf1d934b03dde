"""The run's events: what the job supervisor (and its budget guard) record in state.json's
`events`, a list of {"kind", "at", "run", "attempt", "step", "text", "spend_usd"}, and post to
NOTIFY_WEBHOOK (webhook.py). Runs beside supervisor.py in the cluster's image: Python 3.9, the
standard library only.

Kinds: `preempted` (a node the attempt ran on was lost), `stalled` (the watchdog: no new step
for too long, watchdog.py), `recovering` (the run waits for a whole RayCluster to resubmit),
`resumed` (a resubmitted attempt printed its first step), `failed`, `succeeded`, `stopped`, and
the budget guard's `budget`, `torn_down` and `guard` (it kept the pools for another run's job,
or gave up) (guard.py). `attempt` is the attempt's number (1 for
the first), `step` the training step the run was at, `spend_usd` what the guard had counted
(None without a guard). A text never holds a secret: it is made from the supervisor's own
words, the pods' and Ray's structured answers.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("rltui-supervisor")

KINDS = ("preempted", "stalled", "recovering", "resumed", "failed", "succeeded", "stopped", "budget",
         "torn_down", "guard")
MAX_TEXT = 600  # a chat line, not a log: the log's own lines stay in the attempt's record


def add_event(state: dict[str, Any], spec: dict[str, Any], kind: str, text: str, now: float) -> dict[str, Any]:
    """Append one event to `state["events"]` (the caller saves the state) and return it."""
    attempts = state.get("attempts") or []
    event = {"kind": kind, "at": round(float(now), 3), "run": str(spec.get("run") or ""),
             "attempt": len(attempts) or None,
             # run-wide, as saves print it: the header's "Step s/S" restarts each epoch
             "step": _step(attempts[-1]) if attempts else None, "text": str(text)[:MAX_TEXT],
             "spend_usd": state.get("spend_usd")}
    state.setdefault("events", []).append(event)
    log.info("event %s: %s", kind, event["text"])
    return event


def _step(attempt: dict[str, Any]) -> Any:
    """Where the attempt is: its last step, else its first, else the step it resumes from."""
    for key in ("last_step", "first_step", "resumed_from_step"):
        if attempt.get(key) is not None:
            return attempt[key]
    return None


def sentence(event: dict[str, Any]) -> str:
    """The line a chat shows for an event: what happened, to which run, attempt and step."""
    where = [f"run {event['run']}"] if event.get("run") else []
    if event.get("attempt"):
        where.append(f"attempt {event['attempt']}")
    if event.get("step") is not None:
        where.append(f"step {event['step']}")
    spend = event.get("spend_usd")
    cost = f" (spent so far: about ${float(spend):,.2f})" if isinstance(spend, (int, float)) else ""
    head = f"rltui {event.get('kind')}: " + (f"{', '.join(where)}: " if where else "")
    return f"{head}{event.get('text') or ''}{cost}"


def status_events(state: dict[str, Any], spec: dict[str, Any], before: str, now: float) -> None:
    """The events of a look that changed the run's status (`before`: its status at the look's
    start): RECOVERING, and the final ones. The causes (preempted, stalled, resumed, budget)
    are added where they are found."""
    status = str(state.get("status") or "")
    if status == before:
        return
    message = str(state.get("message") or "")
    if status == "RECOVERING":
        add_event(state, spec, "recovering", f"{message}; resubmitting from step "
                  f"{int(state.get('saved_step') or 0)} once the RayCluster is whole", now)
    elif status == "SUCCEEDED":
        attempts = len(state.get("attempts") or [])
        epoch = f" of epoch {state.get('epoch')}/{state['total_epochs']}" if state.get("total_epochs") else ""
        add_event(state, spec, "succeeded", f"the run succeeded at step {state.get('step')}/"
                  f"{state.get('total_steps')}{epoch} after {attempts} attempt{'s' if attempts != 1 else ''}", now)
    elif status == "FAILED":
        add_event(state, spec, "failed", message or "the run failed", now)
    elif status == "STOPPED":
        events = state.get("events") or []
        if events and events[-1].get("kind") == "budget":
            return  # the guard stopped it and said so: one message, not two
        add_event(state, spec, "stopped", message or "the run was stopped", now)
