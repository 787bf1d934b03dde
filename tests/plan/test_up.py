"""`up`: concurrency, the Lustre chain overlapping xpk, locks, probes, retries, failures."""

from __future__ import annotations

import asyncio
import random

import pytest

from rltui.plan import (PermanentError, Probe, RetryPolicy, Runner, Step, StepOutput, StepState,
                        TransientError)

S = StepState


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


async def test_independent_steps_run_at_the_same_time(cloud, step_cls, fast_retry):
    steps = [step_cls("enable_apis", work_s=0.01),
             step_cls("ip_range", ("enable_apis",), work_s=0.15),
             step_cls("xpk_cluster", ("enable_apis",), work_s=0.15)]
    result = await Runner(steps, cloud, retry=fast_retry).up()
    assert result.ok and set(result.states.values()) == {S.DONE}
    assert overlap(cloud.spans["ip_range"], cloud.spans["xpk_cluster"])
    # a step only starts once its need is done
    assert cloud.spans["ip_range"][0] >= cloud.spans["enable_apis"][1]
    assert result.elapsed_s < 0.3    # about 0.16 s; one after the other would be 0.31 s


class Xpk(Step):
    """xpk makes the network early, then spends much longer on the cluster and node pools."""
    name, title, expected_s = "xpk_cluster", "xpk cluster create", 1500.0

    async def probe(self, cloud) -> Probe:
        return Probe(exists="xpk_cluster" in cloud.objects, ready=cloud.is_ready("xpk_cluster"))

    async def apply(self, cloud, out: StepOutput) -> None:
        start = cloud.now()
        out.line("[XPK] Creating networks")
        await asyncio.sleep(0.03)
        cloud.create("network", 0.0)
        out.progress(0.1)
        cloud.create("xpk_cluster", 0.35)
        while not cloud.is_ready("xpk_cluster"):
            await asyncio.sleep(0.005)
        cloud.spans[self.name] = (start, cloud.now())


class NetworkReady(Step):
    """Waits for the network xpk makes: it needs no step, it polls the cloud."""
    name, title, expected_s = "network_ready", "Network ready", 120.0

    async def probe(self, cloud) -> Probe:
        return Probe(exists="network" in cloud.objects)

    async def apply(self, cloud, out: StepOutput) -> None:
        start = cloud.now()
        while "network" not in cloud.objects:
            await asyncio.sleep(0.005)
        cloud.spans[self.name] = (start, cloud.now())


async def test_lustre_chain_starts_while_xpk_still_runs(cloud, step_cls, fast_retry, events):
    steps = [Xpk(), NetworkReady(),
             step_cls("ip_range", ("network_ready",), work_s=0.02),
             step_cls("vpc_peering", ("ip_range",), work_s=0.02),
             step_cls("lustre_instance", ("vpc_peering",), work_s=0.05),
             step_cls("addons", ("xpk_cluster",), work_s=0.02)]
    result = await Runner(steps, cloud, retry=fast_retry, listener=events.append).up()
    assert result.ok
    xpk = cloud.spans["xpk_cluster"]
    assert cloud.spans["network_ready"][1] < xpk[0] + 0.15      # right after the network appears
    assert cloud.spans["lustre_instance"][1] < xpk[1]           # whole chain done before xpk
    assert cloud.spans["addons"][0] >= xpk[1]                   # addons really wait for xpk
    # what the headless printer and the TUI see: the addon step waited, naming xpk
    waits = [e for e in events if e.step == "addons" and e.state is S.WAITING]
    assert waits and "xpk cluster create" in waits[0].message
    xpk_events = [e for e in events if e.step == "xpk_cluster"]
    assert [e.line for e in xpk_events if e.kind == "line"] == ["[XPK] Creating networks"]
    assert any(e.kind == "progress" and e.progress == pytest.approx(0.1) for e in xpk_events)
    last = xpk_events[-1]
    assert (last.state, last.expected_s) == (S.DONE, 1500.0) and last.elapsed_s >= 0.3


async def test_a_lock_serialises_two_gke_operations(cloud, step_cls, fast_retry, events):
    gke = ("gke:proj/rl-b200",)
    steps = [step_cls("ray_operator", locks=gke, work_s=0.08, title="RayOperator addon"),
             step_cls("lustre_csi", locks=gke, work_s=0.08, title="Lustre CSI addon"),
             step_cls("ip_range", work_s=0.08)]
    result = await Runner(steps, cloud, retry=fast_retry, listener=events.append).up()
    assert result.ok
    a, b = cloud.spans["ray_operator"], cloud.spans["lustre_csi"]
    assert not overlap(a, b)
    assert overlap(cloud.spans["ip_range"], a)                 # no lock: not held back
    second = "lustre_csi" if b[0] > a[0] else "ray_operator"
    holder = "RayOperator addon" if second == "lustre_csi" else "Lustre CSI addon"
    waits = [e.message for e in events if e.step == second and e.state is S.WAITING]
    assert waits == [f"waits for gke:proj/rl-b200: held by {holder}"]


