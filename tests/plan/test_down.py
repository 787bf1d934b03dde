"""`down`: the reverse graph, parallel where independent, nothing left behind, and the graph
checks shared with `up`."""

from __future__ import annotations

import pytest

from rltui.plan import PermanentError, Runner, StepState

S = StepState


def codelab_shape(step_cls):
    return [step_cls("enable_apis", destroyable=False),
            step_cls("xpk_cluster", ("enable_apis",), work_s=0.03,
                     destroy_needs=("secret", "network_ready")),   # xpk deletes the network last
            step_cls("network_ready", destroyable=False),
            step_cls("ip_range", ("network_ready",)),
            step_cls("vpc_peering", ("ip_range",)),
            step_cls("lustre_instance", ("vpc_peering",), work_s=0.05),
            step_cls("pv_pvc", ("lustre_instance",), work_s=0.05),
            step_cls("addons", ("xpk_cluster",)),
            step_cls("secret", ("xpk_cluster",), work_s=0.05)]


def populate(cloud, names):
    for n in names:
        cloud.create(n, 0.0)


async def test_down_runs_the_graph_in_reverse_and_in_parallel(cloud, step_cls, fast_retry):
    steps = codelab_shape(step_cls)
    populate(cloud, [s.name for s in steps if s.name != "addons"])   # addons never enabled
    result = await Runner(steps, cloud, retry=fast_retry).down()
    assert result.ok and result.mode == "down"
    assert result.states == {"enable_apis": S.SKIPPED, "xpk_cluster": S.DESTROYED,
                             "network_ready": S.SKIPPED, "ip_range": S.DESTROYED,
                             "vpc_peering": S.DESTROYED, "lustre_instance": S.DESTROYED,
                             "pv_pvc": S.DESTROYED, "addons": S.ABSENT, "secret": S.DESTROYED}
    span = cloud.spans
    assert span["secret"][0] < span["pv_pvc"][1] and span["pv_pvc"][0] < span["secret"][1]
    chain = ["pv_pvc", "lustre_instance", "vpc_peering", "ip_range", "xpk_cluster"]
    for before, after in zip(chain, chain[1:]):   # even through the kept network_ready step
        assert span[before][1] <= span[after][0], (before, after)
    assert span["secret"][1] <= span["xpk_cluster"][0]
    assert set(cloud.objects) == {"enable_apis", "network_ready"}
    assert cloud.deleted["addons"] == 0


async def test_down_a_target_removes_what_depends_on_it_only(cloud, step_cls, fast_retry):
    steps = codelab_shape(step_cls)
    populate(cloud, [s.name for s in steps])
    result = await Runner(steps, cloud, retry=fast_retry).down({"lustre_instance"})
    assert result.states == {"lustre_instance": S.DESTROYED, "pv_pvc": S.DESTROYED}
    assert "vpc_peering" in cloud.objects and "xpk_cluster" in cloud.objects


async def test_a_failed_delete_blocks_what_must_wait_for_it(cloud, step_cls, fast_retry):
    steps = codelab_shape(step_cls)
    populate(cloud, [s.name for s in steps])
    cloud.failures["lustre_instance"] = [PermanentError("Instance is mounted: unmount it first.")]
    result = await Runner(steps, cloud, retry=fast_retry).down()
    assert result.states["lustre_instance"] is S.FAILED
    assert result.messages["lustre_instance"] == "Instance is mounted: unmount it first."
    for name in ("vpc_peering", "ip_range", "network_ready", "xpk_cluster", "enable_apis"):
        assert result.states[name] is S.BLOCKED, name
    assert result.states["secret"] is S.DESTROYED and result.states["pv_pvc"] is S.DESTROYED
    assert "xpk_cluster" in cloud.objects     # nothing deleted under a live dependency


async def test_up_then_down_on_one_runner(cloud, step_cls, fast_retry):
    runner = Runner(codelab_shape(step_cls), cloud, retry=fast_retry)
    assert (await runner.up()).ok
    assert (await runner.down()).ok
    assert set(cloud.objects) == {"enable_apis", "network_ready"}
    assert (await runner.up()).ok and cloud.created["xpk_cluster"] == 2


def test_a_cycle_is_rejected_naming_the_steps(step_cls):
    steps = [step_cls("addons", ("raycluster",)), step_cls("raycluster", ("pv_pvc",)),
             step_cls("pv_pvc", ("addons",)), step_cls("ip_range")]
    with pytest.raises(ValueError, match="up graph has a cycle: addons -> raycluster -> pv_pvc "
                                         "-> addons"):
        Runner(steps, None)


