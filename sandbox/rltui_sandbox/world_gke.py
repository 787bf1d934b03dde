"""The sandbox World's GKE clusters: create and delete, the one-operation-at-a-time busy rule
(its two wordings, the ErrorInfo reason and their sources are in the comment that opens
GkeClusterMixin), cluster operations, addons (UpdateCluster: the Ray operator, the Lustre CSI
driver), SetLabels with label fingerprints, and GKE's own UPGRADE_MASTER right after a create.
Node pools, their GPU quota and node recreation are in world_gke_pools.

GkeClusterMixin is mixed into World (world.py) and uses its plumbing (_tick, _commit, _schedule,
_emit, _wait, _project, record, clock) and world_gke_pools' _prepare_pool.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from typing import Any

from google.cloud import container_v1

from rltui_sandbox.grpc_util import AlreadyExists, CloudError, FailedPrecondition, InvalidArgument, NotFound, utcnow
from rltui_sandbox.world_model import _NETWORK_PATH, _copy, _Project, project_number


GKE_API = "https://container.googleapis.com/v1"
GKE_VERSION = "1.33.5-gke.1201000"
GKE_VERSIONS = ("1.34.1-gke.1829001", GKE_VERSION, "1.32.9-gke.1108000")
GKE_CHANNEL_DEFAULTS = {"RAPID": GKE_VERSION, "REGULAR": "1.32.9-gke.1108000", "STABLE": "1.32.9-gke.1108000"}
Status = container_v1.Cluster.Status
OpType = container_v1.Operation.Type
OpStatus = container_v1.Operation.Status


GKE_DOMAIN = "container.googleapis.com"
BUSY_REASON = "CLUSTER_ALREADY_HAS_OPERATION"  # google.rpc.ErrorInfo.reason of a busy cluster
_UPGRADING = (OpType.UPGRADE_MASTER, OpType.UPGRADE_NODES)


# GCE/GKE label syntax: keys start with a lowercase letter; up to 63 of [a-z0-9_-].
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


_CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


def _rfc3339() -> str:
    return utcnow().isoformat(timespec="microseconds").replace("+00:00", "Z")


def label_fingerprint(labels: Any) -> str:
    """8 hex digits that change with the labels (GKE's fingerprints look like "a9dc16a7")."""
    body = json.dumps(dict(sorted(dict(labels).items())), separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:8]


def _pool_data(np: container_v1.NodePool) -> dict[str, Any]:
    """What a node controller needs to make Node objects for a pool."""
    accel = np.config.accelerators[0] if np.config.accelerators else None
    return {
        "node_pool": np.name,
        "node_count": np.initial_node_count,
        "machine_type": np.config.machine_type,
        "spot": np.config.spot,
        "accelerator_type": accel.accelerator_type if accel else "",
        "accelerator_count": accel.accelerator_count if accel else 0,
        "labels": dict(np.config.labels),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect.name} for t in np.config.taints],
        "locations": list(np.locations),
        "version": np.version or GKE_VERSION,
    }