async def test_what_exists_is_not_created_again(cloud, step_cls, fast_retry):
    cloud.create("xpk_cluster", 0.0)
    steps = [step_cls("xpk_cluster"), step_cls("addons", ("xpk_cluster",))]
    result = await Runner(steps, cloud, retry=fast_retry).up()
    assert result.states == {"xpk_cluster": S.EXISTED, "addons": S.DONE}
    assert result.messages["xpk_cluster"] == "xpk_cluster found"
    assert cloud.applies["xpk_cluster"] == 0 and cloud.created["xpk_cluster"] == 1


async def test_rerun_after_a_crash_continues_without_a_second_copy(cloud, step_cls, fast_retry):
    steps = [step_cls("ip_range", work_s=0.01),
             step_cls("lustre_instance", ("ip_range",), work_s=0.25),
             step_cls("pv_pvc", ("lustre_instance",), work_s=0.01)]
    first = asyncio.create_task(Runner(steps, cloud, retry=fast_retry).up())
    while "lustre_instance" not in cloud.objects:
        await asyncio.sleep(0.005)
    first.cancel()                       # the wizard dies; the create operation goes on
    with pytest.raises(asyncio.CancelledError):
        await first
    result = await Runner(steps, cloud, retry=fast_retry).up()
    assert result.ok
    assert result.states == {"ip_range": S.EXISTED, "lustre_instance": S.DONE, "pv_pvc": S.DONE}
    assert cloud.created == {"ip_range": 1, "lustre_instance": 1, "pv_pvc": 1}


async def test_transient_failures_are_retried_then_succeed(cloud, step_cls, fast_retry, events):
    cloud.failures["vpc_peering"] = [TransientError("operation in progress"),
                                     ConnectionResetError("reset by peer")]
    runner = Runner([step_cls("vpc_peering")], cloud, retry=fast_retry, listener=events.append)
    result = await runner.up()
    assert result.states == {"vpc_peering": S.DONE} and runner.snapshot()[0].attempts == 3
    assert cloud.applies["vpc_peering"] == 3 and cloud.created["vpc_peering"] == 1
    notes = [e.message for e in events if e.kind == "note" and "retrying" in e.message]
    assert notes[0].startswith("attempt 1/4 failed: operation in progress; retrying in ")
    assert notes[1].startswith("attempt 2/4 failed: reset by peer;")  # no class name


def test_backoff_grows_is_capped_and_jittered():
    policy = RetryPolicy(attempts=8, base_s=2.0, cap_s=60.0, rng=random.Random(3))
    delays = [policy.delay_s(n) for n in range(1, 8)]
    ceilings = [2, 4, 8, 16, 32, 60, 60]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings))
    assert delays[5] != delays[6]                    # two clients do not retry in lockstep
    again = RetryPolicy(base_s=2.0, cap_s=60.0, rng=random.Random(3))
    assert [again.delay_s(n) for n in range(1, 8)] == delays   # seeded: reproducible


async def test_retry_after_from_the_service_is_honoured(cloud, step_cls, fast_retry):
    cloud.failures["addons"] = [TransientError("cluster busy", retry_after_s=0.12)]
    result = await Runner([step_cls("addons", work_s=0.0)], cloud, retry=fast_retry).up()
    assert result.ok and result.elapsed_s >= 0.12


async def test_transient_failures_give_up_after_the_attempts(cloud, step_cls):
    cloud.failures["addons"] = [TransientError("503 backend error")] * 5
    retry = RetryPolicy(attempts=3, base_s=0.001, cap_s=0.002, rng=random.Random(1))
    runner = Runner([step_cls("addons")], cloud, retry=retry)
    result = await runner.up()
    assert result.states == {"addons": S.FAILED} and cloud.applies["addons"] == 3
    assert result.messages["addons"].startswith("gave up after 3 attempts: 503 backend error.")
    assert runner.snapshot()[0].attempts == 3


async def test_classify_hook_makes_a_foreign_error_transient(cloud, step_cls):
    class Unavailable(Exception):   # what a gRPC/HTTP error would be, without importing them
        pass
    cloud.failures["lustre_instance"] = [Unavailable("UNAVAILABLE")]
    retry = RetryPolicy(attempts=2, base_s=0.001, cap_s=0.001,
                        classify=lambda e: isinstance(e, Unavailable))
    result = await Runner([step_cls("lustre_instance")], cloud, retry=retry).up()
    assert result.ok and cloud.applies["lustre_instance"] == 2


async def test_an_unexpected_error_is_not_retried(cloud, step_cls, fast_retry):
    cloud.failures["secret"] = [KeyError("HF_TOKEN")]
    result = await Runner([step_cls("secret")], cloud, retry=fast_retry).up()
    assert result.states == {"secret": S.FAILED} and cloud.applies["secret"] == 1
    assert result.messages["secret"] == "KeyError: 'HF_TOKEN'"


