"""The teardown's message to NOTIFY_WEBHOOK: both faces' teardown (headless `down`, the wizard's
Teardown through Session.down) end with `announce_teardown`, which posts one `torn_down` message
when env.sh sets a webhook (rltui/notify.py; the run's ConfigMap, where the supervisor kept its
events, is gone by then, so this one is posted from here)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .context import Context

if TYPE_CHECKING:
    from .runner import RunResult


async def announce_teardown(ctx: Context, result: RunResult, left: Iterable[str] = ()) -> str | None:
    """Post `torn_down` (what was deleted, what failed, what is left); the line to show, or None
    when NOTIFY_WEBHOOK is not set. A failed post is told, never raised: the teardown is done."""
    from .. import notify

    cfg = ctx.cfg
    if cfg.notify_webhook is None:
        return None
    problems = [*(f"{name} failed" for name in result.failed), *(f"{name} is left (still billed)" for name in left)]
    if problems:
        what = f"the teardown of {cfg.cluster_name} in {cfg.project_id} ended with " + "; ".join(problems)
    else:
        what = f"everything rltui made for {cfg.cluster_name} in {cfg.project_id} is deleted"
    try:
        await asyncio.to_thread(notify.send, cfg, "torn_down", what)
    except notify.NotifyFailed as exc:
        return f"notify: {exc}"
    return "notify: posted the teardown's message to NOTIFY_WEBHOOK"