class GkeClusterMixin:
    """GKE clusters, their operations, the busy rule, addons and labels (mixed into World)."""

    # ---- GKE clusters ----------------------------------------------------------------------------
    #
    # One operation at a time per cluster. A second operation is refused FAILED_PRECONDITION in
    # one of the two wordings the real API has used, picked by the running operation's type:
    #   UPGRADE_MASTER / UPGRADE_NODES (incl. GKE's own auto-upgrades):
    #     "Operation operation-... is currently upgrading cluster C. Please wait and try again
    #      once it is done."  (hashicorp/terraform-provider-google 3650, banzaicloud/pipeline 623,
    #      kubernetes-sigs/cluster-api-provider-gcp 1363)
    #   every other type (create, delete, UPDATE_CLUSTER incl. labels and addons, node pools):
    #     "Cluster is running incompatible operation operation-...."  (rancher/gke-operator 509,
    #      seen during node-pool updates; cluster-toolkit's error classifier maps this text to
    #      CLUSTER_ALREADY_HAS_OPERATION)
    # Both carry google.rpc.ErrorInfo reason CLUSTER_ALREADY_HAS_OPERATION, domain
    # container.googleapis.com. That reason is seen in gcloud output during an UPGRADE_NODES
    # (a public runbook quoting "FAILED_PRECONDITION: ... CLUSTER_ALREADY_HAS_OPERATION"); whether
    # the older "is currently upgrading" wording carries it was NOT verified, and rancher 509's
    # 2024 details held only a RequestInfo: the sandbox sends it on both so clients can decide
    # from the reason, never the text.
    # Operation names are operation-<ms>-<uuid4> (the 2024 form in rancher/gke-operator 509).

    def _cluster(self, project: str, location: str, name: str) -> container_v1.Cluster:
        cluster = self._project(project).clusters.get(f"{location}/{name}")
        if cluster is None:
            raise NotFound(
                f"Not found: projects/{project}/locations/{location}/clusters/{name}. "
                f"Could not find [{name}] in [{location}]."
            )
        return cluster

    def _shown(self, c: container_v1.Cluster) -> container_v1.Cluster:
        """A copy with the Kubernetes API's current endpoint and CA (the daemon's HTTPS port may
        differ from the one a stored cluster was created under)."""
        out = _copy(c)
        if out.endpoint:
            out.endpoint = self.kube_endpoint
            if self.kube_ca_b64:
                out.master_auth.cluster_ca_certificate = self.kube_ca_b64
        return out

    def get_cluster(self, project: str, location: str, name: str) -> container_v1.Cluster:
        """As GKE returns it. `endpoint` is where the cluster's Kubernetes API answers over https
        and `master_auth.cluster_ca_certificate` the base64 PEM of the CA its certificate chains
        to. A real endpoint is a bare IP served on 443; the sandbox's is `127.0.0.1:<port>`: the
        port is the one difference a client sees (clients use `https://{endpoint}` either way)."""
        self._tick()
        return self._shown(self._cluster(project, location, name))

    def list_clusters(self, project: str, location: str = "-") -> list[container_v1.Cluster]:
        self._tick()
        return [self._shown(c) for k, c in sorted(self._project(project).clusters.items())
                if location == "-" or c.location == location]

    def running_cluster_operation(self, project: str, location: str, cluster: str) -> container_v1.Operation | None:
        """The operation (GKE's own or a client's) running on the cluster now, if any."""
        self._tick()
        prefix = f"/locations/{location}/clusters/{cluster}"
        for op in self._project(project).cluster_ops.values():
            link = op.target_link
            if op.status != OpStatus.DONE and (link.endswith(prefix) or f"{prefix}/" in link):
                return _copy(op)
        return None

    def _busy(self, p: _Project, location: str, cluster: str) -> None:
        """A busy cluster refuses a second operation, with the real API's wording (see above)."""
        op = self.running_cluster_operation(p.id, location, cluster)
        if op is None:
            return
        if op.operation_type in _UPGRADING:
            message = (f"Operation {op.name} is currently upgrading cluster {cluster}. "
                       "Please wait and try again once it is done.")
        else:
            message = f"Cluster is running incompatible operation {op.name}."
        raise FailedPrecondition(message, reason=BUSY_REASON, domain=GKE_DOMAIN)

    def _start_cluster_op(self, p: _Project, location: str, cluster: str, op_type: OpType,
                          target_suffix: str = "", detail: str = "") -> container_v1.Operation:
        name = f"operation-{int(time.time() * 1000)}-{uuid.uuid4()}"
        base = f"{GKE_API}/projects/{project_number(p.id)}/locations/{location}"
        op = container_v1.Operation(
            name=name, zone=location, location=location, operation_type=op_type, status=OpStatus.RUNNING,
            self_link=f"{base}/operations/{name}", target_link=f"{base}/clusters/{cluster}{target_suffix}",
            start_time=_rfc3339(), detail=detail,
        )
        p.cluster_ops[name] = op
        self._op_records[name] = self.record.start(f"gke.{op_type.name.lower()}",
                                                   f"projects/{p.id}/locations/{location}/clusters/{cluster}"
                                                   f"{target_suffix}", operation=name)
        return op

    def _finish_cluster_op(self, project: str, name: str, error: CloudError | None = None) -> None:
        """DONE; a failed operation keeps its google.rpc.Status in `error` (and the deprecated
        status_message), as GKE does."""
        op = self._project(project).cluster_ops.get(name)
        if op is not None:
            op.status, op.end_time = OpStatus.DONE, _rfc3339()
            if error is not None:
                status = error.status_proto()
                container_v1.Operation.pb(op).error.CopyFrom(status)
                op.status_message = error.message
        record_id = self._op_records.pop(name, None)
        if record_id is not None:
            self.record.end(record_id, error.message if error is not None else None)

    def create_cluster(self, project: str, location: str, cluster: container_v1.Cluster, *,
                       key: str = "xpk_control_plane", seconds: float | None = None) -> container_v1.Operation:
        """Start CREATE_CLUSTER: PROVISIONING now, RUNNING (with its node pools) after `key`'s time."""
        self._tick()
        name = cluster.name
        if not _CLUSTER_NAME.match(name or ""):
            raise InvalidArgument(
                f"Invalid value for field 'cluster.name': {name!r}. Must be 1-40 characters, start with a "
                "lowercase letter, and contain only lowercase letters, digits and hyphens."
            )
        p = self._project(project)
        if f"{location}/{name}" in p.clusters:
            raise AlreadyExists(f"Already exists: projects/{project}/locations/{location}/clusters/{name}.")
        c = _copy(cluster)
        c.network = _NETWORK_PATH.sub(r"\g<network>", c.network) or "default"
        if c.network not in p.networks:
            raise NotFound(f'Network "{c.network}" does not exist.')
        c.subnetwork = c.subnetwork or c.network
        c.location, c.zone, c.endpoint, c.status = location, location, self.kube_endpoint, Status.PROVISIONING
        c.master_auth.cluster_ca_certificate = self.kube_ca_b64
        # "Always present" (container v1 DNSEndpointConfig.endpoint, "Ex: uid.us-central1.gke.goog");
        # user traffic over it only when asked for (allow_external_traffic, unset = off: Cluster
        # Toolkit v1.94.0's gke-cluster defaults enable_external_dns_endpoint to false, and xpk
        # 1.16.0 adds --enable-dns-access on its own GKE path only). Nothing resolves it here.
        dns = c.control_plane_endpoints_config.dns_endpoint_config
        dns.endpoint = f"gke-{uuid.uuid4().hex}-{project_number(project)}.{location}.gke.goog"
        c.self_link = f"{GKE_API}/projects/{project}/locations/{location}/clusters/{name}"
        c.create_time, c.id = _rfc3339(), uuid.uuid4().hex
        c.current_master_version = c.initial_cluster_version or GKE_VERSION
        c.label_fingerprint = label_fingerprint(c.resource_labels)
        if not c.node_pools and c.initial_node_count:
            c.node_pools = [container_v1.NodePool(name="default-pool", initial_node_count=c.initial_node_count,
                                                  config=c.node_config)]
        c.initial_node_count = 0
        for np in c.node_pools:
            self._prepare_pool(project, location, name, np)
        p.clusters[f"{location}/{name}"] = c
        op = self._start_cluster_op(p, location, name, OpType.CREATE_CLUSTER)
        self._schedule("cluster_running", {"project": project, "location": location, "cluster": name,
                                           "operation": op.name}, key=key, seconds=seconds)
        self._commit()
        return _copy(op)

    def _on_cluster_running(self, project: str, location: str, cluster: str, operation: str) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        if c is None:
            return
        c.status = Status.RUNNING
        for np in c.node_pools:
            np.status = container_v1.NodePool.Status.RUNNING
        c.current_node_count = sum(np.initial_node_count for np in c.node_pools)
        self._emit("cluster_running", project, location, cluster, endpoint=c.endpoint)
        for np in c.node_pools:
            self._emit("node_pool_ready", project, location, cluster, **_pool_data(np))

    def update_addons(self, project: str, location: str, cluster: str,
                      addons: container_v1.AddonsConfig) -> container_v1.Operation:
        """UpdateCluster(desired_addons_config): RECONCILING for addon_update; only the addons set change.
        Enabling the Lustre CSI driver reaches only nodes created afterwards: existing nodes get it
        when recreated (see update_node_pool; xpk src/xpk/core/cluster.py
        update_gke_cluster_with_lustre_driver_enabled, core/nodepool.py recreate_nodes_in_existing_node_pools;
        container_v1 Operation.Type.UPDATE_CLUSTER: "Some features require recreating the nodes")."""
        self._tick()
        c = self._cluster(project, location, cluster)
        p = self._project(project)
        self._busy(p, location, cluster)
        if c.status != Status.RUNNING:
            raise FailedPrecondition(f"Cluster {cluster} is not running (status {c.status.name}).")
        if not container_v1.AddonsConfig.pb(addons).ListFields():
            raise InvalidArgument("desired_addons_config sets no addon")
        c.status = Status.RECONCILING
        op = self._start_cluster_op(p, location, cluster, OpType.UPDATE_CLUSTER)
        self._schedule("addons_applied", {"project": project, "location": location, "cluster": cluster,
                                          "operation": op.name, "addons": container_v1.AddonsConfig.to_json(addons)},
                       key="addon_update")
        self._commit()
        return _copy(op)

    def _on_addons_applied(self, project: str, location: str, cluster: str, operation: str, addons: str) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        if c is None:
            return
        desired = container_v1.AddonsConfig.pb(container_v1.AddonsConfig.from_json(addons))
        current = container_v1.Cluster.pb(c).addons_config
        for fd, value in desired.ListFields():
            getattr(current, fd.name).CopyFrom(value)
        c.status = Status.RUNNING
        self._emit("addons_changed", project, location, cluster,
                   ray_operator=current.ray_operator_config.enabled,
                   lustre_csi_driver=current.lustre_csi_driver_config.enabled,
                   legacy_lustre_port=current.lustre_csi_driver_config.enable_legacy_lustre_port)

    # -- SetLabels --------------------------------------------------------------------------------
    #
    # ClusterManager.SetLabels(resource_labels, label_fingerprint) replaces the cluster's labels.
    # It is an operation of type UPDATE_CLUSTER (container_v1 Operation.Type: "SET_LABELS: Unused.
    # Updating labels uses UPDATE_CLUSTER"), so it obeys the one-operation rule. A fingerprint that
    # is not the current one is refused FAILED_PRECONDITION: "Labels could not be set due to
    # fingerprint mismatch; try again with the proper fingerprint: incorrect fingerprint supplied
    # was "X", the expected one is "Y"." (crossplane-contrib/provider-gcp 477, cloud-custodian 7603,
    # GoogleCloudPlatform/k8s-config-connector 110); fingerprints are 8 hex digits there. No
    # ErrorInfo reason for the mismatch was found, so none is sent. Which check comes first (busy or
    # fingerprint) was not verified: busy is checked first here. The labels change when the
    # operation ends (gke_set_labels), and a new fingerprint comes with them.

    def set_labels(self, project: str, location: str, cluster: str, resource_labels: dict[str, str],
                   fingerprint: str) -> container_v1.Operation:
        self._tick()
        c = self._cluster(project, location, cluster)
        p = self._project(project)
        self._busy(p, location, cluster)
        if fingerprint != c.label_fingerprint:
            raise FailedPrecondition(
                "Labels could not be set due to fingerprint mismatch; try again with the proper fingerprint: "
                f'incorrect fingerprint supplied was "{fingerprint}", the expected one is "{c.label_fingerprint}".')
        for k, v in resource_labels.items():
            if not _LABEL_KEY.match(k) or not _LABEL_VALUE.match(v):
                raise InvalidArgument(f"Invalid label {k!r}={v!r}: keys start with a lowercase letter; keys and "
                                      "values use up to 63 lowercase letters, digits, '_' or '-'.")
        op = self._start_cluster_op(p, location, cluster, OpType.UPDATE_CLUSTER)
        self._schedule("labels_set", {"project": project, "location": location, "cluster": cluster,
                                      "operation": op.name, "labels": dict(resource_labels)}, key="gke_set_labels")
        self._commit()
        return _copy(op)

    def _on_labels_set(self, project: str, location: str, cluster: str, operation: str,
                       labels: dict[str, str]) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        if c is not None:
            c.resource_labels = dict(labels)
            c.label_fingerprint = label_fingerprint(labels)

    # -- GKE's own operations ---------------------------------------------------------------------
    #
    # Right after a cluster is created GKE often runs its own UPGRADE_MASTER (an auto-upgrade;
    # container_v1 Operation.Type.UPGRADE_MASTER "includes auto-upgrades"), during which every
    # other operation is refused busy: hashicorp/terraform-provider-google 1643 (an UPGRADE_MASTER
    # right after the cluster's node pools), scylladb/scylla-operator 9 ("GKE sometimes upgrades
    # the cluster right after deployment"). The sandbox starts one when xpk's create finishes, for
    # gke_auto_upgrade reference minutes; the cluster is RECONCILING meanwhile (its API answers).
    # World.gke_auto_upgrade = False turns it off.

    def start_gke_upgrade(self, project: str, location: str, cluster: str, *,
                          seconds: float | None = None) -> container_v1.Operation:
        """Start GKE's own UPGRADE_MASTER on an idle cluster (refused busy like any other); it
        takes gke_auto_upgrade, or `seconds` (tests that must see it running on a busy machine).
        Its record names no caller (agent ""), whoever's call made GKE start it."""
        self._tick()
        c = self._cluster(project, location, cluster)
        p = self._project(project)
        self._busy(p, location, cluster)
        c.status = Status.RECONCILING
        with self.record.acting_as(""):
            op = self._start_cluster_op(p, location, cluster, OpType.UPGRADE_MASTER,
                                        detail="Automatic upgrade of the control plane (GKE-initiated)")
        self._schedule("gke_upgraded", {"project": project, "location": location, "cluster": cluster,
                                        "operation": op.name}, key="gke_auto_upgrade", seconds=seconds)
        self._commit()
        self._arm()
        return _copy(op)

    def _on_gke_upgraded(self, project: str, location: str, cluster: str, operation: str) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.get(f"{location}/{cluster}")
        if c is not None and c.status == Status.RECONCILING:
            c.status = Status.RUNNING

    def delete_cluster(self, project: str, location: str, cluster: str, *, key: str = "gke_cluster_delete",
                       seconds: float | None = None) -> container_v1.Operation:
        """Start DELETE_CLUSTER: STOPPING now, gone (with its node pools) after `key`'s time
        (through the API or gcloud, and inside xpk's gcluster destroy alike)."""
        self._tick()
        c = self._cluster(project, location, cluster)
        p = self._project(project)
        self._busy(p, location, cluster)
        c.status = Status.STOPPING
        op = self._start_cluster_op(p, location, cluster, OpType.DELETE_CLUSTER)
        self._schedule("cluster_gone", {"project": project, "location": location, "cluster": cluster,
                                        "operation": op.name}, key=key, seconds=seconds)
        self._commit()
        return _copy(op)

    def _on_cluster_gone(self, project: str, location: str, cluster: str, operation: str) -> None:
        self._finish_cluster_op(project, operation)
        c = self._project(project).clusters.pop(f"{location}/{cluster}", None)
        if c is None:
            return
        for np in c.node_pools:
            self._emit("node_pool_deleted", project, location, cluster, node_pool=np.name)
        self._emit("cluster_deleted", project, location, cluster)

    def server_config(self, project: str, location: str) -> container_v1.ServerConfig:
        """projects.locations.getServerConfig: per release channel a default and the valid
        versions. xpk 1.16.0 reads RAPID's (REGULAR with --gke-version) and refuses a default
        that is not among the valid ones (core/gcloud_context.py). The version strings are the
        sandbox's own, not today's GKE list."""
        self._tick()
        self._project(project)
        channels = [container_v1.ServerConfig.ReleaseChannelConfig(
            channel=container_v1.ReleaseChannel.Channel[name], default_version=default,
            valid_versions=list(GKE_VERSIONS)) for name, default in GKE_CHANNEL_DEFAULTS.items()]
        return container_v1.ServerConfig(default_cluster_version=GKE_CHANNEL_DEFAULTS["REGULAR"],
                                         valid_master_versions=list(GKE_VERSIONS),
                                         valid_node_versions=list(GKE_VERSIONS),
                                         default_image_type="COS_CONTAINERD", channels=channels)

    def get_cluster_operation(self, project: str, location: str, operation: str) -> container_v1.Operation:
        self._tick()
        op = self._project(project).cluster_ops.get(operation)
        if op is None or location not in ("-", op.location):
            raise NotFound(f"Not found: projects/{project}/locations/{location}/operations/{operation}.")
        return _copy(op)

    def list_cluster_operations(self, project: str, location: str = "-") -> list[container_v1.Operation]:
        self._tick()
        return [_copy(op) for _, op in sorted(self._project(project).cluster_ops.items())
                if location in ("-", op.location)]

    async def wait_cluster_operation(self, project: str, location: str, operation: str,
                                     timeout: float | None = None) -> container_v1.Operation:
        self.get_cluster_operation(project, location, operation)
        ops = self._project(project).cluster_ops
        await self._wait(lambda: ops[operation].status == OpStatus.DONE, timeout)
        return _copy(ops[operation])

    async def wait_cluster_idle(self, project: str, location: str, cluster: str,
                                timeout: float | None = None) -> None:
        """Until no operation runs on the cluster (what Terraform's retry on FAILED_PRECONDITION
        amounts to: terraform-provider-google retryWhileIncompatibleOperation)."""
        await self._wait(lambda: self.running_cluster_operation(project, location, cluster) is None, timeout)