async def test_permanent_failure_blocks_dependents_not_other_branches(cloud, step_cls, fast_retry):
    todo = "Quota for B200 in us-east1 is 0: request quota, then run rltui up again."
    cloud.failures["xpk_cluster"] = [PermanentError(todo)]
    steps = [step_cls("xpk_cluster", title="xpk cluster create"),
             step_cls("addons", ("xpk_cluster",)),
             step_cls("raycluster", ("addons", "lustre_instance")),
             step_cls("ip_range", work_s=0.02),
             step_cls("lustre_instance", ("ip_range",), work_s=0.03)]
    result = await Runner(steps, cloud, retry=fast_retry).up()
    assert not result.ok
    assert result.states == {"xpk_cluster": S.FAILED, "addons": S.BLOCKED,
                             "raycluster": S.BLOCKED, "ip_range": S.DONE,
                             "lustre_instance": S.DONE}
    assert result.messages["xpk_cluster"] == todo and cloud.applies["xpk_cluster"] == 1
    assert result.messages["addons"] == "blocked: xpk cluster create failed"
    assert result.failed == ["xpk_cluster"] and result.blocked == ["addons", "raycluster"]


async def test_targets_run_only_what_they_need(cloud, step_cls, fast_retry):
    steps = [step_cls("enable_apis"), step_cls("ip_range", ("enable_apis",)),
             step_cls("xpk_cluster", ("enable_apis",))]
    result = await Runner(steps, cloud, retry=fast_retry).up({"ip_range"})
    assert result.states == {"enable_apis": S.DONE, "ip_range": S.DONE}
    assert "xpk_cluster" not in cloud.objects


async def test_output_from_a_worker_thread_reaches_the_view_bounded(cloud, fast_retry):
    class Chatty(Step):
        name, title, expected_s = "xpk_cluster", "xpk cluster create", 1.0

        async def probe(self, ctx) -> Probe:
            return Probe(exists=False)

        async def apply(self, ctx, out: StepOutput) -> None:
            def blocking_client() -> None:
                for i in range(700):
                    out.line(f"[XPK] line {i}")
            await asyncio.to_thread(blocking_client)
            await asyncio.sleep(0.01)   # the loop delivers what the thread handed over

    runner = Runner([Chatty()], cloud, retry=fast_retry)
    await runner.up()
    view = runner.snapshot()[0]
    assert len(view.lines) == 500
    assert view.lines[0] == "[XPK] line 200" and view.lines[-1] == "[XPK] line 699"
    assert view.command == "" and view.state is S.DONE


async def test_a_listener_that_raises_does_not_break_the_run(cloud, step_cls, fast_retry):
    def broken(event) -> None:
        raise RuntimeError("UI went away")
    result = await Runner([step_cls("a"), step_cls("b", ("a",))], cloud, retry=fast_retry,
                          listener=broken).up()
    assert result.ok


async def test_a_runner_runs_one_plan_at_a_time(cloud, step_cls, fast_retry):
    runner = Runner([step_cls("a", work_s=0.05)], cloud, retry=fast_retry)
    first = asyncio.create_task(runner.up())
    await asyncio.sleep(0.01)
    assert runner.busy
    with pytest.raises(RuntimeError, match="already in progress"):
        await runner.down()
    assert (await first).ok and not runner.busy


def test_importing_the_plan_loads_no_cloud_or_ui_library():
    import subprocess
    import sys
    code = ("import sys, rltui.plan\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'textual', 'grpc', 'google', 'kubernetes', 'ray', 'aiohttp'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_step_alongside_another_starts_without_waiting_but_is_blocked_by_its_failure(
        cloud, step_cls, fast_retry):
    """The addons run alongside xpk (Step.alongside): up({addons}) pulls xpk in, the addons
    start before it ends, and a failed xpk blocks addons that have not started yet."""
    along = step_cls("addons", work_s=0.02)
    along.alongside = ("xpk_cluster",)
    result = await Runner([step_cls("xpk_cluster", work_s=0.2), along], cloud,
                          retry=fast_retry).up({"addons"})
    assert result.ok and set(result.states) == {"xpk_cluster", "addons"}
    assert cloud.spans["addons"][1] < cloud.spans["xpk_cluster"][1]   # did not wait for it

    cloud2 = type(cloud)()
    cloud2.failures["xpk_cluster"] = [PermanentError("quota")]
    late = step_cls("addons", ("slow",), work_s=0.02)
    late.alongside = ("xpk_cluster",)
    steps = [step_cls("slow", work_s=0.1), step_cls("xpk_cluster", work_s=0.0), late]
    result = await Runner(steps, cloud2, retry=fast_retry).up()
    assert result.states["xpk_cluster"] is S.FAILED and result.states["addons"] is S.BLOCKED
    assert cloud2.applies["addons"] == 0
