"""rltui/cost.py: which catalog SKU prices what, the plan's per-hour figure, the running total
since creation, and the day-long cache."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from rltui.config import RLConfig
from rltui.cost import (Prices, Want, cache_file, estimate, fmt_money, load_cached, matches,
                        plan_lines, save_cached, wanted)
from rltui.plan.inventory import Resource

RATES = {"gke": 0.10, "cpu-core": 0.02181159, "cpu-ram": 0.00292353, "gpu-slice:a4-highgpu-8g": 4.9542,
         "lustre": 0.000822}
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def cfg(**kw):
    return RLConfig(PROJECT_ID="rl-demo-project", **kw)


def prices(**rates):
    return Prices(rates={**RATES, **rates}, as_of=NOW.isoformat())


@dataclass
class Sku:
    description: str
    service_regions: list


def test_the_spot_slice_is_told_from_the_on_demand_one_and_the_region_counts():
    want = next(w for w in wanted(cfg()) if w.key == "gpu-slice:a4-highgpu-8g")
    spot = "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas"
    assert matches(want, Sku(spot, ["us-central1", "us-east1"]))
    assert not matches(want, Sku("A4 Nvidia B200 (1 gpu slice) running in Americas", ["us-east1"]))
    assert not matches(want, Sku(spot, ["europe-west4"]))
    gke = Want("gke", "Kubernetes Engine", "Regional Kubernetes Clusters", "global")
    assert matches(gke, Sku("Regional Kubernetes Clusters", ["global"]))
    assert not matches(gke, Sku("Zonal Kubernetes Clusters", ["global"]))


def test_a_device_without_a_known_spot_sku_asks_for_none_and_says_so():
    c = cfg(DEVICE_TYPE="h100-80gb-8")
    assert not [w for w in wanted(c) if w.key.startswith("gpu-slice")]
    est = estimate(c, prices(), [], NOW)
    assert any("a3-highgpu-8g" in label for label in est.unpriced)


def test_the_codelabs_plan_per_hour():
    lines = {line.label: line.per_hour for line in plan_lines(cfg(), prices())}
    assert lines["8 x a4-highgpu-8g Spot (64 GPUs)"] == pytest.approx(64 * 4.9542)
    assert lines["6 x e2-standard-4 (xpk's system pool)"] == pytest.approx(6 * (4 * 0.02181159 + 16 * 0.00292353))
    assert lines["Lustre 9000 GiB at 1000 MB/s/TiB"] == pytest.approx(9000 * 0.000822)
    assert lines["GKE cluster fee"] == pytest.approx(0.10)
    assert estimate(cfg(), prices(), [], NOW).plan_per_hour == pytest.approx(sum(lines.values()))


def test_nothing_exists_costs_nothing_and_leaks_are_not_priced_as_the_plan():
    res = [Resource("GKE cluster", "c", "absent", True),
           Resource("Lustre instance", "old", "active", True, leak=True, created=NOW.isoformat())]
    est = estimate(cfg(), prices(), res, NOW)
    assert (est.per_hour, est.since_created) == (0, 0)
    assert est.as_json() == {"per_hour": 0, "since_created": 0, "currency": "USD",
                             "as_of": NOW.isoformat(), "estimate": True}


def test_since_created_counts_each_resource_from_its_own_creation():
    two_h = (NOW - timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    half_h = (NOW - timedelta(minutes=30)).isoformat()
    res = [Resource("GKE cluster", "c", "running", True, created=two_h),
           Resource("Lustre instance", "l", "active", True, created=half_h),
           Resource("RayCluster", "c", "ready", True)]
    lines = plan_lines(cfg(), prices())
    cluster = sum(x.per_hour for x in lines if x.kind == "GKE cluster")
    lustre = sum(x.per_hour for x in lines if x.kind == "Lustre instance")
    est = estimate(cfg(), prices(), res, NOW)
    assert est.per_hour == pytest.approx(cluster + lustre)
    assert est.since_created == pytest.approx(2 * cluster + 0.5 * lustre)
    # Only the Lustre instance: deleting the cluster stops its share.
    alone = estimate(cfg(), prices(), res[1:], NOW)
    assert alone.per_hour == pytest.approx(lustre)


def test_the_tier_changes_the_lustre_sku_asked_for():
    keys = {w.key: w.description for w in wanted(cfg(LUSTRE_THROUGHPUT=125, LUSTRE_CAPACITY=72000))}
    assert "125 MBps" in keys["lustre"]


def test_the_cache_is_kept_a_day(tmp_path):
    path = cache_file(tmp_path / "cache", cfg(), "sandbox")
    assert load_cached(path) is None
    save_cached(path, prices())
    assert json.loads(path.read_text())["rates"]["gpu-slice:a4-highgpu-8g"] == 4.9542
    assert load_cached(path, now=NOW + timedelta(hours=23)).rates == RATES
    assert load_cached(path, now=NOW + timedelta(hours=25)) is None
    path.write_text("{not json")
    assert load_cached(path, now=NOW) is None
    assert cache_file(tmp_path, cfg(), "google") != cache_file(tmp_path, cfg(), "sandbox")


def test_money_reads_short():
    assert fmt_money(324.17) == "$324.17"
    assert fmt_money(12345.6) == "$12,346"
    assert fmt_money(3.5, "EUR") == "3.50 EUR"


@pytest.mark.parametrize("exists", [False, True])
def test_status_without_prices_says_0_when_nothing_exists_else_unknown_with_the_reason(exists):
    import asyncio

    from rltui.cloud.errors import CloudError
    from rltui.headless import _cost, _cost_line

    async def run():
        failed = asyncio.get_running_loop().create_future()
        failed.set_exception(CloudError("Cloud Billing API has not been used in project 1", transient=False))
        res = [Resource("GKE cluster", "c", "running" if exists else "absent", True)]
        return await _cost(cfg(), failed, res)

    cost = asyncio.run(run())
    if exists:
        assert cost["per_hour"] is None and "Cloud Billing API" in cost["error"]
        assert _cost_line(cost).startswith("cost: unknown (Cloud Billing API")
    else:
        assert (cost["per_hour"], cost["since_created"]) == (0.0, 0.0)
