"""IAM for the budget guard: its Google service account and the two policies that let it act,
over the REST APIs with ADC, as cloud/servicenetworking.py speaks REST (an authorized session
whose base URLs come from the Endpoints value: one code path for Google and the sandbox;
google-auth and google-api-core load on first use).

- IAM v1 (iam.googleapis.com, cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts):
  POST   v1/projects/P/serviceAccounts            {accountId, serviceAccount: {displayName, description}}
  GET    v1/projects/P/serviceAccounts/EMAIL       404 NOT_FOUND when there is none
  DELETE v1/projects/P/serviceAccounts/EMAIL
  POST   v1/projects/P/serviceAccounts/EMAIL:getIamPolicy?options.requestedPolicyVersion=3
  POST   v1/projects/P/serviceAccounts/EMAIL:setIamPolicy  {policy}
- Cloud Resource Manager v1 (cloud.google.com/resource-manager/reference/rest/v1/projects):
  POST   v1/projects/P:getIamPolicy   {options: {requestedPolicyVersion: 3}}
  POST   v1/projects/P:setIamPolicy   {policy}

A policy is read, changed and written back with the etag it was read with; a write whose etag
is no longer current is refused 409 ABORTED, and the whole read-modify-write is done again
(cloud.google.com/iam/docs/policies, "Policy concurrency control": "the etag ... If the etag is
not current, setIamPolicy fails"). Version 3 is asked for and written back, so conditional
bindings someone else made survive the write ("Policy versions": a read at version 1 drops
their conditions). Absence is 404; an existing account at create is 409 ALREADY_EXISTS (the
error's `status`, AIP-193), told from ABORTED by that field, never by the message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .endpoints import CALL_TIMEOUT_S, Endpoints
from .errors import CloudError, retry

POLICY_VERSION = 3
ETAG_ATTEMPTS = 5  # read-modify-writes refused ABORTED (someone else wrote) before giving up

# A change to a policy: edits it in place, returns whether it changed anything.
Change = Callable[[dict[str, Any]], bool]


def error_status(body: dict[str, Any]) -> str:
    """The google.rpc status name of Google's JSON error ("ABORTED", "ALREADY_EXISTS", ...)."""
    error = body.get("error")
    return str(error.get("status") or "") if isinstance(error, dict) else ""


def add_member(policy: dict[str, Any], role: str, member: str) -> bool:
    """`member` in `role`'s unconditional binding; False when it was there already."""
    bindings = policy.setdefault("bindings", [])
    for binding in bindings:
        if binding.get("role") == role and not binding.get("condition"):
            members = binding.setdefault("members", [])
            if member in members:
                return False
            members.append(member)
            return True
    bindings.append({"role": role, "members": [member]})
    return True


def remove_member(policy: dict[str, Any], role: str, member: str) -> bool:
    """`member` out of `role`'s unconditional binding (only the member: the binding's other
    members stay); False when it was not there. An emptied binding goes."""
    changed = False
    kept = []
    for binding in policy.get("bindings") or []:
        if binding.get("role") == role and not binding.get("condition") and member in (binding.get("members") or []):
            binding["members"] = [m for m in binding["members"] if m != member]
            changed = True
        if binding.get("members"):
            kept.append(binding)
    policy["bindings"] = kept
    return changed


def has_member(policy: dict[str, Any], role: str, member: str) -> bool:
    return any(b.get("role") == role and member in (b.get("members") or []) for b in policy.get("bindings") or [])


