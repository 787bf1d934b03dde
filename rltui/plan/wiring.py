"""Wiring every face shares: the retry policy for the endpoints a face chose (Google, or the
local sandbox: sandbox_link.py), the run's log file, and the one Runner of a config."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .context import Context

if TYPE_CHECKING:
    from ..cloud.endpoints import Endpoints
    from .runner import RetryPolicy, RunEvent, Runner


def retry_policy(endpoints: Endpoints) -> RetryPolicy:
    from ..cloud.errors import CloudError
    from .runner import RetryPolicy

    # Faster sandboxes retry sooner; Google gets the usual 2 s base.
    base = max(0.1, 2.0 * min(1.0, 60.0 * endpoints.time_scale))
    return RetryPolicy(attempts=6, base_s=base, cap_s=60.0 * max(endpoints.time_scale * 60, 0.05),
                       # A call whose own retries ran out has spent its budget: not again here.
                       classify=lambda exc: isinstance(exc, CloudError) and exc.transient
                       and not exc.exhausted)


def log_to_file(ctx: Context) -> Path:
    """Diagnostics (tracebacks included) go to a private file, never to the terminal."""
    ctx.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = ctx.run_dir / "rltui.log"
    root = logging.getLogger("rltui")
    if not any(getattr(h, "baseFilename", None) == str(path) for h in root.handlers):
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        path.chmod(0o600)
    root.setLevel(logging.INFO)
    return path


def make_runner(ctx: Context, listener: Callable[[RunEvent], None]) -> Runner:
    """The plan of `ctx`'s config, its progress saved beside the run's other files."""
    from .progress import ProgressStore
    from .runner import Runner
    from .steps import build_plan

    log_to_file(ctx)
    return Runner(build_plan(ctx), ctx, progress=ProgressStore(ctx.run_dir / "progress.json"),
                  listener=listener, retry=retry_policy(ctx.endpoints))
