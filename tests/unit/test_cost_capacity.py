"""rltui/cost.py by CAPACITY: Spot and on-demand A4 nodes are priced from their own slice SKUs
(never one for the other), a reservation's nodes are shown as already committed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rltui.config import parse_config
from rltui.cost import Prices, estimate, gpu_node_hour, plan_lines, slice_key, wanted
from rltui.plan.inventory import Resource

SPOT, ON_DEMAND = 4.9542, 16.11
RATES = {"gke": 0.10, "cpu-core": 0.02181159, "cpu-ram": 0.00292353, slice_key("a4-highgpu-8g"): SPOT,
         slice_key("a4-highgpu-8g", "on-demand"): ON_DEMAND, "lustre": 0.000822, "nat-gateway": 0.0014,
         "nat-ip": 0.005}
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def cfg(capacity: str):
    return parse_config({"PROJECT_ID": "rl-demo-project", "CAPACITY": capacity})


def prices() -> Prices:
    return Prices(rates=RATES, as_of=NOW.isoformat())


def test_each_mode_asks_the_catalog_for_its_own_slice():
    slices = {c: [w.description for w in wanted(cfg(c)) if w.key.startswith("gpu-slice")]
              for c in ("spot", "on-demand", "reservation:a4-res")}
    assert slices == {"spot": ["Spot Preemptible A4 Nvidia B200 (1 gpu slice)"],
                      "on-demand": ["A4 Nvidia B200 (1 gpu slice)"], "reservation:a4-res": []}


def test_on_demand_nodes_cost_the_on_demand_rate():
    lines = {x.label: x.per_hour for x in plan_lines(cfg("on-demand"), prices())}
    assert lines["8 x a4-highgpu-8g on-demand (64 GPUs)"] == pytest.approx(64 * ON_DEMAND)
    assert gpu_node_hour(cfg("on-demand"), prices()) == pytest.approx(8 * ON_DEMAND)
    assert gpu_node_hour(cfg("spot"), prices()) == pytest.approx(8 * SPOT)


def test_a_reservations_nodes_are_already_committed():
    c = cfg("reservation:a4-res")
    lines = {x.label: x.per_hour for x in plan_lines(c, prices())}
    assert lines["8 x a4-highgpu-8g from reservation a4-res, already committed (64 GPUs)"] == 0.0
    cluster = Resource("GKE cluster", "ray-a4-gpu-spot", "running", True, created="2026-12-01T11:00:00Z",
                       gpu_nodes=("2026-12-01T11:30:00Z",) * 8)
    est = estimate(c, prices(), [cluster], NOW)
    assert est.unpriced == () and est.per_hour == pytest.approx(
        0.10 + 6 * (4 * 0.02181159 + 16 * 0.00292353))


def test_the_same_cluster_costs_more_per_hour_on_demand_than_spot():
    cluster = Resource("GKE cluster", "ray-a4-gpu-spot", "running", True, created="2026-12-01T11:00:00Z",
                       gpu_nodes=("2026-12-01T11:30:00Z",) * 8)
    spot = estimate(cfg("spot"), prices(), [cluster], NOW).per_hour
    on_demand = estimate(cfg("on-demand"), prices(), [cluster], NOW).per_hour
    assert on_demand - spot == pytest.approx(64 * (ON_DEMAND - SPOT))
