"""The sandbox's Cloud Billing Catalog, read by the official google-cloud-billing client over gRPC
(sync CloudCatalogClient, and the async one through rltui's adapter), and the plan's estimate."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from rltui.cloud.billing import BillingAdapter
from rltui.cloud.endpoints import Endpoints
from rltui.config import RLConfig
from rltui.cost import estimate, plan_lines, wanted
from rltui_sandbox.grpc_billing import add_billing_service
from tests import harness


class CatalogBox(harness.LoopThread):
    def __init__(self) -> None:
        super().__init__("billing", timeout=20)
        self.address = ""

    def start(self) -> "CatalogBox":  # type: ignore[override]
        super().start(self._start())
        return self

    async def _start(self) -> None:
        self.address = await self.stack.enter_async_context(harness.grpc_server(extra=[add_billing_service]))


@pytest.fixture(scope="module")
def catalog() -> CatalogBox:
    box = CatalogBox().start()
    yield box
    box.stop()


def test_the_official_client_pages_services_and_skus(catalog):
    from google.cloud import billing_v1
    from google.cloud.billing_v1.services.cloud_catalog.transports import CloudCatalogGrpcTransport

    client = billing_v1.CloudCatalogClient(
        transport=CloudCatalogGrpcTransport(channel=grpc.insecure_channel(catalog.address)))
    services = {s.display_name: s for s in client.list_services(request={"page_size": 2})}
    assert services["Compute Engine"].name == "services/6F81-5844-456A"
    assert services["Kubernetes Engine"].service_id == "CCD8-9BF1-090E"
    skus = list(client.list_skus(request={"parent": "services/6F81-5844-456A", "page_size": 2}))
    spot = next(s for s in skus if s.description.startswith("Spot Preemptible A4"))
    assert spot.category.resource_group == "GPU" and spot.category.usage_type == "OnDemand"
    assert "us-east1" in spot.service_regions
    rate = spot.pricing_info[0].pricing_expression
    assert rate.usage_unit == "h"
    assert rate.tiered_rates[0].unit_price.units == 4 and rate.tiered_rates[0].unit_price.currency_code == "USD"
    with pytest.raises(Exception) as err:
        list(client.list_skus(request={"parent": "services/0000-0000-0000"}))
    assert type(err.value).__name__ == "NotFound"


def test_the_adapter_prices_the_codelabs_plan(catalog):
    cfg = RLConfig(PROJECT_ID="rl-demo-project")
    ep = Endpoints(label="SANDBOX", grpc_target=catalog.address)

    async def read():
        adapter = BillingAdapter(ep)
        try:
            return await adapter.prices(wanted(cfg))
        finally:
            await adapter.close()

    prices = asyncio.run(read())
    assert prices.missing == ()
    # the Spot slice, not the on-demand one beside it; the on-demand E2 core, not Spot nor EMEA's
    assert prices.rates["gpu-slice:a4-highgpu-8g"] == pytest.approx(4.9542)
    assert prices.rates["cpu-core"] == pytest.approx(0.02181159)
    assert prices.rates["gke"] == pytest.approx(0.10)
    # Cloud NAT from the Networking service: per VM using the gateway, and per NAT IP
    assert prices.rates["nat-gateway"] == pytest.approx(0.0014)
    assert prices.rates["nat-ip"] == pytest.approx(0.005)
    # Lustre is served per GiB-month, as the catalog's storage SKUs are: per GiB-hour here
    assert prices.rates["lustre"] == pytest.approx(0.000822)
    assert prices.rates["cpu-ram"] == pytest.approx(0.00292353)
    lines = {line.label: line.per_hour for line in plan_lines(cfg, prices)}
    assert lines["8 x a4-highgpu-8g Spot (64 GPUs)"] == pytest.approx(64 * 4.9542)
    est = estimate(cfg, prices, [])
    assert est.per_hour == 0 and est.plan_per_hour > 64 * 4.9542


def test_prices_are_read_once_a_day_then_come_from_the_state_folder(tmp_path):
    """plan/inventory.py `prices`: the catalog's answer is kept under <state>/cache/; with the
    catalog gone, the cache still answers; a cache older than a day is read again."""
    import json

    from rltui.plan.context import Context
    from rltui.plan.inventory import Resource, cost, prices

    cfg = RLConfig(PROJECT_ID="rl-demo-project")
    box = CatalogBox().start()
    ep = Endpoints(label="SANDBOX", grpc_target=box.address)

    async def read(endpoints):
        ctx = Context(cfg, endpoints, root=tmp_path)
        try:
            gpu = Resource("GKE cluster", "c", "running", True, gpu_nodes=("",) * 8)
            return await prices(ctx), await cost(ctx, [gpu])
        finally:
            await ctx.close()

    try:
        first, est = asyncio.run(read(ep))
    finally:
        box.stop()
    cached = list((tmp_path / "cache").glob("prices-sandbox-us-east1-*.json"))
    assert len(cached) == 1 and first.source.startswith("Cloud Billing Catalog")
    assert est is not None and est.per_hour > 64 * 4.9
    again, _ = asyncio.run(read(ep))            # the server is gone: the cache answers
    assert again.rates == first.rates
    data = json.loads(cached[0].read_text())
    data["as_of"] = "2020-01-01T00:00:00+00:00"  # more than a day old
    cached[0].write_text(json.dumps(data))
    box = CatalogBox().start()                    # a day later: read from the catalog again
    try:
        fresh, _ = asyncio.run(read(Endpoints(label="SANDBOX", grpc_target=box.address)))
    finally:
        box.stop()
    assert fresh.as_of > "2020-01-01" and json.loads(cached[0].read_text())["as_of"] == fresh.as_of


def test_a_partial_answer_is_cached_a_day_and_names_what_the_catalog_lacks(tmp_path):
    """cloud/billing.py cached_prices: a region the catalog prices only in part (the sandbox
    has no EMEA E2 RAM, A4 Spot slice or Lustre SKU) is kept with what it lacked, so the next
    status neither pages the catalog again nor loses the names of the lines without a price."""
    from rltui.cloud.billing import cached_prices

    cfg = RLConfig(PROJECT_ID="rl-demo-project", ZONE="europe-west4-a", REGION="europe-west4")
    box = CatalogBox().start()
    try:
        first = asyncio.run(cached_prices(Endpoints(label="SANDBOX", grpc_target=box.address), cfg,
                                          tmp_path / "cache"))
    finally:
        box.stop()
    assert {"cpu-ram", "lustre", "gpu-slice:a4-highgpu-8g"} <= set(first.missing)
    assert first.rates["gke"] == pytest.approx(0.10)
    # the catalog is gone: the day's cache answers, missing names and all
    again = asyncio.run(cached_prices(Endpoints(label="SANDBOX", grpc_target=box.address), cfg,
                                      tmp_path / "cache"))
    assert again.missing == first.missing and again.rates == first.rates
    from rltui.plan.inventory import Resource

    est = estimate(cfg, again, [Resource("Lustre instance", "l", "active", True)])
    assert est.unpriced == ("Lustre 9000 GiB at 1000 MB/s/TiB",)
