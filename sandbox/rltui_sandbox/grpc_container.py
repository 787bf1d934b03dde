"""google.container.v1.ClusterManager over the World: clusters, node pools, addon updates and
GKE's own Operation objects (polled with GetOperation, not google.longrunning).

Requests may name resources the v1 way (`name`/`parent` = projects/P/locations/L/...) or with the
deprecated project_id/zone/cluster_id fields; both are accepted, as the real API does.

Besides reads, create/delete, CreateNodePool and DeleteNodePool (CREATE_NODE_POOL,
DELETE_NODE_POOL: world_gke_pools) and addon updates: SetLabels (resource_labels + label_fingerprint,
an UPDATE_CLUSTER operation), UpdateNodePool (node_version [+ image_type]: an UPGRADE_NODES;
or upgrade_settings alone, the surge settings of the next upgrade
operation that recreates the pool's nodes) and UpdateCluster(desired_node_pool_id +
desired_node_version), which is the same upgrade by another road. Every cluster operation obeys
GKE's one-at-a-time rule (see World._busy): FAILED_PRECONDITION with ErrorInfo reason
CLUSTER_ALREADY_HAS_OPERATION in the status details (google-api-core exposes it as exc.reason).

Who may: each method first asks iam_authz whether the call's bearer token (its `authorization`
metadata, grpc_util.BEARER) holds the method's permission (iam_roles has GKE's table), else
PERMISSION_DENIED `Required "<permission>" permission(s) for "<resource>".` with ErrorInfo reason
IAM_PERMISSION_DENIED in the status details; the owner's token (or none) may do everything.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.cloud import container_v1

from rltui_sandbox import iam_authz as authz
from rltui_sandbox.grpc_util import BEARER, InvalidArgument, Unimplemented, add_service, parse_name
from rltui_sandbox.world import World

LOCATION = "projects/{project}/locations/{location}"
CLUSTER = LOCATION + "/clusters/{cluster}"
NODE_POOL = CLUSTER + "/nodePools/{pool}"
OPERATION = LOCATION + "/operations/{operation}"


# Deprecated request fields by the part of the resource path they stand for.
PROJECT_ZONE = {"project": "project_id", "location": "zone"}
LEGACY_CLUSTER = {**PROJECT_ZONE, "cluster": "cluster_id"}


def _where(req: Any, template: str, field: str, legacy: dict[str, str]) -> dict[str, str]:
    """Resource parts from the v1 path in `field`, else from the deprecated fields."""
    value = getattr(req, field)
    if value:
        return parse_name(template, value, field)
    parts = {key: getattr(req, name) for key, name in legacy.items()}
    if not all(parts.values()):
        raise InvalidArgument(f"{field} is required (or all of {', '.join(legacy.values())})")
    return parts


def _resource(w: dict[str, str]) -> str:
    """What a GKE refusal names: projects/P/locations/L[/clusters/C | /operations/O]."""
    base = f"projects/{w['project']}/locations/{w['location']}"
    if "cluster" in w:
        return f"{base}/clusters/{w['cluster']}"
    if "operation" in w:
        return f"{base}/operations/{w['operation']}"
    return base


def add_container_service(server: grpc.aio.Server, world: World) -> None:
    def cluster_of(req: Any) -> dict[str, str]:
        return _where(req, CLUSTER, "name", LEGACY_CLUSTER)

    def needs(permission: str, where: Any, fn: Any) -> Any:
        def handler(req: Any) -> Any:
            w = where(req)
            authz.require(world, BEARER.get(), w["project"], permission, _resource(w))
            return fn(req)
        return handler

    def location_of(req: Any) -> dict[str, str]:
        return _where(req, LOCATION, "parent", PROJECT_ZONE)

    def pool_of(req: Any) -> dict[str, str]:
        return _where(req, NODE_POOL, "name", {**LEGACY_CLUSTER, "pool": "node_pool_id"})

    def pool_parent_of(req: Any) -> dict[str, str]:
        return _where(req, CLUSTER, "parent", LEGACY_CLUSTER)

    def operation_of(req: Any) -> dict[str, str]:
        return _where(req, OPERATION, "name", {**PROJECT_ZONE, "operation": "operation_id"})

    def list_clusters(req: container_v1.ListClustersRequest) -> container_v1.ListClustersResponse:
        w = _where(req, LOCATION, "parent", PROJECT_ZONE)
        return container_v1.ListClustersResponse(clusters=world.list_clusters(w["project"], w["location"]))

    def get_cluster(req: container_v1.GetClusterRequest) -> container_v1.Cluster:
        w = cluster_of(req)
        return world.get_cluster(w["project"], w["location"], w["cluster"])

    def create_cluster(req: container_v1.CreateClusterRequest) -> container_v1.Operation:
        w = _where(req, LOCATION, "parent", PROJECT_ZONE)
        return world.create_cluster(w["project"], w["location"], req.cluster)

    def delete_cluster(req: container_v1.DeleteClusterRequest) -> container_v1.Operation:
        w = cluster_of(req)
        return world.delete_cluster(w["project"], w["location"], w["cluster"])

    def update_cluster(req: container_v1.UpdateClusterRequest) -> container_v1.Operation:
        w = cluster_of(req)
        fields = {fd.name for fd, _ in container_v1.ClusterUpdate.pb(req.update).ListFields()}
        if not fields:
            raise InvalidArgument("update must set one desired_* field")
        upgrade = {"desired_node_pool_id", "desired_node_version", "desired_image_type"}
        if fields <= upgrade:
            if "desired_node_pool_id" not in fields or "desired_node_version" not in fields:
                raise Unimplemented("the sandbox's UpdateCluster upgrades one node pool: set desired_node_pool_id "
                                    "and desired_node_version (master upgrades are not supported)")
            u = req.update
            return world.update_node_pool(w["project"], w["location"], w["cluster"], u.desired_node_pool_id,
                                          u.desired_node_version, u.desired_image_type)
        others = sorted(fields - {"desired_addons_config"})
        if others:
            raise Unimplemented(f"the sandbox's UpdateCluster supports desired_addons_config or a node pool "
                                f"upgrade only, not {others[0]}")
        return world.update_addons(w["project"], w["location"], w["cluster"], req.update.desired_addons_config)

    def set_labels(req: container_v1.SetLabelsRequest) -> container_v1.Operation:
        w = cluster_of(req)
        return world.set_labels(w["project"], w["location"], w["cluster"], dict(req.resource_labels),
                                req.label_fingerprint)

    def update_node_pool(req: container_v1.UpdateNodePoolRequest) -> container_v1.Operation:
        w = _where(req, NODE_POOL, "name", {**LEGACY_CLUSTER, "pool": "node_pool_id"})
        fields = {fd.name for fd, _ in container_v1.UpdateNodePoolRequest.pb(req).ListFields()}
        extra = sorted(fields - {"name", "project_id", "zone", "cluster_id", "node_pool_id", "node_version",
                                 "image_type", "upgrade_settings"})
        if extra:
            raise Unimplemented(f"the sandbox's UpdateNodePool supports node_version and image_type, or "
                                f"upgrade_settings, only, not {extra[0]}")
        if "upgrade_settings" in fields:
            if fields & {"node_version", "image_type"}:
                raise Unimplemented("the sandbox's UpdateNodePool takes upgrade_settings alone (without "
                                    "node_version or image_type)")
            return world.set_upgrade_settings(w["project"], w["location"], w["cluster"], w["pool"],
                                              req.upgrade_settings)
        return world.update_node_pool(w["project"], w["location"], w["cluster"], w["pool"], req.node_version,
                                      req.image_type)

    def create_node_pool(req: container_v1.CreateNodePoolRequest) -> container_v1.Operation:
        w = _where(req, CLUSTER, "parent", LEGACY_CLUSTER)
        return world.create_node_pool(w["project"], w["location"], w["cluster"], req.node_pool)

    def delete_node_pool(req: container_v1.DeleteNodePoolRequest) -> container_v1.Operation:
        w = _where(req, NODE_POOL, "name", {**LEGACY_CLUSTER, "pool": "node_pool_id"})
        return world.delete_node_pool(w["project"], w["location"], w["cluster"], w["pool"])

    def set_addons_config(req: container_v1.SetAddonsConfigRequest) -> container_v1.Operation:
        w = cluster_of(req)
        return world.update_addons(w["project"], w["location"], w["cluster"], req.addons_config)

    def list_node_pools(req: container_v1.ListNodePoolsRequest) -> container_v1.ListNodePoolsResponse:
        w = _where(req, CLUSTER, "parent", LEGACY_CLUSTER)
        return container_v1.ListNodePoolsResponse(
            node_pools=world.list_node_pools(w["project"], w["location"], w["cluster"]))

    def get_node_pool(req: container_v1.GetNodePoolRequest) -> container_v1.NodePool:
        w = _where(req, NODE_POOL, "name", {**LEGACY_CLUSTER, "pool": "node_pool_id"})
        return world.get_node_pool(w["project"], w["location"], w["cluster"], w["pool"])

    def get_operation(req: container_v1.GetOperationRequest) -> container_v1.Operation:
        w = _where(req, OPERATION, "name", {**PROJECT_ZONE, "operation": "operation_id"})
        return world.get_cluster_operation(w["project"], w["location"], w["operation"])

    def list_operations(req: container_v1.ListOperationsRequest) -> container_v1.ListOperationsResponse:
        w = _where(req, LOCATION, "parent", PROJECT_ZONE)
        return container_v1.ListOperationsResponse(
            operations=world.list_cluster_operations(w["project"], w["location"]))

    m = container_v1
    get, update = "container.clusters.get", "container.clusters.update"
    add_service(server, "google.container.v1.ClusterManager", {
        "ListClusters": (needs("container.clusters.list", location_of, list_clusters), m.ListClustersRequest,
                         m.ListClustersResponse),
        "GetCluster": (needs(get, cluster_of, get_cluster), m.GetClusterRequest, m.Cluster),
        "CreateCluster": (needs("container.clusters.create", location_of, create_cluster), m.CreateClusterRequest,
                          m.Operation),
        "DeleteCluster": (needs("container.clusters.delete", cluster_of, delete_cluster), m.DeleteClusterRequest,
                          m.Operation),
        "UpdateCluster": (needs(update, cluster_of, update_cluster), m.UpdateClusterRequest, m.Operation),
        "SetAddonsConfig": (needs(update, cluster_of, set_addons_config), m.SetAddonsConfigRequest, m.Operation),
        "SetLabels": (needs(update, cluster_of, set_labels), m.SetLabelsRequest, m.Operation),
        "UpdateNodePool": (needs(update, pool_of, update_node_pool), m.UpdateNodePoolRequest, m.Operation),
        "CreateNodePool": (needs(update, pool_parent_of, create_node_pool), m.CreateNodePoolRequest, m.Operation),
        "DeleteNodePool": (needs(update, pool_of, delete_node_pool), m.DeleteNodePoolRequest, m.Operation),
        "ListNodePools": (needs(get, pool_parent_of, list_node_pools), m.ListNodePoolsRequest,
                          m.ListNodePoolsResponse),
        "GetNodePool": (needs(get, pool_of, get_node_pool), m.GetNodePoolRequest, m.NodePool),
        "GetOperation": (needs("container.operations.get", operation_of, get_operation), m.GetOperationRequest,
                         m.Operation),
        "ListOperations": (needs("container.operations.list", location_of, list_operations),
                           m.ListOperationsRequest, m.ListOperationsResponse),
    }, world.faults)
