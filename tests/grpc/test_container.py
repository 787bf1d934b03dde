"""The real ClusterManagerClient against the sandbox's GKE service, and the xpk phases behind it:
GKE's one-operation-at-a-time rule in both real wordings (with ErrorInfo reason
CLUSTER_ALREADY_HAS_OPERATION), GKE's own upgrade right after xpk's create, SetLabels with its
fingerprint, UpdateNodePool as an UPGRADE_NODES operation, and a node pool over GPU quota."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions
from google.cloud import container_v1

from rltui_sandbox.world import FailedPrecondition, xpk_unique_name

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


def test_missing_cluster_is_not_found_like_the_real_api(grpc_box, clients) -> None:
    client = clients.gke(grpc_box)
    with pytest.raises(exceptions.NotFound) as err:
        client.get_cluster(name=NAME)
    assert err.value.message == f"Not found: {NAME}. Could not find [{CLUSTER}] in [{REGION}]."
    with pytest.raises(exceptions.NotFound):
        client.get_operation(name=f"projects/{PROJECT}/locations/{REGION}/operations/operation-1-deadbeef")


def test_create_cluster_provisions_then_runs_with_its_node_pools(make_grpc_box, clients) -> None:
    grpc_box = make_grpc_box(speed=600.0)  # control plane: 10 minutes = 1 s, time to see PROVISIONING
    client = clients.gke(grpc_box)
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


def test_addon_update_takes_time_and_a_busy_cluster_refuses_a_second(make_grpc_box, clients) -> None:
    box = make_grpc_box(speed=600.0)  # addon_update: 4 minutes = 0.4 s
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

    # An UPDATE_CLUSTER running: the "incompatible operation" wording (rancher/gke-operator 509).
    for second in (lambda: client.update_cluster(name=NAME, update=container_v1.ClusterUpdate(
                       desired_addons_config=desired)),
                   lambda: client.set_addons_config(name=NAME, addons_config=desired),
                   lambda: client.delete_cluster(name=NAME)):
        with pytest.raises(exceptions.FailedPrecondition) as err:
            second()
        assert err.value.message == f"Cluster is running incompatible operation {op.name}."
        assert err.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"
        assert err.value.domain == "container.googleapis.com"

    wait_done(client, op)
    assert time.monotonic() - start >= 0.35  # 4 minutes at speed 600, -10 % jitter
    addons = client.get_cluster(name=NAME).addons_config
    assert addons.ray_operator_config.enabled and addons.lustre_csi_driver_config.enabled
    assert addons.http_load_balancing.disabled  # untouched: only the addons sent change
    assert client.get_cluster(name=NAME).status == container_v1.Cluster.Status.RUNNING


def test_set_addons_config_and_unsupported_updates(grpc_box, clients) -> None:
    client = clients.gke(grpc_box)
    running_cluster(grpc_box)
    with pytest.raises(exceptions.MethodNotImplemented, match="desired_node_pool_id"):
        client.update_cluster(name=NAME, update=container_v1.ClusterUpdate(desired_node_version="1.34"))
    with pytest.raises(exceptions.MethodNotImplemented, match="desired_master_version"):
        client.update_cluster(name=NAME, update=container_v1.ClusterUpdate(desired_master_version="1.34"))
    op = client.set_addons_config(name=NAME, addons_config=container_v1.AddonsConfig(
        ray_operator_config=container_v1.RayOperatorConfig(enabled=True)))
    wait_done(client, op)
    assert client.get_cluster(name=NAME).addons_config.ray_operator_config.enabled


def test_delete_cluster_stops_then_is_gone(make_grpc_box, clients) -> None:
    grpc_box = make_grpc_box(speed=600.0)  # xpk_delete: 15 minutes = 1.5 s, time to see STOPPING
    client = clients.gke(grpc_box)
    running_cluster(grpc_box)
    op = client.delete_cluster(name=NAME)
    assert op.operation_type == Op.Type.DELETE_CLUSTER
    assert client.get_cluster(name=NAME).status == container_v1.Cluster.Status.STOPPING
    wait_done(client, op)
    with pytest.raises(exceptions.NotFound):
        client.get_cluster(name=NAME)


def test_xpk_create_then_delete_in_phases(grpc_box, clients) -> None:
    world = grpc_box.world
    world.gke_auto_upgrade = False  # its own test below
    events, lines = [], []
    grpc_box.call(world.subscribe, events.append)
    start = time.monotonic()
    grpc_box.run(world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=8, progress=lines.append))
    took = time.monotonic() - start
    pool = f"a4-highgpu-8g-{CLUSTER}-a4-pool"  # Cluster Toolkit gke-node-pool's default name

    assert 0.2 <= took < 3  # 25 profile minutes at speed 6000
    assert lines[-1].startswith("Apply complete! Resources: ")  # gcluster deploy's Terraform output
    nets = {n.name: n for n in grpc_box.call(world.list_networks, PROJECT)}
    assert {k: n.created_by for k, n in nets.items()} == {
        "default": "", f"{CLUSTER}-net-0": "xpk", f"{CLUSTER}-net-1": "xpk", f"{CLUSTER}-rdma-net": "xpk"}
    rdma = nets[f"{CLUSTER}-rdma-net"].subnets
    assert [(s.name, s.ip_cidr_range) for s in rdma[:2]] == [
        (f"{CLUSTER}-rdma-sub-0", "192.168.128.0/21"), (f"{CLUSTER}-rdma-sub-1", "192.168.136.0/21")]
    assert len(rdma) == 8 and rdma[-1].ip_cidr_range == "192.168.184.0/21"
    rules = {f.name: (f.network, f.source_ranges) for f in grpc_box.call(world.list_firewalls, PROJECT)
             if f.created_by == "xpk" and f.name.endswith(("-internal-0", "-internal-1"))}
    assert rules == {f"{CLUSTER}-internal-0": (f"{CLUSTER}-net-0", ["192.168.0.0/16"]),
                     f"{CLUSTER}-internal-1": (f"{CLUSTER}-net-1", ["192.168.0.0/16"])}
    kinds = [(e.kind, e.data.get("node_pool")) for e in events if e.kind != "addons_changed"]
    assert kinds == [("cluster_running", None), ("node_pool_ready", "default-pool"),
                     ("node_pool_deleted", "default-pool"), ("node_pool_ready", "system"),
                     ("node_pool_ready", pool), ("xpk_cluster_ready", pool)]
    gpu = next(e.data for e in events if e.data.get("node_pool") == pool)
    assert (gpu["node_count"], gpu["machine_type"], gpu["spot"], gpu["accelerator_type"], gpu["accelerator_count"]) \
        == (8, "a4-highgpu-8g", True, "nvidia-b200", 8)
    assert gpu["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-b200"

    # The real client sees xpk's regional cluster, its network, both pools and the Toolkit's labels.
    client = clients.gke(grpc_box)
    got = client.get_cluster(name=NAME)
    assert got.network == f"{CLUSTER}-net-0" and got.current_node_count == 6 + 8
    assert [p.name for p in client.list_node_pools(parent=NAME).node_pools] == ["system", pool]
    assert not got.addons_config.lustre_csi_driver_config.enabled  # xpk's flag does nothing for b200-8
    deployment = xpk_unique_name(PROJECT, REGION, CLUSTER)
    assert dict(got.resource_labels) == {"gke_product_type": "xpk", "ghpc_blueprint": deployment,
                                         "ghpc_deployment": deployment, "ghpc_module": "gke-cluster",
                                         "ghpc_role": "scheduler"}
    assert len(got.label_fingerprint) == 8

    # The codelab's Lustre peering on net-0 keeps xpk from deleting that network.
    net0 = f"{CLUSTER}-net-0"
    grpc_box.run(world.create_address(PROJECT, f"google-managed-services-{net0}", network=net0, prefix_length=24))
    with pytest.raises(FailedPrecondition, match=f"networks/{net0}' is already being used by"):
        grpc_box.run(world.xpk_cluster_delete(PROJECT, ZONE, CLUSTER))
    with pytest.raises(exceptions.NotFound):
        client.get_cluster(name=NAME)
    assert [n.name for n in grpc_box.call(world.list_networks, PROJECT)] == ["default", net0]
    assert [f for f in grpc_box.call(world.list_firewalls, PROJECT) if f.created_by == "xpk"] == []
    assert [e.kind for e in events[-3:]] == ["node_pool_deleted", "node_pool_deleted", "cluster_deleted"]


def test_gke_upgrades_the_master_right_after_xpk_create(grpc_box, clients) -> None:
    """GKE's own UPGRADE_MASTER: the "is currently upgrading" wording, with the same reason."""
    grpc_box.run(grpc_box.world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=2))
    client = clients.gke(grpc_box)
    newest = max(client.list_operations(parent=f"projects/{PROJECT}/locations/{REGION}").operations,
                 key=lambda o: o.start_time)
    assert newest.operation_type == Op.Type.UPGRADE_MASTER  # GKE's own, started by nobody
    # At speed 6000 it lasts 0.08 s: hold one for 30 s to see the refusal on a loaded machine.
    grpc_box.run(grpc_box.world.wait_cluster_idle(PROJECT, REGION, CLUSTER))
    held = grpc_box.call(grpc_box.world.start_gke_upgrade, PROJECT, REGION, CLUSTER, seconds=30)
    ops = [o for o in client.list_operations(parent=f"projects/{PROJECT}/locations/{REGION}").operations
           if o.status != Op.Status.DONE]
    assert [o.name for o in ops] == [held.name]
    assert client.get_cluster(name=NAME).status == container_v1.Cluster.Status.RECONCILING
    with pytest.raises(exceptions.FailedPrecondition) as err:
        client.set_addons_config(name=NAME, addons_config=container_v1.AddonsConfig(
            ray_operator_config=container_v1.RayOperatorConfig(enabled=True)))
    assert err.value.message == (f"Operation {ops[0].name} is currently upgrading cluster {CLUSTER}. "
                                 "Please wait and try again once it is done.")
    assert err.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"
    grpc_box.call(grpc_box.world._on_gke_upgraded, PROJECT, REGION, CLUSTER, held.name)  # end it now
    wait_done(client, ops[0])
    assert client.get_cluster(name=NAME).status == container_v1.Cluster.Status.RUNNING
    op = client.set_addons_config(name=NAME, addons_config=container_v1.AddonsConfig(
        ray_operator_config=container_v1.RayOperatorConfig(enabled=True)))
    assert wait_done(client, op).status == Op.Status.DONE


