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
    time_scale: float = 1.0         # real seconds per reference second (a sandbox runs faster)


def plan_view(runner: Any, time_scale: float = 1.0) -> PlanView:
    """The steps up makes (Step.made_by_up: the budget guard's account is submit's, and only
    a teardown row), with the critical path and the ETA."""
    made = {step.name for step in runner.steps if step.made_by_up}
    return PlanView(tuple(v for v in runner.snapshot() if v.name in made), tuple(runner.critical_path()),
                    runner.eta_s(), bool(runner.busy), time_scale)


def on_gke(seconds: float | None, time_scale: float) -> str:
    """What `seconds` of a sandbox running `time_scale` real seconds per reference second
    stands for on GKE ("25 min"); "" against Google itself, where the time is the time."""
    if seconds is None or time_scale >= 1.0 or time_scale <= 0:
        return ""
    ref = seconds / time_scale
    if ref < 90:
        return f"{round(ref)} s"
    minutes = round(ref / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
