"""Whose the GKE cluster is, and what rltui does while xpk runs (red-team review, items 4, 6, 9
and 13).

xpk's blueprint in rltui's folder proves only that xpk ran there (it writes it before it
deploys, and never removes it): the cluster is rltui's when it carries managed-by=rltui or its
unique Cluster.id is the one rltui recorded (rltui-owned.json) when its own xpk made it. The
real plan against the fake adapters (tests/plan/fakes.py), whose xpk is a real subprocess.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest

from rltui.cloud.detached import Detached
from rltui.config import RLConfig, parse_config
from rltui.plan import RetryPolicy, Runner, StepOutput, StepState, TransientError, inventory
from rltui.plan import xpkstate
from rltui.plan.steps import STEP_TYPES, build_plan
from tests.plan.fakes import inventory_context, b200_config, quick_retry, FakeContext, fake_context, plan_xpk, seed

S = StepState
C = "ray-a4-gpu-spot"
P = "owned-record-proj"
R = "us-east1"
POOL = f"a4-highgpu-8g-{C}-a4-pool"
TAKEN = "ERROR: googleapi: Error 409: Already exists: projects/p/locations/us-east1/clusters/c"


def codelab_config() -> RLConfig:
    return b200_config(P)


@pytest.fixture
def ctx(tmp_path, monkeypatch) -> FakeContext:
    return inventory_context(codelab_config(), tmp_path, monkeypatch)


def retry() -> RetryPolicy:
    return quick_retry(3, 4)


def step(ctx: FakeContext, name: str):
    return {s.name: s for s in build_plan(ctx)}[name]


def someone_elses_cluster_after_a_failed_xpk(ctx: FakeContext) -> None:
    """A cluster of the plan's name made by someone else, and the blueprint an earlier xpk
    wrote in rltui's folder before Terraform failed (the name was taken)."""
    seed(ctx, ["enable_apis"])
    ctx.cloud.seed_cluster(labelled=False)
    ctx.cloud.seed_xpk_state(ctx.xpk_dir)


def recorded(ctx: FakeContext) -> xpkstate.Owned | None:
    return xpkstate.read_owned(ctx.xpk_dir, P, R, C)


# ---- item 4: ownership is recorded, not inferred from xpk's blueprint -----------------------

async def test_up_does_not_label_a_cluster_it_did_not_make(ctx):
    someone_elses_cluster_after_a_failed_xpk(ctx)
    plan_xpk(ctx, *[{"exit": 1, "stderr": TAKEN}] * 3)
    result = await Runner(build_plan(ctx), ctx, retry=retry()).up({"xpk_cluster"})
    assert result.states["xpk_cluster"] is S.FAILED
    assert "managed-by" not in ctx.cloud.cluster.resource_labels
    assert ctx.cloud.count("gke.set_labels") == 0
    # xpk was asked (its Terraform state decides), not skipped on the strength of its blueprint
    assert ctx.cloud.xpk_runs and recorded(ctx) is None


async def test_down_keeps_a_cluster_it_did_not_make_even_with_xpks_blueprint_there(ctx):
    someone_elses_cluster_after_a_failed_xpk(ctx)
    result = await Runner(build_plan(ctx), ctx, retry=retry()).down({"xpk_cluster",
                                                                     "network_ready"})
    assert result.states["xpk_cluster"] is S.SKIPPED
    assert result.messages["xpk_cluster"].startswith("not rltui's (")
    assert result.states["network_ready"] is S.SKIPPED
    assert ctx.cloud.cluster is not None and ctx.cloud.networks
    assert ctx.cloud.xpk_runs == [] and ctx.cloud.count("gke.delete") == 0


async def test_status_does_not_count_a_cluster_it_did_not_make_as_rltuis(ctx):
    someone_elses_cluster_after_a_failed_xpk(ctx)
    resources = await inventory.collect(ctx)
    cluster = next(r for r in resources if r.kind == "GKE cluster" and r.name == C)
    assert not cluster.owned and cluster.hand_delete.startswith("gcloud container clusters")
    nets = [r for r in resources if r.kind == "VPC network" and r.present]
    assert nets and not any(r.owned for r in nets)


async def test_its_own_xpk_run_records_the_cluster_by_its_unique_id(ctx):
    seed(ctx, ["enable_apis"])
    result = await Runner(build_plan(ctx), ctx, retry=retry()).up({"xpk_cluster"})
    assert result.ok, result.messages
    rec = recorded(ctx)
    assert rec is not None and rec.cluster_id == ctx.cloud.cluster.id != ""
    assert rec.create_time == ctx.cloud.cluster.create_time
    data = json.loads((ctx.xpk_dir / "rltui-owned.json").read_text())
    assert (data["project"], data["region"], data["cluster"]) == (P, R, C)