def test_a_cycle_made_by_destroy_needs_is_rejected(step_cls):
    steps = [step_cls("xpk_cluster", destroy_needs=("addons",)),
             step_cls("addons", destroy_needs=("xpk_cluster",))]
    with pytest.raises(ValueError, match="down graph has a cycle"):
        Runner(steps, None)


@pytest.mark.parametrize("steps, message", [
    ([("addons", ("xpk",))], "step addons needs unknown step"),
    ([("addons", ()), ("addons", ())], "duplicate step names: addons"),
])
def test_unknown_needs_and_duplicates_are_rejected(step_cls, steps, message):
    with pytest.raises(ValueError, match=message):
        Runner([step_cls(n, needs) for n, needs in steps], None)


async def test_an_unknown_target_is_rejected(step_cls, cloud):
    runner = Runner([step_cls("addons")], cloud)
    with pytest.raises(ValueError, match="unknown step"):
        await runner.up({"adons"})
    assert not runner.busy


def real_shape(step_cls):
    """FakeSteps wired exactly as the codelab's real steps (names, needs, down order)."""
    from rltui.plan.steps import STEP_TYPES

    steps = []
    for t in STEP_TYPES:
        s = step_cls(t.name, tuple(t.needs), destroyable=t.destroyable,
                     destroy_needs=t.destroy_needs)
        s.destroy_after = tuple(t.destroy_after)
        steps.append(s)
    return steps


async def test_a_refused_peering_delete_never_keeps_the_gpu_cluster(cloud, step_cls, fast_retry):
    """Service Networking refuses a peering delete while the producer still holds it (FACTS):
    that must not stop `down` before xpk deletes the billed cluster."""
    steps = real_shape(step_cls)
    populate(cloud, [s.name for s in steps])
    cloud.failures["peering"] = [PermanentError("Failed to delete connection; Producer services"
                                                " (e.g. CloudSQL, Cloud Memstore, etc.) are still"
                                                " using this connection.")]
    result = await Runner(steps, cloud, retry=fast_retry).down()
    assert result.states["peering"] is S.FAILED
    assert result.states["xpk_cluster"] is S.DESTROYED
    assert "xpk_cluster" not in cloud.objects
    # The range the peering holds stays, and says why.
    assert result.states["ip_range"] is S.BLOCKED


async def test_a_failed_lustre_delete_keeps_its_network_not_the_gpu_cluster(cloud, step_cls,
                                                                           fast_retry):
    """The billed cluster goes while Lustre is deleted; a Lustre instance that could not go
    keeps the network it is on, so xpk's delete of the networks waits and says why."""
    steps = real_shape(step_cls)
    populate(cloud, [s.name for s in steps])
    cloud.failures["lustre_instance"] = [PermanentError("not rltui's: left alone")]
    result = await Runner(steps, cloud, retry=fast_retry).down()
    assert result.states["xpk_cluster"] is S.DESTROYED and "xpk_cluster" not in cloud.objects
    assert result.states["network_ready"] is S.BLOCKED and "network_ready" in cloud.objects
    assert "Lustre" in result.messages["network_ready"] or "lustre" in result.messages["network_ready"]


async def test_xpk_deletes_the_cluster_after_what_holds_its_network(cloud, step_cls, fast_retry):
    """`xpk cluster delete` (xpk_cluster's row) runs while the cluster exists, once the
    Kubernetes objects, Lustre, the peering, the range and rltui's firewall rule are gone; what
    is left of the blueprint (network_ready's row) after it."""
    steps = real_shape(step_cls)
    for s in steps:
        if s.name in ("xpk_cluster", "lustre_instance", "peering"):
            s.work_s = 0.05
    populate(cloud, [s.name for s in steps])
    result = await Runner(steps, cloud, retry=fast_retry).down()
    assert result.ok, result.messages
    span = cloud.spans
    for before in ("raycluster", "pv_pvc", "secret", "lustre_instance", "peering", "ip_range",
                   "lustre_firewall"):
        assert span[before][1] <= span["xpk_cluster"][0], before
    assert span["xpk_cluster"][1] <= span["network_ready"][0]


async def test_a_step_can_ask_for_fewer_attempts(cloud, step_cls):
    from rltui.plan import RetryPolicy, TransientError

    step = step_cls("xpk_cluster")
    step.max_attempts = 2
    cloud.failures["xpk_cluster"] = [TransientError("xpk died"), TransientError("xpk died"),
                                     TransientError("xpk died")]
    result = await Runner([step], cloud, retry=RetryPolicy(attempts=6, base_s=0.001,
                                                           cap_s=0.002)).up()
    assert result.states["xpk_cluster"] is S.FAILED and cloud.applies["xpk_cluster"] == 2
