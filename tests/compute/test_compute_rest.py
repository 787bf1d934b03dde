"""The Compute REST surface through google.cloud.compute_v1 only: Google's error JSON as the
library's exceptions, insert/delete Operations that ExtendedOperation.result() waits for, refusals
GCE makes (in-use network, disabled API), firewall listing, removePeering."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from rltui_sandbox.services import COMPUTE, SERVICE_NETWORKING

P = "compute-test-project"


def address(name: str, network: str = "default", prefix: int = 24) -> compute_v1.Address:
    return compute_v1.Address(name=name, purpose="VPC_PEERING", address_type="INTERNAL", prefix_length=prefix,
                              network=f"projects/{P}/global/networks/{network}")


def test_the_http_endpoint_is_honoured_and_missing_resources_are_not_found(cloud) -> None:
    nets = compute_v1.NetworksClient(client_options={"api_endpoint": cloud.endpoint},
                                     credentials=AnonymousCredentials())
    assert [n.name for n in nets.list(project=P)] == ["default"]
    default = nets.get(project=P, network="default")
    assert default.auto_create_subnetworks and default.self_link.endswith(f"/projects/{P}/global/networks/default")
    assert default.peerings[0].name == "servicenetworking-googleapis-com" and default.peerings[0].state == "ACTIVE"
    with pytest.raises(exceptions.NotFound) as info:
        nets.get(project=P, network="nope")
    assert info.value.message.endswith(f"The resource 'projects/{P}/global/networks/nope' was not found")
    assert info.value.errors == [{"message": f"The resource 'projects/{P}/global/networks/nope' was not found",
                                  "domain": "global", "reason": "notFound"}]


def test_address_insert_runs_for_the_profile_time_and_result_waits(make_cloud) -> None:
    # address_create 0.5 min = 1 s: at 0.1 s, done()'s own poll found it DONE on a loaded CI machine
    cloud = make_cloud(speed=30.0)
    c = cloud.compute()
    op = c["global_addresses"].insert(project=P, address_resource=address("r1"))
    assert op.status == compute_v1.Operation.Status.RUNNING and not op.done()
    assert c["global_addresses"].get(project=P, address="r1").status == "RESERVING"
    op.result(timeout=10)
    assert op.done() and op.error_code in (0, None)
    got = c["global_addresses"].get(project=P, address="r1")
    assert (got.status, got.prefix_length, got.address_type, got.purpose) == ("RESERVED", 24, "INTERNAL", "VPC_PEERING")
    with pytest.raises(exceptions.Conflict) as info:  # 409 alreadyExists
        c["global_addresses"].insert(project=P, address_resource=address("r1"))
    assert info.value.code == 409 and info.value.errors[0]["reason"] == "alreadyExists"
    waited = c["global_operations"].wait(project=P, operation=op.name)
    assert waited.status == compute_v1.Operation.Status.DONE and waited.target_link.endswith("/global/addresses/r1")
    c["global_addresses"].delete(project=P, address="r1").result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        c["global_addresses"].get(project=P, address="r1")
    kinds = [(o["kind"], o["end_ref_s"] is not None) for o in cloud.world.record.snapshot()["operations"]]
    assert ("compute.addresses.insert", True) in kinds and ("compute.addresses.delete", True) in kinds
    calls = cloud.world.record.snapshot()["calls"]
    assert calls["compute:globalAddresses.insert"] == 2 and calls["compute:globalAddresses.get"] >= 3


def test_bad_input_is_400_invalid(cloud) -> None:
    c = cloud.compute()
    with pytest.raises(exceptions.BadRequest) as info:
        c["networks"].insert(project=P, network_resource=compute_v1.Network(name="Bad_Name",
                                                                            auto_create_subnetworks=False))
    assert info.value.errors[0]["reason"] == "invalid"


def test_network_lifecycle_with_subnets_and_firewalls(cloud) -> None:
    c = cloud.compute()
    c["networks"].insert(project=P, network_resource=compute_v1.Network(
        name="rl-net", auto_create_subnetworks=False, mtu=8896)).result(timeout=10)
    c["subnetworks"].insert(project=P, region="us-east1", subnetwork_resource=compute_v1.Subnetwork(
        name="rl-sub", network=f"projects/{P}/global/networks/rl-net", ip_cidr_range="192.168.0.0/24")).result(10)
    c["firewalls"].insert(project=P, firewall_resource=compute_v1.Firewall(
        name="rl-allow-internal", network=f"projects/{P}/global/networks/rl-net", source_ranges=["192.168.0.0/16"],
        allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=["0-65535"])])).result(timeout=10)

    sub = c["subnetworks"].get(project=P, region="us-east1", subnetwork="rl-sub")
    assert sub.network.endswith("/global/networks/rl-net") and sub.gateway_address == "192.168.0.1"
    assert [s.name for s in c["subnetworks"].list(project=P, region="us-east1")] == ["default", "rl-sub"]
    scopes = {scope: [s.name for s in lst.subnetworks] for scope, lst in
              c["subnetworks"].aggregated_list(project=P)}
    assert scopes["regions/us-east1"] == ["default", "rl-sub"] and scopes["regions/us-central1"] == ["default"]
    net = c["networks"].get(project=P, network="rl-net")
    assert net.mtu == 8896 and net.subnetworks[0].endswith("/regions/us-east1/subnetworks/rl-sub")

    by_network = c["firewalls"].list(request={"project": P, "filter": 'network eq ".*/global/networks/rl-net"'})
    assert [f.name for f in by_network] == ["rl-allow-internal"]
    defaults = sorted(f.name for f in c["firewalls"].list(project=P) if f.network.endswith("/networks/default"))
    assert defaults == ["default-allow-icmp", "default-allow-internal", "default-allow-rdp", "default-allow-ssh"]

    # GCE refuses to delete a network something still uses: HTTP 400, resourceInUseByAnotherResource.
    with pytest.raises(exceptions.BadRequest) as info:
        c["networks"].delete(project=P, network="rl-net")
    assert info.value.errors[0]["reason"] == "resourceInUseByAnotherResource"
    assert "is already being used by" in info.value.message
    c["firewalls"].delete(project=P, firewall="rl-allow-internal").result(timeout=10)
    with pytest.raises(exceptions.BadRequest):  # the subnet still holds it
        c["networks"].delete(project=P, network="rl-net")
    op = c["subnetworks"].delete(project=P, region="us-east1", subnetwork="rl-sub")
    op.result(timeout=10)
    assert c["region_operations"].get(project=P, region="us-east1", operation=op.name).status == \
        compute_v1.Operation.Status.DONE
    c["networks"].delete(project=P, network="rl-net").result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        c["networks"].get(project=P, network="rl-net")


def test_remove_peering_is_the_fallback_when_service_networking_refuses(make_cloud) -> None:
    from google.cloud import lustre_v1

    cloud = make_cloud(speed=6000.0)
    lustre = cloud.lustre()
    inst = lustre_v1.Instance(capacity_gib=9000, per_unit_storage_throughput=1000, filesystem="lustre",
                              network=f"projects/{P}/global/networks/default")
    lustre.create_instance(parent=f"projects/{P}/locations/us-east1-b", instance_id="fs1",
                           instance=inst).result(timeout=30)
    op = lustre.delete_instance(name=f"projects/{P}/locations/us-east1-b/instances/fs1")
    assert lustre.get_instance(name=f"projects/{P}/locations/us-east1-b/instances/fs1").state.name == "DELETING"

    async def delete_peering() -> None:
        await cloud.world.delete_peering(P, "default")

    # Refused while the instance exists, DELETING included, with the real words (terraform 19908).
    with pytest.raises(Exception) as info:
        cloud.run(delete_peering())
    assert info.value.message == ("Failed to delete connection; Producer services (e.g. CloudSQL, Cloud Memstore, "
                                  "etc.) are still using this connection.")
    op.result(timeout=30)
    c = cloud.compute()
    with pytest.raises(exceptions.BadRequest):
        c["networks"].remove_peering(project=P, network="default", networks_remove_peering_request_resource=
                                     compute_v1.NetworksRemovePeeringRequest(name="no-such-peering"))
    c["networks"].remove_peering(project=P, network="default", networks_remove_peering_request_resource=
                                 compute_v1.NetworksRemovePeeringRequest(name="servicenetworking-googleapis-com")
                                 ).result(timeout=10)
    assert not c["networks"].get(project=P, network="default").peerings
    assert cloud.call(cloud.world.list_peerings, P, "default") == []


def test_a_fresh_project_refuses_compute_until_it_is_enabled(make_cloud) -> None:
    cloud = make_cloud(speed=6000.0, enabled_services=())
    c = cloud.compute()
    with pytest.raises(exceptions.Forbidden) as info:
        c["networks"].list(project=P)
    exc = info.value
    assert exc.code == 403 and exc.reason == "SERVICE_DISABLED" and exc.domain == "googleapis.com"
    number = exc.metadata["consumer"].split("/")[1]
    assert exc.metadata["service"] == COMPUTE and exc.metadata["consumer"] == f"projects/{number}"
    assert exc.message.endswith(
        f"Compute Engine API has not been used in project {number} before or it is disabled. Enable it by visiting "
        f"https://console.developers.google.com/apis/api/compute.googleapis.com/overview?project={number} then "
        "retry. If you enabled this API recently, wait a few minutes for the action to propagate to our systems "
        "and retry.")
    assert exc.errors[0]["reason"] == "accessNotConfigured"

    cloud.usage().enable_service(request={"name": f"projects/{P}/services/{COMPUTE}"}).result(timeout=30)
    # Enabling compute makes the auto-mode `default` network and its four rules - and no more:
    # private services access is the user's to set up.
    default = c["networks"].get(project=P, network="default")
    assert default.auto_create_subnetworks and not default.peerings
    assert len(list(c["firewalls"].list(project=P))) == 4
    assert list(c["global_addresses"].list(project=P)) == []
    assert not cloud.call(cloud.world.service_enabled, P, SERVICE_NETWORKING)


def test_list_pages(cloud) -> None:
    c = cloud.compute()
    for i in range(3):
        c["firewalls"].insert(project=P, firewall_resource=compute_v1.Firewall(
            name=f"fw-{i}", network=f"projects/{P}/global/networks/default",
            allowed=[compute_v1.Allowed(I_p_protocol="icmp")]))
    pager = c["firewalls"].list(request={"project": P, "max_results": 2})
    assert len(pager._response.items) == 2 and pager.next_page_token
    assert len(list(pager)) == 7  # 4 default rules + 3


def test_wait_returns_within_its_deadline_while_running(make_cloud) -> None:
    cloud = make_cloud(speed=6.0)  # address_create 0.5 min = 5 s; wait's 2 minutes = 20 s capped by speed
    c = cloud.compute()
    op = c["global_addresses"].insert(project=P, address_resource=address("slow"))
    t = time.monotonic()
    got = c["global_operations"].get(project=P, operation=op.name)
    assert got.status == compute_v1.Operation.Status.RUNNING and time.monotonic() - t < 2
