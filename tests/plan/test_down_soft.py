"""`down` takes the billed cluster and Lustre even when an in-cluster delete fails, and the
peering's last resort never cuts off someone else (red-team review, items 1 and 3).

The real plan against the fake adapters (tests/plan/fakes.py): the RayCluster, the Secret and
the PV/PVC vanish with the cluster, so their failure only settles first; Service Networking's
refusal falls back to compute's removePeering only on the blueprint network of an rltui
cluster that goes next, and never while another Lustre instance is on it.
"""

from __future__ import annotations

import random

import pytest
from google.cloud import lustre_v1

from rltui.cloud.errors import CloudError
from rltui.config import RLConfig, parse_config
from rltui.plan import RetryPolicy, Runner, StepState
from rltui.plan.steps import STEP_TYPES, build_plan
from tests.plan.fakes import b200_config, quick_retry, FakeContext, fake_context, seed

S = StepState
C = "ray-a4-gpu-spot"
P = "down-soft-proj"


def codelab_config() -> RLConfig:
    return b200_config(P)


@pytest.fixture
def ctx(tmp_path) -> FakeContext:
    return fake_context(codelab_config(), tmp_path)


def retry() -> RetryPolicy:
    return quick_retry(5, 3)


async def down(ctx: FakeContext, targets: set[str] | None = None):
    return await Runner(build_plan(ctx), ctx, retry=retry()).down(targets)


# ---- item 1: the in-cluster deletes settle first, whatever their outcome -------------------

async def test_a_raycluster_delete_that_times_out_does_not_keep_the_gpu_cluster(ctx):
    """Pods Terminating on a NotReady Spot node: the RayCluster's delete times out every try.
    The cluster (8 GPU nodes, NAT) and Lustre go all the same."""
    seed(ctx, [t.name for t in STEP_TYPES])
    stuck = CloudError(f"RayCluster {C} still exists 180 s after delete", transient=True,
                       code="Timeout")
    ctx.cloud.fail("kube.delete", stuck, stuck, stuck)
    result = await down(ctx)
    assert result.states["raycluster"] is S.FAILED
    assert result.states["lustre_instance"] is S.DESTROYED and not ctx.cloud.instances
    assert result.states["xpk_cluster"] is S.DESTROYED and ctx.cloud.cluster is None
    assert [r.argv[:2] for r in ctx.cloud.xpk_runs] == [["cluster", "delete"]]
    assert not ctx.cloud.networks


async def test_a_refused_kubernetes_call_does_not_keep_lustre_or_the_cluster(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    refused = CloudError("get Secret: Kubernetes API 403: refresh credentials", transient=False,
                         code="403")
    ctx.cloud.fail("kube.get", refused)          # the RayCluster's ownership check
    result = await down(ctx)
    assert result.states["raycluster"] is S.FAILED
    assert result.states["lustre_instance"] is S.DESTROYED
    assert result.states["xpk_cluster"] is S.DESTROYED and ctx.cloud.cluster is None


async def test_the_pv_pvc_down_asks_kubernetes_only(ctx):
    """With Lustre already gone the PV/PVC are still deleted: down does not read the
    instance's mount point."""
    seed(ctx, ["enable_apis", "xpk_cluster", "pv_pvc"])
    assert not ctx.cloud.instances
    result = await down(ctx, {"pv_pvc"})
    assert result.states["pv_pvc"] is S.DESTROYED, result.messages
    assert not ctx.cloud.kube_objects("persistentvolumes")
    assert not ctx.cloud.kube_objects("persistentvolumeclaims")


# ---- item 3: the removePeering fallback ------------------------------------------------------

def _other_instance(ctx: FakeContext, name: str = "someone-elses-lustre") -> None:
    c = ctx.cfg
    ctx.cloud.instances[name] = lustre_v1.Instance(
        name=f"projects/{P}/locations/{c.zone}/instances/{name}",
        state=lustre_v1.Instance.State.ACTIVE, capacity_gib=18000,
        network=f"projects/{P}/global/networks/{c.network}", labels={"team": "data"})


async def test_the_fallback_never_cuts_off_another_lustre_instance(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    _other_instance(ctx)
    result = await down(ctx, {"peering"})
    assert ctx.cloud.count("network.remove_peering") == 0
    assert ctx.cfg.network in ctx.cloud.peerings
    assert result.states["peering"] is S.SKIPPED
    message = result.messages["peering"]
    assert "someone-elses-lustre" in message and "gcloud services vpc-peerings delete" in message
    assert "\n" not in message


async def test_the_fallback_is_kept_for_a_network_whose_cluster_is_not_rltuis(ctx):
    """Service Networking keeps refusing (another producer, say Cloud SQL): on a network of a
    cluster that is not rltui's (no label, no record), the peering stays."""
    seed(ctx, ["enable_apis", "network_ready", "ip_range", "peering"])
    ctx.cloud.seed_cluster(labelled=False)
    in_use = CloudError("delete peering: Producer services are still using this connection.",
                        transient=True, code="PeeringInUse")
    ctx.cloud.fail("network.delete_peering", *[in_use] * 200)
    result = await down(ctx, {"peering"})
    assert ctx.cloud.count("network.remove_peering") == 0
    assert result.states["peering"] is S.SKIPPED
    assert "gcloud services vpc-peerings delete" in result.messages["peering"]


async def test_the_fallback_frees_an_rltui_clusters_network_that_goes_next(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    in_use = CloudError("delete peering: Producer services are still using this connection.",
                        transient=True, code="PeeringInUse")
    ctx.cloud.fail("network.delete_peering", *[in_use] * 200)
    result = await down(ctx)
    assert ctx.cloud.count("network.remove_peering") == 1
    assert result.ok, result.messages
    assert ctx.cloud.cluster is None and not ctx.cloud.networks