def test_set_labels_checks_the_fingerprint(make_grpc_box, clients) -> None:
    grpc_box = make_grpc_box(speed=60.0)  # gke_set_labels: 0.1 minute = 0.1 s
    client = clients.gke(grpc_box)
    running_cluster(grpc_box)
    first = client.get_cluster(name=NAME)
    with pytest.raises(exceptions.FailedPrecondition) as err:
        client.set_labels(request={"name": NAME, "resource_labels": {"team": "rl"}, "label_fingerprint": ""})
    assert err.value.message == ("Labels could not be set due to fingerprint mismatch; try again with the proper "
                                 f'fingerprint: incorrect fingerprint supplied was "", the expected one is '
                                 f'"{first.label_fingerprint}".')
    op = client.set_labels(request={"name": NAME, "resource_labels": {"team": "rl"}, "label_fingerprint": first.label_fingerprint})
    assert op.operation_type == Op.Type.UPDATE_CLUSTER  # SET_LABELS is unused by the API
    with pytest.raises(exceptions.FailedPrecondition) as busy:
        client.set_labels(request={"name": NAME, "resource_labels": {"team": "x"}, "label_fingerprint": first.label_fingerprint})
    assert busy.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"
    listed = client.list_operations(parent=f"projects/{PROJECT}/locations/{REGION}").operations
    assert op.name in [o.name for o in listed]
    wait_done(client, op)
    after = client.get_cluster(name=NAME)
    assert dict(after.resource_labels) == {"team": "rl"} and after.label_fingerprint != first.label_fingerprint
    with pytest.raises(exceptions.FailedPrecondition, match="fingerprint mismatch"):  # the old one is stale now
        client.set_labels(request={"name": NAME, "resource_labels": {}, "label_fingerprint": first.label_fingerprint})


