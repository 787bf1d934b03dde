"""The sandbox World's GKE node pools: listing them, CreateNodePool on an idle RUNNING cluster
(and its late failure over the regional GPU quota: the Compute Engine metric gpu_quota_metric
names, sources in the comment on the quota section), DeleteNodePool (the default-pool Terraform
removes right after a create; sources in its section), and UpdateNodePool, whose same-version
upgrade recreates the nodes one at a time as xpk relies on (sources in the comment on the
recreation section). Clusters, their operations and the busy rule are in world_gke.

GkeNodePoolMixin is mixed into World (world.py) and uses its plumbing and world_gke's cluster
methods (_cluster, _busy, _start_cluster_op, _finish_cluster_op, get_cluster).
"""

from __future__ import annotations

import re
import uuid

from google.cloud import container_v1

from rltui_sandbox.grpc_util import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from rltui_sandbox.world_capacity import fail_for_stockout, out_of_stock
from rltui_sandbox.world_gke import GKE_API, GKE_VERSION, OpType, Status, _copy, _pool_data
from rltui_sandbox.world_model import _check_gce_name, pool_vm, region_of


_POOL_UP = (container_v1.NodePool.Status.RUNNING, container_v1.NodePool.Status.RECONCILING,
            container_v1.NodePool.Status.PROVISIONING)


def gpu_quota_metric(np: container_v1.NodePool) -> str:
    """The Compute Engine quota a pool's GPUs count against: nvidia-b200 -> NVIDIA_B200_GPUS,
    PREEMPTIBLE_NVIDIA_B200_GPUS for Spot/preemptible VMs."""
    if not np.config.accelerators:
        return ""
    name = np.config.accelerators[0].accelerator_type.upper().replace("-", "_") + "_GPUS"
    return ("PREEMPTIBLE_" if np.config.spot or np.config.preemptible else "") + name


def _pool_gpus(np: container_v1.NodePool) -> float:
    accel = np.config.accelerators[0].accelerator_count if np.config.accelerators else 0
    return float(accel * np.initial_node_count * max(1, len(np.locations)))


