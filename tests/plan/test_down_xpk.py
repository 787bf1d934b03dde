"""`down` with xpk's Terraform in mind, and only what is rltui's (issue 24, items 5 and 8).

The real plan against the fake adapters (tests/plan/fakes.py), whose fake `xpk cluster delete`
takes the cluster and the blueprint's networks (with their subnets, firewall rules, routers and
NAT IPs) unless something else holds them:

- the order: the Kubernetes objects, Lustre, the peering, the range and rltui's firewall rule,
  then `xpk cluster delete` while the cluster still exists (never DeleteCluster through the GKE
  API when xpk's state is there), then what is left of the blueprint, by its names;
- without xpk's state, an rltui cluster goes through the GKE API, then its routers, NAT IPs,
  firewall rules, subnets and networks by name; the same for what a failed xpk delete left;
- what is not rltui's (no label, no mark) is kept: SKIPPED, with the command to delete it by
  hand, and nothing of it is deleted.
"""

from __future__ import annotations

import random
import shutil

import pytest

from rltui.config import RLConfig, parse_config
from rltui.plan import RetryPolicy, Runner, StepState
from rltui.plan.ownership import lustre_rule_name
from rltui.plan.steps import STEP_TYPES, build_plan
from tests.plan.fakes import b200_config, quick_retry, Firewall, FakeContext, fake_context, plan_xpk, seed

S = StepState
C = "ray-a4-gpu-spot"
P = "down-xpk-proj"


def codelab_config() -> RLConfig:
    return b200_config(P)


@pytest.fixture
def ctx(tmp_path) -> FakeContext:
    return fake_context(codelab_config(), tmp_path)


def retry() -> RetryPolicy:
    return quick_retry(5, 3)


async def down(ctx: FakeContext, targets: set[str] | None = None) -> tuple[object, list]:
    events: list = []
    result = await Runner(build_plan(ctx), ctx, retry=retry(),
                          listener=events.append).down(targets)
    return result, events


def nothing_left(cloud) -> None:
    assert (cloud.cluster, cloud.networks, cloud.subnets, cloud.firewall_rules, cloud.routers,
            cloud.regional_addresses, cloud.addresses, cloud.peerings, cloud.instances) == (
        None, {}, {}, {}, {}, {}, {}, {}, {})


