"""Prices from the Cloud Billing Catalog, over google-cloud-billing's CloudCatalogAsyncClient (gRPC).

`list_services` (all public services; page size defaults to 5000) finds each wanted service by
its display name ("Compute Engine", "Kubernetes Engine", ...), then `list_skus(parent=
services/<id>)` pages through its SKUs (about 33,000 for Compute Engine, 5000 a page: a catalog
review counted eight requests) and keeps those rltui/cost.py `matches`. The price of a SKU is
its latest `pricing_info` (the catalog returns the current one, at most 12 hours old, when no
time range is asked), first tier `unit_price` (google.type.Money), in `pricing_expression.
usage_unit` (h, GiBy.h, ...). Sources: google-cloud-billing 1.21.0's types
(google/cloud/billing_v1/types/cloud_catalog.py docstrings) and the Catalog API reference
(cloud.google.com/billing/reference/rest/v1/services.skus/list).

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


def unit_price(sku: Any) -> float | None:
    """The latest pricing's first tier, per one usage unit (None: the SKU has no rate)."""
    if not sku.pricing_info:
        return None
    rates = sku.pricing_info[-1].pricing_expression.tiered_rates
    if not rates:
        return None
    price = rates[0].unit_price
    return money(int(price.units), int(price.nanos))


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
                    price = unit_price(sku)
                    if price is not None:
                        rates[want.key] = price
                        currency = sku.pricing_info[-1].pricing_expression.tiered_rates[0] \
                            .unit_price.currency_code or currency
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
