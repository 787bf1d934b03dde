"""What `up` must not do to a running job or to what is not rltui's, and what it must wait for
(red-team review, items 2, 5, 8, 11 and 13's hand-delete commands).

The real steps against the fake adapters (tests/plan/fakes.py).
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from rltui.config import ConfigError, RLConfig, parse_config
from rltui.plan import PermanentError, RetryPolicy, Runner, StepOutput, StepState
from rltui.plan.ownership import hand_delete
from rltui.plan.steps import STEP_TYPES, build_plan
from tests.plan.fakes import CSI_NODE_IDS, FakeContext, Subnetwork, fake_context, seed

S = StepState
C = "ray-a4-gpu-spot"
P = "up-guards-proj"
R = "us-east1"
POOL = f"a4-highgpu-8g-{C}-a4-pool"
BASE = {"PROJECT_ID": P, "ZONE": "us-east1-b", "REGION": R, "CLUSTER_NAME": C,
        "LUSTRE_INSTANCE_ID": "rl-demo-gpu-lustre", "LUSTRE_CAPACITY": "9000",
        "HF_TOKEN": "hf_FAKEtokenDoNotShow0123456789", "NUM_NODES": "2", "GPUS_PER_NODE": "8",
        "DEVICE_TYPE": "b200-8"}


def codelab_config() -> RLConfig:
    return parse_config(BASE)


@pytest.fixture
def ctx(tmp_path) -> FakeContext:
    return fake_context(codelab_config(), tmp_path)


def retry() -> RetryPolicy:
    return RetryPolicy(attempts=3, base_s=0.002, cap_s=0.01, rng=random.Random(9))


def step(ctx: FakeContext, name: str):
    return {s.name: s for s in build_plan(ctx)}[name]


# ---- item 2: no recreation of the GPU pool under a running job -------------------------------

def _replacement_node_without_the_driver(ctx: FakeContext) -> str:
    """A Spot node preempted and replaced: its kubelet has not registered the CSI driver."""
    node = sorted(n for (p, n) in ctx.cloud.objects if p == "nodes" and POOL in n)[-1]
    meta = ctx.cloud.objects[("nodes", node)]["metadata"]
    meta["annotations"][CSI_NODE_IDS] = json.dumps({"pd.csi.storage.gke.io": node})
    return node


async def test_a_pool_with_a_running_job_is_not_recreated(ctx):
    seed(ctx, [t.name for t in STEP_TYPES if t.name != "dashboard"])
    assert any(o["spec"].get("nodeName") for (p, _), o in ctx.cloud.objects.items()
               if p == "pods"), "the Ray pods run on the GPU nodes"
    node = _replacement_node_without_the_driver(ctx)
    result = await Runner(build_plan(ctx), ctx, retry=retry()).up()
    assert ctx.cloud.count("gke.recreate_node_pool") == 0 and ctx.cloud.upgrades == []
    assert result.states["addons"] is S.FAILED
    message = result.messages["addons"]
    assert node in message and "rltui down" in message and "\n" not in message
    assert f"{C}-head" in message or f"{C}-worker" in message
    assert ctx.cloud.kube_objects("pods"), "the job's pods are untouched"


async def test_daemonset_and_system_pods_do_not_hold_a_recreation_back(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster"])
    nodes = sorted(n for (p, n) in ctx.cloud.objects if p == "nodes" and POOL in n)
    for i, node in enumerate(nodes):
        ctx.cloud.objects[("pods", f"csi-node-{i}")] = {
            "kind": "Pod", "metadata": {"name": f"csi-node-{i}", "namespace": "kube-system"},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}
        ctx.cloud.objects[("pods", f"dcgm-{i}")] = {
            "kind": "Pod", "metadata": {"name": f"dcgm-{i}", "namespace": "gmp-public",
                                        "ownerReferences": [{"kind": "DaemonSet",
                                                             "name": "dcgm"}]},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}
    await step(ctx, "addons").apply(ctx, StepOutput())
    assert ctx.cloud.recreated == [(POOL, 0, 2)]


# ---- item 5: b200-8's nodes are on <cluster>-net-0 -----------------------------------------

def test_another_network_is_refused_for_b200_with_the_other_problems_at_once():
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "NETWORK_NAME": "shared-vpc", "REGION": "us-west1"})
    fields = [p.field for p in info.value.problems]
    assert sorted(fields) == ["NETWORK_NAME", "REGION"]
    (line,) = [str(p) for p in info.value.problems if p.field == "NETWORK_NAME"]
    assert "shared-vpc" in line and f"{C}-net-0" in line and "b200-8" in line
    assert "\n" not in line
    parse_config({**BASE, "NETWORK_NAME": f"{C}-net-0"})
    parse_config({**BASE, "NETWORK_NAME": "shared-vpc", "DEVICE_TYPE": "h100-80gb-8"})


# ---- item 8: the IP range's mark is set at insert; a range without it is not adopted ---------

async def test_the_range_is_marked_in_its_insert(ctx):
    seed(ctx, ["enable_apis", "network_ready"])
    await step(ctx, "ip_range").apply(ctx, StepOutput())
    made = ctx.cloud.addresses[ctx.cfg.address_name]
    assert made.description.startswith("managed-by=rltui")
    assert made.labels == {"managed-by": "rltui"}


async def test_a_range_marked_only_in_its_description_is_rltuis(ctx):
    """Labels a global address's insert did not keep: the description is the mark."""
    seed(ctx, ["enable_apis", "network_ready"])
    ctx.cloud.seed_address(labels={}, description="managed-by=rltui: peering range")
    probe = await step(ctx, "ip_range").probe(ctx)
    assert (probe.exists, probe.ready) == (True, True)
    result = await Runner(build_plan(ctx), ctx, retry=retry()).down({"ip_range"})
    assert result.states["ip_range"] is S.DESTROYED and not ctx.cloud.addresses


