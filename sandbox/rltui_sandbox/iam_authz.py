"""Who calls, and whether they may: what the sandbox's GKE, IAM and Resource Manager surfaces
ask before they act (sandbox/SOURCES.md#iam-roles-and-refusals).

The caller is the bearer token's principal. A token GKE's metadata server issued
(world_iam.TOKEN_PREFIX) stands for the pod's principal, and is allowed only what that
principal's roles grant (iam_roles: the project's policy; for a service account's own methods
its policy too). Any other token, or none, is the user's own: the ADC token the sandbox hands
rltui, gcloud and xpk, allowed everything as the project's owner (as the surfaces were before
IAM existed here). A forged or expired metadata-server token is 401 UNAUTHENTICATED.

The refusals, in each API's own shape:
- GKE: 403 PERMISSION_DENIED `Required "container.clusters.update" permission(s) for
  "projects/P/locations/L/clusters/C".` with ErrorInfo reason IAM_PERMISSION_DENIED, domain
  container.googleapis.com, no metadata; over REST also `errors[].reason` "forbidden" (a
  terraform-provider-google run against GKE: "googleapi: Error 403: Required
  \"container.clusters.create\" permission(s) for \"projects/.../locations/us-central1/clusters/
  dev-cluster\". Details: [RequestInfo, {ErrorInfo domain container.googleapis.com, reason
  IAM_PERMISSION_DENIED}], forbidden"; the gRPC form "rpc error: code = PermissionDenied desc =
  Required \"container.clusters.get\" permission(s) for ...",
  terraform-google-modules/terraform-google-kubernetes-engine 926; kyma-project/test-infra 7440).
  The resource named for a list (a location) or an operation follows the cluster's pattern: not
  verified.
- IAM: 403 `Permission 'iam.serviceAccounts.create' denied on resource (or it may not exist).`,
  ErrorInfo reason IAM_PERMISSION_DENIED, domain iam.googleapis.com, metadata {permission} (the
  IAM answer gcloud quotes when impersonation is refused: "Unable to acquire impersonated
  credentials ... Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not
  exist). ... reason IAM_PERMISSION_DENIED, domain iam.googleapis.com"). Which permission each IAM
  method names in it is the method's own (its REST reference), not verified from an answer.
- Resource Manager: 403 `The caller does not have permission` (GoogleCloudPlatform/
  k8s-config-connector 273: "Error retrieving IAM policy for project ...: googleapi: Error 403:
  The caller does not have permission, forbidden"); no ErrorInfo was seen there, so none is sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rltui_sandbox.grpc_util import PermissionDenied

if TYPE_CHECKING:
    from rltui_sandbox.world import World

__all__ = ["bearer", "caller", "crm_denied", "gke_denied", "iam_denied", "may", "require", "require_account"]

IAM_PERMISSION_DENIED = "IAM_PERMISSION_DENIED"


def bearer(request: Any) -> str | None:
    """The bearer token of an aiohttp request (None without one)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def caller(world: World, token: str | None) -> str | None:
    """The principal of a metadata-server token; None for the owner (see the module docstring)."""
    return world.token_principal(token)


def may(world: World, token: str | None, project: str, permission: str) -> bool:
    principal = caller(world, token)
    return principal is None or permission in world.project_permissions(world.resolve_project(project), principal)


def gke_denied(permission: str, resource: str) -> PermissionDenied:
    return PermissionDenied(f'Required "{permission}" permission(s) for "{resource}".',
                            reason=IAM_PERMISSION_DENIED, domain="container.googleapis.com")


def iam_denied(permission: str, resource: str = "") -> PermissionDenied:
    del resource  # IAM's message names no resource ("denied on resource (or it may not exist)")
    return PermissionDenied(f"Permission '{permission}' denied on resource (or it may not exist).",
                            reason=IAM_PERMISSION_DENIED, domain="iam.googleapis.com",
                            metadata={"permission": permission})


def crm_denied(permission: str, resource: str = "") -> PermissionDenied:
    del permission, resource
    return PermissionDenied("The caller does not have permission")


def require(world: World, token: str | None, project: str, permission: str, resource: str,
            denied: Any = gke_denied) -> None:
    """Refuse (`denied(permission, resource)`) unless the caller may `permission` in `project`."""
    if not may(world, token, project, permission):
        raise denied(permission, resource)


def require_account(world: World, token: str | None, email: str, permission: str) -> None:
    """Refuse in IAM's shape unless the caller may `permission` on the service account `email`
    (its own policy or its project's)."""
    principal = caller(world, token)
    if principal is not None and permission not in world.account_permissions(email, principal):
        raise iam_denied(permission, email)
