"""The sandbox's Kubernetes Engine REST API (container.googleapis.com v1, and v1beta1 for `gcloud
beta container`), for the real gcloud: clusters get/list/update/delete/setAddons, nodePools
list/get/update, operations get/list, getServerConfig - over the same World clusters the gRPC
ClusterManager (grpc_container.py) serves.

Paths and bodies: the container.v1 discovery document shipped in google-api-python-client
2.202.0 (`googleapiclient/discovery_cache/documents/container.v1.json`):
- GET  v1/projects/{p}/locations/{l}/clusters[/{c}]          (projects.locations.clusters.list/get)
- PUT  v1/projects/{p}/locations/{l}/clusters/{c}            (update; body UpdateClusterRequest:
       `{"update": {"desiredAddonsConfig": {...}}}` - what `gcloud container clusters update
       --update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED` sends, see tests/gcloud)
- POST v1/projects/{p}/locations/{l}/clusters/{c}:setAddons  (body SetAddonsConfigRequest)
- GET  .../clusters/{c}/nodePools[/{np}], PUT .../nodePools/{np} (nodeVersion, imageType)
- POST .../clusters/{c}/nodePools (body CreateNodePoolRequest `{"nodePool": {...}}`) and
  DELETE .../clusters/{c}/nodePools/{np} (projects.locations.clusters.nodePools.create/delete;
  the DELETE is what Terraform's remove_default_node_pool sends for `default-pool`,
  terraform-provider-google v7.40.0 resource_container_cluster.go), both also under the zones path
- GET  v1/projects/{p}/locations/{l}/operations[/{op}]
- DELETE v1/projects/{p}/locations/{l}/clusters/{c}          (`gcloud beta container clusters delete`,
       xpk 1.16.0's plain delete path, under v1beta1)
- GET  v1/projects/{p}/locations/{l}/serverConfig            (`gcloud container get-server-config
       --region`, which xpk 1.16.0 runs twice before every create)
- the same under the deprecated v1/projects/{projectId}/zones/{zone}/... paths (clusters get,
  list, update; operations get), which older gcloud releases used.
Bodies are the proto3 JSON mapping of container_v1 messages (camelCase; enums by name).

`gcloud container clusters get-credentials` is one GET of the cluster: it writes
`server: https://<endpoint>` and `certificate-authority-data: <masterAuth.clusterCaCertificate>`
(SOURCES.md#real-gcloud-offline); both are whatever the World's Cluster holds.
GKE's one-operation-at-a-time rule and the addon/node-pool state machines are the World's
(world_gke.py, world_gke_pools.py). Calls are counted as `container:<collection>.<method>`;
the API gate is container.googleapis.com. Refusals carry the older `errors[]` beside status and
details, with the reason words GKE's REST errors were seen with (failedPrecondition for a busy
cluster, from which Terraform decides to retry: rest_util's module docstring has the sources).

Who may: every method but getServerConfig first asks iam_authz whether the caller holds its
permission (container.clusters.get for clusters and node pools read, container.clusters.update
for any change, nodePools.create/delete included; iam_roles has the table and its source), so a
pod's metadata-server token without the role gets 403 PERMISSION_DENIED, reason
IAM_PERMISSION_DENIED, before anything is looked up; the owner's token may do everything.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web
from google.cloud import container_v1

from rltui_sandbox import iam_authz as authz
from rltui_sandbox import services as apis
from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import InvalidArgument, Unimplemented
from rltui_sandbox.record import Record
from rltui_sandbox.rest_util import RestApi, body_of, proto_json
from rltui_sandbox.world import World

__all__ = ["container_app", "cluster_json"]

LOC = "/v1/projects/{project}/locations/{location}"
ZONE = "/v1/projects/{project}/zones/{location}"
UPGRADE = {"desired_node_pool_id", "desired_node_version", "desired_image_type"}


def _msg(cls: Any, body: Any) -> Any:
    return cls.from_json(json.dumps(body or {}), ignore_unknown_fields=True)


def cluster_json(c: container_v1.Cluster) -> dict[str, Any]:
    """Cluster JSON, with `currentNodeVersion` (deprecated: "the oldest version of all the node
    pools", container.v1 discovery document) filled in when the World left it empty: `gcloud
    container clusters describe` compares it with currentMasterVersion as SemVer and crashes
    ("ParseError: The value is not a valid SemVer string: [None]") without it (seen here with SDK 528)."""
    body = proto_json(c)
    if not body.get("currentNodeVersion"):
        versions = [np.version for np in c.node_pools if np.version]
        oldest = min(versions, key=_semver) if versions else c.current_master_version
        if oldest:
            body["currentNodeVersion"] = oldest
    return body


def _semver(v: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.\-+]", v)[:3])


def _resource(path: str, m: dict[str, str]) -> str:
    """What a GKE refusal names: projects/P/{locations|zones}/L[/clusters/C | /operations/O]."""
    base = f"projects/{m['project']}/{'zones' if '/zones/' in path else 'locations'}/{m['location']}"
    if "cluster" in m:
        return f"{base}/clusters/{m['cluster']}"
    if "operation" in m:
        return f"{base}/operations/{m['operation']}"
    return base


def container_app(world: World, *, record: Record | None = None, faults: Faults | None = None) -> web.Application:
    api = RestApi("container", apis.CONTAINER, world, record=record, faults=faults, legacy_errors=True)

    def needs(permission: str, fn: Any) -> Any:
        async def handler(request: web.Request, m: dict[str, str]) -> Any:
            authz.require(world, authz.bearer(request), m["project"], permission, _resource(request.path, m))
            return await fn(request, m)
        return handler

    get, update = "container.clusters.get", "container.clusters.update"

    def cluster_id(m: dict[str, str]) -> str:
        return m["cluster"]

    async def clusters_get(request: web.Request, m: dict[str, str]) -> Any:
        return cluster_json(world.get_cluster(m["project"], m["location"], cluster_id(m)))

    async def clusters_list(request: web.Request, m: dict[str, str]) -> Any:
        return {"clusters": [cluster_json(c) for c in world.list_clusters(m["project"], m["location"])]}

    async def clusters_update(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        update = _msg(container_v1.ClusterUpdate, body.get("update"))
        fields = {fd.name for fd, _ in container_v1.ClusterUpdate.pb(update).ListFields()}
        if not fields:
            raise InvalidArgument("update must set one desired_* field")
        p, loc, c = m["project"], m["location"], cluster_id(m)
        if fields <= UPGRADE:
            if not {"desired_node_pool_id", "desired_node_version"} <= fields:
                raise Unimplemented("the sandbox's clusters.update upgrades one node pool: set desiredNodePoolId "
                                    "and desiredNodeVersion (master upgrades are not supported)")
            op = world.update_node_pool(p, loc, c, update.desired_node_pool_id, update.desired_node_version,
                                        update.desired_image_type)
            return proto_json(op)
        others = sorted(fields - {"desired_addons_config"})
        if others:
            raise Unimplemented(f"the sandbox's clusters.update supports desiredAddonsConfig or a node pool "
                                f"upgrade only, not {others[0]}")
        return proto_json(world.update_addons(p, loc, c, update.desired_addons_config))

    async def clusters_set_addons(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        addons = _msg(container_v1.AddonsConfig, body.get("addonsConfig"))
        return proto_json(world.update_addons(m["project"], m["location"], cluster_id(m), addons))

    async def pools_list(request: web.Request, m: dict[str, str]) -> Any:
        pools = world.list_node_pools(m["project"], m["location"], cluster_id(m))
        return {"nodePools": [proto_json(np) for np in pools]}

    async def pools_get(request: web.Request, m: dict[str, str]) -> Any:
        return proto_json(world.get_node_pool(m["project"], m["location"], cluster_id(m), m["pool"]))

    async def pools_update(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        extra = sorted(set(body) - {"name", "projectId", "zone", "clusterId", "nodePoolId", "nodeVersion",
                                    "imageType", "upgradeSettings"})
        if extra:
            raise Unimplemented(f"the sandbox's nodePools.update supports nodeVersion and imageType, or "
                                f"upgradeSettings, only, not {extra[0]}")
        if "upgradeSettings" in body:
            if {"nodeVersion", "imageType"} & set(body):
                raise Unimplemented("the sandbox's nodePools.update takes upgradeSettings alone")
            settings = _msg(container_v1.NodePool.UpgradeSettings, body["upgradeSettings"])
            return proto_json(world.set_upgrade_settings(m["project"], m["location"], cluster_id(m), m["pool"],
                                                         settings))
        return proto_json(world.update_node_pool(m["project"], m["location"], cluster_id(m), m["pool"],
                                                 str(body.get("nodeVersion") or ""), str(body.get("imageType") or "")))

    async def pools_create(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        if not isinstance(body.get("nodePool"), dict):
            raise InvalidArgument("nodePool is required")
        pool = _msg(container_v1.NodePool, body["nodePool"])
        return proto_json(world.create_node_pool(m["project"], m["location"], cluster_id(m), pool))

    async def pools_delete(request: web.Request, m: dict[str, str]) -> Any:
        return proto_json(world.delete_node_pool(m["project"], m["location"], cluster_id(m), m["pool"]))

    async def ops_get(request: web.Request, m: dict[str, str]) -> Any:
        return proto_json(world.get_cluster_operation(m["project"], m["location"], m["operation"]))

    async def ops_list(request: web.Request, m: dict[str, str]) -> Any:
        return {"operations": [proto_json(o) for o in world.list_cluster_operations(m["project"], m["location"])]}

    async def clusters_delete(request: web.Request, m: dict[str, str]) -> Any:
        return proto_json(world.delete_cluster(m["project"], m["location"], cluster_id(m)))

    async def server_config(request: web.Request, m: dict[str, str]) -> Any:
        return proto_json(world.server_config(m["project"], m["location"]))

    # `gcloud beta container` speaks v1beta1 (a superset of v1's messages): the same handlers,
    # v1's JSON (apitools leaves the beta-only fields unset).
    for version in ("v1", "v1beta1"):
        loc, zone = f"/{version}{LOC[3:]}", f"/{version}{ZONE[3:]}"
        for base, scope in ((loc, "locations"), (zone, "zones")):
            api.route("GET", base + "/clusters", f"{scope}.clusters.list",
                      needs("container.clusters.list", clusters_list))
            api.route("GET", base + "/clusters/{cluster:[^/:]+}", f"{scope}.clusters.get", needs(get, clusters_get))
            api.route("PUT", base + "/clusters/{cluster:[^/:]+}", f"{scope}.clusters.update",
                      needs(update, clusters_update))
            api.route("DELETE", base + "/clusters/{cluster:[^/:]+}", f"{scope}.clusters.delete",
                      needs("container.clusters.delete", clusters_delete))
            api.route("GET", base + "/operations", f"{scope}.operations.list",
                      needs("container.operations.list", ops_list))
            api.route("GET", base + "/operations/{operation}", f"{scope}.operations.get",
                      needs("container.operations.get", ops_get))
        api.route("GET", loc + "/serverConfig", "locations.getServerConfig", server_config)
        api.route("GET", zone + "/serverconfig", "zones.getServerconfig", server_config)
        api.route("POST", loc + "/clusters/{cluster:[^/:]+}:setAddons", "locations.clusters.setAddons",
                  needs(update, clusters_set_addons))
        api.route("POST", zone + "/clusters/{cluster:[^/:]+}/addons", "zones.clusters.addons",
                  needs(update, clusters_set_addons))
        api.route("GET", loc + "/clusters/{cluster}/nodePools", "locations.clusters.nodePools.list",
                  needs(get, pools_list))
        api.route("GET", loc + "/clusters/{cluster}/nodePools/{pool}", "locations.clusters.nodePools.get",
                  needs(get, pools_get))
        api.route("PUT", loc + "/clusters/{cluster}/nodePools/{pool}", "locations.clusters.nodePools.update",
                  needs(update, pools_update))
        api.route("GET", zone + "/clusters/{cluster}/nodePools", "zones.clusters.nodePools.list",
                  needs(get, pools_list))
        api.route("GET", zone + "/clusters/{cluster}/nodePools/{pool}", "zones.clusters.nodePools.get",
                  needs(get, pools_get))
        for base, scope in ((loc, "locations"), (zone, "zones")):
            api.route("POST", base + "/clusters/{cluster}/nodePools", f"{scope}.clusters.nodePools.create",
                      needs(update, pools_create))
            api.route("DELETE", base + "/clusters/{cluster}/nodePools/{pool}", f"{scope}.clusters.nodePools.delete",
                      needs(update, pools_delete))
    return api.app
