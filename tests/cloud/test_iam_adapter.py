"""rltui's IAM adapter (rltui/cloud/iam.py) against the sandbox's IAM and Resource Manager REST
(the status JSON's `rest` map): the budget guard's account made once and found again, its
policies read-modify-written with their etag, a write that lost a race to someone else done
again from a fresh read (409 ABORTED) without losing the other writer's member, and a delete
that says whether there was anything to delete."""

from __future__ import annotations

from typing import Any

import pytest
from google.auth.transport.requests import AuthorizedSession

from rltui.cloud.endpoints import Endpoints
from rltui.cloud.iam import IamAdapter, add_member, has_member, remove_member

pytestmark = pytest.mark.slow

PROJECT = "iam-adapter-test"
ROLE = "roles/container.clusterAdmin"


@pytest.fixture
def iam(sandbox) -> IamAdapter:
    return IamAdapter(Endpoints.sandbox(sandbox), PROJECT)


async def test_the_account_is_made_once_and_found_again(iam) -> None:
    made = await iam.create_account("rltui-guard-test0001", display_name="rltui budget guard",
                                    description="managed-by=rltui: a test")
    again = await iam.create_account("rltui-guard-test0001", display_name="another", description="another")
    assert made["email"] == again["email"] == iam.email("rltui-guard-test0001")
    assert again["description"] == "managed-by=rltui: a test"  # the one there, as it is
    assert (await iam.account(made["email"]) or {}).get("email") == made["email"]
    assert await iam.delete_account(made["email"]) is True
    assert await iam.account(made["email"]) is None and await iam.delete_account(made["email"]) is False


async def test_a_policy_write_that_lost_a_race_is_done_again_from_a_fresh_read(iam, sandbox) -> None:
    """Between rltui's read and its write, someone else writes the project's policy: IAM refuses
    rltui's stale etag (409 ABORTED); rltui reads again and adds its member to what is there."""
    http = AuthorizedSession(Endpoints.sandbox(sandbox).credentials())
    url = f"{sandbox['rest']['cloudresourcemanager']}v1/projects/{PROJECT}"
    me, them = "serviceAccount:guard@x.iam.gserviceaccount.com", "user:ana@example.com"
    reads: list[str] = []

    def change(policy: dict[str, Any]) -> bool:
        reads.append(str(policy.get("etag")))
        if len(reads) == 1:  # the other writer gets in first
            theirs = http.post(f"{url}:getIamPolicy", json={}, timeout=20).json()
            add_member(theirs, ROLE, them)
            assert http.post(f"{url}:setIamPolicy", json={"policy": theirs}, timeout=20).status_code == 200
        return add_member(policy, ROLE, me)

    assert await iam.change_project_policy(change) is True
    assert len(reads) == 2 and reads[0] != reads[1]
    policy = await iam.project_policy()
    assert has_member(policy, ROLE, me) and has_member(policy, ROLE, them)
    # Nothing to change: no write at all.
    assert await iam.change_project_policy(lambda p: add_member(p, ROLE, me)) is False
    assert await iam.change_project_policy(lambda p: remove_member(p, ROLE, me)) is True
    policy = await iam.project_policy()
    assert not has_member(policy, ROLE, me) and has_member(policy, ROLE, them)


async def test_the_accounts_own_policy_is_read_modify_written_too(iam) -> None:
    """(The supervisor's KSA as a member needs a cluster with Workload Identity in the project,
    as on Google: "Identity Pool does not exist" before one. tests/e2e/test_guard.py binds it.)"""
    made = await iam.create_account("rltui-guard-test0002", display_name="g", description="managed-by=rltui")
    who = "user:ana@example.com"
    assert await iam.change_account_policy(made["email"], lambda p: add_member(
        p, "roles/iam.workloadIdentityUser", who)) is True
    assert await iam.change_account_policy(made["email"], lambda p: add_member(
        p, "roles/iam.workloadIdentityUser", who)) is False
    await iam.delete_account(made["email"])
