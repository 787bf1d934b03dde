"""The IAM roles the sandbox knows, the permissions it checks, and who a policy member is
(sandbox/SOURCES.md#iam-roles-and-refusals).

Which permission each call needs:
- GKE (cloud.google.com/kubernetes-engine/docs/reference/api-permissions, "Google Kubernetes
  Engine API permissions"): clusters.get and nodePools.get/list need container.clusters.get;
  clusters.list container.clusters.list; clusters.create container.clusters.create; clusters.delete
  container.clusters.delete; clusters.update, nodePools.create and nodePools.delete (and so
  nodePools.update, setAddons, setLabels) container.clusters.update; operations.get
  container.operations.get; operations.list container.operations.list. GKE has no
  container.nodePools.* permission: deleting a node pool is container.clusters.update (also the
  REST reference's "Authorization requires the following IAM permission" on
  projects.locations.clusters.nodePools/delete). getServerConfig is not checked: its permission
  was not found.
- IAM v1 (cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts, each method's
  "Authorization requires"): iam.serviceAccounts.create/get/list/delete/getIamPolicy/
  setIamPolicy; impersonation (what GKE's metadata server does for a linked Kubernetes
  ServiceAccount) iam.serviceAccounts.getAccessToken.
- Resource Manager v1 (cloud.google.com/resource-manager/reference/rest/v1/projects/getIamPolicy,
  setIamPolicy): resourcemanager.projects.getIamPolicy / setIamPolicy.

ROLES: each predefined role's permissions among CHECKED, as the IAM roles reference lists them
(docs.cloud.google.com/iam/docs/roles-permissions/container, .../iam, .../resourcemanager), read
from the roles API snapshot iann0036/iam-dataset gcp/roles/<role>.json (container.admin,
container.clusterAdmin, container.clusterViewer, container.viewer, container.developer,
iam.workloadIdentityUser, iam.serviceAccountAdmin, resourcemanager.projectIamAdmin). Their
Kubernetes-object permissions (container.pods.*, ...) are left out: the sandbox's Kubernetes API
authorizes by RBAC and the owner's token, not by IAM. roles/owner holds every permission. Any
other role, custom roles (projects/P/roles/X) included, grants nothing here (not imitated), and
a binding with a condition grants nothing either (conditions are not evaluated).
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["CHECKED", "OWNER_ROLE", "ROLES", "WORKLOAD_IDENTITY_USER", "granted", "member_ok", "member_matches"]

OWNER_ROLE = "roles/owner"
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"

_CLUSTERS = ("create", "delete", "get", "list", "update")
CHECKED = frozenset({
    *(f"container.clusters.{v}" for v in _CLUSTERS), "container.operations.get", "container.operations.list",
    *(f"iam.serviceAccounts.{v}" for v in ("create", "delete", "get", "list", "getIamPolicy", "setIamPolicy",
                                           "getAccessToken")),
    "resourcemanager.projects.get", "resourcemanager.projects.getIamPolicy",
    "resourcemanager.projects.setIamPolicy",
})

_PROJECT_READ = frozenset({"resourcemanager.projects.get"})  # and .list, which the sandbox does not check
_CLUSTER_ADMIN = frozenset({*(f"container.clusters.{v}" for v in _CLUSTERS), "container.operations.get",
                            "container.operations.list"}) | _PROJECT_READ
ROLES: dict[str, frozenset[str]] = {
    "roles/container.admin": _CLUSTER_ADMIN,  # container.* (+ getCredentials, which is not checked)
    "roles/container.clusterAdmin": _CLUSTER_ADMIN,
    "roles/container.clusterViewer": frozenset({"container.clusters.get", "container.clusters.list"}) | _PROJECT_READ,
    "roles/container.viewer": frozenset({"container.clusters.get", "container.clusters.list",
                                         "container.operations.get", "container.operations.list"}) | _PROJECT_READ,
    # Kubernetes objects and clusters.get/list/connect; no container.operations.*
    "roles/container.developer": frozenset({"container.clusters.get", "container.clusters.list"}) | _PROJECT_READ,
    WORKLOAD_IDENTITY_USER: frozenset({"iam.serviceAccounts.get", "iam.serviceAccounts.getAccessToken",
                                       "iam.serviceAccounts.list"}),
    "roles/iam.serviceAccountAdmin": frozenset({f"iam.serviceAccounts.{v}" for v in (
        "create", "delete", "get", "list", "getIamPolicy", "setIamPolicy")}) | _PROJECT_READ,
    "roles/resourcemanager.projectIamAdmin": frozenset({"resourcemanager.projects.getIamPolicy",
                                                        "resourcemanager.projects.setIamPolicy"}) | _PROJECT_READ,
    OWNER_ROLE: CHECKED,
}

# Principal identifiers a policy member may be (cloud.google.com/iam/docs/principal-identifiers;
# the legacy Workload Identity member serviceAccount:PROJECT.svc.id.goog[NS/KSA] is an email-less
# serviceAccount: member, cloud.google.com/kubernetes-engine/docs/how-to/workload-identity).
_MEMBER = re.compile(r"^(allUsers|allAuthenticatedUsers|(user|serviceAccount|group|domain|deleted:user|"
                     r"deleted:serviceAccount|deleted:group|projectOwner|projectEditor|projectViewer):\S+|"
                     r"principal(Set)?://iam\.googleapis\.com/\S+)$")


def member_ok(member: str) -> bool:
    return bool(_MEMBER.match(member or ""))


def member_matches(member: str, principal: str) -> bool:
    """Whether a binding's member stands for `principal` (a member string itself): the same
    identifier, or a principalSet of a Workload Identity pool's namespace that holds a Kubernetes
    ServiceAccount principal (.../workloadIdentityPools/POOL/namespace/NS, GKE's concepts page
    "workload-identity", "Kubernetes resources in IAM policies")."""
    if member == principal:
        return True
    if member.startswith("principalSet://") and principal.startswith("principal://"):
        head, sep, ns = member.removeprefix("principalSet://").rpartition("/namespace/")
        return bool(sep) and principal.removeprefix("principal://").startswith(f"{head}/subject/ns/{ns}/sa/")
    return False


def granted(roles: Iterable[str]) -> frozenset[str]:
    """The checked permissions a set of roles grants."""
    out: set[str] = set()
    for role in roles:
        out |= ROLES.get(role, frozenset())
    return frozenset(out)