class GkeNodePoolMixin:
    """GKE node pools: create, quota failure, recreation (mixed into World)."""

    def list_node_pools(self, project: str, location: str, cluster: str) -> list[container_v1.NodePool]:
        return list(self.get_cluster(project, location, cluster).node_pools)

    def get_node_pool(self, project: str, location: str, cluster: str, pool: str) -> container_v1.NodePool:
        for np in self.list_node_pools(project, location, cluster):
            if np.name == pool:
                return np
        raise NotFound(f"Not found: projects/{project}/locations/{location}/clusters/{cluster}/nodePools/{pool}.")

    def _pool(self, project: str, location: str, cluster: str, pool: str) -> container_v1.NodePool:
        for np in self._cluster(project, location, cluster).node_pools:
            if np.name == pool:
                return np
        raise NotFound(f"Not found: projects/{project}/locations/{location}/clusters/{cluster}/nodePools/{pool}.")

    def _prepare_pool(self, project: str, location: str, cluster: str, np: container_v1.NodePool) -> None:
        np.status = container_v1.NodePool.Status.PROVISIONING
        np.self_link = f"{GKE_API}/projects/{project}/locations/{location}/clusters/{cluster}/nodePools/{np.name}"
        np.version = np.version or GKE_VERSION
        np.initial_node_count = np.initial_node_count or 3
        np.config.machine_type = np.config.machine_type or "e2-medium"
        np.config.image_type = np.config.image_type or "COS_CONTAINERD"

    # -- quotas: a node pool asking for more GPUs than the region's quota fails late --------------
    #
    # Spot and preemptible VMs count against the PREEMPTIBLE_* metric. The CREATE_NODE_POOL
    # operation ends DONE with error {code: 8 RESOURCE_EXHAUSTED, message: "Instance '<vm>'
    # creation failed: Quota 'X' exceeded.  Limit: N in region R."} (two spaces, as GCE words it),
    # the node pool stays in ERROR, and nodepool_conditions carry canonical_code RESOURCE_EXHAUSTED
    # with code GCE_QUOTA_EXCEEDED and the IGM's "Insufficient quota to satisfy the request: ..."
    # detail. Sources: kubernetes-sigs/sig-storage-local-static-provisioner 526 (a GKE operation
    # printed by gcloud, 2025), hashicorp/terraform-provider-google 16165 (NVIDIA_P100_GPUS in a
    # node pool), vanvalenlab/kiosk-console 367 (PREEMPTIBLE_NVIDIA_V100_GPUS). The failure is
    # reported when the pool would otherwise be ready (how long GKE's IGM retries varies).

    #
    # Which metric a Spot pool is charged: PREEMPTIBLE_* once preemptible quota is granted (a
    # limit above 0, or none set: the sandbox's unlimited), else the standard metric ("In regions
    # where you don't have preemptible CPU quota, you can use standard CPU quota to launch
    # preemptible VMs", and "After Compute Engine grants you preemptible CPU quota in that region,
    # all preemptible VMs count against that quota": docs.cloud.google.com/compute/docs/instances/
    # create-use-preemptible, "Preemptible CPU quotas"; GPUs as well: "To prevent Spot VMs from
    # consuming your quotas for standard VMs' CPUs, GPUs, and disks, consider requesting
    # preemptible quota for Spot VMs", .../create-use-spot). A granted but short preemptible
    # quota is not made up from the standard one. The standard metric, when the World sets none,
    # is 0 there, as the sandbox's Cloud Quotas serves it (grpc_quotas.DEFAULTS).

    def _charged_metric(self, np: container_v1.NodePool) -> str:
        """The quota metric a pool's GPUs count against (see above)."""
        metric = gpu_quota_metric(np)
        if metric.startswith("PREEMPTIBLE_") and metric in self.quotas and float(self.quotas[metric]) <= 0:
            return metric.removeprefix("PREEMPTIBLE_")
        return metric

    def _quota_problem(self, project: str, location: str, cluster: str,
                       np: container_v1.NodePool) -> tuple[str, float] | None:
        metric = self._charged_metric(np)
        fell_back = metric != gpu_quota_metric(np)
        if not metric or (metric not in self.quotas and not fell_back):
            return None
        region = region_of(location)
        wanted = _pool_gpus(np)
        used = sum(_pool_gpus(other) for c in self._project(project).clusters.values()
                   if region_of(c.location) == region for other in c.node_pools
                   # by name: a proto-plus repeated field stores a copy, never `np` itself
                   if other.name != np.name and other.status in _POOL_UP and self._charged_metric(other) == metric)
        limit = float(self.quotas.get(metric, 0.0))
        return (metric, limit) if used + wanted > limit else None

    def create_node_pool(self, project: str, location: str, cluster: str, pool: container_v1.NodePool, *,
                         key: str = "xpk_node_pool", seconds: float | None = None) -> container_v1.Operation:
        """Start CREATE_NODE_POOL on a RUNNING, idle cluster; the pool is RUNNING after `key`'s time,
        or (over quota) the operation ends with the quota error and the pool is ERROR."""
        self._tick()
        c = self._cluster(project, location, cluster)
        p = self._project(project)
        self._busy(p, location, cluster)
        if c.status != Status.RUNNING:
            raise FailedPrecondition(f"Cluster {cluster} is not running (status {c.status.name}).")
        if any(np.name == pool.name for np in c.node_pools):
            raise AlreadyExists(
                f"Already exists: projects/{project}/locations/{location}/clusters/{cluster}/nodePools/{pool.name}."
            )
        _check_gce_name("nodePool", pool.name)
        np = _copy(pool)
        self._prepare_pool(project, location, cluster, np)
        c.node_pools.append(np)
        op = self._start_cluster_op(p, location, cluster, OpType.CREATE_NODE_POOL, f"/nodePools/{np.name}")
        args = {"project": project, "location": location, "cluster": cluster, "pool": np.name, "operation": op.name}
        failing = self._quota_problem(project, location, cluster, np) or out_of_stock(self, np)
        action = "node_pool_failed" if failing else "node_pool_ready"
        self._schedule(action, args, key=key, seconds=seconds)
        self._commit()
        return _copy(op)

    def _on_node_pool_ready(self, project: str, location: str, cluster: str, pool: str, operation: str) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        for np in c.node_pools if c is not None else []:
            if np.name == pool:
                np.status = container_v1.NodePool.Status.RUNNING
                c.current_node_count = sum(n.initial_node_count for n in c.node_pools
                                           if n.status in _POOL_UP)
                self._emit("node_pool_ready", project, location, cluster, **_pool_data(np))

    def _on_node_pool_failed(self, project: str, location: str, cluster: str, pool: str, operation: str) -> None:
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        np = next((n for n in c.node_pools if n.name == pool), None) if c is not None else None
        if np is None:
            self._finish_cluster_op(project, operation)
            return
        problem = self._quota_problem(project, location, cluster, np)
        if problem is None and out_of_stock(self, np):   # the --capacity knob: world_capacity
            fail_for_stockout(self, project, location, cluster, np, operation)
            return
        if problem is None:  # quota raised (or stock back) meanwhile: the pool comes up after all
            self._on_node_pool_ready(project, location, cluster, pool, operation)
            return
        metric, limit = problem
        message = (f"Instance '{pool_vm(cluster, pool)}' creation failed: Quota '{metric}' exceeded.  "
                   f"Limit: {limit:.1f} in region {region_of(location)}.")
        self._fail_pool(project, location, cluster, np, operation, "Insufficient quota to satisfy the request",
                        container_v1.StatusCondition.Code.GCE_QUOTA_EXCEEDED, message, canonical_code=9,
                        detail_condition=True, error_detail=False)

    def _fail_pool(self, project: str, location: str, cluster: str, np: container_v1.NodePool, operation: str,
                   lead: str, code: container_v1.StatusCondition.Code, message: str, *, canonical_code: int,
                   detail_condition: bool, error_detail: bool) -> None:
        """End a pool's create as failed, the way GKE reports it: the IGM's detail on the operation
        and the pool (`lead`: Not all instances running ... Current errors: [CODE]: message), the
        operation's nodepool_conditions (with the detail as a second condition when
        `detail_condition`), the pool ERROR, the operation DONE with RESOURCE_EXHAUSTED."""
        from rltui_sandbox.grpc_util import ResourceExhausted  # one name, kept local to this rare path

        count = np.initial_node_count * max(1, len(np.locations))
        detail = (f"{lead}: Not all instances running in IGM after "
                  f"{self.clock.seconds('xpk_node_pool') * self.clock.speed:.6f}s. Expected {count}, running 0, "
                  f"transitioning {count}. Current errors: [{code.name}]: {message}")
        op = self._project(project).cluster_ops.get(operation)
        if op is not None:
            op.detail = detail
            op.nodepool_conditions = [container_v1.StatusCondition(canonical_code=canonical_code, code=code,
                                                                   message=message)]
            if detail_condition:
                op.nodepool_conditions.append(container_v1.StatusCondition(canonical_code=canonical_code,
                                                                           message=detail))
        np.status = container_v1.NodePool.Status.ERROR
        np.status_message = detail
        self._finish_cluster_op(project, operation, ResourceExhausted(detail if error_detail else message))
        self._emit("node_pool_failed", project, location, cluster, node_pool=np.name, message=message)

    # -- DeleteNodePool ---------------------------------------------------------------------------
    #
    # A DELETE_NODE_POOL operation (container_v1 Operation.Type) under the one-operation rule
    # (world_gke: a second operation meanwhile is refused "Cluster is running incompatible
    # operation ..."; hashicorp/terraform-provider-google 10366 shows GKE's own wording while a pool
    # is deleted, "Operation operation-... is currently deleting a node pool for cluster ...", which
    # the sandbox does not reproduce). The pool is STOPPING meanwhile and gone after `key`'s time.
    # Terraform's google_container_cluster with remove_default_node_pool (Cluster Toolkit's
    # gke-cluster) sends it for `default-pool` right after the create's operation is DONE and waits
    # for it (terraform-provider-google v7.40.0 google/services/container/
    # resource_container_cluster.go, `if d.Get("remove_default_node_pool")`). Deleting a cluster's
    # last pool is allowed (that flow leaves none until its google_container_node_pool resources).

    def delete_node_pool(self, project: str, location: str, cluster: str, pool: str, *,
                         key: str = "gke_node_pool_delete", seconds: float | None = None) -> container_v1.Operation:
        self._tick()
        p = self._project(project)
        np = self._pool(project, location, cluster, pool)  # NotFound for the cluster or the pool
        self._busy(p, location, cluster)
        np.status = container_v1.NodePool.Status.STOPPING
        op = self._start_cluster_op(p, location, cluster, OpType.DELETE_NODE_POOL, f"/nodePools/{pool}")
        self._schedule("node_pool_gone", {"project": project, "location": location, "cluster": cluster,
                                          "pool": pool, "operation": op.name}, key=key, seconds=seconds)
        self._commit()
        return _copy(op)

    def _on_node_pool_gone(self, project: str, location: str, cluster: str, pool: str, operation: str) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        if c is None:
            return
        kept = [np for np in c.node_pools if np.name != pool]
        if len(kept) == len(c.node_pools):
            return
        c.node_pools = kept
        c.current_node_count = sum(n.initial_node_count for n in c.node_pools if n.status in _POOL_UP)
        self._emit("node_pool_deleted", project, location, cluster, node_pool=pool)

    # -- node pool upgrade = recreation -------------------------------------------------------------
    #
    # UpdateNodePool(node_version[, image_type]) and UpdateCluster(desired_node_pool_id +
    # desired_node_version) upgrade a pool; an "upgrade" to the same version recreates its nodes,
    # which is how xpk makes existing nodes take the Lustre CSI driver (core/nodepool.py
    # recreate_nodes_in_existing_node_pools: `gcloud container clusters upgrade C --node-pool=X`).
    # Operation type UPGRADE_NODES (container_v1: "A node pool is being updated ... includes most
    # forms of updates to node pools"). node_version accepts "-" (the master's version), "latest",
    # 1.X, 1.X.Y or 1.X.Y-gke.N (UpdateNodePoolRequest docstring); the docstring calls image_type
    # "Required" too, but whether the API refuses an empty one was not verified: empty keeps the
    # pool's image. Nodes are recreated max_surge + max_unavailable at a time ("(maxUnavailable +
    # maxSurge) determines the level of parallelism", container_v1 NodePool.UpgradeSettings; Cluster
    # Toolkit's gke-node-pool sets max_surge 0, max_unavailable 1: one at a time; GKE's default for
    # a pool without settings is max_surge 1, max_unavailable 0), node_pool_recreate reference
    # minutes per batch: each node goes away (its pods are killed, as in a preemption) and registers
    # again, with no images and with the cluster's current CSI drivers. A surge node is not
    # modelled: a batch's nodes are recreated in place.
    #
    # UpdateNodePool(upgrade_settings) alone changes the settings: a short operation
    # (gke_set_labels' time: metadata only). Its operation type is not verified (UPDATE_CLUSTER
    # here); the sandbox does not take upgrade_settings together with node_version.

    def update_node_pool(self, project: str, location: str, cluster: str, pool: str, node_version: str,
                         image_type: str = "") -> container_v1.Operation:
        self._tick()
        c = self._cluster(project, location, cluster)
        p = self._project(project)
        np = self._pool(project, location, cluster, pool)
        self._busy(p, location, cluster)
        if c.status != Status.RUNNING:
            raise FailedPrecondition(f"Cluster {cluster} is not running (status {c.status.name}).")
        if np.status != container_v1.NodePool.Status.RUNNING:
            raise FailedPrecondition(f"Node pool {pool} is not running (status {np.status.name}).")
        version = self._resolve_node_version(c, node_version)
        nodes = np.initial_node_count * max(1, len(np.locations))
        per_node = self.clock.seconds("node_pool_recreate")
        batch = upgrade_batch(np)
        batches = -(-nodes // batch)
        np.status = container_v1.NodePool.Status.RECONCILING
        c.status = Status.RECONCILING
        op = self._start_cluster_op(p, location, cluster, OpType.UPGRADE_NODES, f"/nodePools/{pool}")
        self._schedule("node_pool_recreated", {"project": project, "location": location, "cluster": cluster,
                                               "pool": pool, "operation": op.name, "version": version,
                                               "image_type": image_type}, seconds=per_node * batches)
        self._commit()
        self._emit("node_pool_recreating", project, location, cluster,
                   **{**_pool_data(np), "per_node_s": per_node, "batch": batch, "version": version,
                      "operation": op.name})
        return _copy(op)

    def set_upgrade_settings(self, project: str, location: str, cluster: str, pool: str,
                             settings: container_v1.NodePool.UpgradeSettings) -> container_v1.Operation:
        """UpdateNodePool(upgrade_settings): the pool's surge settings, for its next upgrade."""
        self._tick()
        c = self._cluster(project, location, cluster)
        p = self._project(project)
        self._pool(project, location, cluster, pool)
        self._busy(p, location, cluster)
        if c.status != Status.RUNNING:
            raise FailedPrecondition(f"Cluster {cluster} is not running (status {c.status.name}).")
        if settings.max_surge < 0 or settings.max_unavailable < 0 or settings.max_surge + settings.max_unavailable < 1:
            raise InvalidArgument("upgrade_settings: max_surge and max_unavailable must be >= 0 and not both 0")
        op = self._start_cluster_op(p, location, cluster, OpType.UPDATE_CLUSTER, f"/nodePools/{pool}")
        self._schedule("upgrade_settings_set", {
            "project": project, "location": location, "cluster": cluster, "pool": pool, "operation": op.name,
            "max_surge": int(settings.max_surge), "max_unavailable": int(settings.max_unavailable)},
            key="gke_set_labels")
        self._commit()
        return _copy(op)

    def _on_upgrade_settings_set(self, project: str, location: str, cluster: str, pool: str, operation: str,
                                 max_surge: int, max_unavailable: int) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        np = next((n for n in c.node_pools if n.name == pool), None) if c is not None else None
        if np is not None:
            np.upgrade_settings.max_surge = max_surge
            np.upgrade_settings.max_unavailable = max_unavailable

    @staticmethod
    def _resolve_node_version(c: container_v1.Cluster, wanted: str) -> str:
        if not wanted:
            raise InvalidArgument("node_version is required: a version, \"latest\" or \"-\" (the master's version)")
        if wanted in ("-", "latest") or wanted == c.current_master_version:
            return c.current_master_version
        if not re.match(r"^1\.\d+(\.\d+(-gke\.\d+)?)?$", wanted):
            raise InvalidArgument(f'Version "{wanted}" is invalid. It should have the form 1.X, 1.X.Y, 1.X.Y-.*, '
                                  "'latest'")
        if not c.current_master_version.startswith(wanted):
            raise InvalidArgument(f"Node version {wanted!r} is not offered by the sandbox: it runs only "
                                  f"{c.current_master_version} (use \"-\" for the master's version)")
        return c.current_master_version

    def _on_node_pool_recreated(self, project: str, location: str, cluster: str, pool: str, operation: str,
                                version: str, image_type: str) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        np = next((n for n in c.node_pools if n.name == pool), None) if c is not None else None
        if np is None:
            return
        np.version = version
        if image_type:
            np.config.image_type = image_type
        np.status = container_v1.NodePool.Status.RUNNING
        if c.status == Status.RECONCILING:
            c.status = Status.RUNNING
        self._emit("node_pool_recreated", project, location, cluster, node_pool=pool, version=version)


def upgrade_batch(np: container_v1.NodePool) -> int:
    """How many of a pool's nodes an upgrade takes at once: max_surge + max_unavailable, GKE's
    default (surge 1, unavailable 0) for a pool that sets neither."""
    settings = np.upgrade_settings
    if not container_v1.NodePool.pb(np).HasField("upgrade_settings"):
        return 1
    return max(1, int(settings.max_surge) + int(settings.max_unavailable))
