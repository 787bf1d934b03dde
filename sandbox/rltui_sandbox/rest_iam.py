"""The sandbox's IAM REST API v1 (iam.googleapis.com): projects.serviceAccounts create, get, list,
delete, getIamPolicy, setIamPolicy - what `rltui submit` uses to make the budget guard's Google
service account and let the supervisor's Kubernetes ServiceAccount act as it
(sandbox/SOURCES.md#iam-service-accounts, #iam-policy-etag).

Paths and bodies (cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts and each
method's page):
- POST   v1/projects/{p}/serviceAccounts                 {accountId, serviceAccount: {displayName,
         description}} -> ServiceAccount
- GET    v1/projects/{p}/serviceAccounts                 ?pageSize&pageToken -> {accounts, nextPageToken}
- GET    v1/projects/{p}/serviceAccounts/{email|uniqueId} -> ServiceAccount
- DELETE v1/projects/{p}/serviceAccounts/{email|uniqueId} -> {}
- POST   v1/projects/{p}/serviceAccounts/{sa}:getIamPolicy ?options.requestedPolicyVersion (the
         method's query parameter; a body `options` is read too) -> Policy
- POST   v1/projects/{p}/serviceAccounts/{sa}:setIamPolicy {policy, updateMask?} -> Policy
`{p}` is a project ID or number, or `-` ("infer the project from the account"). The World's
IamMixin (world_iam.py) keeps the accounts and policies and says where each rule comes from.
Errors are Google's JSON with `errors[]` too (terraform prints IAM's "..., alreadyExists",
"..., aborted", rest_util). A caller holding a metadata-server token needs the method's
permission (iam_authz, iam_roles); the owner's token may do everything. Not gated: whether
iam.googleapis.com is on in a codelab project (enabling container.googleapis.com is said to
enable what it depends on) is not verified, so a call is never refused SERVICE_DISABLED here.
Calls are counted as `iam:<collection>.<method>`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from rltui_sandbox import iam_authz as authz
from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import CloudError, InvalidArgument
from rltui_sandbox.record import Record
from rltui_sandbox.rest_util import RestApi, body_of, list_body
from rltui_sandbox.world import World

__all__ = ["iam_app"]

BASE = "/v1/projects/{project:[^/:]+}/serviceAccounts"
ACCOUNT = BASE + "/{account:[^/:]+}"


def _int(value: Any, name: str) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        raise InvalidArgument(f"Invalid value at '{name}' (TYPE_INT32), {value!r}") from None


def iam_app(world: World, *, record: Record | None = None, faults: Faults | None = None) -> web.Application:
    api = RestApi("iam", None, world, record=record, faults=faults, legacy_errors=True)

    def account(request: web.Request, m: dict[str, str], permission: str) -> str:
        """The account's email once the caller may `permission` on it: a caller without the
        permission is refused before anyone learns whether the account exists ("denied on resource
        (or it may not exist)"); then 404, or 403 under `-`, when there is none."""
        try:
            email = str(world.get_service_account(m["project"], m["account"])["email"])
        except CloudError:
            email = m["account"]
        authz.require_account(world, authz.bearer(request), email, permission)
        return str(world.get_service_account(m["project"], m["account"])["email"])

    def one_project(m: dict[str, str]) -> None:
        if m["project"] == "-":  # only an account's own methods infer the project from it
            raise InvalidArgument("projects/- is not valid here: name the project.")

    async def create(request: web.Request, m: dict[str, str]) -> Any:
        one_project(m)
        authz.require(world, authz.bearer(request), m["project"], "iam.serviceAccounts.create",
                      f"projects/{m['project']}", authz.iam_denied)
        body = await body_of(request)
        account = body.get("serviceAccount") or {}
        if not isinstance(account, dict):
            raise InvalidArgument("serviceAccount must be an object.")
        return world.create_service_account(m["project"], body.get("accountId"),  # type: ignore[arg-type]
                                            str(account.get("displayName") or ""),
                                            str(account.get("description") or ""))

    async def list_(request: web.Request, m: dict[str, str]) -> Any:
        one_project(m)
        authz.require(world, authz.bearer(request), m["project"], "iam.serviceAccounts.list",
                      f"projects/{m['project']}", authz.iam_denied)
        q = request.query
        accounts = world.list_service_accounts(m["project"])
        out = list_body("accounts", accounts, _int(q.get("pageSize"), "page_size"), q.get("pageToken", ""),
                        lambda a: a)
        return out if out.get("accounts") or out.get("nextPageToken") else {}

    async def get(request: web.Request, m: dict[str, str]) -> Any:
        email = account(request, m, "iam.serviceAccounts.get")
        return world.get_service_account(m["project"], email)

    async def delete(request: web.Request, m: dict[str, str]) -> Any:
        email = account(request, m, "iam.serviceAccounts.delete")
        world.delete_service_account(m["project"], email)
        return {}

    async def get_policy(request: web.Request, m: dict[str, str]) -> Any:
        email = account(request, m, "iam.serviceAccounts.getIamPolicy")
        options = (await body_of(request)).get("options") or {}
        version = request.query.get("options.requestedPolicyVersion",
                                    options.get("requestedPolicyVersion") if isinstance(options, dict) else 0)
        return world.get_account_policy(m["project"], email, _int(version, "options.requested_policy_version"))

    async def set_policy(request: web.Request, m: dict[str, str]) -> Any:
        email = account(request, m, "iam.serviceAccounts.setIamPolicy")
        return world.set_account_policy(m["project"], email, (await body_of(request)).get("policy"))

    api.route("POST", BASE, "projects.serviceAccounts.create", create)
    api.route("GET", BASE, "projects.serviceAccounts.list", list_)
    api.route("GET", ACCOUNT, "projects.serviceAccounts.get", get)
    api.route("DELETE", ACCOUNT, "projects.serviceAccounts.delete", delete)
    api.route("POST", ACCOUNT + ":getIamPolicy", "projects.serviceAccounts.getIamPolicy", get_policy)
    api.route("POST", ACCOUNT + ":setIamPolicy", "projects.serviceAccounts.setIamPolicy", set_policy)
    return api.app
