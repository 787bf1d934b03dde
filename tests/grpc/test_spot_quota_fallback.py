"""The sandbox charges a Spot node pool's GPUs as Compute Engine does (world_gke_pools
`_charged_metric`): against the preemptible quota once one is granted, against the family's
standard quota where none is ("In regions where you don't have preemptible CPU quota, you can use
standard CPU quota to launch preemptible VMs": docs.cloud.google.com/compute/docs/instances/
create-use-preemptible), as rltui's `up --check` judges it from the same World's Cloud Quotas."""

from __future__ import annotations

import pytest
from google.cloud import container_v1

PROJECT = "rl-demo-project"
ZONE = "us-east1-b"
REGION = "us-east1"
CLUSTER = "ray-a4-gpu-spot"
POOL = f"projects/{PROJECT}/locations/{REGION}/clusters/{CLUSTER}/nodePools/a4-highgpu-8g-{CLUSTER}-a4-pool"
Op = container_v1.Operation


def failed_pool_ops(box, clients) -> list:
    ops = clients.gke(box).list_operations(parent=f"projects/{PROJECT}/locations/{REGION}").operations
    return [o for o in ops if o.operation_type == Op.Type.CREATE_NODE_POOL and o.error.code]


def test_no_preemptible_quota_and_enough_standard_quota_makes_the_spot_pool(grpc_box, clients) -> None:
    world = grpc_box.world
    world.quotas.update({"PREEMPTIBLE_NVIDIA_B200_GPUS": 0.0, "NVIDIA_B200_GPUS": 64.0})  # 8 x 8 GPUs
    grpc_box.run(world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=8))
    assert failed_pool_ops(grpc_box, clients) == []
    assert clients.gke(grpc_box).get_node_pool(name=POOL).status == container_v1.NodePool.Status.RUNNING


def test_no_preemptible_quota_and_no_standard_quota_fails_on_the_standard_metric(grpc_box, clients) -> None:
    world = grpc_box.world
    world.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = 0.0   # the standard one unset: 0, as Cloud Quotas serves
    with pytest.raises(Exception):
        grpc_box.run(world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=8))
    failed = failed_pool_ops(grpc_box, clients)
    assert len(failed) == 1
    assert failed[0].error.message.endswith("creation failed: Quota 'NVIDIA_B200_GPUS' exceeded.  "
                                            "Limit: 0.0 in region us-east1.")


def test_a_granted_short_preemptible_quota_fails_whatever_the_standard_one(grpc_box, clients) -> None:
    world = grpc_box.world
    world.quotas.update({"PREEMPTIBLE_NVIDIA_B200_GPUS": 32.0, "NVIDIA_B200_GPUS": 1000.0})
    with pytest.raises(Exception):
        grpc_box.run(world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=8))
    failed = failed_pool_ops(grpc_box, clients)
    assert len(failed) == 1 and "Quota 'PREEMPTIBLE_NVIDIA_B200_GPUS' exceeded" in failed[0].error.message
