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
         "lustre": 0.000822, "nat-gateway": 0.0014, "nat-ip": 0.005}
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
    assert any("a3-highgpu-8g" in label for label in est.plan_unpriced)


def test_the_codelabs_plan_per_hour():
    lines = {line.label: line.per_hour for line in plan_lines(cfg(), prices())}
    assert lines["8 x a4-highgpu-8g Spot (64 GPUs)"] == pytest.approx(64 * 4.9542)
    assert lines["6 x e2-standard-4 (xpk's system pool)"] == pytest.approx(6 * (4 * 0.02181159 + 16 * 0.00292353))
    assert lines["Lustre 9000 GiB at 1000 MB/s/TiB"] == pytest.approx(9000 * 0.000822)
    assert lines["GKE cluster fee"] == pytest.approx(0.10)
    # xpk's two Cloud NATs, each at most used by the 8 GPU and 6 system nodes, and their 4 IPs
    assert lines["2 Cloud NAT gateways (at most 14 VMs each)"] == pytest.approx(2 * 14 * 0.0014)
    assert lines["4 NAT IPs (static, used by Cloud NAT)"] == pytest.approx(4 * 0.005)
    assert estimate(cfg(), prices(), [], NOW).plan_per_hour == pytest.approx(sum(lines.values()))


def test_nothing_exists_costs_nothing_and_leaks_are_not_priced_as_the_plan():
    res = [Resource("GKE cluster", "c", "absent", True),
           Resource("Lustre instance", "old", "active", True, leak=True, created=NOW.isoformat())]
    est = estimate(cfg(), prices(), res, NOW)
    assert (est.per_hour, est.since_created) == (0, 0)
    assert est.as_json() == {"per_hour": 0, "since_created": 0, "currency": "USD",
                             "as_of": NOW.isoformat(), "estimate": True, "unpriced": [], "notes": []}


