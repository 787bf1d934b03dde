"""The World's IAM on its own: kept across a restart as the rest of its state, the metadata
server's tokens mapped back to their principal (and refused when forged), and who a Kubernetes
ServiceAccount is before and after it is linked to a Google service account."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.cloud import container_v1

from rltui_sandbox.profile import Clock, LatencyProfile
from rltui_sandbox.services import CODELAB_APIS
from rltui_sandbox.world import InvalidArgument, World
from rltui_sandbox.world_iam import Unauthenticated, WorkloadDenied, ksa_principal

PROJECT = "iam-world-test"
POOL = f"{PROJECT}.svc.id.goog"
GSA = f"rltui-guard-test@{PROJECT}.iam.gserviceaccount.com"


def world_at(state_dir: Path) -> World:
    return World(state_dir, Clock(LatencyProfile.load(), speed=6000.0, seed=2), enabled_services=CODELAB_APIS)


def bind(world: World, role: str, member: str) -> None:
    policy = world.get_account_policy(PROJECT, GSA)
    world.set_account_policy(PROJECT, GSA, {**policy, "bindings": [{"role": role, "members": [member]}]})


async def test_accounts_and_policies_survive_a_restart(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    made = world.create_service_account(PROJECT, "rltui-guard-test", "budget guard")
    project = world.get_project_policy(PROJECT)
    grant = {**project, "bindings": [*project["bindings"], {"role": "roles/container.clusterAdmin",
                                                            "members": [f"serviceAccount:{GSA}"]}]}
    written = world.set_project_policy(PROJECT, grant)
    world.close()

    again = world_at(tmp_path)
    assert again.get_service_account(PROJECT, made["uniqueId"]) == made
    assert again.get_project_policy(PROJECT, 3) == written
    assert "container.clusters.update" in again.project_permissions(PROJECT, f"serviceAccount:{GSA}")
    again.close()


async def test_tokens_stand_for_their_principal_and_a_forged_one_is_refused(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    token, lifetime = world.mint_access_token(f"serviceAccount:{GSA}")
    assert 3000 < lifetime < 3600
    assert world.token_principal(token) == f"serviceAccount:{GSA}"
    assert world.token_principal("sbx1.9999999999.abc") is None  # the owner's (the ADC's tokens)
    head, _, mac = token.rpartition(".")
    with pytest.raises(Unauthenticated):
        world.token_principal(f"{head}.{'0' * len(mac)}")
    world.close()
    assert world_at(tmp_path).token_principal(token) == f"serviceAccount:{GSA}"  # the secret is kept


async def test_a_service_account_is_its_own_principal_until_linked(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    world.create_service_account(PROJECT, "rltui-guard-test")
    assert world.workload_identity(PROJECT, POOL, "default", "sup", None) == \
        (POOL, ksa_principal(PROJECT, POOL, "default", "sup"))
    with pytest.raises(WorkloadDenied, match="missing IAM policy binding"):
        world.workload_identity(PROJECT, POOL, "default", "sup", GSA)
    with pytest.raises(InvalidArgument, match=r"Identity Pool does not exist \(iam-world-test.svc.id.goog\)"):
        bind(world, "roles/iam.workloadIdentityUser", f"serviceAccount:{POOL}[default/sup]")

    # The pool is made by the project's first cluster with Workload Identity.
    world.create_cluster(PROJECT, "us-east1", container_v1.Cluster(
        name="wi", workload_identity_config=container_v1.WorkloadIdentityConfig(workload_pool=POOL)), seconds=0.0)
    bind(world, "roles/iam.workloadIdentityUser", f"serviceAccount:{POOL}[default/sup]")
    assert world.workload_identity(PROJECT, POOL, "default", "sup", GSA) == (GSA, f"serviceAccount:{GSA}")
    with pytest.raises(WorkloadDenied):  # another KSA of the namespace is not linked
        world.workload_identity(PROJECT, POOL, "default", "other", GSA)
    world.close()


async def test_a_namespace_principal_set_grants_its_service_accounts(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    number = ksa_principal(PROJECT, POOL, "ns", "x").split("/projects/")[1].split("/")[0]
    members = [f"principalSet://iam.googleapis.com/projects/{number}/locations/global/workloadIdentityPools/"
               f"{POOL}/namespace/default"]
    policy = world.get_project_policy(PROJECT)
    world.set_project_policy(PROJECT, {**policy, "bindings": [
        *policy["bindings"], {"role": "roles/container.clusterViewer", "members": members}]})
    assert "container.clusters.get" in world.project_permissions(PROJECT, ksa_principal(PROJECT, POOL, "default", "a"))
    assert not world.project_permissions(PROJECT, ksa_principal(PROJECT, POOL, "other", "a"))
    world.close()
