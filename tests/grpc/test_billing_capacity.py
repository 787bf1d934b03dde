"""The sandbox's Cloud Billing Catalog prices CAPACITY=on-demand from the on-demand A4 slice SKU
(not the Spot one beside it), read by rltui's adapter over the official client."""

from __future__ import annotations

import asyncio

import pytest

from rltui.cloud.billing import BillingAdapter
from rltui.cloud.endpoints import Endpoints
from rltui.config import parse_config
from rltui.cost import plan_lines, wanted
from tests.grpc.test_billing import catalog  # noqa: F401 - the fixture


def test_on_demand_is_priced_from_its_own_sku_and_differs_from_spot(catalog):  # noqa: F811
    ep = Endpoints(label="SANDBOX", grpc_target=catalog.address)

    def per_hour(capacity: str) -> dict[str, float | None]:
        cfg = parse_config({"PROJECT_ID": "rl-demo-project", "CAPACITY": capacity})

        async def read():
            adapter = BillingAdapter(ep)
            try:
                return await adapter.prices(wanted(cfg))
            finally:
                await adapter.close()

        prices = asyncio.run(read())
        assert prices.missing == ()
        return {x.label: x.per_hour for x in plan_lines(cfg, prices)}

    on_demand, spot = per_hour("on-demand"), per_hour("spot")
    assert on_demand["8 x a4-highgpu-8g on-demand (64 GPUs)"] == pytest.approx(64 * 16.11)
    assert spot["8 x a4-highgpu-8g Spot (64 GPUs)"] == pytest.approx(64 * 4.9542)