def test_update_node_pool_is_an_upgrade_nodes_operation(make_grpc_box, clients) -> None:
    grpc_box = make_grpc_box(speed=120.0)  # one node recreated: 4 minutes = 2 s, time to see it busy
    client = clients.gke(grpc_box)
    running_cluster(grpc_box)
    events: list = []
    grpc_box.call(grpc_box.world.subscribe, events.append)
    pool = f"{NAME}/nodePools/default-pool"
    with pytest.raises(exceptions.InvalidArgument, match="node_version is required"):
        client.update_node_pool(request={"name": pool, "image_type": "COS_CONTAINERD"})
    with pytest.raises(exceptions.InvalidArgument, match="It should have the form"):
        client.update_node_pool(request={"name": pool, "node_version": "v1.33"})
    op = client.update_node_pool(request={"name": pool, "node_version": "-", "image_type": "COS_CONTAINERD"})
    assert op.operation_type == Op.Type.UPGRADE_NODES and op.target_link.endswith("/nodePools/default-pool")
    assert client.get_node_pool(name=pool).status == container_v1.NodePool.Status.RECONCILING
    with pytest.raises(exceptions.FailedPrecondition) as busy:  # an upgrade: the older wording
        client.update_node_pool(request={"name": pool, "node_version": "-", "image_type": "COS_CONTAINERD"})
    assert "is currently upgrading cluster" in busy.value.message
    assert busy.value.reason == "CLUSTER_ALREADY_HAS_OPERATION"
    wait_done(client, op)
    assert client.get_node_pool(name=pool).status == container_v1.NodePool.Status.RUNNING
    assert [e.kind for e in events] == ["node_pool_recreating", "node_pool_recreated"]
    # The same upgrade by UpdateCluster, as gcloud container clusters upgrade --node-pool may send it.
    op = client.update_cluster(name=NAME, update=container_v1.ClusterUpdate(
        desired_node_pool_id="default-pool", desired_node_version="-"))
    assert op.operation_type == Op.Type.UPGRADE_NODES
    wait_done(client, op)


