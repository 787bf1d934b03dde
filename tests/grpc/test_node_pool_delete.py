"""DeleteNodePool (what Terraform's remove_default_node_pool sends right after a create) over the
real ClusterManager clients, under GKE's one-operation rule; GKE's REST errors with the errors[]
reason Terraform retries on; the caller's user agent on the recorded operations; Routers and
regional addresses in world.json, and older files without them still loading."""

from __future__ import annotations

import json
import time

import grpc
import pytest
from google.api_core import exceptions
from google.api_core.gapic_v1.client_info import ClientInfo
from google.cloud import container_v1
from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcAsyncIOTransport

from rltui_sandbox.world import BUSY_REASON, InUse, World

PROJECT = "pool-delete-project"
REGION = "us-east1"
CLUSTER = "c1"
NAME = f"projects/{PROJECT}/locations/{REGION}/clusters/{CLUSTER}"
Op = container_v1.Operation


def running_cluster(box) -> None:
    """A RUNNING cluster with default-pool and system, made instantly."""
    cluster = container_v1.Cluster(name=CLUSTER, node_pools=[
        container_v1.NodePool(name="default-pool", initial_node_count=1),
        container_v1.NodePool(name="system", initial_node_count=1)])
    op = box.call(box.world.create_cluster, PROJECT, REGION, cluster, seconds=0.0)
    box.run(box.world.wait_cluster_operation(PROJECT, REGION, op.name))


def wait_done(client, op: Op, timeout: float = 20) -> Op:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        op = client.get_operation(name=f"projects/{PROJECT}/locations/{REGION}/operations/{op.name}")
        if op.status == Op.Status.DONE:
            return op
        time.sleep(0.02)
    raise AssertionError(f"{op.name} not DONE")


def test_delete_node_pool_is_an_operation_under_the_busy_rule(make_grpc_box, clients) -> None:
    box = make_grpc_box(speed=60.0)  # gke_node_pool_delete 1.5 min = 1.5 s: time to see it busy
    running_cluster(box)
    events: list = []
    box.call(box.world.subscribe, events.append)
    client = clients.gke(box)
    op = client.delete_node_pool(name=f"{NAME}/nodePools/default-pool")
    assert op.operation_type == Op.Type.DELETE_NODE_POOL and op.status == Op.Status.RUNNING
    assert op.target_link.endswith(f"/clusters/{CLUSTER}/nodePools/default-pool")
    pool = client.get_node_pool(name=f"{NAME}/nodePools/default-pool")
    assert pool.status == container_v1.NodePool.Status.STOPPING
    with pytest.raises(exceptions.FailedPrecondition) as busy:
        client.delete_node_pool(name=f"{NAME}/nodePools/system")
    assert busy.value.reason == BUSY_REASON
    wait_done(client, op)
    assert [p.name for p in client.list_node_pools(parent=NAME).node_pools] == ["system"]
    assert any(e.kind == "node_pool_deleted" and e.data["node_pool"] == "default-pool" for e in events)
    with pytest.raises(exceptions.NotFound):
        client.delete_node_pool(name=f"{NAME}/nodePools/default-pool")
    # the last pool may go too (Terraform's flow leaves none until its node pool resources)
    wait_done(client, client.delete_node_pool(name=f"{NAME}/nodePools/system"))
    assert list(client.list_node_pools(parent=NAME).node_pools) == []
    ops = [o for o in box.world.record.snapshot()["operations"] if o["kind"] == "gke.delete_node_pool"]
    assert len(ops) == 2 and all(o["end_ref_s"] is not None for o in ops)


async def test_a_grpc_call_records_the_callers_user_agent(grpc_box) -> None:
    running_cluster(grpc_box)
    info = ClientInfo(user_agent="rltui/9.9")
    channel = grpc.aio.insecure_channel(grpc_box.address)
    client = container_v1.ClusterManagerAsyncClient(
        transport=ClusterManagerGrpcAsyncIOTransport(channel=channel, client_info=info), client_info=info)
    await client.delete_node_pool(name=f"{NAME}/nodePools/default-pool")
    await channel.close()
    [rec] = [o for o in grpc_box.world.record.snapshot()["operations"] if o["kind"] == "gke.delete_node_pool"]
    assert "rltui/9.9" in rec["agent"] and "grpc-python" in rec["agent"]
    # the World's own work names no caller: the create above, GKE's auto-upgrade
    [create] = [o for o in grpc_box.world.record.snapshot()["operations"] if o["kind"] == "gke.create_cluster"]
    assert create["agent"] == ""
    grpc_box.run(grpc_box.world.wait_cluster_idle(PROJECT, REGION, CLUSTER, timeout=10))
    upgrade = grpc_box.call(grpc_box.world.start_gke_upgrade, PROJECT, REGION, CLUSTER, seconds=60.0)
    [auto] = [o for o in grpc_box.world.record.snapshot()["operations"] if o.get("operation") == upgrade.name]
    assert auto["agent"] == ""


