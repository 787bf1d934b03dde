"""What `submit --down-after/--max-cost` finds and makes before the job goes in (plan/guard.py
prepare_guard), over the in-memory project (tests/plan/fakes.py): the GPU pools from GKE, the
price from the cost meter, Workload Identity checked, the account made once with its one role
and its link to the supervisor's KSA, and a refusal, one line naming the flag, for each thing
that rules a guard out."""

from __future__ import annotations

import json

import pytest
from google.cloud import container_v1

from rltui.cost import Prices, slice_key
from rltui.plan import guard as plan_guard
from rltui.plan import inventory
from rltui.plan.jobs import Refused
from tests.plan.fakes import b200_config, fake_context, seed

POOL = "a4-highgpu-8g-ray-a4-gpu-spot-a4-pool"
SLICE = 4.9542  # one B200 Spot slice per hour (sc-crawler's test figure, rltui/cost.py)


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    ctx = fake_context(b200_config("guard-prepare"), tmp_path)
    seed(ctx, ["enable_apis", "xpk_cluster"])

    async def prices(_ctx) -> Prices:
        return Prices(rates={slice_key("a4-highgpu-8g"): SLICE}, as_of="2027-01-15T08:00:00+00:00")

    monkeypatch.setattr(inventory, "prices", prices)
    return ctx


def with_workload_identity(ctx, mode: str = "GKE_METADATA") -> None:
    cluster = ctx.cloud.cluster
    cluster.workload_identity_config = container_v1.WorkloadIdentityConfig(workload_pool="guard-prepare.svc.id.goog")
    for pool in cluster.node_pools:
        pool.config.workload_metadata_config.mode = getattr(container_v1.WorkloadMetadataConfig.Mode, mode)


async def test_the_guard_gets_the_gpu_pool_a_price_and_an_account_linked_to_the_supervisor(ctx) -> None:
    with_workload_identity(ctx)
    guard, note = await plan_guard.prepare_guard(ctx, down_after="gpus", max_cost_usd=500.0)
    iam = ctx._adapters["iam"]
    (email,) = iam.accounts
    assert guard == {"down_after": "gpus", "max_cost_usd": 500.0, "gpu_pools": [POOL],
                     "gpu_node_hour_usd": pytest.approx(8 * SLICE), "currency": "USD", "project": "guard-prepare",
                     "location": "us-east1", "cluster": "ray-a4-gpu-spot",
                     "container_api": "https://container.googleapis.com/", "time_scale": ctx.endpoints.time_scale,
                     "service_account": email}
    assert "hf_FAKE" not in json.dumps(guard)
    assert note.startswith(f"budget guard: deletes GPU pool {POOL} when the run ends or once ~$500 is spent")
    assert iam.policies["project"]["bindings"] == [{"role": "roles/container.clusterAdmin",
                                                     "members": [f"serviceAccount:{email}"]}]
    assert iam.policies[email]["bindings"] == [{"role": "roles/iam.workloadIdentityUser", "members": [
        "serviceAccount:guard-prepare.svc.id.goog[default/rltui-supervisor]"]}]
    # A second submit makes nothing twice.
    await plan_guard.prepare_guard(ctx, down_after="gpus", max_cost_usd=None)
    assert len(iam.accounts) == 1 and len(iam.policies["project"]["bindings"][0]["members"]) == 1


async def test_no_workload_identity_is_refused_with_the_command_that_turns_it_on(ctx) -> None:
    with pytest.raises(Refused) as no_pool:
        await plan_guard.prepare_guard(ctx, down_after="gpus", max_cost_usd=None)
    assert str(no_pool.value) == (
        "--down-after: cluster ray-a4-gpu-spot has no Workload Identity, which the guard acts through: `gcloud"
        " container clusters update ray-a4-gpu-spot --region=us-east1 --workload-pool=guard-prepare.svc.id.goog`,"
        " then submit again")
    with_workload_identity(ctx, mode="GCE_METADATA")
    with pytest.raises(Refused, match=r"node pool system runs no GKE metadata server.*--workload-metadata=GKE_METADATA"):
        await plan_guard.prepare_guard(ctx, down_after=None, max_cost_usd=100.0)
    assert ctx._adapters["iam"].accounts == {}, "nothing made before the refusal"


async def test_a_budget_without_a_price_is_refused(ctx, monkeypatch) -> None:
    with_workload_identity(ctx)

    async def no_gpu_price(_ctx) -> Prices:
        return Prices(rates={}, missing=(slice_key("a4-highgpu-8g"),))

    monkeypatch.setattr(inventory, "prices", no_gpu_price)
    with pytest.raises(Refused, match="^--max-cost: the Cloud Billing Catalog has no price for a a4-highgpu-8g"):
        await plan_guard.prepare_guard(ctx, down_after=None, max_cost_usd=100.0)
    guard, _ = await plan_guard.prepare_guard(ctx, down_after="gpus", max_cost_usd=None)
    assert guard["gpu_node_hour_usd"] is None  # down_after alone needs no price


