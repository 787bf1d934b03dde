"""The real ClusterManagerClient against the sandbox's GKE service, and the xpk phases behind it."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions
from google.cloud import container_v1

from rltui.sandbox.world import FailedPrecondition

PROJECT = "rl-demo-project"
ZONE = "us-east1-b"
REGION = "us-east1"
CLUSTER = "ray-a4-gpu-spot"
NAME = f"projects/{PROJECT}/locations/{REGION}/clusters/{CLUSTER}"
Op = container_v1.Operation


def wait_done(client, op: container_v1.Operation, timeout: float = 20) -> container_v1.Operation:
    """Poll GetOperation the way gcloud does until DONE."""
    deadline = time.monotonic() + timeout
    name = f"projects/{PROJECT}/locations/{op.location}/operations/{op.name}"
    while time.monotonic() < deadline:
        op = client.get_operation(name=name)
        if op.status == Op.Status.DONE:
            return op
        time.sleep(0.02)
    raise AssertionError(f"operation {name} not DONE after {timeout} s")


def running_cluster(box) -> None:
    """A RUNNING cluster with one pool and HTTP load balancing off, made instantly."""
    cluster = container_v1.Cluster(
        name=CLUSTER,
        addons_config=container_v1.AddonsConfig(http_load_balancing=container_v1.HttpLoadBalancing(disabled=True)),
        node_pools=[container_v1.NodePool(name="default-pool", initial_node_count=1)],
    )
    op = box.call(box.world.create_cluster, PROJECT, REGION, cluster, seconds=0.0)
    box.run(box.world.wait_cluster_operation(PROJECT, REGION, op.name))


def test_missing_cluster_is_not_found_like_the_real_api(sandbox, clients) -> None:
    client = clients.gke(sandbox)
    with pytest.raises(exceptions.NotFound) as err:
        client.get_cluster(name=NAME)
    assert err.value.message == f"Not found: {NAME}. Could not find [{CLUSTER}] in [{REGION}]."
    with pytest.raises(exceptions.NotFound):
        client.get_operation(name=f"projects/{PROJECT}/locations/{REGION}/operations/operation-1-deadbeef")


def test_create_cluster_provisions_then_runs_with_its_node_pools(sandbox, clients) -> None:
    client = clients.gke(sandbox)
    cluster = container_v1.Cluster(
        name=CLUSTER,
        node_pools=[container_v1.NodePool(name="cpu-pool", initial_node_count=2,
                                          config=container_v1.NodeConfig(machine_type="e2-standard-4"))],
    )
    op = client.create_cluster(parent=f"projects/{PROJECT}/locations/{REGION}", cluster=cluster)
    assert op.operation_type == Op.Type.CREATE_CLUSTER and op.status == Op.Status.RUNNING
    assert op.target_link.endswith(f"/locations/{REGION}/clusters/{CLUSTER}")
    assert op.self_link.endswith(f"/operations/{op.name}") and op.start_time
    assert client.get_cluster(name=NAME).status == container_v1.Cluster.Status.PROVISIONING
    with pytest.raises(exceptions.AlreadyExists):
        client.create_cluster(parent=f"projects/{PROJECT}/locations/{REGION}", cluster=cluster)

    done = wait_done(client, op)

    assert done.end_time and not done.error.message
    got = client.get_cluster(name=NAME)
    assert got.status == container_v1.Cluster.Status.RUNNING and got.endpoint == "127.0.0.1"
    assert got.current_node_count == 2
    pools = client.list_node_pools(parent=NAME).node_pools
    assert [(p.name, p.status, p.config.machine_type) for p in pools] == [
        ("cpu-pool", container_v1.NodePool.Status.RUNNING, "e2-standard-4")]
    assert client.get_node_pool(name=f"{NAME}/nodePools/cpu-pool").initial_node_count == 2
    assert [c.name for c in client.list_clusters(parent=f"projects/{PROJECT}/locations/-").clusters] == [CLUSTER]
    # The deprecated zone-style fields name the same cluster.
    assert client.get_cluster(project_id=PROJECT, zone=REGION, cluster_id=CLUSTER).name == CLUSTER
    ops = client.list_operations(parent=f"projects/{PROJECT}/locations/{REGION}").operations
    assert [o.name for o in ops] == [op.name]


def test_addon_update_takes_time_and_a_busy_cluster_refuses_a_second(make_sandbox, clients) -> None:
    box = make_sandbox(speed=600.0)  # addon_update: 4 minutes = 0.4 s
    client = clients.gke(box)
    running_cluster(box)
    desired = container_v1.AddonsConfig(
        ray_operator_config=container_v1.RayOperatorConfig(enabled=True),
        lustre_csi_driver_config=container_v1.LustreCsiDriverConfig(enabled=True),
    )
    start = time.monotonic()
    op = client.update_cluster(name=NAME, update=container_v1.ClusterUpdate(desired_addons_config=desired))
    assert op.operation_type == Op.Type.UPDATE_CLUSTER
    assert client.get_cluster(name=NAME).status == container_v1.Cluster.Status.RECONCILING

    with pytest.raises(exceptions.FailedPrecondition) as err:
        client.update_cluster(name=NAME, update=container_v1.ClusterUpdate(desired_addons_config=desired))
    assert f"Operation {op.name} is currently updating cluster {CLUSTER}" in err.value.message
    with pytest.raises(exceptions.FailedPrecondition):
        client.set_addons_config(name=NAME, addons_config=desired)
    with pytest.raises(exceptions.FailedPrecondition):
        client.delete_cluster(name=NAME)

    wait_done(client, op)
    assert time.monotonic() - start >= 0.35  # 4 minutes at speed 600, -10 % jitter
    addons = client.get_cluster(name=NAME).addons_config
    assert addons.ray_operator_config.enabled and addons.lustre_csi_driver_config.enabled
    assert addons.http_load_balancing.disabled  # untouched: only the addons sent change
    assert client.get_cluster(name=NAME).status == container_v1.Cluster.Status.RUNNING


def test_set_addons_config_and_unsupported_updates(sandbox, clients) -> None:
    client = clients.gke(sandbox)
    running_cluster(sandbox)
    with pytest.raises(exceptions.MethodNotImplemented, match="desired_node_version"):
        client.update_cluster(name=NAME, update=container_v1.ClusterUpdate(desired_node_version="1.34"))
    op = client.set_addons_config(name=NAME, addons_config=container_v1.AddonsConfig(
        ray_operator_config=container_v1.RayOperatorConfig(enabled=True)))
    wait_done(client, op)
    assert client.get_cluster(name=NAME).addons_config.ray_operator_config.enabled


def test_delete_cluster_stops_then_is_gone(sandbox, clients) -> None:
    client = clients.gke(sandbox)
    running_cluster(sandbox)
    op = client.delete_cluster(name=NAME)
    assert op.operation_type == Op.Type.DELETE_CLUSTER
    assert client.get_cluster(name=NAME).status == container_v1.Cluster.Status.STOPPING
    wait_done(client, op)
    with pytest.raises(exceptions.NotFound):
        client.get_cluster(name=NAME)


def test_xpk_create_then_delete_in_phases(sandbox, clients) -> None:
    world = sandbox.world
    events, lines = [], []
    sandbox.call(world.subscribe, events.append)
    start = time.monotonic()
    sandbox.run(world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=8, progress=lines.append))
    took = time.monotonic() - start

    assert 0.2 <= took < 3  # 25 profile minutes at speed 6000
    assert lines[-1] == "[XPK] Exiting XPK cleanly"
    nets = {n.name: n.created_by for n in sandbox.call(world.list_networks, PROJECT)}
    assert nets == {"default": "", f"{CLUSTER}-net-0": "xpk", f"{CLUSTER}-net-1": "xpk", f"{CLUSTER}-rdma-net": "xpk"}
    kinds = [(e.kind, e.data.get("node_pool")) for e in events]
    assert kinds == [("cluster_running", None), ("node_pool_ready", "default-pool"),
                     ("node_pool_ready", f"{CLUSTER}-np-0"), ("xpk_cluster_ready", f"{CLUSTER}-np-0")]
    gpu = events[2].data
    assert (gpu["node_count"], gpu["machine_type"], gpu["spot"], gpu["accelerator_type"], gpu["accelerator_count"]) \
        == (8, "a4-highgpu-8g", True, "nvidia-b200", 8)
    assert gpu["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-b200"

    # The real client sees xpk's regional cluster, its network and both pools.
    client = clients.gke(sandbox)
    got = client.get_cluster(name=NAME)
    assert got.network == f"{CLUSTER}-net-0" and got.current_node_count == 9
    assert [p.name for p in client.list_node_pools(parent=NAME).node_pools] == ["default-pool", f"{CLUSTER}-np-0"]
    assert not got.addons_config.lustre_csi_driver_config.enabled  # xpk's flag does nothing for b200-8

    # The codelab's Lustre peering on net-0 keeps xpk from deleting that network.
    net0 = f"{CLUSTER}-net-0"
    sandbox.run(world.create_address(PROJECT, f"google-managed-services-{net0}", network=net0, prefix_length=24))
    with pytest.raises(FailedPrecondition, match=f"networks/{net0}' is already being used by"):
        sandbox.run(world.xpk_cluster_delete(PROJECT, ZONE, CLUSTER))
    with pytest.raises(exceptions.NotFound):
        client.get_cluster(name=NAME)
    assert [n.name for n in sandbox.call(world.list_networks, PROJECT)] == ["default", net0]
    assert [e.kind for e in events[-3:]] == ["node_pool_deleted", "node_pool_deleted", "cluster_deleted"]
