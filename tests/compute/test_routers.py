"""Cloud Routers with their NATs and regional addresses (what Cluster Toolkit's vpc module makes)
through google.cloud.compute_v1 only: NAT IPs IN_USE with their router as user, deletes refused
while in use (resourceInUseByAnotherResource), aggregated lists, subnetworks' secondary ranges,
a global address's labels, and the caller's user agent on every recorded operation."""

from __future__ import annotations

import ipaddress

import pytest
from google.api_core import exceptions
from google.api_core.gapic_v1.client_info import ClientInfo
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

P = "router-test-project"
R = "us-east1"
NET = "c1-net-0"


def nat_ip(name: str, labels: dict[str, str] | None = None) -> compute_v1.Address:
    return compute_v1.Address(name=name, address_type="EXTERNAL", labels=labels or {})


def make_network(c) -> None:
    c["networks"].insert(project=P, network_resource=compute_v1.Network(
        name=NET, auto_create_subnetworks=False, mtu=8896)).result(timeout=10)


def make_router(c, ips: list[str], name: str = f"{NET}-router") -> None:
    nat = compute_v1.RouterNat(
        name=f"cloud-nat-{R}", nat_ip_allocate_option="MANUAL_ONLY",
        source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
        nat_ips=[f"https://www.googleapis.com/compute/v1/projects/{P}/regions/{R}/addresses/{ip}" for ip in ips])
    c["routers"].insert(project=P, region=R, router_resource=compute_v1.Router(
        name=name, network=f"projects/{P}/global/networks/{NET}", nats=[nat])).result(timeout=10)


def test_nat_ips_are_in_use_while_the_router_uses_them(cloud) -> None:
    c = cloud.compute()
    make_network(c)
    labels = {"ghpc_module": "vpc", "ghpc_role": "network"}
    ips = [f"{NET}-nat-ips-{R}-0", f"{NET}-nat-ips-{R}-1"]
    for ip in ips:
        c["addresses"].insert(project=P, region=R, address_resource=nat_ip(ip, labels)).result(timeout=10)
    got = c["addresses"].get(project=P, region=R, address=ips[0])
    assert (got.status, got.address_type, got.network_tier, dict(got.labels)) == \
        ("RESERVED", "EXTERNAL", "PREMIUM", labels)
    assert ipaddress.IPv4Address(got.address) in ipaddress.IPv4Network("203.0.113.0/24")  # invented, RFC 5737
    assert got.region.endswith(f"/projects/{P}/regions/{R}") and got.label_fingerprint and not got.users

    make_router(c, ips)
    router = c["routers"].get(project=P, region=R, router=f"{NET}-router")
    assert router.network.endswith(f"/global/networks/{NET}") and router.region.endswith(f"/regions/{R}")
    [nat] = router.nats
    assert nat.name == f"cloud-nat-{R}" and [ip.rsplit("/", 1)[1] for ip in nat.nat_ips] == ips
    assert nat.nat_ip_allocate_option == "MANUAL_ONLY"
    for ip in ips:
        used = c["addresses"].get(project=P, region=R, address=ip)
        assert used.status == "IN_USE" and list(used.users) == [router.self_link]

    with pytest.raises(exceptions.BadRequest) as info:  # GCE's InUse
        c["addresses"].delete(project=P, region=R, address=ips[0])
    assert info.value.errors[0]["reason"] == "resourceInUseByAnotherResource"
    with pytest.raises(exceptions.BadRequest) as info:
        c["networks"].delete(project=P, network=NET)
    assert info.value.errors[0]["reason"] == "resourceInUseByAnotherResource"
    assert f"/regions/{R}/routers/{NET}-router" in info.value.message
    with pytest.raises(exceptions.Conflict):
        make_router(c, ips)
    with pytest.raises(exceptions.BadRequest):  # another router may not take the same NAT IPs
        make_router(c, ips[:1], name="other-router")

    assert [r.name for r in c["routers"].list(project=P, region=R)] == [f"{NET}-router"]
    agg = {scope: [r.name for r in scoped.routers] for scope, scoped in c["routers"].aggregated_list(project=P)}
    assert agg == {f"regions/{R}": [f"{NET}-router"]}
    addr_agg = {scope: sorted(a.name for a in scoped.addresses)
                for scope, scoped in c["addresses"].aggregated_list(project=P)}
    assert addr_agg[f"regions/{R}"] == ips and "google-managed-services-default" in addr_agg["global"]

    c["routers"].delete(project=P, region=R, router=f"{NET}-router").result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        c["routers"].get(project=P, region=R, router=f"{NET}-router")
    freed = c["addresses"].get(project=P, region=R, address=ips[0])
    assert freed.status == "RESERVED" and not freed.users
    for ip in ips:
        c["addresses"].delete(project=P, region=R, address=ip).result(timeout=10)
    assert list(c["addresses"].list(project=P, region=R)) == []
    c["networks"].delete(project=P, network=NET).result(timeout=10)

    kinds = [o["kind"] for o in cloud.world.record.snapshot()["operations"]]
    assert kinds.count("compute.routers.insert") == 1 and kinds.count("compute.routers.delete") == 1
    assert kinds.count("compute.addresses.insert") == 2 and kinds.count("compute.addresses.delete") == 2