def test_node_pool_over_gpu_quota_leaves_the_error_in_its_operation(grpc_box, clients) -> None:
    world = grpc_box.world
    world.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = 32.0  # 8 Spot nodes x 8 GPUs = 64
    with pytest.raises(Exception) as err:
        grpc_box.run(world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=8))
    assert f'NodePool a4-highgpu-8g-{CLUSTER}-a4-pool was created in the error state "ERROR"' in str(err.value)
    client = clients.gke(grpc_box)
    ops = client.list_operations(parent=f"projects/{PROJECT}/locations/{REGION}").operations
    failed = [o for o in ops if o.operation_type == Op.Type.CREATE_NODE_POOL and o.error.code]
    assert len(failed) == 1 and failed[0].status == Op.Status.DONE
    assert failed[0].error.code == 8  # google.rpc.Code.RESOURCE_EXHAUSTED
    assert failed[0].error.message.endswith("creation failed: Quota 'PREEMPTIBLE_NVIDIA_B200_GPUS' exceeded.  "
                                            "Limit: 32.0 in region us-east1.")
    assert failed[0].nodepool_conditions[0].code == container_v1.StatusCondition.Code.GCE_QUOTA_EXCEEDED
    pool = client.get_node_pool(name=f"{NAME}/nodePools/a4-highgpu-8g-{CLUSTER}-a4-pool")
    assert pool.status == container_v1.NodePool.Status.ERROR


def test_an_upgrade_takes_max_surge_plus_max_unavailable_nodes_at_a_time(make_grpc_box, clients) -> None:
    """UpgradeSettings: "(maxUnavailable + maxSurge) determines the level of parallelism": four
    nodes with max_unavailable 4 are recreated in one node's time, not four."""
    box = make_grpc_box(speed=6000.0)
    cluster = container_v1.Cluster(name=CLUSTER, node_pools=[container_v1.NodePool(
        name="gpu", initial_node_count=4, upgrade_settings=container_v1.NodePool.UpgradeSettings(
            max_surge=0, max_unavailable=1))])
    op = box.call(box.world.create_cluster, PROJECT, REGION, cluster, seconds=0.0)
    box.run(box.world.wait_cluster_operation(PROJECT, REGION, op.name))
    client, pool = clients.gke(box), f"{NAME}/nodePools/gpu"

    def recreate() -> float:
        op = client.update_node_pool(request={"name": pool, "node_version": "-", "image_type": "COS_CONTAINERD"})
        wait_done(client, op)
        rec = next(o for o in reversed(box.call(box.world.record.snapshot)["operations"])
                   if o.get("operation") == op.name)
        return (rec["end_ref_s"] - rec["start_ref_s"]) / 60.0

    assert 4 * 3.6 <= recreate() <= 4 * 4.4 + 0.5         # one at a time, 4 min each (jitter 10%)
    settings = container_v1.NodePool.UpgradeSettings(max_surge=0, max_unavailable=4)
    op = client.update_node_pool(request={"name": pool, "upgrade_settings": settings})
    assert op.operation_type == Op.Type.UPDATE_CLUSTER
    wait_done(client, op)
    assert client.get_node_pool(name=pool).upgrade_settings.max_unavailable == 4
    assert 3.6 <= recreate() <= 4.4 + 0.5                   # all four at once
    with pytest.raises(exceptions.MethodNotImplemented):
        client.update_node_pool(request={"name": pool, "upgrade_settings": settings, "node_version": "-"})
