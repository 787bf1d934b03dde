"""Nothing changes the GKE cluster while xpk's Terraform works on it; the Lustre CSI driver
reaches the GPU nodes; the waits on what xpk makes end when xpk is gone (issue 24, items 1-3).

The real plan against the fake adapters (tests/plan/fakes.py): the fake xpk is a subprocess,
and a GKE change (addons, labels, node pool updates, delete) made while it runs is written down
in the fake's `violations`.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

import pytest

from rltui.cloud.errors import CloudError
from rltui.config import RLConfig, parse_config
from rltui.plan import RetryPolicy, Runner, StepOutput, StepState, TransientError
from rltui.plan.steps import STEP_TYPES, CredentialsStep, NetworkReadyStep, build_plan
from tests.plan.fakes import b200_config, quick_retry, LUSTRE_DRIVER, FakeContext, fake_context, plan_xpk, seed

S = StepState
C = "ray-a4-gpu-spot"
POOL = f"a4-highgpu-8g-{C}-a4-pool"


def codelab_config() -> RLConfig:
    return parse_config({
        "PROJECT_ID": "overlap-proj", "ZONE": "us-east1-b", "REGION": "us-east1",
        "CLUSTER_NAME": C, "LUSTRE_INSTANCE_ID": "rl-demo-gpu-lustre", "LUSTRE_CAPACITY": "9000",
        "HF_TOKEN": "hf_FAKEtokenDoNotShow0123456789", "NUM_NODES": "2", "GPUS_PER_NODE": "8",
        "DEVICE_TYPE": "b200-8"})


@pytest.fixture
def ctx(tmp_path) -> FakeContext:
    return fake_context(codelab_config(), tmp_path)


def retry() -> RetryPolicy:
    return quick_retry(11, 4)


def step(ctx: FakeContext, name: str):
    return {s.name: s for s in build_plan(ctx)}[name]


# ---- item 1: no GKE change while xpk runs ------------------------------------------------------

async def test_nothing_changes_the_cluster_while_xpk_runs(ctx):
    """Terraform goes on after the control plane (default-pool, the GPU pool, kubectl-apply):
    the addons and the label wait for xpk's exit; the Kubernetes objects do not."""
    plan_xpk(ctx, {"pause_after_s": 0.5})
    events: list = []
    result = await Runner(build_plan(ctx), ctx, retry=retry(), listener=events.append).up()
    assert result.ok, result.messages
    cloud = ctx.cloud
    assert cloud.violations == []
    xpk_end = cloud.spans["xpk"][1]
    addons = next(e.at for e in events if e.step == "addons" and e.state is S.RUNNING)
    assert addons >= xpk_end
    secret = next(e.at for e in events if e.step == "secret" and e.state is S.DONE)
    assert secret < xpk_end, "the Secret no longer overlaps xpk"


async def test_an_xpk_rerun_turns_the_addons_and_the_label_back_on(ctx):
    """A re-apply of the blueprint (xpk run again: its GPU pool was short) leaves the addons
    off and the labels the blueprint's: both are set again after it, in the same up."""
    seed(ctx, [t.name for t in STEP_TYPES if t.name != "dashboard"])
    gpu = next(p for p in ctx.cloud.cluster.node_pools if p.name == POOL)
    gpu.initial_node_count = 1                    # not built: xpk_cluster runs xpk again
    result = await Runner(build_plan(ctx), ctx, retry=retry()).up()
    assert result.ok, result.messages
    cloud = ctx.cloud
    assert [r.argv[:2] for r in cloud.xpk_runs] == [["cluster", "create"]]
    addons = cloud.cluster.addons_config
    assert addons.ray_operator_config.enabled and addons.lustre_csi_driver_config.enabled
    assert cloud.cluster.resource_labels["managed-by"] == "rltui"
    assert result.states["addons"] is S.DONE and cloud.violations == []


# ---- item 2: the Lustre driver on the nodes ---------------------------------------------------

def _register_on_csinodes(ctx: FakeContext) -> None:
    """The kubelets register the driver (CSINode .spec.drivers) right after the update."""
    gke = ctx._adapters["gke"]
    enable = gke.enable_addons

    async def enable_then_register(**kwargs):
        await enable(**kwargs)
        for (plural, name), node in list(ctx.cloud.objects.items()):
            if plural == "nodes" and "cloud.google.com/gke-accelerator" in node["metadata"]["labels"]:
                ctx.cloud.objects[("csinodes", name)] = {
                    "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                    "metadata": {"name": name},
                    "spec": {"drivers": [{"name": LUSTRE_DRIVER, "nodeID": name}]}}

    gke.enable_addons = enable_then_register