def test_router_refusals(cloud) -> None:
    c = cloud.compute()
    with pytest.raises(exceptions.NotFound):  # no such network
        make_router(c, [])
    make_network(c)
    with pytest.raises(exceptions.NotFound):  # no such NAT IP
        make_router(c, ["nope"])
    with pytest.raises(exceptions.NotFound):
        c["addresses"].get(project=P, region=R, address="nope")
    with pytest.raises(exceptions.BadRequest):  # the sandbox makes EXTERNAL regional addresses only
        c["addresses"].insert(project=P, region=R, address_resource=compute_v1.Address(
            name="internal", address_type="INTERNAL")).result(timeout=10)


def test_subnet_secondary_ranges_and_global_address_labels(cloud) -> None:
    c = cloud.compute()
    make_network(c)
    ranges = [compute_v1.SubnetworkSecondaryRange(range_name="pods", ip_cidr_range="10.4.0.0/14"),
              compute_v1.SubnetworkSecondaryRange(range_name="services", ip_cidr_range="10.0.32.0/20")]
    c["subnetworks"].insert(project=P, region=R, subnetwork_resource=compute_v1.Subnetwork(
        name="c1-sub-0", network=f"projects/{P}/global/networks/{NET}", ip_cidr_range="192.168.0.0/18",
        secondary_ip_ranges=ranges)).result(timeout=10)
    sub = c["subnetworks"].get(project=P, region=R, subnetwork="c1-sub-0")
    assert [(r.range_name, r.ip_cidr_range) for r in sub.secondary_ip_ranges] == \
        [("pods", "10.4.0.0/14"), ("services", "10.0.32.0/20")]
    c["global_addresses"].insert(project=P, address_resource=compute_v1.Address(
        name="psa-range", purpose="VPC_PEERING", address_type="INTERNAL", prefix_length=24,
        network=f"projects/{P}/global/networks/{NET}", labels={"created_by": "rltui"},
        description="Lustre's range")).result(timeout=10)
    got = c["global_addresses"].get(project=P, address="psa-range")
    assert dict(got.labels) == {"created_by": "rltui"} and got.description == "Lustre's range"
    assert cloud.world.get_address(P, "psa-range").labels == {"created_by": "rltui"}


def test_a_compute_insert_records_the_callers_user_agent(cloud) -> None:
    client = compute_v1.AddressesClient(client_options={"api_endpoint": cloud.endpoint},
                                        credentials=AnonymousCredentials(),
                                        client_info=ClientInfo(user_agent="rltui/9.9"))
    op = client.insert_unary(project=P, region=R, address_resource=nat_ip("ua-ip"))
    assert op.status == compute_v1.Operation.Status.DONE
    [rec] = [o for o in cloud.world.record.snapshot()["operations"]
             if o["kind"] == "compute.addresses.insert" and o["target"].endswith("/ua-ip")]
    assert "rltui/9.9" in rec["agent"]