async def test_a_recorded_cluster_without_its_label_is_rltuis(ctx):
    """The label was lost (or never set: a crash right after xpk): the id says it is ours,
    so up labels it without running xpk again, and down deletes it with xpk."""
    seed(ctx, ["enable_apis"])
    ctx.cloud.seed_cluster(labelled=False)
    ctx.cloud.seed_xpk_state(ctx.xpk_dir)
    cl = ctx.cloud.cluster
    xpkstate.record_owned(ctx.xpk_dir, P, R, C, cl.id, cl.create_time)
    result = await Runner(build_plan(ctx), ctx, retry=retry()).up({"xpk_cluster"})
    assert result.ok, result.messages
    assert ctx.cloud.xpk_runs == []
    assert ctx.cloud.cluster.resource_labels["managed-by"] == "rltui"
    ctx.cloud.cluster.resource_labels.pop("managed-by")
    result = await Runner(build_plan(ctx), ctx, retry=retry()).down({"xpk_cluster",
                                                                     "network_ready"})
    assert result.ok, result.messages
    assert ctx.cloud.cluster is None and not ctx.cloud.networks
    assert recorded(ctx) is None, "a finished teardown forgets the record"


async def test_a_record_of_another_cluster_id_proves_nothing(ctx):
    someone_elses_cluster_after_a_failed_xpk(ctx)
    xpkstate.record_owned(ctx.xpk_dir, P, R, C, "0" * 32, "2020-01-01T00:00:00Z")
    result = await Runner(build_plan(ctx), ctx, retry=retry()).down({"xpk_cluster"})
    assert result.states["xpk_cluster"] is S.SKIPPED and ctx.cloud.cluster is not None


async def _own_create_running(ctx: FakeContext, until: str) -> Detached:
    """An `xpk cluster create` of rltui's, started in its folder, that has made the
    networks ("networks") or the cluster too ("cluster") and goes on (Terraform)."""
    plan_xpk(ctx, {"pause_s": 30} if until == "networks" else {"pause_after_s": 30})
    tool = Detached(ctx.xpk_dir, "xpk")
    tool.start(step(ctx, "xpk_cluster")._argv("create"), "create", ctx.endpoints.subprocess_env())
    while not (ctx.cloud.networks if until == "networks" else ctx.cloud.cluster):
        ctx.cloud.sync_xpk()
        await asyncio.sleep(0.02)
    return tool


async def test_down_during_its_own_create_takes_the_cluster_that_run_made(ctx):
    """`rltui down` while rltui's own xpk create runs (no exit 0 yet: no record, no label):
    what that run made is rltui's, recorded at first sight, and goes with xpk's delete."""
    seed(ctx, ["enable_apis"])
    tool = await _own_create_running(ctx, "cluster")
    assert "managed-by" not in ctx.cloud.cluster.resource_labels and recorded(ctx) is None
    assert inventory.cluster_is_rltuis(ctx, C, ctx.cloud.cluster)
    result = await Runner(build_plan(ctx), ctx, retry=retry()).down()
    assert tool.live() is None
    assert result.ok, result.messages
    assert ctx.cloud.cluster is None and not ctx.cloud.networks and not ctx.cloud.routers
    assert [r.argv[:2] for r in ctx.cloud.xpk_runs][-1] == ["cluster", "delete"]


async def test_down_during_its_own_create_takes_the_networks_that_run_made(ctx):
    seed(ctx, ["enable_apis"])
    tool = await _own_create_running(ctx, "networks")
    result = await Runner(build_plan(ctx), ctx, retry=retry()).down()
    assert tool.live() is None
    assert result.ok, result.messages
    assert result.messages["network_ready"] == "deleted by rltui, by the blueprint's names"
    assert not ctx.cloud.networks and not ctx.cloud.routers and not ctx.cloud.firewall_rules