async def test_nodes_that_register_the_driver_are_not_recreated(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster"])
    _register_on_csinodes(ctx)
    await step(ctx, "addons").apply(ctx, StepOutput())
    assert ctx.cloud.count("gke.enable_addons") == 1
    assert ctx.cloud.recreated == [] and ctx.cloud.upgrades == []
    assert (await step(ctx, "addons").probe(ctx)).ready


async def test_nodes_without_the_driver_are_recreated_all_at_once_then_settings_put_back(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster"])
    t0 = time.monotonic()
    await step(ctx, "addons").apply(ctx, StepOutput())
    assert ctx.cloud.recreated == [(POOL, 0, 2)]
    assert ctx.cloud.upgrades == [(POOL, 0, 2), (POOL, 0, 1)]
    gpu = next(p for p in ctx.cloud.cluster.node_pools if p.name == POOL)
    assert (gpu.upgrade_settings.max_surge, gpu.upgrade_settings.max_unavailable) == (0, 1)
    # The bounded wait: 2 reference minutes at this time scale, not a real minute.
    assert time.monotonic() - t0 < 5


async def test_a_failed_recreation_still_puts_the_blueprints_settings_back(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster"])
    ctx.cloud.fail("gke.recreate_node_pool",
                   CloudError("recreate: quota", transient=False, code="rpc8"))
    with pytest.raises(CloudError):
        await step(ctx, "addons").apply(ctx, StepOutput())
    assert ctx.cloud.upgrades == [(POOL, 0, 2), (POOL, 0, 1)]


async def test_settings_a_crash_left_are_put_back(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster", "addons"])
    gpu = next(p for p in ctx.cloud.cluster.node_pools if p.name == POOL)
    gpu.upgrade_settings.max_unavailable = 2       # a recreation's, never put back
    addons = step(ctx, "addons")
    probe = await addons.probe(ctx)
    assert (probe.exists, probe.ready) == (True, False) and "not put back" in probe.detail
    await addons.apply(ctx, StepOutput())
    assert ctx.cloud.upgrades == [(POOL, 0, 1)] and ctx.cloud.recreated == []
    assert (await addons.probe(ctx)).ready


# ---- item 3: a wait on xpk ends when xpk is gone -------------------------------------------------

async def test_the_network_wait_ends_at_once_when_no_xpk_runs(ctx):
    seed(ctx, ["enable_apis"])
    t0 = time.monotonic()
    result = await asyncio.wait_for(
        Runner(build_plan(ctx), ctx, retry=retry()).up({"network_ready"}), 30)
    assert time.monotonic() - t0 < 20
    assert result.states["network_ready"] is S.FAILED
    message = result.messages["network_ready"]
    assert (f"subnetwork {C}-sub-0 of network {C}-net-0 does not exist and xpk is not"
            " running (its log: ") in message
    assert str(ctx.xpk_dir / "rltui-xpk-create.log") in message


async def test_the_wait_ends_as_soon_as_an_xpk_that_ran_has_exited(ctx):
    """A record of an xpk that started during the wait and is gone: no grace."""
    seed(ctx, ["enable_apis"])
    ctx.xpk_dir.mkdir(parents=True, exist_ok=True)
    log = ctx.xpk_dir / "rltui-xpk-create.log"

    async def xpk_ran_and_exited() -> None:
        await asyncio.sleep(0.05)
        (ctx.xpk_dir / "rltui-xpk.json").write_text(json.dumps({
            "pid": 2 ** 22 + 7, "start_ticks": 1, "cmdline": ["xpk"], "argv": ["xpk"],
            "verb": "create", "log": str(log), "log_offset": 0, "started_at": time.time()}))

    t0 = time.monotonic()
    writer = asyncio.ensure_future(xpk_ran_and_exited())
    with pytest.raises(TransientError, match="xpk is not running"):
        await step(ctx, "network_ready").apply(ctx, StepOutput())
    await writer
    assert time.monotonic() - t0 < 2.0


async def test_the_credentials_wait_ends_when_no_xpk_makes_the_cluster(ctx):
    seed(ctx, ["enable_apis", "network_ready"])
    with pytest.raises(TransientError, match=f"the GKE control plane of {C} does not exist and"
                                             " xpk is not running"):
        await asyncio.wait_for(step(ctx, "credentials").apply(ctx, StepOutput()), 20)


def test_a_step_that_waits_on_xpk_gets_two_tries_not_six():
    assert NetworkReadyStep.max_attempts == CredentialsStep.max_attempts == 2
