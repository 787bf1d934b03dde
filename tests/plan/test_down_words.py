"""Teardown in its own words: `down` names each row for what it deletes (Step.down_title), and a
step it does not delete says what became of its object (Step.kept), read from the cloud.

The real plan (rltui/plan/steps*.py) against the fake adapters (tests/plan/fakes.py); the fake
`xpk` is a subprocess that writes xpk's blueprint, so `xpk cluster delete` (the cluster's row,
while the cluster exists) takes the Cluster Toolkit path, which deletes the cluster and the
blueprint (xpk 1.16.0 commands/cluster_gcluster.py cluster_delete: gcluster destroy); the
networks' row then finds nothing left.
"""

from __future__ import annotations

from rltui.config import RLConfig, parse_config
from rltui.plan import RetryPolicy, Runner, StepState
from rltui.plan.steps import STEP_TYPES, build_plan
from tests.plan.fakes import Network, fake_context, seed


S = StepState
C, LUSTRE = "ray-a4-gpu-spot", "rl-demo-gpu-lustre"
NET = f"{C}-net-0"
TITLES = {
    "raycluster": f"RayCluster {C}", "secret": f"Secret {C}-job-secrets",
    "pv_pvc": f"PVC {LUSTRE}-pvc, PV {LUSTRE}-pv", "lustre_instance": f"Lustre instance {LUSTRE}",
    "peering": f"VPC peering servicenetworking on {NET}",
    "ip_range": f"IP range google-managed-services-{NET}",
    "xpk_cluster": f"GKE cluster {C} and its blueprint (xpk cluster delete)",
    "network_ready": f"VPC networks {NET}, -net-1, -rdma-net, their routers and NAT IPs"
                     " (what is left)",
    "lustre_firewall": f"Firewall rule {NET}-allow-lustre-traffic",
    "enable_apis": "Enabled APIs", "addons": "Addons (RayOperator + Lustre CSI)",
    "credentials": "Cluster credentials", "dashboard": "Ray dashboard port-forward",
    "guard_account": "Service account rltui-guard-5cafcd91 (the budget guard's)"}


def codelab_config(**extra: str) -> RLConfig:
    return parse_config({
        "PROJECT_ID": "words-proj", "ZONE": "us-east1-b", "REGION": "us-east1",
        "CLUSTER_NAME": C, "LUSTRE_INSTANCE_ID": LUSTRE, "LUSTRE_CAPACITY": "9000",
        "HF_TOKEN": "hf_FAKEtokenDoNotShow0123456789", "NUM_NODES": "2", "GPUS_PER_NODE": "8",
        "DEVICE_TYPE": "b200-8", **extra})


def retry() -> RetryPolicy:
    import random
    return RetryPolicy(attempts=2, base_s=0.002, cap_s=0.01, rng=random.Random(3))


async def _down(ctx) -> tuple[object, list]:
    events: list = []
    result = await Runner(build_plan(ctx), ctx, retry=retry(), listener=events.append).down()
    return result, events


async def test_down_rows_are_named_for_what_they_delete(tmp_path):
    ctx = fake_context(codelab_config(), tmp_path)
    seed(ctx, [t.name for t in STEP_TYPES])
    ctx.cloud.op_s = 0.05   # the Lustre delete operation runs long enough to be seen
    result, events = await _down(ctx)
    assert result.ok, result.messages
    titles = {e.step: e.title for e in events}
    assert titles == TITLES
    words = " ".join(f"{e.title} {e.message}" for e in events)
    for creation in ("xpk cluster create", "RayCluster ready", "Network ready"):
        assert creation not in words
    waits = next(e.message for e in events if e.step == "peering" and e.state is S.WAITING)
    assert waits == f"waits: Lustre instance {LUSTRE}"
    # while its delete operation runs, the Lustre row says the state the API reports
    notes = [e.message for e in events if e.step == "lustre_instance" and e.state is S.DESTROYING]
    assert notes[0] == "deleting" and "state DELETING" in notes and "ACTIVE" not in notes
    assert result.messages["xpk_cluster"] == "deleted by xpk cluster delete, with its blueprint"
    assert (result.states["network_ready"], result.messages["network_ready"]) == (
        S.ABSENT, "none left: xpk cluster delete removed them")
    assert result.messages["addons"] == "kept: they go with the GKE cluster"
    assert result.messages["enable_apis"] == "kept: other things in the project may use them"
    assert result.messages["dashboard"] == "nothing in the cloud: a local port-forward"


async def test_when_the_cluster_stays_the_networks_row_says_they_are_still_there(tmp_path):
    """A cluster that is not rltui's (no label, no xpk state in rltui's folder) is left alone,
    and so are its networks: each row says whose they are and how to delete them by hand, not
    that they were deleted, and nothing failed."""
    import shutil

    ctx = fake_context(codelab_config(), tmp_path)
    seed(ctx, [t.name for t in STEP_TYPES])
    shutil.rmtree(ctx.xpk_dir)
    ctx.cloud.cluster.resource_labels.pop("managed-by", None)
    result, _ = await _down(ctx)
    assert result.states["xpk_cluster"] is S.SKIPPED
    assert result.messages["xpk_cluster"].startswith("not rltui's (no managed-by=rltui label")
    assert (f"gcloud container clusters delete {C} --region=us-east1 --project=words-proj"
            " --quiet") in result.messages["xpk_cluster"]
    assert result.states["network_ready"] is S.SKIPPED
    assert result.messages["network_ready"].startswith(
        f"not rltui's (they belong to cluster {C}, which is not rltui's")
    assert ctx.cloud.networks and ctx.cloud.cluster is not None


async def test_a_project_with_nothing_says_nothing_was_deleted(tmp_path):
    ctx = fake_context(codelab_config(), tmp_path)
    seed(ctx, ["enable_apis"])
    result, events = await _down(ctx)
    assert result.ok, result.messages
    assert result.states["network_ready"] is S.ABSENT
    assert result.messages["network_ready"] == "nothing to delete"
    assert not any(e.state is S.DESTROYED for e in events)


async def test_a_network_xpk_did_not_make_is_never_deleted(tmp_path):
    """NETWORK_NAME names the user's own VPC: the networks' row is about xpk's blueprint only."""
    ctx = fake_context(codelab_config(NETWORK_NAME="shared-vpc", DEVICE_TYPE="h100-80gb-8"),
                       tmp_path)
    seed(ctx, ["enable_apis"])
    ctx.cloud.networks["shared-vpc"] = Network("shared-vpc")
    result, events = await _down(ctx)
    assert {e.step: e.title for e in events}["network_ready"] == (
        f"VPC networks {C}-net-0, -net-1, -rdma-net, their routers and NAT IPs (what is left)")
    assert result.messages["network_ready"] == "nothing to delete"
    assert "shared-vpc" in ctx.cloud.networks
    assert ctx.cloud.count("network.delete_network") == 0
