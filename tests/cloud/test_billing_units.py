"""cloud/billing.py: a catalog SKU's price made per hour (per GiB-hour) from its usage unit, its
base-unit conversion and its tiers; a unit it cannot price by the hour leaves the line unpriced.
Real google-cloud-billing Sku messages, in the shapes public catalog responses show."""

from __future__ import annotations

import asyncio

import pytest
from google.cloud import billing_v1 as b

from rltui.cloud.billing import HOURS_PER_MONTH, BillingAdapter, sku_rate, unit_price
from rltui.cloud.endpoints import Endpoints
from rltui.config import RLConfig
from rltui.cost import estimate, wanted

PD_MONTH_FACTOR = 2.8759101014016e15      # "Storage PD Capacity": GiBy.mo in By.s (744 h)


def money(price: float) -> dict:
    units = int(price)
    return {"currency_code": "USD", "units": units, "nanos": round((price - units) * 1e9)}


def sku(unit: str, tiers: list[tuple[float, float]], *, base: str = "", factor: float = 0.0,
        interval: str = "", count: int = 0, desc: str = "X running in Americas") -> b.Sku:
    info: dict = {"pricing_expression": {
        "usage_unit": unit, "base_unit": base, "base_unit_conversion_factor": factor,
        "display_quantity": 1.0,
        "tiered_rates": [{"start_usage_amount": start, "unit_price": money(price)} for start, price in tiers]}}
    if interval:
        info["aggregation_info"] = {"aggregation_interval": interval, "aggregation_count": count,
                                    "aggregation_level": "ACCOUNT"}
    return b.Sku(description=desc, service_regions=["us-east1"], pricing_info=[info])


def test_an_hourly_sku_is_its_price():
    assert unit_price(sku("h", [(0, 4.9542)], base="s", factor=3600.0)) == pytest.approx(4.9542)
    assert unit_price(sku("h", [(0, 0.10)])) == pytest.approx(0.10)      # no base unit given


def test_a_month_is_what_the_skus_conversion_factor_says():
    """GiBy.mo in By.s with the catalog's factor: a 744-hour month; per GiB-hour."""
    price = unit_price(sku("GiBy.mo", [(0, 0.044)], base="By.s", factor=PD_MONTH_FACTOR), "GiBy")
    assert price == pytest.approx(0.044 / 744)


def test_a_month_without_a_conversion_is_730_hours():
    assert unit_price(sku("GiBy.mo", [(0, 0.73)]), "GiBy") == pytest.approx(0.73 / HOURS_PER_MONTH)
    assert HOURS_PER_MONTH == 730.0


@pytest.mark.parametrize("unit, quantity", [
    ("GiBy", "GiBy"),        # data, not a rate in time
    ("count", ""),
    ("GiBy.d", "GiBy"),      # a unit the estimate does not know
    ("GiBy.h", ""),          # per GiB-hour where a per-hour rate is wanted
    ("h", "GiBy"),           # per hour where a per GiB-hour rate is wanted
])
def test_a_unit_it_cannot_price_by_the_hour_gives_no_rate(unit, quantity):
    assert unit_price(sku(unit, [(0, 1.0)]), quantity) is None


def test_an_inconsistent_conversion_gives_no_rate():
    assert unit_price(sku("h", [(0, 1.0)], base="s", factor=60.0)) is None
    assert unit_price(sku("GiBy.mo", [(0, 1.0)], base="By.s", factor=3600.0 * 2 ** 30), "GiBy") is None


def test_a_first_tier_with_a_rate_is_taken():
    assert unit_price(sku("h", [(0, 0.5), (1000, 0.25)])) == pytest.approx(0.5)


def test_a_free_allowance_the_plan_exceeds_takes_the_first_paid_tier():
    """First 100 hours a month free, then 0.5: one thing running all month (730 h) is past it."""
    free_then_paid = [(0, 0.0), (100, 0.5)]
    assert unit_price(sku("h", free_then_paid), hourly_use=1.0) == pytest.approx(0.5)
    # 0.1 of a thing all month is 73 hours: within the allowance
    assert unit_price(sku("h", free_then_paid), hourly_use=0.1) == 0.0
    # aggregated daily, one thing is 24 hours a day: within it; five are 120: past it
    daily = sku("h", free_then_paid, interval="DAILY", count=1)
    assert unit_price(daily, hourly_use=1.0) == 0.0
    assert unit_price(daily, hourly_use=5.0) == pytest.approx(0.5)


def test_an_all_free_sku_costs_nothing():
    assert sku_rate(sku("h", [(0, 0.0)])) == (0.0, "USD")


def test_the_adapter_names_a_sku_in_an_unknown_unit_unpriced(monkeypatch):
    """The Lustre SKU in a unit the estimate refuses: left out of the rates, named missing, its
    line unpriced in the estimate (never priced by a guess)."""
    cfg = RLConfig(PROJECT_ID="rl-demo-project")
    skus = {
        "services/L": [sku("GiBy.d", [(0, 1.0)], desc="Managed Lustre 1000 MBps per TiB Capacity running in Americas")],
        "services/G": [sku("h", [(0, 0.10)], desc="Regional Kubernetes Clusters")],
    }
    skus["services/G"][0].service_regions = ["global"]
    adapter = BillingAdapter(Endpoints(label="test"))

    async def services() -> dict[str, str]:
        return {"Managed Lustre": "services/L", "Kubernetes Engine": "services/G"}

    async def list_skus(service: str) -> list:
        return skus[service]

    monkeypatch.setattr(adapter, "services", services)
    monkeypatch.setattr(adapter, "skus", list_skus)
    prices = asyncio.run(adapter.prices(wanted(cfg)))
    assert "lustre" in prices.missing and prices.rates["gke"] == pytest.approx(0.10)
    from rltui.plan.inventory import Resource

    est = estimate(cfg, prices, [Resource("Lustre instance", "l", "active", True)])
    assert est.unpriced == ("Lustre 9000 GiB at 1000 MB/s/TiB",)
