"""The plan as a screen draws it: each step's view, the critical path and an honest ETA."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def fmt_s(seconds: float | None) -> str:
    """0:58, 17:30, 1:02:03 (whole seconds, truncated so a ticking clock never runs ahead)."""
    if seconds is None:
        return "--:--"
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


@dataclass(frozen=True)
class PlanView:
    steps: tuple[Any, ...]          # rltui.plan.runner.StepView, in graph order
    critical_path: tuple[str, ...]  # step names, first to last
    eta_s: float | None             # seconds to a ready RayCluster; None when a failure blocks it
    running: bool


def plan_view(runner: Any) -> PlanView:
    return PlanView(tuple(runner.snapshot()), tuple(runner.critical_path()), runner.eta_s(),
                    bool(runner.busy))