class IamAdapter:
    def __init__(self, endpoints: Endpoints, project: str) -> None:
        self.endpoints, self.project = endpoints, project
        self._session: Any = None

    def _http(self) -> Any:
        if self._session is None:
            from google.auth.transport.requests import AuthorizedSession

            from .endpoints import user_agent

            self._session = AuthorizedSession(self.endpoints.credentials())
            self._session.headers["User-Agent"] = user_agent()
        return self._session

    async def _send(self, what: str, method: str, url: str, *, ok: tuple[int, ...] = (),
                    **kwargs: Any) -> tuple[int, dict[str, Any]]:
        """(status, JSON) for a 2xx or a status in `ok`; other answers are raised as the API's
        error (google-api-core from_http_response: classified and retried by cloud/errors.py)."""
        def call() -> tuple[int, dict[str, Any]]:
            from google.api_core import exceptions as gexc

            resp = self._http().request(method, url, timeout=CALL_TIMEOUT_S, **kwargs)
            try:
                body = resp.json() if resp.content else {}
            except ValueError:
                body = {}
            if resp.status_code < 300 or resp.status_code in ok:
                return int(resp.status_code), body if isinstance(body, dict) else {}
            raise gexc.from_http_response(resp)

        return await retry(lambda: asyncio.to_thread(call), what=what)

    def _iam(self, path: str) -> str:
        return self.endpoints.api_url("iam") + f"v1/projects/{self.project}/serviceAccounts" + path

    def _crm(self, path: str) -> str:
        return self.endpoints.api_url("cloudresourcemanager") + f"v1/projects/{self.project}" + path

    # --- the service account ---

    def email(self, account_id: str) -> str:
        """The address IAM gives an account of a project (an unscoped project id)."""
        return f"{account_id}@{self.project}.iam.gserviceaccount.com"

    async def account(self, email: str) -> dict[str, Any] | None:
        """The ServiceAccount, or None when there is none (404)."""
        status, body = await self._send(f"service account {email}", "GET", self._iam(f"/{email}"), ok=(404,))
        return None if status == 404 else body

    async def create_account(self, account_id: str, *, display_name: str, description: str) -> dict[str, Any]:
        """Create it; one that exists already (409 ALREADY_EXISTS) is returned as it is, for the
        caller to check whose it is."""
        body = {"accountId": account_id, "serviceAccount": {"displayName": display_name, "description": description}}
        status, answer = await self._send(f"create service account {account_id}", "POST", self._iam(""),
                                          ok=(409,), json=body)
        if status == 409:
            found = await self.account(self.email(account_id))
            if found is None:
                raise CloudError(f"service account {account_id}: IAM says it exists and cannot find it; try again",
                                 transient=True, code="Conflict")
            return found
        return answer

    async def delete_account(self, email: str) -> bool:
        """Delete it; False when it was gone already."""
        status, _ = await self._send(f"delete service account {email}", "DELETE", self._iam(f"/{email}"), ok=(404,))
        return status != 404

    # --- policies ---

    async def change_account_policy(self, email: str, change: Change) -> bool:
        """Read-modify-write the account's own policy (who may act as it)."""
        return await self._rmw(
            f"IAM policy of {email}",
            lambda: self._send(f"IAM policy of {email}", "POST", self._iam(f"/{email}:getIamPolicy"),
                               params={"options.requestedPolicyVersion": POLICY_VERSION}),
            lambda policy: self._send(f"set IAM policy of {email}", "POST", self._iam(f"/{email}:setIamPolicy"),
                                      ok=(409,), json={"policy": policy}),
            change)

    async def project_policy(self) -> dict[str, Any]:
        _, policy = await self._send(f"IAM policy of project {self.project}", "POST", self._crm(":getIamPolicy"),
                                     json={"options": {"requestedPolicyVersion": POLICY_VERSION}})
        return policy

    async def change_project_policy(self, change: Change) -> bool:
        """Read-modify-write the project's policy."""
        return await self._rmw(
            f"IAM policy of project {self.project}",
            lambda: self._send(f"IAM policy of project {self.project}", "POST", self._crm(":getIamPolicy"),
                               json={"options": {"requestedPolicyVersion": POLICY_VERSION}}),
            lambda policy: self._send(f"set IAM policy of project {self.project}", "POST", self._crm(":setIamPolicy"),
                                      ok=(409,), json={"policy": policy}),
            change)

    async def _rmw(self, what: str, read: Callable[[], Any], write: Callable[[dict[str, Any]], Any],
                   change: Change) -> bool:
        """True when a write was made; a 409 ABORTED (a stale etag) starts over with a new read."""
        for _ in range(ETAG_ATTEMPTS):
            _, policy = await read()
            if not change(policy):
                return False
            # The etag and version go back as they were read: IAM refuses the write if the
            # policy changed since, and a version-3 policy keeps its conditions.
            status, answer = await write(policy)
            if status != 409:
                return True
            if error_status(answer) != "ABORTED":
                raise CloudError(f"{what}: refused 409 {error_status(answer) or 'Conflict'}", transient=False,
                                 code="Conflict")
        raise CloudError(f"{what}: changed by someone else {ETAG_ATTEMPTS} times in a row; try again",
                         transient=True, code="Aborted")


__all__ = ["IamAdapter", "add_member", "has_member", "remove_member"]