def test_gke_rest_errors_carry_the_reason_terraform_retries_on(tmp_path) -> None:
    import urllib.error
    import urllib.request

    from tests import harness

    with harness.LoopThread("rest-gke") as lt:
        world = lt.enter(harness.world(tmp_path / "state", speed=600.0))  # a pool's create: 2.2 s
        urls = lt.enter(harness.rest_sites(world))
        base = urls["container"] + f"v1/{NAME}"

        def call(method: str, path: str = "", body: dict | None = None, agent: str = "Terraform/1.9 test") -> tuple:
            data = json.dumps(body).encode() if body is not None else None
            req = urllib.request.Request(base + path, data=data, method=method,
                                         headers={"User-Agent": agent, "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as err:
                return err.code, json.loads(err.read())

        status, body = call("GET")
        assert status == 404 and body["error"]["status"] == "NOT_FOUND"
        assert body["error"]["errors"] == [{"message": body["error"]["message"], "domain": "global",
                                            "reason": "notFound"}]
        cluster = container_v1.Cluster(name=CLUSTER, node_pools=[
            container_v1.NodePool(name="default-pool", initial_node_count=1)])
        op = lt.call(world.create_cluster, PROJECT, REGION, cluster, seconds=0.0)
        lt.run(world.wait_cluster_operation(PROJECT, REGION, op.name))

        status, body = call("POST", "/nodePools", {"nodePool": {"name": "system", "initialNodeCount": 1}})
        assert status == 200 and body["operationType"] == "CREATE_NODE_POOL"
        status, body = call("DELETE", "/nodePools/default-pool")  # busy: the create still runs
        assert status == 400 and body["error"]["errors"][0]["reason"] == "failedPrecondition"
        assert body["error"]["status"] == "FAILED_PRECONDITION"
        assert body["error"]["details"][0]["reason"] == BUSY_REASON  # the ErrorInfo is kept
        lt.run(world.wait_cluster_idle(PROJECT, REGION, CLUSTER, timeout=30))
        status, body = call("DELETE", "/nodePools/default-pool", agent="Terraform/1.9 terraform-provider-google/7.40.0")
        assert status == 200 and body["operationType"] == "DELETE_NODE_POOL"
        status, body = call("PUT", "", {"update": {}})  # INVALID_ARGUMENT
        assert status == 400 and body["error"]["errors"][0]["reason"] == "badRequest"
        ops = {o["kind"]: o for o in world.record.snapshot()["operations"]}
        assert ops["gke.delete_node_pool"]["agent"] == "Terraform/1.9 terraform-provider-google/7.40.0"
        assert ops["gke.create_node_pool"]["agent"] == "Terraform/1.9 test"


def test_routers_and_regional_addresses_persist_and_old_files_load(tmp_path) -> None:
    from rltui_sandbox.profile import Clock, LatencyProfile

    clock = Clock(LatencyProfile.load(), speed=6000.0)
    world = World(tmp_path, clock)
    world.create_network("p", "net", created_by="xpk")
    world.create_subnet("p", REGION, "sub", network="net", ip_cidr_range="192.168.0.0/18",
                        secondary_ranges=[{"rangeName": "pods", "ipCidrRange": "10.4.0.0/14"}])
    ip = world.create_regional_address("p", REGION, "net-nat-ips-0", labels={"ghpc_role": "network"})
    router = world.create_router("p", REGION, "net-router", network="net",
                                 nats=[{"name": f"cloud-nat-{REGION}", "natIps": [ip.name]}])
    assert router.nats[0]["natIpAllocateOption"] == "MANUAL_ONLY"
    assert router.nats[0]["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    with pytest.raises(InUse):
        world.delete_regional_address("p", REGION, ip.name)
    with pytest.raises(InUse):
        world.delete_network("p", "net")
    world.close()

    again = World(tmp_path, clock)
    assert again.get_router("p", REGION, "net-router") == router
    used = again.get_regional_address("p", REGION, ip.name)
    assert (used.status, used.users, used.labels) == ("IN_USE", [router.path], {"ghpc_role": "network"})
    pods = [{"rangeName": "pods", "ipCidrRange": "10.4.0.0/14"}]
    assert again.get_subnet("p", REGION, "sub").secondary_ranges == pods
    again.delete_router("p", REGION, "net-router")
    assert again.get_regional_address("p", REGION, ip.name).status == "RESERVED"
    again.close()

    # a world.json written before routers, regional addresses, labels and secondary ranges
    data = json.loads((tmp_path / "world.json").read_text())
    for project in data["projects"].values():
        project.pop("routers"), project.pop("regional_addresses")
        for net in project["networks"]:
            for sub in net["subnets"]:
                sub.pop("secondary_ranges")
        for addr in project["addresses"]:
            addr.pop("labels"), addr.pop("description")
    (tmp_path / "world.json").write_text(json.dumps(data))
    old = World(tmp_path, clock)
    assert old.list_routers("p") == [] and old.list_regional_addresses("p") == []
    assert old.get_subnet("p", REGION, "sub").secondary_ranges == []
    old.close()