async def test_a_range_without_the_mark_is_not_adopted(ctx):
    seed(ctx, ["enable_apis", "network_ready"])
    ctx.cloud.seed_address(labels={"team": "db"})
    ip_range = step(ctx, "ip_range")
    probe = await ip_range.probe(ctx)
    assert (probe.exists, probe.ready) == (True, False) and "not rltui's" in probe.detail
    with pytest.raises(PermanentError) as info:
        await ip_range.apply(ctx, StepOutput())
    message = str(info.value)
    assert ctx.cfg.address_name in message and "not rltui's" in message and "\n" not in message
    assert ctx.cloud.addresses[ctx.cfg.address_name].labels == {"team": "db"}
    assert ctx.cloud.count("network.create_address") == 0


# ---- item 11: the range waits for the blueprint's subnetwork --------------------------------

async def test_the_network_is_ready_once_its_subnetwork_exists(ctx):
    seed(ctx, ["enable_apis", "network_ready"])
    sub = ctx.cloud.subnets.pop(f"{C}-sub-0")
    network_ready = step(ctx, "network_ready")
    probe = await network_ready.probe(ctx)
    assert (probe.exists, probe.ready) == (True, False) and f"{C}-sub-0" in probe.detail

    async def terraform_makes_the_subnet() -> None:
        await asyncio.sleep(0.2)
        ctx.cloud.subnets[sub.name] = Subnetwork(sub.name, sub.network, sub.region)

    maker = asyncio.ensure_future(terraform_makes_the_subnet())
    await network_ready.apply(ctx, StepOutput())
    assert maker.done() and ctx.cloud.count("network.subnetwork") >= 2
    assert (await network_ready.probe(ctx)).ready


# ---- item 13: kubectl's hand-delete names the cluster's context -----------------------------

def test_a_kubectl_hand_delete_names_the_clusters_context():
    cfg = codelab_config()
    assert hand_delete("Secret", f"{C}-job-secrets", cfg) == (
        f"kubectl delete secret {C}-job-secrets --context=gke_{P}_{R}_{C}")
    assert hand_delete("RayCluster", C, cfg).endswith(f"--context=gke_{P}_{R}_{C}")
