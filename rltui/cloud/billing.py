"""Prices from the Cloud Billing Catalog, over google-cloud-billing's CloudCatalogAsyncClient (gRPC).

`list_services` (all public services; page size defaults to 5000) finds each wanted service by
its display name ("Compute Engine", "Kubernetes Engine", ...), then `list_skus(parent=
services/<id>)` pages through its SKUs (about 33,000 for Compute Engine, 5000 a page: a catalog
review counted eight requests) and keeps those rltui/cost.py `matches`. The price of a SKU is
its latest `pricing_info` (the catalog returns the current one, at most 12 hours old, when no
time range is asked): a tier's `unit_price` (google.type.Money) per `pricing_expression.
usage_unit`, made a price per hour (per GiB-hour for a GiBy unit) by `unit_price`. Sources:
google-cloud-billing 1.21.0's types (google/cloud/billing_v1/types/cloud_catalog.py
PricingExpression, TierRate, AggregationInfo docstrings) and the Catalog API reference
(cloud.google.com/billing/reference/rest/v1/services.skus/list).

Units. The estimate's rates are per hour (GPU slices, vCPUs, clusters, NAT VMs and IPs) or per
GiB-hour (RAM, Lustre capacity). A usage unit of "h", "GiBy.h" or "GiBy.mo" is converted; any
other unit (data in "GiBy", a count, a day, a unit the catalog adds later) is refused: the SKU
gives no rate and its line is named unpriced, never guessed. A month is what the SKU's own
`base_unit_conversion_factor` says it is ("Conversion factor for converting from price per
usage_unit to price per base_unit": the base unit of "GiBy.mo" is "By.s"; the catalog's storage
SKUs give 2.8759101014016e15 = 2^30 x 2,678,400 s, a 744-hour month, in public catalog
responses of Compute Engine's "Storage PD Capacity" SKUs); a SKU without a factor (or with a
base unit other than "s"/"By.s") is taken at 730 hours a month, the month of Google's pricing
pages ("a 30-day billing cycle (730 hours)", "GiB-months (GiB-hours / hours in month)":
cloud.google.com/solutions/partners/netapp-cloud-volumes/costs). An "h" SKU whose factor is not
3600 (per hour), or a month outside 28-31 days, is refused as inconsistent. `display_quantity`
"does not affect the pricing formula" (its docstring): ignored.

Tiers. `tiered_rates` are sorted by `start_usage_amount` ("Usage is priced at this rate only
after this amount"), applied to the usage aggregated over `aggregation_info`'s interval (DAILY
or MONTHLY, `aggregation_count` of them; MONTHLY when unset) and level (the whole billing
account or project). The estimate takes the first tier when its rate is not zero. When the
first tier is free (an allowance) and a later one is not, the plan's own use over one interval
(`Want.hourly_use` x the interval's hours, in the SKU's units) decides: past the allowance, the
first non-zero tier's rate (the marginal rate, which a plan running for hours pays; the
allowance's share of the first interval is not subtracted, so this errs high); within it, 0 (a
lower bound: other use of the same billing account may have spent the allowance). Later, lower
volume tiers are not applied (an upper bound again). A SKU whose tiers are all free costs 0.
The day's cache (`cached_prices`) keeps the choice made for the plan it was read for.

The catalog needs no project and no billing permission: any credentials (or an API key) read
it. A SKU that is not found is left out of the rates and named in `Prices.missing`.

`cached_prices` keeps the answer a day under the state folder (rltui/cost.py `cache_file`),
whole or partial: a SKU the catalog lacks today is named missing in the cache too, so a
`status` a minute later neither pages Compute Engine's SKUs again nor drops the line silently.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..config import RLConfig
from ..cost import Prices, Want, cache_file, load_cached, matches, money, save_cached, wanted
from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import retry

HOURS_PER_MONTH = 730.0        # Google's pricing pages' month (see the module docstring)
GIB = float(2 ** 30)
# A usage unit's quantity part -> bytes per unit, and the base unit that quantity x time is in.
_QUANTITIES = {"": (1.0, "s"), "GiBy": (GIB, "By.s")}
_INTERVAL_HOURS = {"DAILY": 24.0, "MONTHLY": HOURS_PER_MONTH}


def hours_per_unit(expr: Any, quantity: str = "") -> float | None:
    """How many hours (GiB-hours for `quantity` "GiBy") one `usage_unit` of the SKU is: 1 for
    "h"/"GiBy.h", a month's hours for "mo"; None for a unit the estimate cannot price by the
    hour, or one whose quantity is not `quantity` (see the module docstring)."""
    unit = str(expr.usage_unit)
    have, _, time_unit = unit.rpartition(".")
    if have != quantity or have not in _QUANTITIES or time_unit not in ("h", "mo"):
        return None
    per_unit, base = _QUANTITIES[have]
    factor = float(expr.base_unit_conversion_factor or 0.0)
    if expr.base_unit == base and factor > 0:
        hours = factor / (3600.0 * per_unit)
        if time_unit == "h":
            return 1.0 if abs(hours - 1.0) < 1e-9 else None
        return hours if 28 * 24 <= hours <= 31 * 24 else None
    return 1.0 if time_unit == "h" else HOURS_PER_MONTH


def _amount(rate: Any) -> float:
    return money(int(rate.unit_price.units), int(rate.unit_price.nanos))


def _interval_hours(info: Any) -> float:
    agg = getattr(info, "aggregation_info", None)
    name = getattr(getattr(agg, "aggregation_interval", None), "name", "")
    count = max(1, int(getattr(agg, "aggregation_count", 0) or 0))
    return _INTERVAL_HOURS.get(name, HOURS_PER_MONTH) * count


def _tier(info: Any, hours: float, hourly_use: float) -> Any:
    """The tier whose rate the estimate takes (see the module docstring)."""
    rates = list(info.pricing_expression.tiered_rates)
    paid = next((r for r in rates if _amount(r) != 0), None)
    if _amount(rates[0]) != 0 or paid is None:
        return rates[0]
    used = hourly_use * _interval_hours(info) / hours      # in the SKU's usage units
    return paid if used > float(paid.start_usage_amount) else rates[0]


def sku_rate(sku: Any, quantity: str = "", hourly_use: float = 1.0) -> tuple[float, str] | None:
    """(price per hour, or per GiB-hour for `quantity` "GiBy"; its currency) of the SKU's latest
    pricing; None when it has no rate the estimate can use (no tiers, or a unit it refuses)."""
    if not sku.pricing_info:
        return None
    info = sku.pricing_info[-1]
    expr = info.pricing_expression
    hours = hours_per_unit(expr, quantity)
    if hours is None or not expr.tiered_rates:
        return None
    tier = _tier(info, hours, hourly_use)
    return _amount(tier) / hours, str(tier.unit_price.currency_code)


def unit_price(sku: Any, quantity: str = "", hourly_use: float = 1.0) -> float | None:
    """The SKU's price per hour (per GiB-hour for `quantity` "GiBy"); None: no usable rate."""
    got = sku_rate(sku, quantity, hourly_use)
    return None if got is None else got[0]


