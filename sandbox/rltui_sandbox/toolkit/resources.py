"""The blueprint's resources made, read and deleted through the World's own methods (those its
Compute REST and GKE surfaces call), each call under Terraform's user agent for that resource's
module (blueprint.user_agent), so the sandbox's record says who did what; a Compute insert or
delete is recorded as the REST surface records one (compute.<collection>.<verb>).

The arguments are the modules' (blueprint.py has their sources). What the gke-cluster module asks
of GKE at creation: an `initial_node_count = 1` default pool, which it removes right after, and
its addons_config (gke-cluster main.tf): GCS FUSE on (xpk sets enable_gcsfuse_csi), persistent
disk on (enable_persistent_disk_csi's default), Filestore, Parallelstore, the Ray operator and
the Lustre CSI driver off (their defaults; xpk's a4 blueprint sets none of them). Workload
Identity is on: the cluster's workload pool is `<project>.svc.id.goog` and both pools (the system
pool, where rltui's supervisor runs, and the GPU pool) run the GKE metadata server (GKE_METADATA;
the lines are cited where they are set). The default pool's node_config sets no mode; it is
removed right after the create, and what GKE gives it meanwhile is not modelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.cloud import container_v1

from rltui_sandbox.grpc_util import NotFound
from rltui_sandbox.toolkit.blueprint import Params, Res, user_agent
from rltui_sandbox.world_model import Firewall

if TYPE_CHECKING:
    from rltui_sandbox.world import World


def desired_addons() -> container_v1.AddonsConfig:
    """The gke-cluster module's addons_config for xpk's a4 blueprint (every block set, as the
    provider sends the whole block)."""
    pb = container_v1.AddonsConfig.pb(container_v1.AddonsConfig())
    pb.gcs_fuse_csi_driver_config.enabled = True
    pb.gce_persistent_disk_csi_driver_config.enabled = True
    for empty in (pb.gcp_filestore_csi_driver_config, pb.parallelstore_csi_driver_config,
                  pb.ray_operator_config, pb.lustre_csi_driver_config, pb.dns_cache_config):
        empty.SetInParent()   # sent as {enabled: false}
    return container_v1.AddonsConfig.wrap(pb)


class Cloud:
    """Terraform's side of the World for one deployment."""

    def __init__(self, world: World, p: Params) -> None:
        self.world, self.p = world, p

    # ---- where things are --------------------------------------------------------------------------

    def path(self, res: Res) -> str:
        p = self.p
        return {
            "network": f"projects/{p.project}/global/networks/{res.name}",
            "subnet": f"projects/{p.project}/regions/{p.region}/subnetworks/{res.name}",
            "firewall": f"projects/{p.project}/global/firewalls/{res.name}",
            "nat_ip": f"projects/{p.project}/regions/{p.region}/addresses/{res.name}",
            "router": f"projects/{p.project}/regions/{p.region}/routers/{res.name}",
            "cluster": f"projects/{p.project}/locations/{p.region}/clusters/{p.cluster}",
            "node_pool": f"projects/{p.project}/locations/{p.region}/clusters/{p.cluster}/nodePools/{res.name}",
        }.get(res.kind, res.address)

    def cluster_status(self) -> str:
        """The cluster's status name, or "" when it does not exist."""
        try:
            return self.world.get_cluster(self.p.project, self.p.region, self.p.cluster).status.name
        except NotFound:
            return ""

    def exists(self, res: Res) -> bool:
        w, p = self.world, self.p
        read = {
            "network": lambda: w.get_network(p.project, res.name),
            "subnet": lambda: w.get_subnet(p.project, p.region, res.name),
            "firewall": lambda: w.get_firewall(p.project, res.name),
            "nat_ip": lambda: w.get_regional_address(p.project, p.region, res.name),
            "router": lambda: w.get_router(p.project, p.region, res.name),
            "cluster": lambda: w.get_cluster(p.project, p.region, p.cluster),
            "node_pool": lambda: w.get_node_pool(p.project, p.region, p.cluster, res.name),
        }.get(res.kind)
        if read is None:
            return True
        with w.record.acting_as(res.agent):
            try:
                read()
            except NotFound:
                return False
        return True

    # ---- Compute ---------------------------------------------------------------------------------

    def _compute_op(self, res: Res, verb: str) -> None:
        region = self.p.region if res.kind in ("subnet", "nat_ip", "router") else ""
        self.world.start_compute_op(self.p.project, verb, self.path(res), region=region, done=True)

    def create(self, res: Res) -> None:
        w, p, s = self.world, self.p, res.spec
        with w.record.acting_as(res.agent):
            if res.kind == "network":
                w.create_network(p.project, res.name, created_by="xpk", mtu=int(s["mtu"]),
                                 description=str(s.get("description") or ""))
            elif res.kind == "subnet":
                w.create_subnet(p.project, p.region, res.name, network=s["network"], ip_cidr_range=s["ip_cidr_range"],
                                secondary_ranges=list(s.get("secondary_ranges") or []))
            elif res.kind == "firewall":
                w.create_firewall(p.project, Firewall(p.project, res.name, s["network"],
                                                      source_ranges=list(s["source_ranges"]),
                                                      allowed=[dict(a) for a in s["allowed"]],
                                                      description=s["description"], created_by="xpk"))
            elif res.kind == "nat_ip":
                w.create_regional_address(p.project, p.region, res.name, address_type="EXTERNAL",
                                          labels=dict(s["labels"]))
            elif res.kind == "router":
                w.create_router(p.project, p.region, res.name, network=s["network"],
                                nats=[dict(n) for n in s["nats"]])
            else:
                raise ValueError(f"not a Compute resource: {res.kind}")
            self._compute_op(res, "insert")

    def delete(self, res: Res) -> None:
        w, p = self.world, self.p
        with w.record.acting_as(res.agent):
            if res.kind == "network":
                w.delete_network(p.project, res.name, cascade_subnets=False)
            elif res.kind == "subnet":
                w.delete_subnet(p.project, p.region, res.name)
            elif res.kind == "firewall":
                w.delete_firewall(p.project, res.name)
            elif res.kind == "nat_ip":
                w.delete_regional_address(p.project, p.region, res.name)
            elif res.kind == "router":
                w.delete_router(p.project, p.region, res.name)
            else:
                raise ValueError(f"not a Compute resource: {res.kind}")
            self._compute_op(res, "delete")

    # ---- GKE -------------------------------------------------------------------------------------

    def _agent(self, module: str = "gke-cluster") -> str:
        return user_agent(module, "google-beta")

    def create_cluster(self, res: Res, seconds: float) -> container_v1.Operation:
        p = self.p
        spec = container_v1.Cluster(
            name=p.cluster, network=f"{p.cluster}-net-0", subnetwork=f"{p.cluster}-sub-0", locations=[p.zone],
            resource_labels=dict(res.spec["labels"]), initial_node_count=1,
            node_config=container_v1.NodeConfig(machine_type="e2-medium", image_type="COS_CONTAINERD"),
            addons_config=desired_addons(), initial_cluster_version=p.gke_version,
            # cluster-toolkit v1.94.0 modules/scheduler/gke-cluster/main.tf lines 246-248:
            # workload_identity_config { workload_pool = "${var.project_id}.svc.id.goog" }.
            workload_identity_config=container_v1.WorkloadIdentityConfig(workload_pool=f"{p.project}.svc.id.goog"))
        with self.world.record.acting_as(res.agent):
            return self.world.create_cluster(p.project, p.region, spec, seconds=seconds)

    def delete_pool(self, pool: str) -> container_v1.Operation:
        module = "gke-node-pool" if pool not in ("system", "default-pool") else "gke-cluster"
        with self.world.record.acting_as(self._agent(module)):
            return self.world.delete_node_pool(self.p.project, self.p.region, self.p.cluster, pool)

    def create_pool(self, res: Res, seconds: float) -> container_v1.Operation:
        p, s = self.p, res.spec
        # Both pools run the GKE metadata server: cluster-toolkit v1.94.0 gke-cluster main.tf lines
        # 491-493 (system_node_pools) and gke-node-pool main.tf lines 244-246, each
        # `workload_metadata_config { mode = "GKE_METADATA" }` ("Implied by Workload Identity").
        metadata = container_v1.WorkloadMetadataConfig(mode=container_v1.WorkloadMetadataConfig.Mode.GKE_METADATA)
        config = container_v1.NodeConfig(
            machine_type=s["machine_type"], image_type="COS_CONTAINERD", resource_labels=dict(s["labels"]),
            taints=[container_v1.NodeTaint(key=t["key"], value=t["value"],
                                           effect=getattr(container_v1.NodeTaint.Effect, t["effect"]))
                    for t in s.get("taints") or []], workload_metadata_config=metadata)
        if s.get("accelerator"):
            labels = {"cloud.google.com/gke-accelerator": s["accelerator"]}
            if s["spot"]:
                labels["cloud.google.com/gke-spot"] = "true"
            config = container_v1.NodeConfig(
                machine_type=s["machine_type"], spot=bool(s["spot"]), labels=labels, image_type="COS_CONTAINERD",
                disk_type="hyperdisk-balanced", resource_labels=dict(s["labels"]), workload_metadata_config=metadata,
                accelerators=[container_v1.AcceleratorConfig(accelerator_count=int(s["accelerators_per_node"]),
                                                             accelerator_type=s["accelerator"])],
                # GKE taints GPU nodes itself (nvidia.com/gpu=present:NoSchedule).
                taints=[container_v1.NodeTaint(key="nvidia.com/gpu", value="present",
                                               effect=container_v1.NodeTaint.Effect.NO_SCHEDULE)])
        pool = container_v1.NodePool(
            name=res.name, initial_node_count=int(s["node_count"]), locations=[p.zone], config=config,
            management=container_v1.NodeManagement(auto_upgrade=True, auto_repair=True),
            # gke-node-pool and gke-cluster main.tf: max_surge 0, max_unavailable 1
            upgrade_settings=container_v1.NodePool.UpgradeSettings(max_surge=0, max_unavailable=1))
        with self.world.record.acting_as(res.agent):
            return self.world.create_node_pool(p.project, p.region, p.cluster, pool, seconds=seconds)

    def delete_cluster(self) -> container_v1.Operation:
        with self.world.record.acting_as(self._agent()):
            return self.world.delete_cluster(self.p.project, self.p.region, self.p.cluster)

    def addons_drift(self) -> bool:
        """Whether the cluster's Ray operator or Lustre CSI driver is on (the blueprint has both off)."""
        try:
            c = self.world.get_cluster(self.p.project, self.p.region, self.p.cluster)
        except NotFound:
            return False
        return bool(c.addons_config.ray_operator_config.enabled or c.addons_config.lustre_csi_driver_config.enabled)

    def labels_drift(self, wanted: dict[str, str]) -> bool:
        """Whether a label of the blueprint's is missing or changed. resource_labels is
        non-authoritative ("will only manage the labels present in your configuration",
        terraform-provider-google v7.40.0 resource_container_cluster.go line 2168): labels
        others added (rltui's managed-by) are left alone."""
        try:
            c = self.world.get_cluster(self.p.project, self.p.region, self.p.cluster)
        except NotFound:
            return False
        have = dict(c.resource_labels)
        return any(have.get(k) != v for k, v in wanted.items())

    def update_addons(self, addons: container_v1.AddonsConfig) -> container_v1.Operation:
        with self.world.record.acting_as(self._agent()):
            return self.world.update_addons(self.p.project, self.p.region, self.p.cluster, addons)

    def set_labels(self, wanted: dict[str, str]) -> container_v1.Operation:
        """The blueprint's labels put back, the others kept (non-authoritative, as above)."""
        with self.world.record.acting_as(self._agent()):
            c = self.world.get_cluster(self.p.project, self.p.region, self.p.cluster)
            return self.world.set_labels(self.p.project, self.p.region, self.p.cluster,
                                         {**dict(c.resource_labels), **wanted}, c.label_fingerprint)