def test_since_created_counts_each_resource_from_its_own_creation():
    two_h = (NOW - timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    half_h = (NOW - timedelta(minutes=30)).isoformat()
    res = [Resource("GKE cluster", "c", "running", True, created=two_h, gpu_nodes=(half_h,) * 8),
           Resource("Lustre instance", "l", "active", True, created=half_h),
           Resource("RayCluster", "c", "ready", True)]
    lines = {x.label: x for x in plan_lines(cfg(), prices())}
    gpus = lines["8 x a4-highgpu-8g Spot (64 GPUs)"].per_hour
    fee_and_cpu = lines["GKE cluster fee"].per_hour + lines["6 x e2-standard-4 (xpk's system pool)"].per_hour
    lustre = lines["Lustre 9000 GiB at 1000 MB/s/TiB"].per_hour
    est = estimate(cfg(), prices(), res, NOW)
    assert est.per_hour == pytest.approx(fee_and_cpu + gpus + lustre)
    # the GPU nodes came 90 minutes after the cluster: their slices count from then
    assert est.since_created == pytest.approx(2 * fee_and_cpu + 0.5 * gpus + 0.5 * lustre)
    assert est.notes == () and est.unpriced == ()
    # Only the Lustre instance: deleting the cluster stops its share.
    alone = estimate(cfg(), prices(), res[1:], NOW)
    assert alone.per_hour == pytest.approx(lustre)


def test_a_cluster_without_gpu_nodes_is_not_charged_for_64_b200s():
    """xpk's cluster is up for an hour before its GPU pool (or the pool failed over quota):
    the meter charges the cluster fee and the system pool, not 64 Spot slices."""
    res = [Resource("GKE cluster", "c", "running", True, created=(NOW - timedelta(hours=1)).isoformat())]
    lines = {x.label: x.per_hour for x in plan_lines(cfg(), prices())}
    est = estimate(cfg(), prices(), res, NOW)
    fee_and_cpu = lines["GKE cluster fee"] + lines["6 x e2-standard-4 (xpk's system pool)"]
    assert est.per_hour == pytest.approx(fee_and_cpu)
    assert est.since_created == pytest.approx(fee_and_cpu)
    assert est.per_hour < 1.0      # not the ~$317/h of 64 B200 slices


def test_gpu_nodes_known_only_from_the_node_pool_are_priced_and_said_to_lack_a_time():
    res = [Resource("GKE cluster", "c", "reconciling", True, created=(NOW - timedelta(hours=1)).isoformat(),
                    gpu_nodes=("",) * 8)]
    est = estimate(cfg(), prices(), res, NOW)
    assert est.per_hour == pytest.approx(0.10 + 6 * (4 * 0.02181159 + 16 * 0.00292353) + 64 * 4.9542)
    assert est.since_created < 1.0
    assert est.notes == ("since created leaves out 8 of 8 x a4-highgpu-8g Spot (64 GPUs): creation time not known",)
    assert est.as_json()["notes"] == list(est.notes)


def test_the_gpu_nodes_come_from_the_node_pools_that_are_up():
    from types import SimpleNamespace as NS

    from rltui.cost import pool_gpu_nodes

    def pool(machine, status, count, zones=("us-east1-b",)):
        return NS(config=NS(machine_type=machine), status=NS(name=status), initial_node_count=count,
                  locations=list(zones))

    cluster = NS(node_pools=[pool("e2-standard-4", "RUNNING", 6), pool("a4-highgpu-8g", "RUNNING", 8)])
    assert pool_gpu_nodes(cluster, "a4-highgpu-8g") == ("",) * 8
    two_zones = NS(node_pools=[pool("a4-highgpu-8g", "RECONCILING", 2, ("us-east1-b", "us-east1-c"))])
    assert len(pool_gpu_nodes(two_zones, "a4-highgpu-8g")) == 4
    for status in ("PROVISIONING", "ERROR"):   # being made, or failed over quota: no node
        assert pool_gpu_nodes(NS(node_pools=[pool("a4-highgpu-8g", status, 8)]), "a4-highgpu-8g") == ()
    assert pool_gpu_nodes(None, "a4-highgpu-8g") == ()


def test_a_missing_price_is_named_never_dropped_silently():
    partial = Prices(rates={k: v for k, v in RATES.items() if k != "lustre"}, as_of=NOW.isoformat(),
                     missing=("lustre",))
    res = [Resource("Lustre instance", "l", "active", True, created=NOW.isoformat())]
    est = estimate(cfg(), partial, res, NOW)
    assert est.per_hour == 0
    assert est.unpriced == ("Lustre 9000 GiB at 1000 MB/s/TiB",)
    assert est.as_json()["unpriced"] == ["Lustre 9000 GiB at 1000 MB/s/TiB"]
    assert "Lustre 9000 GiB at 1000 MB/s/TiB" in est.plan_unpriced
    # nothing of it exists: the plan says so, what exists does not
    assert estimate(cfg(), partial, [], NOW).unpriced == ()


def test_status_names_the_lines_without_a_price():
    from rltui.headless import _cost_lines

    cost = {"per_hour": 0.1, "since_created": 0.2, "currency": "USD", "as_of": NOW.isoformat(),
            "unpriced": ["Lustre 9000 GiB at 1000 MB/s/TiB"],
            "notes": ["since created leaves out 8 of 8 x a4-highgpu-8g Spot (64 GPUs): creation time not known"]}
    lines = _cost_lines(cost)
    assert lines[0].startswith("cost (estimate): $0.10/h now")
    assert "no price for: Lustre 9000 GiB at 1000 MB/s/TiB (left out of the estimate)" in lines[1]
    assert "creation time not known" in lines[2]


def test_the_nats_cost_their_ips_and_per_node_that_may_use_them():
    made = (NOW - timedelta(hours=1)).isoformat()
    nat = [Resource("Cloud NAT", f"cloud-nat-us-east1 on c-net-{i}-router", "present", True, created=made)
           for i in (0, 1)]
    ips = [Resource("NAT IP", f"c-net-{i}-nat-ips-us-east1-{k}", "in_use", True, created=made)
           for i in (0, 1) for k in (0, 1)]
    alone = estimate(cfg(), prices(), nat + ips, NOW)   # no cluster: no VM uses the NATs
    assert alone.per_hour == pytest.approx(4 * 0.005) and alone.since_created == pytest.approx(4 * 0.005)
    cluster = Resource("GKE cluster", "c", "running", True, created=made, gpu_nodes=(made,) * 8)
    with_nodes = estimate(cfg(), prices(), [cluster, *nat, *ips], NOW)
    without = estimate(cfg(), prices(), [cluster], NOW)
    assert with_nodes.per_hour - without.per_hour == pytest.approx(4 * 0.005 + 2 * 14 * 0.0014)


def test_the_tier_changes_the_lustre_sku_asked_for():
    keys = {w.key: w.description for w in wanted(cfg(LUSTRE_THROUGHPUT=125, LUSTRE_CAPACITY=72000))}
    assert "125 MBps" in keys["lustre"]


def test_a_partial_price_list_is_cached_with_what_was_missing(tmp_path):
    path = cache_file(tmp_path / "cache", cfg(), "google")
    partial = Prices(rates={"gke": 0.1}, as_of=NOW.isoformat(), missing=tuple(
        w.key for w in wanted(cfg()) if w.key != "gke"))
    save_cached(path, partial)
    got = load_cached(path, now=NOW + timedelta(hours=1), wants=wanted(cfg()))
    assert got is not None and "nat-ip" in got.missing and got.rates == {"gke": 0.1}
    # a cache written before a SKU was wanted (no NAT keys) is read again, not trusted
    old = Prices(rates={"gke": 0.1}, as_of=NOW.isoformat())
    save_cached(path, old)
    assert load_cached(path, now=NOW, wants=wanted(cfg())) is None


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