async def test_a_blueprint_older_than_rltuis_last_create_is_not_taken(ctx):
    """Networks of the same names someone else's xpk left before rltui's xpk ran (and
    failed: the names were taken): not rltui's."""
    seed(ctx, ["enable_apis", "network_ready"])      # made before rltui's run
    ctx.cloud.seed_xpk_state(ctx.xpk_dir)
    plan_xpk(ctx, {"exit": 1, "stderr": TAKEN})
    rec, _ = Detached(ctx.xpk_dir, "xpk").start(step(ctx, "xpk_cluster")._argv("create"),
                                                "create", ctx.endpoints.subprocess_env())
    await _until_xpk_exits(ctx)
    result = await Runner(build_plan(ctx), ctx, retry=retry()).down({"network_ready"})
    assert result.states["network_ready"] is S.SKIPPED
    assert ctx.cloud.networks and ctx.cloud.routers


# ---- item 6: nothing is "there" while xpk still works on it --------------------------------

async def _until_xpk_exits(ctx: FakeContext) -> None:
    tool = Detached(ctx.xpk_dir, "xpk")
    while tool.live() is not None:
        await asyncio.sleep(0.02)
    ctx.cloud.sync_xpk()


async def test_a_running_xpk_makes_the_cluster_not_ready_and_the_addons_wait(ctx):
    seed(ctx, [t.name for t in STEP_TYPES if t.name != "dashboard"])
    plan_xpk(ctx, {"pause_s": 0.4})          # a re-apply: it turns the addons off again
    xpk = step(ctx, "xpk_cluster")
    Detached(ctx.xpk_dir, "xpk").start(xpk._argv("create"), "create",
                                       ctx.endpoints.subprocess_env())
    probe = await xpk.probe(ctx)
    assert (probe.exists, probe.ready) == (True, False) and "xpk cluster create" in probe.detail
    addons = await step(ctx, "addons").probe(ctx)
    assert not addons.ready and "xpk cluster create" in addons.detail
    result = await Runner(build_plan(ctx), ctx, retry=retry()).up()
    await _until_xpk_exits(ctx)
    assert result.ok, result.messages
    assert result.states["xpk_cluster"] is S.DONE      # re-attached and waited for
    enabled = ctx.cloud.cluster.addons_config
    assert enabled.ray_operator_config.enabled and enabled.lustre_csi_driver_config.enabled
    assert ctx.cloud.violations == []


async def test_the_addons_do_not_touch_the_cluster_while_xpk_runs(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster"])
    plan_xpk(ctx, {"pause_s": 0.3})
    Detached(ctx.xpk_dir, "xpk").start(step(ctx, "xpk_cluster")._argv("create"), "create",
                                       ctx.endpoints.subprocess_env())
    await step(ctx, "addons").apply(ctx, StepOutput())
    await _until_xpk_exits(ctx)
    assert ctx.cloud.violations == []
    assert ctx.cloud.count("gke.enable_addons") == 1


# ---- item 9: a pool GKE made partly is built ------------------------------------------------

async def test_a_pool_running_with_error_is_built_and_xpk_is_not_run_again(ctx):
    """A Spot stockout: the pool is RUNNING_WITH_ERROR ("created and partially usable"); a
    new xpk run would re-apply the blueprint (the addons off under the running job)."""
    from google.cloud import container_v1

    seed(ctx, [t.name for t in STEP_TYPES if t.name != "dashboard"])
    gpu = next(p for p in ctx.cloud.cluster.node_pools if p.name == POOL)
    gpu.status = container_v1.NodePool.Status.RUNNING_WITH_ERROR
    result = await Runner(build_plan(ctx), ctx, retry=retry()).up()
    assert result.ok, result.messages
    assert ctx.cloud.xpk_runs == []
    assert result.states["xpk_cluster"] is S.EXISTED
    assert "RUNNING_WITH_ERROR" in result.messages["xpk_cluster"]


# ---- item 13: the wait for a live delete is bounded -----------------------------------------

async def test_waiting_for_a_live_xpk_delete_before_creating_is_bounded(ctx):
    seed(ctx, ["enable_apis"])
    tool = Detached(ctx.xpk_dir, "xpk")
    rec, started = tool.start(["sleep", "60"], "delete", ctx.endpoints.subprocess_env())
    assert started
    data = json.loads(tool.record_path.read_text())
    data["started_at"] = time.time() - 100_000      # running for far longer than 3 deletes
    tool.record_path.write_text(json.dumps(data))
    xpk = step(ctx, "xpk_cluster")
    try:
        with pytest.raises(TransientError, match="xpk cluster delete"):
            await asyncio.wait_for(xpk._xpk("create", StepOutput(), xpk.expected_s), 5)
    finally:
        await tool.stop(tool.read() or rec)
    assert ctx.cloud.xpk_runs == []
