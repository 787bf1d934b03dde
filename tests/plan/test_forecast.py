"""Critical path and ETA on the codelab's shape, with a clock the test moves."""

from __future__ import annotations

import asyncio

import pytest

from rltui.plan import PermanentError, Probe, Runner, Step, StepOutput, StepState

S = StepState
GKE = ("gke:proj/ray-a4-gpu-spot",)


class Gated(Step):
    """Runs until the test opens its gate, so the test decides what is running when."""

    def __init__(self, name: str, expected_s: float, needs: tuple[str, ...] = (),
                 locks: tuple[str, ...] = ()) -> None:
        self.name, self.title, self.expected_s = name, name, expected_s
        self.needs, self.locks = needs, locks
        self.gate = asyncio.Event()

    async def probe(self, ctx) -> Probe:
        return Probe(exists=False)

    async def apply(self, ctx, out: StepOutput) -> None:
        await self.gate.wait()


def codelab() -> list[Gated]:
    return [Gated("xpk_cluster", 1500, locks=GKE),
            Gated("network_ready", 120),
            Gated("ip_range", 30, ("network_ready",)),
            Gated("vpc_peering", 90, ("ip_range",)),
            Gated("lustre_instance", 720, ("vpc_peering",)),
            Gated("addons", 240, ("xpk_cluster",), locks=GKE),
            Gated("pv_pvc", 12, ("lustre_instance", "xpk_cluster")),
            Gated("raycluster", 480, ("addons", "pv_pvc"))]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def until(runner: Runner, **states: StepState) -> None:
    for _ in range(2000):
        view = {v.name: v.state for v in runner.snapshot()}
        if all(view[n] is s for n, s in states.items()):
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never reached {states}: {view}")


def test_before_a_run_the_plan_is_xpk_then_addons_then_the_raycluster():
    runner = Runner(codelab(), None)
    assert runner.critical_path() == ["xpk_cluster", "addons", "raycluster"]
    assert runner.eta_s() == pytest.approx(1500 + 240 + 480)


async def test_eta_follows_the_run_and_the_critical_path_moves():
    steps = codelab()
    gate = {s.name: s.gate for s in steps}
    clock = Clock()
    runner = Runner(steps, None, clock=clock)
    run = asyncio.create_task(runner.up())
    await until(runner, xpk_cluster=S.RUNNING, network_ready=S.RUNNING)
    clock.now = 100.0
    gate["network_ready"].set()
    await until(runner, network_ready=S.DONE, ip_range=S.RUNNING)
    assert runner.eta_s() == pytest.approx(1400 + 240 + 480)
    assert runner.critical_path() == ["xpk_cluster", "addons", "raycluster"]
    view = {v.name: v for v in runner.snapshot()}
    assert (view["xpk_cluster"].elapsed_s, view["network_ready"].elapsed_s) == (100.0, 100.0)
    assert view["addons"].message == "waits: xpk_cluster"

    # xpk runs long and the IP range is stuck: each is given a tenth of its expected time
    # more, and now the Lustre chain decides the finish
    clock.now = 1800.0
    assert runner.critical_path() == ["ip_range", "vpc_peering", "lustre_instance", "pv_pvc",
                                      "raycluster"]
    assert runner.eta_s() == pytest.approx(3 + 90 + 720 + 12 + 480)
    for name in ("ip_range", "vpc_peering", "lustre_instance", "xpk_cluster", "pv_pvc",
                 "addons", "raycluster"):
        gate[name].set()
    assert (await run).ok
    assert runner.eta_s() == 0.0 and runner.critical_path() == []


async def test_steps_sharing_a_lock_add_up():
    steps = [Gated("ray_operator", 100, locks=GKE), Gated("lustre_csi", 100, locks=GKE),
             Gated("secret", 150)]
    clock = Clock()
    runner = Runner(steps, None, clock=clock)
    assert runner.eta_s() == pytest.approx(200)
    assert runner.critical_path() == ["ray_operator", "lustre_csi"]
    run = asyncio.create_task(runner.up())
    await until(runner, ray_operator=S.RUNNING, lustre_csi=S.WAITING, secret=S.RUNNING)
    clock.now = 30.0
    assert runner.eta_s() == pytest.approx(70 + 100)
    for s in steps:
        s.gate.set()
    assert (await run).ok


async def test_no_eta_once_a_failure_means_the_run_cannot_finish():
    class Broken(Gated):
        async def apply(self, ctx, out: StepOutput) -> None:
            raise PermanentError("Enable billing on the project, then run again.")

    steps = [Broken("xpk_cluster", 1500), Gated("addons", 240, ("xpk_cluster",)),
             Gated("ip_range", 30)]
    steps[2].gate.set()
    runner = Runner(steps, None)
    result = await runner.up()
    assert result.states["addons"] is S.BLOCKED
    assert runner.eta_s() is None and runner.critical_path() == []


async def test_teardown_is_forecast_with_delete_durations():
    steps = [Gated("xpk_cluster", 1500), Gated("lustre_instance", 720),
             Gated("pv_pvc", 12, ("lustre_instance", "xpk_cluster"))]
    steps[0].destroy_expected_s, steps[1].destroy_expected_s = 900.0, 300.0
    for s in steps:   # everything exists; each delete runs until its gate opens
        s.probe = _exists
        s.destroy = _gated_destroy(s)
    clock = Clock()
    runner = Runner(steps, None, clock=clock)
    # the Teardown screen asks before anything runs
    assert runner.eta_s("down") == pytest.approx(12 + 900)
    assert runner.critical_path("down") == ["pv_pvc", "xpk_cluster"]
    assert runner.eta_s() == pytest.approx(1500 + 12)          # the up plan is the default
    run = asyncio.create_task(runner.down())
    await until(runner, pv_pvc=S.DESTROYING, xpk_cluster=S.WAITING)
    clock.now = 10.0
    steps[2].gate.set()
    await until(runner, pv_pvc=S.DESTROYED, xpk_cluster=S.DESTROYING)
    clock.now = 110.0
    assert runner.eta_s() == pytest.approx(800)                 # xpk delete began at 10 s
    assert runner.critical_path() == ["xpk_cluster"]
    assert {v.name: v.expected_s for v in runner.snapshot()} == {
        "xpk_cluster": 900.0, "lustre_instance": 300.0, "pv_pvc": 12.0}
    steps[0].gate.set()
    steps[1].gate.set()
    assert (await run).ok and runner.eta_s() == 0.0


async def _exists(ctx) -> Probe:
    return Probe(exists=True)


def _gated_destroy(step: Gated):
    async def destroy(ctx, out: StepOutput) -> None:
        await step.gate.wait()
    return destroy
