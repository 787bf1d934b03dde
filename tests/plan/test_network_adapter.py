"""rltui/cloud/network.py's calls for the blueprint's Cloud Routers, NAT IPs and rltui's Lustre
firewall rule, and the IP range's label, through the official google-cloud-compute clients
against the sandbox's Compute REST routes in-process (tests/harness.py: a World and its routes;
no daemon)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

from aiohttp import web

from rltui.cloud.endpoints import Endpoints
from rltui.cloud.network import NetworkAdapter
from rltui_sandbox.rest_compute import add_compute_routes
from tests import harness

PROJECT, REGION = "net-adapter-proj", "us-east1"


async def test_routers_nat_ips_firewall_rule_and_range_labels(tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        world = await stack.enter_async_context(harness.world(tmp_path / "state"))
        app = web.Application()
        add_compute_routes(app, world)
        url = (await stack.enter_async_context(harness.serve_app(app))).url
        net = NetworkAdapter(Endpoints(label="SANDBOX", compute_url=url), PROJECT)

        world.create_network(PROJECT, "c-net-0")
        for i in range(2):
            world.create_regional_address(PROJECT, REGION, f"c-net-0-nat-ips-{REGION}-{i}",
                                          labels={"ghpc_module": "vpc"})
        world.create_router(PROJECT, REGION, "c-net-0-router", network="c-net-0", nats=[{
            "name": f"cloud-nat-{REGION}", "natIpAllocateOption": "MANUAL_ONLY",
            "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES",
            "natIps": [f"c-net-0-nat-ips-{REGION}-{i}" for i in range(2)]}])

        (router,) = await net.routers(REGION)
        assert router.name == "c-net-0-router" and router.network.endswith("/c-net-0")
        assert [n.name for n in router.nats] == [f"cloud-nat-{REGION}"]
        assert len(router.nats[0].nat_ips) == 2
        ips = sorted(a.name for a in await net.regional_addresses(REGION))
        assert ips == [f"c-net-0-nat-ips-{REGION}-0", f"c-net-0-nat-ips-{REGION}-1"]

        await net.create_address("google-managed-services-c-net-0", "c-net-0", 24,
                                 labels={"managed-by": "rltui"},
                                 description="managed-by=rltui: peering range")
        made = await net.address("google-managed-services-c-net-0")
        assert dict(made.labels) == {"managed-by": "rltui"}
        assert made.description == "managed-by=rltui: peering range"
        cidr = f"{made.address}/{made.prefix_length}"

        await net.create_firewall("c-net-0-allow-lustre-traffic", network="c-net-0",
                                  source_ranges=[cidr], tcp_ports=["988"],
                                  description="managed-by=rltui: Managed Lustre")
        rule = await net.firewall("c-net-0-allow-lustre-traffic")
        assert rule.description.startswith("managed-by=rltui")
        assert (rule.direction, list(rule.source_ranges)) == ("INGRESS", [cidr])
        assert [(a.I_p_protocol, list(a.ports)) for a in rule.allowed] == [("tcp", ["988"])]
        assert await net.firewall("no-such-rule") is None

        # The leftovers' order: the router (and its NAT) frees its NAT IPs.
        await net.delete_router(REGION, "c-net-0-router")
        for ip in ips:
            await net.delete_regional_address(REGION, ip)
        await net.delete_firewall("c-net-0-allow-lustre-traffic")
        assert await net.routers(REGION) == [] and await net.regional_addresses(REGION) == []
        assert await net.firewall("c-net-0-allow-lustre-traffic") is None


# ---- red-team review, item 7: a compute operation's wait is not cut by the start's retry -----

class _Addresses:
    """globalAddresses: the first insert starts operation-1; a second one is refused (409)."""

    def __init__(self) -> None:
        self.inserts = 0

    def insert(self, **_: object) -> object:
        from types import SimpleNamespace

        from google.api_core import exceptions as gexc

        self.inserts += 1
        if self.inserts > 1:
            raise gexc.Conflict("The resource 'google-managed-services-c-net-0' already exists")
        return SimpleNamespace(name="operation-1")


class _Operations:
    """globalOperations.wait: RUNNING for `run_s`, then DONE (with `error`, if set)."""

    def __init__(self, run_s: float, error: str = "") -> None:
        import time

        self.t0, self.run_s, self.error, self.waits = time.monotonic(), run_s, error, 0

    def wait(self, **_: object) -> object:
        import time

        from google.cloud import compute_v1

        self.waits += 1
        time.sleep(0.05)
        if time.monotonic() - self.t0 < self.run_s:
            return compute_v1.Operation(name="operation-1",
                                        status=compute_v1.Operation.Status.RUNNING)
        error = {"errors": [{"code": "IP_SPACE_EXHAUSTED", "message": self.error}]}
        return compute_v1.Operation(name="operation-1", status=compute_v1.Operation.Status.DONE,
                                    error=error if self.error else None)


def _short_retry(monkeypatch) -> None:
    """The retry's per-attempt timeout, 60 s, made 0.2 s: an operation that runs longer than
    that is what a 600 s wait meets."""
    import functools

    from rltui.cloud import network as network_module
    from rltui.cloud.errors import retry

    monkeypatch.setattr(network_module, "retry", functools.partial(retry, timeout_s=0.2))


async def test_an_insert_is_sent_once_and_waited_for_past_the_retrys_timeout(monkeypatch):
    _short_retry(monkeypatch)
    addresses, ops = _Addresses(), _Operations(run_s=0.6)
    net = NetworkAdapter(Endpoints(label="FAKE"), PROJECT)
    net._clients.update(GlobalAddresses=addresses, GlobalOperations=ops)
    await net.create_address("google-managed-services-c-net-0", "c-net-0", 24)
    assert addresses.inserts == 1 and ops.waits >= 2


async def test_an_operation_that_fails_late_is_reported_not_taken_for_done(monkeypatch):
    import pytest

    from rltui.cloud.errors import CloudError

    _short_retry(monkeypatch)
    addresses = _Addresses()
    ops = _Operations(run_s=0.5, error="no free /24 left in the network's ranges")
    net = NetworkAdapter(Endpoints(label="FAKE"), PROJECT)
    net._clients.update(GlobalAddresses=addresses, GlobalOperations=ops)
    with pytest.raises(CloudError, match="no free /24"):
        await net.create_address("google-managed-services-c-net-0", "c-net-0", 24)
    assert addresses.inserts == 1
