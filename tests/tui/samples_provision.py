"""Deterministic plan snapshots for the Provision screen: the codelab's eleven steps with
the reference durations (latency profile), cluster ray-a4-gpu-spot in team-rl-sandbox-42."""

from __future__ import annotations

from dataclasses import replace

from rltui.plan.runner import RunEvent, StepView
from rltui.plan.step import StepState as S
from rltui.plan.view import PlanView

P, C, Z, R = "team-rl-sandbox-42", "ray-a4-gpu-spot", "us-east1-b", "us-east1"
NET = f"{C}-net-0"
STATE = __import__("pathlib").Path("/home/user/.local/state/rltui")

def _from_the_plan() -> list[tuple[str, str, tuple[str, ...], float, str]]:
    """name, title, needs, expected_s, command of each step, from the real plan (so the screen
    shows the commands rltui runs), in the order the Provision screen lists them."""
    from pathlib import Path

    from rltui.cloud.endpoints import Endpoints
    from rltui.config import parse_config
    from rltui.envfile import EnvFile
    from rltui.plan.context import Context
    from rltui.plan.steps import build_plan

    env = Path(__file__).resolve().parents[1] / "data" / "env" / "devrel-demos.env.sh"
    ctx = Context(parse_config(EnvFile.read(env).values()), Endpoints(label="SANDBOX"), root=STATE)
    steps = {s.name: s for s in build_plan(ctx) if s.made_by_up}  # what Provision lists (plan_view)
    order = ("enable_apis", "xpk_cluster", "addons", "network_ready", "ip_range", "peering",
             "lustre_instance", "lustre_firewall", "credentials", "secret", "pv_pvc", "raycluster",
             "dashboard")
    assert set(order) == set(steps), "a step was added to the plan: list it here"
    return [(n, steps[n].title, tuple(steps[n].needs), steps[n].expected_s, steps[n].command()) for n in order]


STEPS = _from_the_plan()
TITLES = {name: title for name, title, *_ in STEPS}

XPK_LINES = (
    "[XPK] Starting xpk",
    f"[XPK] Working on {P} and {Z}",
    f"[XPK] Creating networks {C}-net-0, {C}-net-1, {C}-rdma-net",
    "[XPK] Cluster Toolkit: blueprint written to xpk-b200-8.yaml",
    f"[XPK] GKE control plane {C}: RUNNING",
    "[XPK] Node pool a4-highgpu-8g: 3/8 nodes",
    "[XPK] Node pool a4-highgpu-8g: 5/8 nodes",
)


def fresh() -> dict[str, StepView]:
    return {name: StepView(name, title, S.PENDING, 0.0, expected, "", None, (), needs, command, 0)
            for name, title, needs, expected, command in STEPS}


def _plan(views: dict[str, StepView], path: tuple[str, ...], eta: float | None,
          running: bool) -> PlanView:
    return PlanView(tuple(views.values()), path, eta, running)


def _set(views: dict[str, StepView], name: str, state: S, elapsed: float = 0.0,
         message: str = "", **more: object) -> None:
    attempts = 1 if state not in (S.PENDING, S.WAITING, S.BLOCKED, S.SKIPPED) else 0
    views[name] = replace(views[name], state=state, elapsed_s=elapsed, message=message,
                          attempts=more.pop("attempts", attempts), **more)  # type: ignore[arg-type]


def plan_idle() -> PlanView:
    """Before any run: every step pending, the full critical path and how long a run takes."""
    return _plan(fresh(), ("enable_apis", "xpk_cluster", "addons", "raycluster", "dashboard"),
                 2232.0, False)


def plan_mid_run() -> PlanView:
    """xpk at 70% (17:30 of 25:00) while the Lustre chain runs beside it."""
    v = fresh()
    _set(v, "enable_apis", S.DONE, 58.0, "done", attempts=1)
    _set(v, "xpk_cluster", S.RUNNING, 1050.0, "creating", lines=XPK_LINES)
    _set(v, "network_ready", S.DONE, 121.0, "done")
    _set(v, "ip_range", S.DONE, 30.0, "done")
    _set(v, "peering", S.DONE, 89.0, "done")
    _set(v, "lustre_instance", S.RUNNING, 432.0, "state CREATING")
    _set(v, "addons", S.WAITING, 0.0, "waits: xpk cluster create")
    _set(v, "credentials", S.WAITING, 0.0, "waits: xpk cluster create")
    _set(v, "secret", S.WAITING, 0.0, "waits: Cluster credentials")
    _set(v, "pv_pvc", S.WAITING, 0.0, "waits: Cluster credentials, Lustre instance")
    _set(v, "raycluster", S.WAITING, 0.0,
         "waits: Addons (RayOperator + Lustre CSI), PV / PVC, Secret (HF_TOKEN, WANDB_API_KEY)")
    _set(v, "dashboard", S.WAITING, 0.0, "waits: RayCluster ready")
    return _plan(v, ("xpk_cluster", "addons", "raycluster", "dashboard"), 450.0 + 240 + 480 + 12,
                 True)


QUOTA = ("QUOTA_EXCEEDED: Quota 'GLOBAL_INTERNAL_ADDRESSES' exceeded. Limit: 5.0 globally. "
         "Ask for more quota in the console (IAM & Admin > Quotas) or delete unused ranges.")


def plan_failed() -> PlanView:
    """The IP range failed for quota; the rest of the Lustre chain is blocked, xpk goes on."""
    v = fresh()
    _set(v, "enable_apis", S.EXISTED, 0.4, "already there")
    _set(v, "xpk_cluster", S.RUNNING, 600.0, "creating", lines=XPK_LINES[:5])
    _set(v, "network_ready", S.DONE, 118.0, "done")
    _set(v, "ip_range", S.FAILED, 3.0, QUOTA,
         lines=(f"Create request issued for: [google-managed-services-{NET}]",
                "ERROR: (gcloud.compute.addresses.create) " + QUOTA))
    _set(v, "peering", S.BLOCKED, 0.0, "blocked: IP range failed")
    _set(v, "lustre_instance", S.BLOCKED, 0.0, "blocked: VPC peering blocked")
    _set(v, "addons", S.WAITING, 0.0, "waits: xpk cluster create")
    _set(v, "credentials", S.WAITING, 0.0, "waits: xpk cluster create")
    _set(v, "secret", S.WAITING, 0.0, "waits: Cluster credentials")
    _set(v, "pv_pvc", S.BLOCKED, 0.0, "blocked: Lustre instance blocked")
    _set(v, "raycluster", S.BLOCKED, 0.0, "blocked: PV / PVC blocked")
    _set(v, "dashboard", S.BLOCKED, 0.0, "blocked: RayCluster ready blocked")
    return _plan(v, (), None, True)


def xpk_line(text: str, elapsed: float = 1051.0) -> RunEvent:
    """One line of xpk's output as the runner publishes it."""
    return RunEvent("xpk_cluster", "xpk cluster create", S.RUNNING, 1_700_000_000.0, elapsed,
                    1500.0, "creating", None, text, "line")


def lustre_line(text: str) -> RunEvent:
    return RunEvent("lustre_instance", "Lustre instance", S.RUNNING, 1_700_000_000.0, 433.0,
                    720.0, "state CREATING", None, text, "line")
