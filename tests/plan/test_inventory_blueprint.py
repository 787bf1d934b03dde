"""status, Teardown and the leak scan list xpk's whole blueprint (Cloud Routers with their NATs,
NAT IPs, firewall rules, subnetworks), rltui's Lustre firewall rule, and whose each one is
(issue 24, items 6 and 8): the inventory over the fake adapters (tests/plan/fakes.py)."""

from __future__ import annotations

import pytest

from rltui.config import RLConfig, parse_config
from rltui.plan import inventory
from rltui.plan.steps import STEP_TYPES
from tests.plan.fakes import inventory_context, b200_config, quick_retry, FakeContext, fake_context, seed

C, P, R = "ray-a4-gpu-spot", "inv-bp-proj", "us-east1"


def codelab_config() -> RLConfig:
    return b200_config(P)


@pytest.fixture
def ctx(tmp_path, monkeypatch) -> FakeContext:
    return inventory_context(codelab_config(), tmp_path, monkeypatch)


def rows(resources, kind: str) -> dict[str, inventory.Resource]:
    return {r.name: r for r in resources if r.kind == kind}


async def test_the_blueprints_routers_nat_and_nat_ips_are_listed_as_rltuis(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    resources = await inventory.collect(ctx)
    routers = rows(resources, "Cloud Router")
    assert sorted(routers) == [f"{C}-net-0-router", f"{C}-net-1-router"]
    nats = rows(resources, "Cloud NAT")
    assert sorted(nats) == [f"cloud-nat-{R} on {C}-net-0-router",
                            f"cloud-nat-{R} on {C}-net-1-router"]
    ips = rows(resources, "NAT IP")
    assert sorted(ips) == [f"{C}-net-{i}-nat-ips-{R}-{j}" for i in (0, 1) for j in (0, 1)]
    rules = rows(resources, "Firewall rule")
    assert set(rules) == {f"{C}-internal-0", f"{C}-internal-1",
                          *(f"{C}-net-{i}-fw-allow-{w}" for i in (0, 1)
                            for w in ("internal-traffic", "iap-ingress")),
                          f"{C}-net-0-allow-lustre-traffic"}
    assert len(rows(resources, "Subnetwork")) == 10
    listed = [r for r in resources if r.kind in ("Cloud Router", "Cloud NAT", "NAT IP",
                                                 "Firewall rule", "Subnetwork", "IP range",
                                                 "VPC peering", "VPC network")]
    assert all(r.present and r.owned and not r.hand_delete for r in listed), \
        [r for r in listed if not (r.present and r.owned)]


async def test_what_is_not_rltuis_carries_the_command_to_delete_it(ctx):
    import shutil

    seed(ctx, ["enable_apis"])
    ctx.cloud.seed_cluster(labelled=False)     # made by xpk elsewhere: not rltui's
    shutil.rmtree(ctx.xpk_dir, ignore_errors=True)
    ctx.cloud.seed_address(labels={})
    ctx.cloud.seed_peering()
    resources = await inventory.collect(ctx)
    foreign = {(r.kind, r.name): r.hand_delete for r in resources if r.present and not r.owned}
    assert foreign[("GKE cluster", C)] == (f"gcloud container clusters delete {C} --region={R}"
                                           f" --project={P} --quiet")
    assert foreign[("IP range", f"google-managed-services-{C}-net-0")] == (
        f"gcloud compute addresses delete google-managed-services-{C}-net-0 --global"
        f" --project={P} --quiet")
    assert foreign[("VPC peering", f"servicenetworking on {C}-net-0")].startswith(
        "gcloud services vpc-peerings delete --service=servicenetworking.googleapis.com")
    assert foreign[("Cloud Router", f"{C}-net-0-router")] == (
        f"gcloud compute routers delete {C}-net-0-router --region={R} --project={P} --quiet")
    assert foreign[("Cloud NAT", f"cloud-nat-{R} on {C}-net-1-router")] == (
        f"gcloud compute routers nats delete cloud-nat-{R} --router={C}-net-1-router"
        f" --region={R} --project={P} --quiet")
    assert foreign[("NAT IP", f"{C}-net-0-nat-ips-{R}-1")] == (
        f"gcloud compute addresses delete {C}-net-0-nat-ips-{R}-1 --region={R} --project={P}"
        " --quiet")
    assert not [r for r in resources if r.leak]


async def test_another_rltui_clusters_routers_and_nat_ips_are_leaks(ctx):
    from tests.plan.fakes import RegionalAddress, Router

    seed(ctx, ["enable_apis"])
    other = "old-run"
    from rltui.plan import xpkstate

    # rltui's xpk made it (recorded in rltui's folder for that cluster); the cluster is gone.
    xpkstate.record_owned(ctx.xpk_dir.parent / other, P, R, other, "9" * 32,
                          "2026-01-01T00:00:00Z")
    ctx.cloud.routers[f"{other}-net-0-router"] = Router(f"{other}-net-0-router",
                                                        f"x/networks/{other}-net-0", R)
    ctx.cloud.regional_addresses[f"{other}-net-1-nat-ips-{R}-0"] = RegionalAddress(
        f"{other}-net-1-nat-ips-{R}-0", R)
    resources = await inventory.collect(ctx)
    leaks = {(r.kind, r.name) for r in resources if r.leak}
    assert leaks == {("Cloud Router", f"{other}-net-0-router"),
                     ("NAT IP", f"{other}-net-1-nat-ips-{R}-0")}
