"""The fake xpk's Terraform (sandbox/rltui_sandbox/toolkit/) as Cluster Toolkit v1.94.0 and
terraform-provider-google v7.40.0 behave: the a4 blueprint's whole resource list (routers, NAT,
NAT IPs, the vpc module's own firewall rules), the default pool made and removed right after the
create, the system and GPU pools, a busy cluster at the default pool's removal failing the apply
and tainting the cluster (replaced on the next run), a re-apply turning the addons off again,
destroy reading the cluster first, a network in use failing the destroy, and who did what."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from google.cloud import container_v1

from rltui_sandbox.toolkit.terraform import TerraformFailed
from rltui_sandbox.world import xpk_unique_name

PROJECT = "rl-demo-project"
ZONE = "us-east1-b"
REGION = "us-east1"
CLUSTER = "ray-a4-gpu-spot"
POOL = f"a4-highgpu-8g-{CLUSTER}-a4-pool"


def ops(box) -> list[dict]:
    return box.call(box.world.record.snapshot)["operations"]


def kinds(box) -> list[str]:
    return [o["kind"] for o in ops(box)]


def create(box, **kw) -> container_v1.Cluster:
    return box.run(box.world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=2, **kw))


def addons_on() -> container_v1.AddonsConfig:
    return container_v1.AddonsConfig(ray_operator_config=container_v1.RayOperatorConfig(enabled=True),
                                     lustre_csi_driver_config=container_v1.LustreCsiDriverConfig(enabled=True))


def test_the_blueprint_makes_routers_nat_ips_and_the_vpc_modules_rules(grpc_box) -> None:
    world = grpc_box.world
    world.gke_auto_upgrade = False
    lines: list[str] = []
    create(grpc_box, progress=lines.append)
    w = grpc_box.call
    routers = {r.name: r for r in w(world.list_routers, PROJECT)}
    assert set(routers) == {f"{CLUSTER}-net-0-router", f"{CLUSTER}-net-1-router"}
    nat = routers[f"{CLUSTER}-net-0-router"].nats[0]
    assert nat["name"] == f"cloud-nat-{REGION}"
    assert nat["natIps"] == [f"{CLUSTER}-net-0-nat-ips-{REGION}-0", f"{CLUSTER}-net-0-nat-ips-{REGION}-1"]
    ips = {a.name: a for a in w(world.list_regional_addresses, PROJECT)}
    assert len(ips) == 4 and all(a.address_type == "EXTERNAL" and a.status == "IN_USE" for a in ips.values())
    assert ips[f"{CLUSTER}-net-1-nat-ips-{REGION}-1"].labels["ghpc_module"] == "vpc"
    rules = {f.name for f in w(world.list_firewalls, PROJECT) if f.network.startswith(CLUSTER)}
    assert rules == {f"{CLUSTER}-internal-0", f"{CLUSTER}-internal-1",
                     f"{CLUSTER}-net-0-fw-allow-internal-traffic", f"{CLUSTER}-net-1-fw-allow-internal-traffic",
                     f"{CLUSTER}-net-0-fw-allow-iap-ingress", f"{CLUSTER}-net-1-fw-allow-iap-ingress"}
    sub0 = w(world.get_subnet, PROJECT, REGION, f"{CLUSTER}-sub-0")
    assert [r["rangeName"] for r in sub0.secondary_ranges] == ["pods", "services"]
    # The default pool is created with the cluster and removed right after; then the two pools.
    gke = [k for k in kinds(grpc_box) if k.startswith("gke.")]
    assert gke == ["gke.create_cluster", "gke.delete_node_pool", "gke.create_node_pool", "gke.create_node_pool"]
    cluster = w(world.get_cluster, PROJECT, REGION, CLUSTER)
    assert [p.name for p in cluster.node_pools] == ["system", POOL]
    assert not cluster.addons_config.ray_operator_config.enabled
    assert cluster.addons_config.gcs_fuse_csi_driver_config.enabled
    assert lines[-1].startswith("Apply complete! Resources:")


def test_every_call_carries_terraforms_user_agent(grpc_box) -> None:
    grpc_box.world.gke_auto_upgrade = False
    create(grpc_box)
    agents = {o["kind"]: o.get("agent", "") for o in ops(grpc_box)}
    assert agents["gke.create_cluster"].startswith("Terraform/")
    assert "terraform-provider-google-beta/" in agents["gke.create_cluster"]
    assert agents["gke.create_cluster"].endswith("blueprints/terraform/hpc-toolkit:gke-cluster/v1.94.0")
    assert agents["compute.routers.insert"].endswith("hpc-toolkit:vpc/v1.94.0")


def test_another_clients_update_at_the_default_pools_removal_fails_the_apply_and_taints_the_cluster(
        make_grpc_box, tmp_path: Path) -> None:
    """The provider removes default-pool right after the create with the default retry
    predicates only: a busy cluster (400 failedPrecondition) is not retried. The next apply
    replaces the tainted cluster."""
    grpc_box = make_grpc_box(speed=600)   # the addon update (4 min) outlasts Terraform's poll
    world = grpc_box.world
    world.gke_auto_upgrade = False
    world.terraform_poll_ref_s = 60.0   # 0.1 s: the other client, woken by the DONE, is first
    folder = tmp_path / "deployment"

    async def update_when_running() -> None:
        clusters = world._project(PROJECT).clusters
        await world._wait(lambda: f"{REGION}/{CLUSTER}" in clusters and clusters[
            f"{REGION}/{CLUSTER}"].status == container_v1.Cluster.Status.RUNNING)
        world.update_addons(PROJECT, REGION, CLUSTER, addons_on())

    async def both() -> None:
        racer = asyncio.ensure_future(update_when_running())
        try:
            await world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=2, deployment_dir=str(folder))
        finally:
            await racer

    with pytest.raises(TerraformFailed) as failed:
        grpc_box.run(both())
    assert "Error deleting default node pool: googleapi: Error 400: Cluster is running incompatible operation" \
        in failed.value.message and failed.value.message.count("failedPrecondition") == 1
    state = json.loads((folder / "primary" / "terraform.tfstate").read_text())
    tainted = [r["address"] for r in state["resources"] if r["instances"][0].get("status") == "tainted"]
    assert tainted == [f"module.{CLUSTER}-a4-cluster.google_container_cluster.gke_cluster"]
    assert POOL not in [p.name for p in grpc_box.call(world.get_cluster, PROJECT, REGION, CLUSTER).node_pools]

    world.terraform_poll_ref_s = 10.0
    grpc_box.run(world.wait_cluster_idle(PROJECT, REGION, CLUSTER), timeout=30)
    grpc_box.run(world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=2, deployment_dir=str(folder)))
    gke = [k for k in kinds(grpc_box) if k in ("gke.create_cluster", "gke.delete_cluster")]
    assert gke == ["gke.create_cluster", "gke.delete_cluster", "gke.create_cluster"]   # replaced
    assert not grpc_box.call(world.get_cluster, PROJECT, REGION, CLUSTER).addons_config.ray_operator_config.enabled


def test_a_rerun_turns_the_addons_off_and_keeps_labels_others_added(grpc_box) -> None:
    """addons_config is not in gke-cluster's ignore_changes; resource_labels is non-authoritative
    (terraform-provider-google v7.40.0): the blueprint's labels are put back, rltui's stays."""
    world = grpc_box.world
    world.gke_auto_upgrade = False
    create(grpc_box)
    w = grpc_box.call
    op = w(world.update_addons, PROJECT, REGION, CLUSTER, addons_on())
    grpc_box.run(world.wait_cluster_operation(PROJECT, REGION, op.name))
    c = w(world.get_cluster, PROJECT, REGION, CLUSTER)
    labels = {**c.resource_labels, "managed-by": "rltui", "ghpc_role": "changed"}
    op = w(world.set_labels, PROJECT, REGION, CLUSTER, labels, c.label_fingerprint)
    grpc_box.run(world.wait_cluster_operation(PROJECT, REGION, op.name))
    lines: list[str] = []
    create(grpc_box, progress=lines.append)
    c = w(world.get_cluster, PROJECT, REGION, CLUSTER)
    assert not c.addons_config.ray_operator_config.enabled
    assert not c.addons_config.lustre_csi_driver_config.enabled
    assert c.resource_labels["managed-by"] == "rltui" and c.resource_labels["ghpc_role"] == "scheduler"
    assert any("Modifications complete" in line for line in lines)
    assert kinds(grpc_box).count("gke.create_cluster") == 1   # modified in place, not replaced


def test_destroy_reads_the_cluster_first_and_fails_once_it_is_gone(grpc_box) -> None:
    world = grpc_box.world
    world.gke_auto_upgrade = False
    create(grpc_box)
    op = grpc_box.call(world.delete_cluster, PROJECT, REGION, CLUSTER)
    grpc_box.run(world.wait_cluster_operation(PROJECT, REGION, op.name))
    with pytest.raises(TerraformFailed, match=f"clusters/{CLUSTER} not found"):
        grpc_box.run(world.xpk_cluster_delete(PROJECT, ZONE, CLUSTER))
    names = {n.name for n in grpc_box.call(world.list_networks, PROJECT)}
    assert {f"{CLUSTER}-net-0", f"{CLUSTER}-net-1", f"{CLUSTER}-rdma-net"} <= names   # nothing deleted
    assert len(grpc_box.call(world.list_routers, PROJECT)) == 2


def test_destroy_deletes_everything_but_a_network_still_in_use(grpc_box) -> None:
    world = grpc_box.world
    world.gke_auto_upgrade = False
    create(grpc_box)
    net0 = f"{CLUSTER}-net-0"
    grpc_box.run(world.create_address(PROJECT, "lustre-range", network=net0, prefix_length=24))
    with pytest.raises(TerraformFailed, match=f"networks/{net0}' is already being used by"):
        grpc_box.run(world.xpk_cluster_delete(PROJECT, ZONE, CLUSTER))
    w = grpc_box.call
    assert [n.name for n in w(world.list_networks, PROJECT)] == ["default", net0]
    assert w(world.list_routers, PROJECT) == [] and w(world.list_regional_addresses, PROJECT) == []
    assert [f.name for f in w(world.list_firewalls, PROJECT) if f.network.startswith(CLUSTER)] == []
    # Once the range goes, the same destroy finishes (its state still holds the network).
    grpc_box.run(world.delete_address(PROJECT, "lustre-range"))
    grpc_box.run(world.xpk_cluster_delete(PROJECT, ZONE, CLUSTER))
    assert [n.name for n in w(world.list_networks, PROJECT)] == ["default"]


def test_a_gpu_pool_over_quota_is_tainted_and_replaced_on_the_next_run(grpc_box) -> None:
    world = grpc_box.world
    world.gke_auto_upgrade = False
    world.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = 8.0
    with pytest.raises(TerraformFailed, match=f'NodePool {POOL} was created in the error state "ERROR"'):
        create(grpc_box)
    world.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = 64.0
    create(grpc_box)
    pools = [k for k in kinds(grpc_box) if "node_pool" in k]
    assert pools == ["gke.delete_node_pool", "gke.create_node_pool", "gke.create_node_pool",
                     "gke.delete_node_pool", "gke.create_node_pool"]
    assert {p.name: p.status for p in grpc_box.call(world.get_cluster, PROJECT, REGION, CLUSTER).node_pools}[POOL] \
        == container_v1.NodePool.Status.RUNNING


def test_the_state_lives_in_the_deployment_folder(grpc_box, tmp_path: Path) -> None:
    grpc_box.world.gke_auto_upgrade = False
    folder = tmp_path / "gcluster-out" / f"{PROJECT}-{REGION}" / xpk_unique_name(PROJECT, REGION, CLUSTER)
    create(grpc_box, deployment_dir=str(folder))
    state = json.loads((folder / "primary" / "terraform.tfstate").read_text())
    assert state["version"] == 4
    types = sorted({r["type"] for r in state["resources"] if r["type"].startswith("google_")})
    assert types == ["google_compute_address", "google_compute_firewall", "google_compute_network",
                     "google_compute_router", "google_compute_subnetwork", "google_container_cluster",
                     "google_container_node_pool"]
    grpc_box.run(grpc_box.world.xpk_cluster_delete(PROJECT, ZONE, CLUSTER, deployment_dir=str(folder)))
    assert json.loads((folder / "primary" / "terraform.tfstate").read_text())["resources"] == []