async def test_xpk_deletes_the_cluster_it_made_after_what_holds_its_network(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    cloud = ctx.cloud
    cloud.slow.update({"delete lustre": 0.05, "delete peering": 0.05, "delete address": 0.05})
    result, events = await down(ctx)
    assert result.ok, result.messages
    # The cluster and its whole blueprint went with xpk's delete, from xpk's state folder.
    assert cloud.count("gke.delete") == 0, "DeleteCluster would make xpk's delete impossible"
    (run,) = cloud.xpk_runs
    assert run.argv[:2] == ["cluster", "delete"] and run.cwd == str(ctx.xpk_dir) and run.code == 0
    nothing_left(cloud)
    order = [(e.step, e.state) for e in events if e.kind == "state"]
    xpk_starts = order.index(("xpk_cluster", S.DESTROYING))
    for name in ("raycluster", "secret", "pv_pvc", "lustre_instance", "peering", "ip_range",
                 "lustre_firewall"):
        assert order.index((name, S.DESTROYED)) < xpk_starts, f"xpk's delete began before {name}"
    assert result.messages["xpk_cluster"] == "deleted by xpk cluster delete, with its blueprint"
    assert (result.states["network_ready"], result.messages["network_ready"]) == (
        S.ABSENT, "none left: xpk cluster delete removed them")
    assert cloud.violations == []


async def test_without_xpk_state_a_labelled_cluster_and_its_blueprint_go_by_name(ctx):
    seed(ctx, ["enable_apis"])
    ctx.cloud.seed_cluster(labelled=True)        # no blueprint in ctx.xpk_dir
    result, _ = await down(ctx, {"xpk_cluster", "network_ready"})
    assert result.ok, result.messages
    cloud = ctx.cloud
    assert cloud.count("gke.delete") == 1 and cloud.xpk_runs == []
    # Routers before their NAT IPs (a NAT holds them), rules and subnets before the networks.
    calls = [c for c in cloud.calls if c.startswith("network.delete_")]
    first = {kind: calls.index(f"network.delete_{kind}") for kind in (
        "router", "regional_address", "firewall", "subnetwork", "network")}
    assert first["router"] < first["regional_address"] < first["network"]
    assert first["firewall"] < first["network"] and first["subnetwork"] < first["network"]
    nothing_left(cloud)
    assert result.messages["xpk_cluster"] == "deleted through the GKE API (xpk's state was lost)"
    assert result.messages["network_ready"] == "deleted by rltui, by the blueprint's names"


async def test_what_a_failed_xpk_delete_left_goes_by_name(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    plan_xpk(ctx, {"leave": True, "exit": 1, "stderr": "ERROR: terraform destroy failed"})
    result, _ = await down(ctx)
    assert result.ok, result.messages
    cloud = ctx.cloud
    assert cloud.count("gke.delete") == 0 and [r.code for r in cloud.xpk_runs] == [1]
    assert result.messages["xpk_cluster"] == ("deleted by xpk cluster delete (which left some"
                                              " of its blueprint)")
    assert result.messages["network_ready"] == "deleted by rltui, by the blueprint's names"
    nothing_left(cloud)


async def test_a_foreign_rule_on_the_network_is_not_deleted_by_name(ctx):
    """Only the blueprint's names (and rltui's own rule, by its mark) are deleted: a rule of
    someone else's keeps the network, and down says so."""
    seed(ctx, ["enable_apis"])
    ctx.cloud.seed_cluster(labelled=True)
    net = ctx.cloud.networks[f"{C}-net-1"]
    ctx.cloud.firewall_rules["allow-my-bastion"] = Firewall("allow-my-bastion", net.self_link)
    result, _ = await down(ctx, {"xpk_cluster", "network_ready"})
    assert result.states["network_ready"] is S.FAILED
    assert "already being used by allow-my-bastion" in result.messages["network_ready"]
    assert "allow-my-bastion" in ctx.cloud.firewall_rules and f"{C}-net-1" in ctx.cloud.networks
    assert f"{C}-net-0" not in ctx.cloud.networks


async def test_what_was_made_by_hand_is_kept_with_the_command_to_delete_it(ctx):
    """A cluster made by xpk from another folder, a range and a peering made by hand: all
    still there after down, each row kept (not failed) with the command to delete it."""
    seed(ctx, ["enable_apis"])
    ctx.cloud.seed_cluster(labelled=False)       # no label, no xpk state in rltui's folder
    ctx.cloud.seed_address(labels={})
    ctx.cloud.seed_peering()
    result, _ = await down(ctx)
    assert result.ok, result.messages
    m = result.messages
    assert (result.states["xpk_cluster"], result.states["ip_range"],
            result.states["peering"], result.states["network_ready"]) == (S.SKIPPED,) * 4
    assert m["ip_range"] == ("not rltui's (no managed-by=rltui label or description): left"
                             " alone; to delete it by hand: gcloud compute addresses delete"
                             f" google-managed-services-{C}-net-0 --global --project={P} --quiet")
    assert m["peering"].startswith(f"not rltui's (it reserves google-managed-services-{C}-net-0,"
                                   " not rltui's marked range alone)")
    assert ("gcloud services vpc-peerings delete --service=servicenetworking.googleapis.com"
            f" --network={C}-net-0 --project={P} --quiet") in m["peering"]
    assert "not rltui's" in m["xpk_cluster"] and "not rltui's" in m["network_ready"]
    cloud = ctx.cloud
    assert cloud.cluster is not None and cloud.addresses and cloud.peerings and cloud.networks
    assert cloud.xpk_runs == [] and not [c for c in cloud.calls if ".delete" in c]


async def test_a_foreign_lustre_instance_keeps_the_peering_range_and_network_not_the_cluster(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    ctx.cloud.instances[ctx.cfg.lustre_instance_id].labels.clear()    # not made by rltui
    result, _ = await down(ctx)
    m = result.messages
    assert result.states["lustre_instance"] is S.SKIPPED
    assert m["lustre_instance"] == ("not rltui's (no managed-by=rltui label): left alone; to"
                                    " delete it by hand: gcloud lustre instances delete"
                                    f" rl-demo-gpu-lustre --location=us-east1-b --project={P}"
                                    " --quiet")
    assert m["peering"] == ("kept: Lustre instance rl-demo-gpu-lustre, which is not rltui's,"
                            " uses it")
    assert m["ip_range"] == f"kept: the peering on {C}-net-0, which stays, reserves it"
    # The billed cluster went all the same (xpk's Terraform deletes it before the network).
    assert result.states["xpk_cluster"] is S.DESTROYED and ctx.cloud.cluster is None
    assert result.states["network_ready"] is S.FAILED
    assert "already being used" in m["network_ready"]
    assert ctx.cloud.instances and ctx.cloud.peerings and f"{C}-net-0" in ctx.cloud.networks


async def test_a_peering_that_cannot_be_deleted_does_not_keep_the_gpu_cluster(ctx):
    from rltui.cloud.errors import CloudError

    seed(ctx, [t.name for t in STEP_TYPES])
    ctx.cloud.fail("network.delete_peering",
                   CloudError("delete peering: permission denied", transient=False, code="403"))
    result, _ = await down(ctx)
    assert result.states["peering"] is S.FAILED and result.states["ip_range"] is S.BLOCKED
    assert result.states["xpk_cluster"] is S.DESTROYED and ctx.cloud.cluster is None
    assert ctx.cloud.count("gke.delete") == 0
    assert ctx.cloud.held_networks() == [f"{C}-net-0"]
    assert result.states["network_ready"] is S.FAILED
    assert "already being used" in result.messages["network_ready"]


async def test_rltuis_firewall_rule_goes_before_xpk_and_a_foreign_one_is_kept(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    rule = lustre_rule_name(ctx.cfg.network)
    ctx.cloud.firewall_rules.pop(rule)
    ctx.cloud.seed_lustre_rule(description="the network team's rule")
    result, _ = await down(ctx)
    assert result.states["lustre_firewall"] is S.SKIPPED
    assert result.messages["lustre_firewall"] == (
        "not rltui's (its description does not start with managed-by=rltui): left alone; to"
        f" delete it by hand: gcloud compute firewall-rules delete {rule} --project={P} --quiet")
    assert rule in ctx.cloud.firewall_rules
    # It keeps its network: xpk's Terraform could not delete that one.
    assert result.states["network_ready"] is S.FAILED and ctx.cloud.cluster is None


async def test_kubernetes_objects_without_rltuis_label_are_kept(ctx):
    seed(ctx, [t.name for t in STEP_TYPES])
    secret = ctx.cloud.objects[("secrets", f"{C}-job-secrets")]
    secret["metadata"]["labels"] = {}
    result, _ = await down(ctx, {"secret"})
    assert result.states["secret"] is S.SKIPPED
    assert result.messages["secret"].endswith(f"kubectl delete secret {C}-job-secrets"
                                              f" --context=gke_{P}_us-east1_{C}")
    assert ("secrets", f"{C}-job-secrets") in ctx.cloud.objects


async def test_networks_without_xpk_state_or_an_owned_cluster_are_kept(ctx):
    seed(ctx, ["enable_apis"])
    ctx.cloud.seed_networks()                     # no cluster, no blueprint: whose are they?
    shutil.rmtree(ctx.xpk_dir, ignore_errors=True)
    result, _ = await down(ctx, {"xpk_cluster", "network_ready"})
    assert result.states["xpk_cluster"] is S.ABSENT
    assert result.states["network_ready"] is S.SKIPPED
    assert result.messages["network_ready"].startswith("not rltui's (left from a cluster")
    assert ctx.cloud.networks and ctx.cloud.routers
