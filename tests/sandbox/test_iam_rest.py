"""The sandbox daemon's IAM and Resource Manager policy REST APIs, through the status JSON's `rest`
map and the transport rltui uses (google-auth's AuthorizedSession over the sandbox's ADC, as
rltui/cloud/servicenetworking.py and rltui/cloud/iam.py speak REST): service accounts made,
read, listed and deleted; a bad accountId; a second create; the etag rule on both policies."""

from __future__ import annotations

import pytest
from google.auth.transport.requests import AuthorizedSession

from rltui.cloud.endpoints import Endpoints

pytestmark = pytest.mark.slow

PROJECT = "iam-rest-test"


@pytest.fixture(scope="module")
def http(sandbox) -> AuthorizedSession:
    return AuthorizedSession(Endpoints(label="SANDBOX", adc_file=sandbox["adc"]).credentials())


@pytest.fixture(scope="module")
def accounts(sandbox) -> str:
    return f"{sandbox['rest']['iam']}v1/projects/{PROJECT}/serviceAccounts"


def error(answer) -> dict:
    return answer.json()["error"]


def test_a_service_account_is_made_read_listed_and_deleted(http, accounts) -> None:
    made = http.post(accounts, json={"accountId": "budget-guard", "serviceAccount": {
        "displayName": "rltui budget guard", "description": "deletes the GPU pools"}}, timeout=20)
    assert made.status_code == 200, made.text
    sa = made.json()
    email = f"budget-guard@{PROJECT}.iam.gserviceaccount.com"
    assert (sa["email"], sa["name"], sa["projectId"]) == (email, f"projects/{PROJECT}/serviceAccounts/{email}", PROJECT)
    assert sa["displayName"] == "rltui budget guard" and sa["uniqueId"].isdigit() and len(sa["uniqueId"]) == 21

    assert http.get(f"{accounts}/{email}", timeout=20).json() == sa
    assert http.get(f"{accounts}/{sa['uniqueId']}", timeout=20).json() == sa
    assert [a["email"] for a in http.get(accounts, timeout=20).json()["accounts"]] == [email]

    again = http.post(accounts, json={"accountId": "budget-guard"}, timeout=20)
    assert again.status_code == 409 and error(again)["status"] == "ALREADY_EXISTS"
    assert error(again)["errors"][0]["reason"] == "alreadyExists"

    gone = http.delete(f"{accounts}/{email}", timeout=20)
    assert (gone.status_code, gone.json()) == (200, {})
    missing = http.get(f"{accounts}/{email}", timeout=20)
    assert missing.status_code == 404 and error(missing)["status"] == "NOT_FOUND"
    # Under the `-` wildcard IAM answers a missing account 403, not 404.
    wildcard = http.get(accounts.replace(f"/projects/{PROJECT}/", "/projects/-/") + f"/{email}", timeout=20)
    assert wildcard.status_code == 403 and error(wildcard)["details"][0]["reason"] == "IAM_PERMISSION_DENIED"
    assert http.get(accounts, timeout=20).json() == {}


@pytest.mark.parametrize("account_id", ["guard", "a" * 31, "Budget-guard", "1budget-guard", "budget-guard-",
                                        "budget_guard"])
def test_a_bad_account_id_is_refused(http, accounts, account_id) -> None:
    answer = http.post(accounts, json={"accountId": account_id}, timeout=20)
    assert answer.status_code == 400, answer.text
    assert error(answer)["status"] == "INVALID_ARGUMENT" and error(answer)["errors"][0]["reason"] == "badRequest"
    assert http.get(f"{accounts}/{account_id}@{PROJECT}.iam.gserviceaccount.com", timeout=20).status_code == 404


def test_a_stale_etag_is_aborted_on_the_accounts_policy(http, accounts) -> None:
    email = http.post(accounts, json={"accountId": "etag-test"}, timeout=20).json()["email"]
    policy_url = f"{accounts}/{email}"
    first = http.post(f"{policy_url}:getIamPolicy", params={"options.requestedPolicyVersion": 3}, timeout=20).json()
    assert first == {"etag": "ACAB"}  # never set
    binding = {"role": "roles/iam.workloadIdentityUser", "members": [f"serviceAccount:{email}"]}
    written = http.post(f"{policy_url}:setIamPolicy", json={"policy": {**first, "bindings": [binding]}}, timeout=20)
    assert written.status_code == 200, written.text
    assert written.json()["bindings"] == [binding] and written.json()["etag"] != "ACAB"

    stale = http.post(f"{policy_url}:setIamPolicy", json={"policy": {**first, "bindings": []}}, timeout=20)
    assert stale.status_code == 409 and error(stale)["status"] == "ABORTED", stale.text
    assert http.post(f"{policy_url}:getIamPolicy", timeout=20).json() == written.json()


def test_a_workload_identity_member_needs_its_pool(http, accounts) -> None:
    """The pool PROJECT.svc.id.goog exists once a cluster with Workload Identity was made there."""
    email = http.post(accounts, json={"accountId": "pool-test"}, timeout=20).json()["email"]
    member = f"serviceAccount:{PROJECT}.svc.id.goog[default/rltui-supervisor]"
    answer = http.post(f"{accounts}/{email}:setIamPolicy", timeout=20, json={"policy": {"bindings": [
        {"role": "roles/iam.workloadIdentityUser", "members": [member]}]}})
    assert answer.status_code == 400 and error(answer)["status"] == "INVALID_ARGUMENT", answer.text


def test_the_projects_policy_has_its_owner_and_the_etag_rule(http, sandbox) -> None:
    crm = f"{sandbox['rest']['cloudresourcemanager']}v1/projects/{PROJECT}"
    read = http.post(f"{crm}:getIamPolicy", json={"options": {"requestedPolicyVersion": 3}}, timeout=20).json()
    owners = [b["members"] for b in read["bindings"] if b["role"] == "roles/owner"]
    assert owners == [["serviceAccount:rltui-sandbox@rltui-sandbox.iam.gserviceaccount.com"]]

    email = http.post(f"{sandbox['rest']['iam']}v1/projects/{PROJECT}/serviceAccounts", json={"accountId": "crm-test"},
                      timeout=20).json()["email"]
    grant = {**read, "bindings": [*read["bindings"], {"role": "roles/container.clusterAdmin",
                                                      "members": [f"serviceAccount:{email}"]}]}
    written = http.post(f"{crm}:setIamPolicy", json={"policy": grant}, timeout=20)
    assert written.status_code == 200, written.text
    stale = http.post(f"{crm}:setIamPolicy", json={"policy": read}, timeout=20)
    assert stale.status_code == 409 and error(stale)["status"] == "ABORTED"
    assert error(stale)["errors"][0]["reason"] == "aborted"

    unknown = {**written.json(), "bindings": [{"role": "roles/viewer",
                                               "members": [f"serviceAccount:nobody-here@{PROJECT}.iam.gserviceaccount.com"]}]}
    refused = http.post(f"{crm}:setIamPolicy", json={"policy": unknown}, timeout=20)
    assert refused.status_code == 400 and error(refused)["status"] == "INVALID_ARGUMENT"