class BillingAdapter:
    def __init__(self, endpoints: Endpoints) -> None:
        self.endpoints = endpoints
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.endpoints.billing()
        return self._client

    async def services(self) -> dict[str, str]:
        """display name -> resource name ("services/6F81-5844-456A")."""
        async def call() -> dict[str, str]:
            out: dict[str, str] = {}
            pager = await self.client.list_services(request={}, timeout=CALL_TIMEOUT_S)
            async for service in pager:
                out.setdefault(service.display_name, service.name)
            return out

        return await retry(call, what="Cloud Billing Catalog: list services")

    async def skus(self, service: str) -> list[Any]:
        async def call() -> list[Any]:
            pager = await self.client.list_skus(request={"parent": service}, timeout=CALL_TIMEOUT_S)
            return [sku async for sku in pager]

        return await retry(call, what=f"Cloud Billing Catalog: SKUs of {service}", timeout_s=300.0)

    async def prices(self, wants: list[Want]) -> Prices:
        """Every wanted unit price, each service's SKUs listed once."""
        names = await self.services()
        rates: dict[str, float] = {}
        currency = "USD"
        for service in dict.fromkeys(w.service for w in wants):
            if service not in names:
                continue
            todo = [w for w in wants if w.service == service]
            for sku in await self.skus(names[service]):
                for want in todo:
                    if want.key in rates or not matches(want, sku):
                        continue
                    got = sku_rate(sku, want.quantity, want.hourly_use)
                    if got is not None:
                        rates[want.key] = got[0]
                        currency = got[1] or currency
        return Prices(rates=rates, currency=currency,
                      as_of=datetime.now(UTC).isoformat(timespec="seconds"),
                      source=f"Cloud Billing Catalog ({self.endpoints.label})",
                      missing=tuple(w.key for w in wants if w.key not in rates))

    async def close(self) -> None:
        if self._client is not None:
            transport = getattr(self._client, "transport", None)
            if transport is not None:
                await transport.close()
            self._client = None


async def cached_prices(endpoints: Endpoints, cfg: RLConfig, cache_dir: Path) -> Prices:
    """The plan's unit prices: `cache_dir`'s file when under a day old and asked for every SKU
    the plan wants, else the Cloud Billing Catalog's, then kept there, missing SKUs and all
    (named in `Prices.missing`, for the same day). File I/O runs in a thread; a cache that
    cannot be written is logged, the prices are still good now."""
    wants = wanted(cfg)
    path = cache_file(cache_dir, cfg, "sandbox" if endpoints.grpc_target else "google")
    cached = await asyncio.to_thread(load_cached, path, wants=wants)
    if cached is not None:
        return cached
    adapter = BillingAdapter(endpoints)
    try:
        fresh = await adapter.prices(wants)
    finally:
        await adapter.close()
    try:
        await asyncio.to_thread(save_cached, path, fresh)
    except OSError as exc:
        logging.getLogger(__name__).warning("prices not cached in %s: %s", path, exc)
    return fresh