async def test_an_account_of_that_name_that_is_not_rltuis_is_left_alone(ctx) -> None:
    with_workload_identity(ctx)
    iam = ctx._adapters["iam"]
    email = iam.email(plan_guard.ms.guard_account_id(ctx.cfg))
    iam.accounts[email] = {"email": email, "description": "made by hand"}
    iam.policies[email] = {"etag": "BwE0", "bindings": []}
    with pytest.raises(Refused, match=f"service account {email} exists and is not rltui's.*gcloud iam service-accounts"
                                      f" delete {email}"):
        await plan_guard.prepare_guard(ctx, down_after="gpus", max_cost_usd=None)
    assert iam.policies["project"]["bindings"] == []


async def test_no_cluster_no_guard(tmp_path) -> None:
    ctx = fake_context(b200_config("guard-prepare"), tmp_path)
    seed(ctx, ["enable_apis"])
    with pytest.raises(Refused, match="^--down-after: GKE cluster ray-a4-gpu-spot does not exist: run `rltui up`"):
        await plan_guard.prepare_guard(ctx, down_after="gpus", max_cost_usd=None)


async def test_down_keeps_an_account_that_is_not_rltuis_and_takes_only_its_own_member(ctx) -> None:
    from rltui.plan.step import Kept, StepOutput
    from rltui.plan.steps_guard import GuardAccountStep

    with_workload_identity(ctx)
    await plan_guard.prepare_guard(ctx, down_after="gpus", max_cost_usd=None)
    iam = ctx._adapters["iam"]
    (email,) = iam.accounts
    iam.policies["project"]["bindings"][0]["members"].append("user:ana@example.com")
    said = await GuardAccountStep(ctx).destroy(ctx, StepOutput())
    assert said == f"deleted {email}, and its role on the project" and iam.accounts == {}
    assert iam.policies["project"]["bindings"] == [{"role": "roles/container.clusterAdmin",
                                                     "members": ["user:ana@example.com"]}]
    iam.accounts[email] = {"email": email, "description": "made by hand"}
    with pytest.raises(Kept, match="not rltui's .*gcloud iam service-accounts delete"):
        await GuardAccountStep(ctx).destroy(ctx, StepOutput())
    assert email in iam.accounts


async def test_a_limit_the_gpu_nodes_have_passed_already_is_refused(ctx) -> None:
    """The guard counts from the nodes' creation: a limit they passed before the submit would stop
    the job at its first look, so submit says so instead, and makes nothing."""
    import time

    with_workload_identity(ctx)
    an_hour_ago = time.time() - 3600 * ctx.endpoints.time_scale  # an hour of the cloud's clock
    for name in ("gpu-a", "gpu-b"):
        ctx.cloud.objects[("nodes", name)] = {
            "apiVersion": "v1", "kind": "Node", "metadata": {
                "name": name, "uid": f"uid-{name}", "labels": {"cloud.google.com/gke-nodepool": POOL},
                "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(an_hour_ago))}}
    with pytest.raises(Refused, match=r"^--max-cost: the GPU nodes have cost ~\$[\d,.]+ since they were created,"
                                      r" more than \$50\.00: give a higher limit"):
        await plan_guard.prepare_guard(ctx, down_after=None, max_cost_usd=50.0)
    assert ctx._adapters["iam"].accounts == {}, "nothing made before the refusal"
    guard, _ = await plan_guard.prepare_guard(ctx, down_after=None, max_cost_usd=500.0)
    assert guard["max_cost_usd"] == 500.0


async def test_a_budget_on_reserved_nodes_is_refused(tmp_path, monkeypatch) -> None:
    """A reservation bills whether its machines run or not: a spend limit could never trip."""
    ctx = fake_context(b200_config("guard-prepare", CAPACITY="reservation:rl-b200"), tmp_path)
    seed(ctx, ["enable_apis", "xpk_cluster"])

    async def prices(_ctx) -> Prices:
        return Prices(rates={slice_key("a4-highgpu-8g"): SLICE}, as_of="2027-01-15T08:00:00+00:00")

    monkeypatch.setattr(inventory, "prices", prices)
    with_workload_identity(ctx)
    with pytest.raises(Refused, match=r"^--max-cost: the GPU nodes come from a reservation \(CAPACITY=reservation:rl-b200\)"):
        await plan_guard.prepare_guard(ctx, down_after=None, max_cost_usd=100.0)
    assert ctx._adapters["iam"].accounts == {}, "nothing made before the refusal"
