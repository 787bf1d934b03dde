"""status and the cost meter read what runs now (red-team review, items 10 and 12): the
Kubernetes objects while GKE upgrades the cluster (RECONCILING: the API answers), and the GPU
nodes from the Kubernetes Nodes (each with its own creation time), not from the pools'
create-time count. The inventory over the fake adapters (tests/plan/fakes.py)."""

from __future__ import annotations

import pytest
from google.cloud import container_v1

from rltui.config import RLConfig, parse_config
from rltui.plan import inventory
from rltui.plan.steps import STEP_TYPES
from tests.plan.fakes import inventory_context, b200_config, quick_retry, FakeContext, fake_context, seed

C, P, R = "ray-a4-gpu-spot", "inv-nodes-proj", "us-east1"
POOL = f"a4-highgpu-8g-{C}-a4-pool"


def codelab_config() -> RLConfig:
    return b200_config(P)


@pytest.fixture
def ctx(tmp_path, monkeypatch) -> FakeContext:
    return inventory_context(codelab_config(), tmp_path, monkeypatch)


def the(resources, kind: str, name: str) -> inventory.Resource:
    return next(r for r in resources if r.kind == kind and r.name == name)


async def test_the_kubernetes_objects_are_read_while_the_cluster_reconciles(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    ctx.cloud.cluster.status = container_v1.Cluster.Status.RECONCILING
    resources = await inventory.collect(ctx)
    assert the(resources, "RayCluster", C).present
    assert the(resources, "Secret", f"{C}-job-secrets").present
    assert the(resources, "PersistentVolume", ctx.cfg.pv_name).present


async def test_gpu_nodes_are_the_kubernetes_nodes_each_from_its_own_time(ctx):
    """A Spot stockout: the pool asked for 5 nodes at creation, 2 exist."""
    seed(ctx, [t.name for t in STEP_TYPES])
    gpu = next(p for p in ctx.cloud.cluster.node_pools if p.name == POOL)
    gpu.initial_node_count = 5
    gpu.status = container_v1.NodePool.Status.RUNNING_WITH_ERROR
    nodes = {n: o for (p, n), o in ctx.cloud.objects.items() if p == "nodes"}
    gpu_nodes = sorted(n for n, o in nodes.items()
                       if "cloud.google.com/gke-accelerator" in o["metadata"]["labels"])
    nodes[gpu_nodes[0]]["metadata"]["creationTimestamp"] = "2026-03-01T10:00:00Z"
    nodes[gpu_nodes[1]]["metadata"]["creationTimestamp"] = "2026-03-01T11:30:00Z"
    cluster = the(await inventory.collect(ctx), "GKE cluster", C)
    assert sorted(cluster.gpu_nodes) == ["2026-03-01T10:00:00Z", "2026-03-01T11:30:00Z"]
    assert cluster.detail == "3 nodes"      # the system node and the two GPU nodes


async def test_without_kubernetes_the_pools_count_stands_in(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster"])
    ctx.cloud.cluster.status = container_v1.Cluster.Status.STOPPING
    cluster = the(await inventory.collect(ctx), "GKE cluster", C)
    assert cluster.gpu_nodes == ("", "")
    assert cluster.detail == "3 nodes"
