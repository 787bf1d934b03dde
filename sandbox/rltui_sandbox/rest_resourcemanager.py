"""The sandbox's Cloud Resource Manager REST API v1: projects.get - what `gcloud services
vpc-peerings list|connect` (and others) ask first, for the project NUMBER
(SOURCES.md#real-gcloud-offline).

Path and fields: the cloudresourcemanager.v1 discovery document (google-api-python-client 2.202.0):
`GET v1/projects/{projectId}` -> Project {projectNumber (int64, a string in JSON), projectId,
lifecycleState ACTIVE, name, createTime, parent?}. Any project ID names a sandbox project (the
World makes one on first use), and its number is world_model.project_number. A project number
in the path is resolved to its ID when the World knows it. Not gated: whether projects.get
needs cloudresourcemanager.googleapis.com enabled in the caller's quota project is not verified
(gcloud sends no quota project by default). Counted as `cloudresourcemanager:projects.get`.

projects.testIamPermissions (what `rltui up --check` asks): `POST v1/projects/{resource}:testIamPermissions`
with `{"permissions": [string]}`, answering `{"permissions": [the subset the caller holds]}` - the
field is omitted when that subset is empty (proto3 JSON leaves out an empty repeated field). "There
are no permissions required for making this API call." (Resource Manager REST reference,
docs.cloud.google.com/resource-manager/reference/rest/v1/projects/testIamPermissions). A
permission with a wildcard is refused 400 INVALID_ARGUMENT ("Permissions with wildcards (such as '*'
or 'storage.*') are not allowed", the same page's TestIamPermissionsRequest); the wording of that
error is not verified. The sandbox's caller holds every permission except those in the World's
`denied_permissions` (`rltui sandbox start --deny PERMISSION`, the daemon's --deny). Counted as
`cloudresourcemanager:projects.testIamPermissions`; not gated, like projects.get.

The permissions it knows: KNOWN_PERMISSIONS, those rltui asks for (rltui/plan/checks.py
STEP_PERMISSIONS), each named on Google's IAM permission reference
(docs.cloud.google.com/iam/docs/roles-permissions/<service>: serviceusage, container, compute,
servicenetworking, lustre, iam) and, for the IP range and the peering, the Private Services Access
"Required permissions" list (docs.cloud.google.com/sql/docs/mysql/configure-private-services-access:
compute.globalAddresses.create, compute.globalAddresses.createInternal, compute.networks.use,
servicenetworking.services.addPeering, ...). Another name is refused 400 INVALID_ARGUMENT, so that
a misspelt permission in rltui's list fails here instead of reading as "missing" forever. The real
API knows every permission of every service: that it refuses one that does not exist, and its
wording, are NOT verified (a permission that does not apply to a project is refused 400 Bad
Request: googleapis/google-cloud-java 722). A caller holding a token of GKE's metadata server
holds what its roles grant instead (iam_authz; the --deny list is the owner's).

The project's allow policy (cloud.google.com/resource-manager/reference/rest/v1/projects/
getIamPolicy, setIamPolicy; sandbox/SOURCES.md#iam-policy-etag): `POST v1/projects/{resource}:
getIamPolicy` with `{"options": {"requestedPolicyVersion": N}}` and `POST ...:setIamPolicy` with
`{"policy": {...}, "updateMask"?}`, answering the Policy; a stale etag is 409 ABORTED. The World
keeps it (world_iam: a new project's creator, the sandbox's own account, is its owner). A caller
with a metadata-server token needs resourcemanager.projects.getIamPolicy / setIamPolicy, else
403 "The caller does not have permission". Counted as `cloudresourcemanager:projects.getIamPolicy`
and `...setIamPolicy`; not gated, like projects.get. Refusals carry `errors[]` beside status
("..., forbidden", "..., aborted" as terraform prints them; rest_util).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from rltui_sandbox import iam_authz as authz
from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import InvalidArgument
from rltui_sandbox.record import Record
from rltui_sandbox.rest_util import RestApi, body_of
from rltui_sandbox.world import World, project_number

__all__ = ["KNOWN_PERMISSIONS", "resourcemanager_app", "project_json"]

CREATED = "2026-12-01T00:00:00.000Z"

KNOWN_PERMISSIONS = frozenset({
    # serviceusage
    "serviceusage.services.enable", "serviceusage.services.list",
    # container (GKE; the Kubernetes objects are container.* too)
    "container.clusters.create", "container.clusters.get", "container.clusters.update",
    "container.clusters.delete", "container.operations.get", "container.persistentVolumes.create",
    "container.persistentVolumeClaims.create", "container.secrets.create",
    "container.thirdPartyObjects.create", "container.pods.portForward",
    # iam
    "iam.serviceAccounts.actAs",
    # compute: xpk's blueprint, the IP range, the peering's fallback, the Lustre firewall rule
    "compute.networks.create", "compute.networks.get", "compute.networks.delete",
    "compute.networks.updatePolicy", "compute.networks.use", "compute.networks.removePeering",
    "compute.subnetworks.create", "compute.subnetworks.get", "compute.subnetworks.delete",
    "compute.firewalls.create", "compute.firewalls.get", "compute.firewalls.delete",
    "compute.routers.create", "compute.routers.get", "compute.routers.update", "compute.routers.delete",
    "compute.addresses.create", "compute.addresses.get", "compute.addresses.use", "compute.addresses.delete",
    "compute.globalAddresses.create", "compute.globalAddresses.createInternal",
    "compute.globalAddresses.get", "compute.globalAddresses.setLabels",
    "compute.globalAddresses.delete", "compute.globalAddresses.deleteInternal",
    "compute.globalOperations.get", "compute.regionOperations.get",
    # servicenetworking
    "servicenetworking.services.addPeering", "servicenetworking.services.deleteConnection",
    # lustre
    "lustre.instances.create", "lustre.instances.get", "lustre.instances.delete", "lustre.operations.get",
})


def project_json(project: str) -> dict[str, Any]:
    return {"projectNumber": str(project_number(project)), "projectId": project, "lifecycleState": "ACTIVE",
            "name": project, "createTime": CREATED}


def resourcemanager_app(world: World, *, record: Record | None = None,
                        faults: Faults | None = None) -> web.Application:
    api = RestApi("cloudresourcemanager", None, world, record=record, faults=faults, legacy_errors=True)

    async def get(request: web.Request, m: dict[str, str]) -> Any:
        return project_json(m["project"])

    async def test_permissions(request: web.Request, m: dict[str, str]) -> Any:
        asked = (await body_of(request)).get("permissions") or []
        if not isinstance(asked, list) or any(not isinstance(p, str) or "*" in p for p in asked):
            raise InvalidArgument("Permissions with wildcards (such as '*' or 'storage.*') are not allowed.")
        unknown = sorted(p for p in asked if p not in KNOWN_PERMISSIONS)
        if unknown:   # the wording is the sandbox's (see the module docstring)
            raise InvalidArgument(f"Permission {unknown[0]} is not valid.")
        principal = authz.caller(world, authz.bearer(request))
        if principal is None:
            held = [p for p in asked if p not in world.denied_permissions]
        else:
            granted = world.project_permissions(m["project"], principal)
            held = [p for p in asked if p in granted]
        return {"permissions": held} if held else {}

    async def get_policy(request: web.Request, m: dict[str, str]) -> Any:
        authz.require(world, authz.bearer(request), m["project"], "resourcemanager.projects.getIamPolicy",
                      f"projects/{m['project']}", authz.crm_denied)
        options = (await body_of(request)).get("options") or {}
        version = options.get("requestedPolicyVersion", 0) if isinstance(options, dict) else 0
        if not isinstance(version, int):
            raise InvalidArgument(f"Invalid value at 'options.requested_policy_version' (TYPE_INT32), {version!r}")
        return world.get_project_policy(m["project"], version)

    async def set_policy(request: web.Request, m: dict[str, str]) -> Any:
        authz.require(world, authz.bearer(request), m["project"], "resourcemanager.projects.setIamPolicy",
                      f"projects/{m['project']}", authz.crm_denied)
        return world.set_project_policy(m["project"], (await body_of(request)).get("policy"))

    api.route("GET", "/v1/projects/{project:[^/:]+}", "projects.get", get, gate=False)
    api.route("POST", "/v1/projects/{project:[^/:]+}:testIamPermissions", "projects.testIamPermissions",
              test_permissions, gate=False)
    api.route("POST", "/v1/projects/{project:[^/:]+}:getIamPolicy", "projects.getIamPolicy", get_policy, gate=False)
    api.route("POST", "/v1/projects/{project:[^/:]+}:setIamPolicy", "projects.setIamPolicy", set_policy, gate=False)
    return api.app
