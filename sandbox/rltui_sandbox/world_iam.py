"""The sandbox World's IAM: service accounts, their allow policies and the project's, the
Workload Identity pools GKE makes, and the access tokens GKE's metadata server hands pods
(sandbox/SOURCES.md#iam-service-accounts, #iam-policy-etag, #gke-workload-identity).

Service accounts (iam.googleapis.com v1 projects.serviceAccounts; cloud.google.com/iam/docs/
reference/rest/v1/projects.serviceAccounts): `accountId` is "unique within a project, must be
6-30 characters long, and match the regular expression [a-z]([-a-z0-9]*[a-z0-9])" (create's
request body), else 400 INVALID_ARGUMENT (the wording is the sandbox's); displayName at most 100
and description at most 256 UTF-8 bytes (ServiceAccount). The account is
`ACCOUNT@PROJECT.iam.gserviceaccount.com`, named `projects/P/serviceAccounts/EMAIL`, with a
21-digit uniqueId (also its oauth2ClientId); get/delete/getIamPolicy/setIamPolicy take the email
or the unique id. A second create is 409 ALREADY_EXISTS "Service account X already exists within
project projects/P." (terraform-provider-google runs quote it: "googleapi: Error 409: ...,
alreadyExists"). A missing account is 404 NOT_FOUND "Unknown service account", except under the
`projects/-` wildcard, where "the response contains an HTTP 403 Forbidden error instead of a 404
Not Found" (ServiceAccount.name; the 403 in IAM's own shape, iam_authz.iam_denied). Deleting an
account drops its policy; undelete is not imitated.

Allow policies (cloud.google.com/iam/docs/reference/rest/v1/Policy; resource-manager
reference v1 projects/getIamPolicy, setIamPolicy; cloud.google.com/iam/docs/policies "Policy
concurrency control"): `{version, etag, bindings: [{role, members, condition?}]}`. A policy never
set reads `{"etag": "ACAB"}` (the answer client tests record for an empty policy, e.g. a Pub/Sub
IAM test's `{"etag":"ACAB"}`; not verified against Google). setIamPolicy with an etag that is no longer current is refused 409 ABORTED
"There were concurrent policy changes. Please retry the whole read-modify-write with exponential
backoff." (the wording terraform and openshift-installer runs quote, "..., aborted"); without an
etag it overwrites. Each write gets a new etag (base64 of 8 bytes, as Google's look: "BwX...").
Version is 0, 1 or 3 ("Requests that specify an invalid value are rejected"); a policy with a
conditional binding must be read and written at version 3 ("Any operation that affects
conditional role bindings must specify version 3"), else 400. Members must be principal
identifiers (iam_roles.member_ok); a serviceAccount member of a sandbox project that does not
exist is 400 "Service account X does not exist." (Config Connector troubleshooting, "Error 400:
Service account [NAME]@[PROJECT ID].iam.gserviceaccount.com does not exist., badRequest"); a
Workload Identity member `serviceAccount:POOL[NS/KSA]` before any cluster of that pool exists is
400 "Identity Pool does not exist (POOL)." (Terraform configs record it, e.g.
googlecloudrobotics/core: "Avoid Error 400: Identity Pool does not exist (my-project.svc.id.goog)",
depends_on the cluster: the pool is made by the first cluster with workload_identity_config).
Bindings are kept as written, members de-duplicated and emptied bindings dropped (Google's exact
normalisation is not verified). A new project's policy has its creator as roles/owner (the account
that creates a project becomes its Owner; no page saying so was found here): the sandbox's own
service account, whose ADC the sandbox hands rltui, gcloud and xpk.

Effect: at once. Google documents that policy changes "typically propagate in 2 minutes, but
could potentially take 7 minutes or longer" (cloud.google.com/iam/docs/access-change-propagation);
the sandbox does not imitate that delay.

Tokens: the metadata server's access tokens are `ya29.sbxwi.<payload>.<HMAC>` under a secret in
the World's folder (`iam-token-secret`, 0600), stateless and living an hour as Google's access
tokens do (expires_in 3599): the surfaces map one back to its principal (iam_authz). Any other
token is the project owner's, as before this module.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import re
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltui.atomic import write_private
from rltui_sandbox.grpc_util import AlreadyExists, CloudError, InvalidArgument, NotFound
from rltui_sandbox.iam_authz import iam_denied
from rltui_sandbox.iam_roles import granted, member_matches, member_ok
from rltui_sandbox.world_model import project_number

if TYPE_CHECKING:
    from rltui_sandbox.world_model import _Project

__all__ = ["Aborted", "EMPTY_ETAG", "IamMixin", "OWNER_MEMBER", "TOKEN_PREFIX", "Unauthenticated",
           "WorkloadDenied", "ksa_principal"]

# The sandbox's own identity (kube/auth.py SERVICE_ACCOUNT: the ADC and gcloud account).
OWNER_MEMBER = "serviceAccount:rltui-sandbox@rltui-sandbox.iam.gserviceaccount.com"
EMPTY_ETAG = "ACAB"
TOKEN_PREFIX = "ya29.sbxwi."
TOKEN_LIFETIME_S = 3599
_ACCOUNT_ID = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])$")
_SA_EMAIL = re.compile(r"^(?P<id>[^@]+)@(?P<project>[a-z][-a-z0-9]*)\.iam\.gserviceaccount\.com$")
_WI_MEMBER = re.compile(r"^serviceAccount:(?P<pool>[^\[\]]+\.svc\.id\.goog)\[(?P<ns>[^/\]]+)/(?P<ksa>[^\]]+)\]$")
CONCURRENT = ("There were concurrent policy changes. Please retry the whole read-modify-write with "
              "exponential backoff.")


class Aborted(CloudError):
    code = "ABORTED"


class Unauthenticated(CloudError):
    code = "UNAUTHENTICATED"


class WorkloadDenied(Exception):
    """GKE's metadata server could not get the pod a token: its answer's text."""


def ksa_principal(project: str, pool: str, namespace: str, ksa: str) -> str:
    """A Kubernetes ServiceAccount as an IAM principal (GKE concepts "workload-identity":
    principal://iam.googleapis.com/projects/PROJECT_NUMBER/locations/global/workloadIdentityPools/
    PROJECT_ID.svc.id.goog/subject/ns/NAMESPACE/sa/KSA_NAME)."""
    return (f"principal://iam.googleapis.com/projects/{project_number(project)}/locations/global/"
            f"workloadIdentityPools/{pool}/subject/ns/{namespace}/sa/{ksa}")


def _etag(body: Any) -> str:
    digest = hashlib.sha256(f"{json.dumps(body, sort_keys=True)}|{time.time_ns()}|{secrets.token_hex(4)}".encode())
    return base64.b64encode(b"\x07" + digest.digest()[:7]).decode()


class IamMixin:
    """Service accounts, allow policies, Workload Identity and tokens (mixed into World)."""

    if TYPE_CHECKING:
        state_dir: Path
        _projects: dict[str, _Project]

        def _project(self, project: str) -> _Project: ...
        def _commit(self) -> None: ...
        def _tick(self) -> None: ...

    # ---- state ----------------------------------------------------------------------------------

    def _iam(self, project: str) -> dict[str, Any]:
        iam = self._project(project).iam
        iam.setdefault("accounts", {})
        iam.setdefault("account_policies", {})
        iam.setdefault("pools", [])
        return iam

    def _find_account(self, project: str, ref: str) -> tuple[str, dict[str, Any]] | None:
        """(its project, the account) for an email or unique id; project "-" searches all."""
        projects = list(self._projects) if project == "-" else [project]
        for pid in projects:
            for email, acct in self._iam(pid)["accounts"].items():
                if ref in (email, acct["uniqueId"]):
                    return pid, acct
        return None

    def _account(self, project: str, ref: str) -> tuple[str, dict[str, Any]]:
        found = self._find_account(project, ref)
        if found is None:
            if project == "-":  # the wildcard answers 403, not 404 (module docstring)
                raise iam_denied("iam.serviceAccounts.get", f"projects/-/serviceAccounts/{ref}")
            raise NotFound("Unknown service account")
        return found

    # ---- service accounts -----------------------------------------------------------------------

    def create_service_account(self, project: str, account_id: str, display_name: str = "",
                               description: str = "") -> dict[str, Any]:
        self._tick()
        if not isinstance(account_id, str) or not 6 <= len(account_id) <= 30 or not _ACCOUNT_ID.match(account_id):
            raise InvalidArgument(f"accountId {account_id!r} is invalid: it must be 6-30 characters long and match "
                                  "the regular expression [a-z]([-a-z0-9]*[a-z0-9]).")
        if len(display_name.encode()) > 100:
            raise InvalidArgument("serviceAccount.displayName is longer than 100 bytes.")
        if len(description.encode()) > 256:
            raise InvalidArgument("serviceAccount.description is longer than 256 bytes.")
        email = f"{account_id}@{project}.iam.gserviceaccount.com"
        accounts = self._iam(project)["accounts"]
        if email in accounts:
            raise AlreadyExists(f"Service account {account_id} already exists within project projects/{project}.")
        unique = str(10 ** 20 + int(hashlib.sha256(f"{email}|{time.time_ns()}".encode()).hexdigest(), 16) % (9 * 10 ** 20))
        acct = {"name": f"projects/{project}/serviceAccounts/{email}", "projectId": project, "uniqueId": unique,
                "email": email, "oauth2ClientId": unique}
        if display_name:
            acct["displayName"] = display_name
        if description:
            acct["description"] = description
        accounts[email] = acct
        self._commit()
        return dict(acct)

    def get_service_account(self, project: str, ref: str) -> dict[str, Any]:
        self._tick()
        return dict(self._account(project, ref)[1])

    def list_service_accounts(self, project: str) -> list[dict[str, Any]]:
        self._tick()
        return [dict(a) for _, a in sorted(self._iam(project)["accounts"].items())]

    def delete_service_account(self, project: str, ref: str) -> None:
        self._tick()
        pid, acct = self._account(project, ref)
        iam = self._iam(pid)
        del iam["accounts"][acct["email"]]
        iam["account_policies"].pop(acct["email"], None)
        self._commit()

    # ---- policies -------------------------------------------------------------------------------

    def get_account_policy(self, project: str, ref: str, requested_version: int = 0) -> dict[str, Any]:
        self._tick()
        pid, acct = self._account(project, ref)
        return _read(self._iam(pid)["account_policies"].get(acct["email"]), requested_version)

    def set_account_policy(self, project: str, ref: str, policy: Any) -> dict[str, Any]:
        self._tick()
        pid, acct = self._account(project, ref)
        policies = self._iam(pid)["account_policies"]
        policies[acct["email"]] = self._write(policies.get(acct["email"]), policy)
        self._commit()
        return _read(policies[acct["email"]], 3)

    def _project_policy(self, project: str) -> dict[str, Any]:
        iam = self._iam(project)
        if "policy" not in iam:  # a new project: its creator is its owner (module docstring)
            bindings = [{"role": "roles/owner", "members": [OWNER_MEMBER]}]
            iam["policy"] = {"version": 1, "etag": _etag(bindings), "bindings": bindings}
        return iam["policy"]

    def get_project_policy(self, project: str, requested_version: int = 0) -> dict[str, Any]:
        self._tick()
        return _read(self._project_policy(project), requested_version)

    def set_project_policy(self, project: str, policy: Any) -> dict[str, Any]:
        self._tick()
        iam = self._iam(project)
        iam["policy"] = self._write(self._project_policy(project), policy)
        self._commit()
        return _read(iam["policy"], 3)

    def _write(self, current: dict[str, Any] | None, policy: Any) -> dict[str, Any]:
        """The policy to store in place of `current`, or the refusal (module docstring)."""
        if not isinstance(policy, dict):
            raise InvalidArgument("policy is required.")
        version = policy.get("version", 0)
        if version not in (0, 1, 3):
            raise InvalidArgument(f"Invalid policy version {version!r}: it must be 0, 1 or 3.")
        etag = policy.get("etag")
        if etag and etag != (current or {}).get("etag", EMPTY_ETAG):
            raise Aborted(CONCURRENT)
        bindings = []
        for binding in policy.get("bindings") or []:
            if not isinstance(binding, dict) or not str(binding.get("role") or "").strip():
                raise InvalidArgument("Every binding needs a role.")
            role = str(binding["role"])
            if not re.match(r"^(roles/|projects/[^/]+/roles/|organizations/[^/]+/roles/)[A-Za-z0-9_.]+$", role):
                raise InvalidArgument(f"Role ({role}) does not exist in the resource's hierarchy.")
            if binding.get("condition") and version != 3:
                raise InvalidArgument("A policy with a conditional binding must specify version 3.")
            members = list(dict.fromkeys(str(m) for m in binding.get("members") or []))
            for member in members:
                self._check_member(member)
            if members:
                bindings.append({**copy.deepcopy(binding), "role": role, "members": members})
        conditional = any(b.get("condition") for b in bindings)
        return {"version": 3 if conditional else 1, "etag": _etag(bindings), "bindings": bindings}

    def _check_member(self, member: str) -> None:
        if not member_ok(member):
            raise InvalidArgument(f"Invalid principal identifier {member!r} in the policy.")
        wi = _WI_MEMBER.match(member)
        if wi and not self.workload_pool_exists(wi["pool"]):
            raise InvalidArgument(f"Identity Pool does not exist ({wi['pool']}).")
        sa = _SA_EMAIL.match(member.removeprefix("serviceAccount:")) if member.startswith("serviceAccount:") else None
        if sa and sa["project"] in self._projects and self._find_account(sa["project"], sa.group(0)) is None:
            raise InvalidArgument(f"Service account {sa.group(0)} does not exist.")

    # ---- Workload Identity ----------------------------------------------------------------------

    def workload_pool_exists(self, pool: str) -> bool:
        """Made by the first cluster with that workload pool, and kept after it (module docstring;
        a cluster deleted before anything asked is not remembered, a simplification)."""
        for pid, p in self._projects.items():
            if pool in self._iam(pid)["pools"]:
                return True
            if any(c.workload_identity_config.workload_pool == pool for c in p.clusters.values()):
                self._iam(pid)["pools"].append(pool)
                return True
        return False

    def project_permissions(self, project: str, principal: str) -> frozenset[str]:
        """What the project's policy grants `principal` (its unconditional bindings)."""
        roles = [b["role"] for b in self._project_policy(project)["bindings"]
                 if not b.get("condition") and any(member_matches(m, principal) for m in b["members"])]
        return granted(roles)

    def account_permissions(self, email: str, principal: str) -> frozenset[str]:
        """What `principal` may do on a service account: the account's own policy and its
        project's (a project grant reaches every account in it)."""
        found = _SA_EMAIL.match(email)
        if found is None or found["project"] not in self._projects:
            return frozenset()
        policy = self._iam(found["project"])["account_policies"].get(email) or {}
        roles = [b["role"] for b in policy.get("bindings") or []
                 if not b.get("condition") and any(member_matches(m, principal) for m in b["members"])]
        return granted(roles) | self.project_permissions(found["project"], principal)

    def workload_identity(self, project: str, pool: str, namespace: str, ksa: str,
                          gsa: str | None) -> tuple[str, str]:
        """(email, principal) GKE's metadata server answers a pod of `namespace`/`ksa` with
        (sandbox/SOURCES.md#gke-workload-identity): annotated with a Google service account
        `gsa`, that account once the KSA may get its tokens (roles/iam.workloadIdentityUser, i.e.
        iam.serviceAccounts.getAccessToken, for serviceAccount:POOL[NS/KSA] or the KSA's
        principal), else WorkloadDenied with GKE's text; unannotated, the KSA's own principal,
        email the pool."""
        self._tick()
        principal = ksa_principal(project, pool, namespace, ksa)
        if not gsa:
            return pool, principal
        legacy = f"serviceAccount:{pool}[{namespace}/{ksa}]"
        known = _SA_EMAIL.match(gsa)
        exists = bool(known and known["project"] in self._projects
                      and self._find_account(known["project"], gsa) is not None)
        may = exists and any("iam.serviceAccounts.getAccessToken" in self.account_permissions(gsa, who)
                             for who in (legacy, principal))
        if not may:
            raise WorkloadDenied(
                "Unable to generate access token; IAM returned 403 Forbidden: Permission "
                "'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).\n"
                "This error could be caused by a missing IAM policy binding on the target IAM service account.\n"
                "For more information, refer to the Workload Identity documentation:\n"
                "\thttps://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity#authenticating_to\n\n")
        return gsa, f"serviceAccount:{gsa}"

    # ---- tokens ---------------------------------------------------------------------------------

    def _token_secret(self) -> bytes:
        path = self.state_dir / "iam-token-secret"
        if not path.exists():
            write_private(path, secrets.token_hex(32))
        return bytes.fromhex(path.read_text().strip())

    def mint_access_token(self, principal: str, lifetime_s: int = TOKEN_LIFETIME_S) -> tuple[str, int]:
        """(token, expires_in) standing for `principal` (a policy member string)."""
        payload = base64.urlsafe_b64encode(json.dumps([principal, int(time.time()) + lifetime_s]).encode())
        body = TOKEN_PREFIX + payload.decode().rstrip("=")
        mac = hmac.new(self._token_secret(), body.encode(), hashlib.sha256).hexdigest()[:40]
        return f"{body}.{mac}", lifetime_s

    def token_principal(self, token: str | None) -> str | None:
        """The principal a metadata-server token stands for; None for any other token (the
        owner's). A token of that form that is forged or expired is refused 401."""
        if not token or not token.startswith(TOKEN_PREFIX):
            return None
        body, _, mac = token.rpartition(".")
        try:
            good = hmac.compare_digest(mac, hmac.new(self._token_secret(), body.encode(), hashlib.sha256).hexdigest()[:40])
            raw = body.removeprefix(TOKEN_PREFIX)
            principal, expiry = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        except (ValueError, TypeError):
            good = False
        if not good or int(expiry) <= time.time():
            raise Unauthenticated(
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
                "other valid authentication credential. See "
                "https://developers.google.com/identity/sign-in/web/devconsole-project.")
        return str(principal)


def _read(policy: dict[str, Any] | None, requested_version: int) -> dict[str, Any]:
    """A stored policy as getIamPolicy answers it."""
    if requested_version not in (0, 1, 3):
        raise InvalidArgument(f"Invalid requestedPolicyVersion {requested_version!r}: it must be 0, 1 or 3.")
    if policy is None:
        return {"etag": EMPTY_ETAG}
    if policy["version"] == 3 and requested_version != 3:
        # "Requests for policies with any conditional role bindings must specify version 3"
        # (GetPolicyOptions); what Google answers a lower version instead is not verified.
        raise InvalidArgument("The policy has conditional bindings: request version 3.")
    out = copy.deepcopy(policy)
    if not out["bindings"]:
        del out["bindings"]
    return out
