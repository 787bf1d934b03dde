"""NOTIFY_WEBHOOK from the user's machine: `rltui notify --test` and the teardown's message. The
post itself is the supervisor's (rltui/oncluster/webhook.py: `{"text": ...}`, a short timeout,
failures told without the URL), so a message that works here works from the cluster.

Pure core: the standard library only, loaded by the commands that post and by nothing at startup.
"""

from __future__ import annotations

import time
from typing import Any

from .oncluster.events import sentence
from .oncluster.webhook import PostFailed, post


class NotifyFailed(Exception):
    """A post that did not go through: one line for the user, never the URL."""


def send(cfg: Any, kind: str, text: str, run: str = "") -> str:
    """Post one message as the supervisor words its events; returns the sentence posted.
    Raises NotifyFailed; ValueError when NOTIFY_WEBHOOK is not set."""
    if cfg.notify_webhook is None:
        raise ValueError("NOTIFY_WEBHOOK is not set in env.sh")
    line = sentence({"kind": kind, "at": time.time(), "run": run, "attempt": None, "step": None, "text": text,
                     "spend_usd": None})
    try:
        post(cfg.notify_webhook.get_secret_value(), line)
    except PostFailed as exc:
        raise NotifyFailed(f"the post to NOTIFY_WEBHOOK failed: {exc}") from None
    return line


def test_message(cfg: Any) -> str:
    """`rltui notify --test`: one message, sent now."""
    return send(cfg, "test", f"a test message from `rltui notify --test` for {cfg.cluster_name} in "
                f"{cfg.project_id}: the runs' events (preempted, stalled, resumed, succeeded, failed, ...) "
                "will arrive here")
