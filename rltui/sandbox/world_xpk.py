"""What `xpk cluster create` / `xpk cluster delete` (xpk 1.16.0 on the Cluster Toolkit path) do
to the sandbox World: the phases at the latency profile's milestones, and the names xpk's
blueprint gives (networks, subnets, firewall rules, the cluster, the system and GPU pools, the
Toolkit's labels). Sources in the comment that opens XpkMixin: AI-Hypercomputer/xpk 1.16.0
src/xpk/core/blueprint/blueprint_generator.py and Cluster Toolkit v1.94.0's modules;
xpk_names.py has xpk's deployment-name hash.

XpkMixin is mixed into World (world.py) and drives the other services through their methods
(create_network, create_firewall, create_cluster, create_node_pool, delete_cluster, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import ipaddress
import re
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from google.cloud import container_v1

from rltui.sandbox.grpc_util import CloudError, FailedPrecondition, InvalidArgument, NotFound
from rltui.sandbox.world_gke import GKE_API, Status
from rltui.sandbox.world_model import Firewall, Network, Subnet, region_of
from rltui.sandbox.xpk_names import unique_name


@dataclass(frozen=True)
class XpkDevice:
    machine_type: str
    accelerator_type: str
    accelerators_per_node: int


# xpk --device-type values the sandbox knows; all go through Cluster Toolkit in real xpk.
XPK_DEVICE_TYPES: dict[str, XpkDevice] = {"b200-8": XpkDevice("a4-highgpu-8g", "nvidia-b200", 8)}
XPK_MILESTONES = ("xpk_networks", "xpk_control_plane", "xpk_node_pool", "xpk_done")
TERRAFORM_POLL_REF_S = 10.0  # reference seconds between Terraform's polls (_terraform_poll_s)


def xpk_unique_name(project: str, region: str, cluster: str) -> str:
    """xpk's deployment (and blueprint) name: `<cluster>-<h5>` (see xpk_names.unique_name)."""
    return unique_name(project, region, cluster)


class XpkMixin:
    """xpk's cluster create and delete (mixed into World)."""

    terraform_poll_ref_s = TERRAFORM_POLL_REF_S   # tests widen it to make a race certain

    # ---- xpk 1.16.0 (what `xpk cluster create/delete` does on the Cluster Toolkit path) --------
    #
    # Source: AI-Hypercomputer/xpk 1.16.0 src/xpk/core/blueprint/blueprint_generator.py
    # generate_a4_blueprint (b200-8 -> a4-highgpu-8g) and Cluster Toolkit v1.94.0's modules:
    #   <c>-net-0 / <c>-sub-0 192.168.0.0/18, firewall <c>-internal-0; <c>-net-1 / <c>-sub-1
    #   192.168.64.0/18, firewall <c>-internal-1 (both: source 192.168.0.0/16, tcp 0-65535,
    #   udp 0-65535, icmp); <c>-rdma-net with 8 subnets <c>-rdma-sub-<i> = cidrsubnet(
    #   192.168.128.0/18, 3, i) (modules/network/gpu-rdma-vpc); MTU 8896 on all three.
    #   The cluster (modules/scheduler/gke-cluster) is regional, named <c> (prefix_with_deployment_name
    #   false), resource_labels = blueprint vars.labels {"gke_product_type": "xpk"} + the Toolkit's
    #   ghpc_blueprint / ghpc_deployment (= the deployment name <c>-<h5>) + the module's
    #   ghpc_module "gke-cluster", ghpc_role "scheduler", set at creation (no SetLabels call).
    #   Its system pool is "system" (system_node_pool_name's default) with
    #   --default-pool-cpu-num-nodes (default 6) nodes of --default-pool-cpu-machine-type; the
    #   sandbox skips the default-pool the module creates and removes. The GPU pool
    #   (modules/compute/gke-node-pool, no name set) is "<machine type>-<module id>" =
    #   "a4-highgpu-8g-<c>-a4-pool", static_node_count --num-nodes, zones [zone], spot per --spot.
    # --enable-lustre-csi-driver is ignored on this path (the blueprint has no Lustre setting).

    async def xpk_cluster_create(self, project: str, zone: str, cluster: str, *, num_nodes: int,
                                 device_type: str = "b200-8", spot: bool = True,
                                 default_pool_cpu_machine_type: str = "e2-standard-16",
                                 default_pool_cpu_num_nodes: int = 6, deployment: str = "",
                                 gke_version: str = "",
                                 progress: Callable[[str], None] | None = None) -> container_v1.Cluster:
        """Networks at xpk_networks, control plane at xpk_control_plane, the GPU pool at
        xpk_node_pool, exit at xpk_done (minutes after start). Re-running skips what exists.
        Terraform polls the cluster's create and retries a busy cluster every 10 s
        (_terraform_poll_s): a GPU pool that starts late (another client's operation got in
        first) still takes its own xpk_node_pool - xpk_control_plane, and the JobSet/Kueue
        phase its xpk_done - xpk_node_pool after it.
        A GPU pool that fails (e.g. over quota) raises CloudError with the operation's error.
        Progress lines are Terraform's, as gcluster deploy streams them."""
        device = XPK_DEVICE_TYPES.get(device_type)
        if device is None:
            raise InvalidArgument(f"device type {device_type!r} is not known; try one of {sorted(XPK_DEVICE_TYPES)}")
        if num_nodes < 1:
            raise InvalidArgument(f"num_nodes must be >= 1, got {num_nodes}")
        say = progress or (lambda _line: None)
        region = region_of(zone)
        deployment = deployment or xpk_unique_name(project, region, cluster)
        t_net, t_cp, t_np, t_done = self.clock.offsets(XPK_MILESTONES)
        start = time.monotonic()

        def left(t: float) -> float:
            return max(0.0, t - (time.monotonic() - start))

        say(f"module.{cluster}-net-0.module.vpc.module.vpc.google_compute_network.network: Creating...")
        gke_target = f"projects/{project}/locations/{region}/clusters/{cluster}"
        with self._phase("xpk.networks", f"projects/{project}/global/networks/{cluster}-net-0", "xpk_networks"):
            await asyncio.sleep(left(t_net))
        p = self._project(project)
        for net in _xpk_networks(project, region, cluster):
            if net.name not in p.networks:
                self.create_network(project, net.name, subnets=net.subnets, created_by="xpk")
            say(f"module.{net.name}.module.vpc.module.vpc.google_compute_network.network: Creation complete "
                f"[id=projects/{project}/global/networks/{net.name}]")
        for rule in _xpk_firewalls(project, cluster):
            if rule.name not in p.firewalls:
                self.create_firewall(project, rule)
            say(f"module.{rule.network}.module.firewall_rules.google_compute_firewall.rules_ingress_egress"
                f"[\"{rule.name}\"]: Creation complete [id=projects/{project}/global/firewalls/{rule.name}]")
        if f"{region}/{cluster}" not in p.clusters:
            spec = _xpk_cluster(cluster, zone, default_pool_cpu_machine_type, default_pool_cpu_num_nodes,
                                deployment)
            spec.initial_cluster_version = gke_version  # the blueprint's min_master_version
            self.create_cluster(project, region, spec, seconds=left(t_cp))
            say(f"module.{cluster}-a4-cluster.google_container_cluster.gke_cluster: Creating...")
        # Terraform learns that the create is done by polling its operation (below).
        while self.get_cluster(project, region, cluster).status == Status.PROVISIONING:
            await asyncio.sleep(self._terraform_poll_s())
        self._poll_lag(gke_target)
        say(f"module.{cluster}-a4-cluster.google_container_cluster.gke_cluster: Creation complete "
            f"[id=projects/{project}/locations/{region}/clusters/{cluster}]")
        pool = _xpk_pool(cluster, zone, device, num_nodes, spot, deployment)
        existing = next((np for np in self._cluster(project, region, cluster).node_pools if np.name == pool.name),
                        None)
        resource = f"module.{cluster}-a4-pool.google_container_node_pool.node_pool[0]"
        if existing is not None and existing.status == container_v1.NodePool.Status.ERROR:
            raise FailedPrecondition(f"Error: node pool {pool.name} is in state ERROR: {existing.status_message}")
        if existing is None:
            # Terraform retries a busy cluster (another client's operation, e.g. an addon update
            # that got in first) on the same poll; the pool takes its own time once started.
            waited = False
            while self.running_cluster_operation(project, region, cluster) is not None:
                waited = True
                await asyncio.sleep(self._terraform_poll_s())
            if waited:
                self._poll_lag(gke_target)
            op = self.create_node_pool(project, region, cluster, pool,
                                       seconds=max(left(t_np), t_np - t_cp))
            say(f"{resource}: Creating...")
            done = await self.wait_cluster_operation(project, region, op.name)
            if container_v1.Operation.pb(done).HasField("error"):
                from rltui.sandbox.grpc_util import ResourceExhausted
                err = container_v1.Operation.pb(done).error
                failed = ResourceExhausted(err.message) if err.code == 8 else CloudError(err.message)
                failed.message = (f"Error: error creating NodePool: {err.message}\n\n"
                                  f"  with {resource},\n  on modules/embedded/modules/compute/gke-node-pool/main.tf, "
                                  f"in resource \"google_container_node_pool\" \"node_pool\"")
                raise failed
        say(f"{resource}: Creation complete [id=projects/{project}/locations/{region}/clusters/{cluster}/"
            f"nodePools/{pool.name}]")
        say("module.workload-manager-install.module.install_jobset[0]: Creation complete")
        # JobSet, Kueue and the configmaps come after the pool, however late it came.
        with self._phase("xpk.workloads", gke_target, "xpk_done"):
            await asyncio.sleep(max(left(t_done), t_done - t_np))
        say("Apply complete!")
        self._emit("xpk_cluster_ready", project, region, cluster, zone=zone, node_pool=pool.name)
        if self.gke_auto_upgrade and self.running_cluster_operation(project, region, cluster) is None:
            self.start_gke_upgrade(project, region, cluster)
        return self.get_cluster(project, region, cluster)

    @contextlib.contextmanager
    def _phase(self, kind: str, target: str, key: str) -> Iterator[None]:
        """A phase of xpk's create that the profile times but no API call of the sandbox's
        stands for (the networks before the cluster; JobSet, Kueue and the configmaps after the
        pool), as one operation of the record named by its profile key."""
        with self.record.operation(kind, target, key=key):
            yield

    def _poll_lag(self, gke_target: str) -> None:
        """The wait from the cluster's last GKE operation's DONE to the Terraform poll that saw it
        (at most _terraform_poll_s), recorded so that the modelled poll is not taken for real time."""
        done = self.record.last_end(gke_target)
        if done is not None:
            self.record.span("xpk.terraform_poll", gke_target, done, key="terraform_poll")

    def _terraform_poll_s(self) -> float:
        """Real seconds between Terraform's polls of a GKE operation: the Google provider waits
        on one with its configured PollInterval, 10 s (hashicorp/terraform-provider-google
        google/transport/config.go `c.PollInterval = 10 * time.Second`; tpgresource
        OperationWait -> StateChangeConf{PollInterval}; services/container
        ContainerOperationWait). So gcluster's next GKE call (the GPU pool) comes up to 10 s
        after the create is DONE, and another client's call can land in that gap."""
        return self.terraform_poll_ref_s / self.clock.speed

    async def xpk_cluster_delete(self, project: str, zone: str, cluster: str, *, delete_networks: bool = True,
                                 progress: Callable[[str], None] | None = None) -> None:
        """delete_networks=True: the Toolkit path (gcluster destroy: the cluster, once no operation
        runs on it since Terraform retries FAILED_PRECONDITION, then the firewall rules and the
        three networks). False: the plain GKE path xpk takes without its blueprint (`gcloud beta
        container clusters delete`, no retry: a busy cluster fails it; the Toolkit networks stay,
        since xpk's delete_cluster_subnets only matches `<c>-<location>-sub-*`). A network still
        used (e.g. by a peering) stays and FailedPrecondition says which.

        A cluster already deleted (through the GKE API, as rltui's down does while Lustre goes):
        xpk 1.16.0 does not look first. commands/cluster.py cluster_delete (lines 600-603) takes
        the Toolkit path on the blueprint alone (created_by_gcluster), and
        commands/cluster_gcluster.py cluster_delete (178-227) runs `gcluster destroy` on the
        deployment (core/gcluster_manager.py destroy_deployment, 135-143), no GKE call of its
        own. Terraform's refresh then reads the cluster and its node pool as 404, which the
        google provider drops from the state rather than destroys (terraform-provider-google
        handleNotFoundError), so what is left goes: the firewall rules, then the networks. Not
        verified against a live project: the blueprint's kubectl-apply modules (Cluster Toolkit
        v1.94.0 modules/management/kubectl-apply/main.tf) read `data.google_container_cluster`,
        which fails with "<id> not found" when the cluster is gone and its id is known (the
        provider's datasourceContainerClusterRead); rltui's down falls back to deleting the
        blueprint's names itself if xpk leaves them (plan/steps_lustre.py NetworkReadyStep).
        Timing: the cluster takes `gke_cluster_delete`, the rest `xpk_delete` minus that (both
        estimates in the profile), so xpk's whole delete still takes `xpk_delete`."""
        say = progress or (lambda _line: None)
        region = region_of(zone)
        rest_s = max(0.0, self.clock.seconds("xpk_delete") - self.clock.seconds("gke_cluster_delete"))
        if f"{region}/{cluster}" in self._project(project).clusters:
            if delete_networks:
                await self.wait_cluster_idle(project, region, cluster)
            op = self.delete_cluster(project, region, cluster)
            say(f"module.{cluster}-a4-cluster.google_container_cluster.gke_cluster: Destroying... "
                f"[id=projects/{project}/locations/{region}/clusters/{cluster}]" if delete_networks
                else f"Deleting cluster {cluster}...")
            await self.wait_cluster_operation(project, region, op.name)
            say(f"module.{cluster}-a4-cluster.google_container_cluster.gke_cluster: Destruction complete"
                if delete_networks else
                f"Deleted [{GKE_API}/projects/{project}/zones/{region}/clusters/{cluster}].")
        elif not delete_networks:
            raise NotFound(f"ResponseError: code=404, message=Not found: projects/{project}/locations/{region}/"
                           f"clusters/{cluster}. Could not find [{cluster}] in [{region}].")
        if not delete_networks:
            return
        await asyncio.sleep(rest_s)
        errors: list[str] = []
        p = self._project(project)
        for rule in _xpk_firewalls(project, cluster):
            if rule.name in p.firewalls:
                self.delete_firewall(project, rule.name)
                say(f"module.{rule.network}.module.firewall_rules.google_compute_firewall.rules_ingress_egress"
                    f"[\"{rule.name}\"]: Destruction complete")
        for net in _xpk_networks(project, region, cluster):
            if net.name in p.networks:
                try:
                    self.delete_network(project, net.name)
                    say(f"module.{net.name}.module.vpc.module.vpc.google_compute_network.network: "
                        "Destruction complete")
                except CloudError as exc:
                    errors.append(exc.message)
        if errors:
            raise FailedPrecondition("; ".join(f"Error: {e}" for e in errors))


def _xpk_networks(project: str, region: str, cluster: str) -> list[Network]:
    rdma = ipaddress.ip_network("192.168.128.0/18").subnets(new_prefix=21)  # cidrsubnet(range, 3, i)
    return [
        Network(project, f"{cluster}-net-0", [Subnet(f"{cluster}-sub-0", region, "192.168.0.0/18")], "xpk"),
        Network(project, f"{cluster}-net-1", [Subnet(f"{cluster}-sub-1", region, "192.168.64.0/18")], "xpk"),
        Network(project, f"{cluster}-rdma-net",
                [Subnet(f"{cluster}-rdma-sub-{i}", region, str(net)) for i, net in enumerate(rdma)], "xpk"),
    ]


_XPK_ALLOW = [{"IPProtocol": "tcp", "ports": ["0-65535"]}, {"IPProtocol": "udp", "ports": ["0-65535"]},
              {"IPProtocol": "icmp"}]


def _xpk_firewalls(project: str, cluster: str) -> list[Firewall]:
    return [Firewall(project, f"{cluster}-internal-{i}", f"{cluster}-net-{i}",
                     source_ranges=["192.168.0.0/16"], allowed=copy.deepcopy(_XPK_ALLOW), created_by="xpk")
            for i in (0, 1)]


def _toolkit_labels(deployment: str, module: str, role: str) -> dict[str, str]:
    return {"gke_product_type": "xpk", "ghpc_blueprint": deployment, "ghpc_deployment": deployment,
            "ghpc_module": module, "ghpc_role": role}


def _xpk_cluster(cluster: str, zone: str, cpu_machine_type: str, cpu_nodes: int,
                 deployment: str) -> container_v1.Cluster:
    return container_v1.Cluster(
        name=cluster, network=f"{cluster}-net-0", subnetwork=f"{cluster}-sub-0", locations=[zone],
        resource_labels=_toolkit_labels(deployment, "gke-cluster", "scheduler"),
        node_pools=[container_v1.NodePool(name="system", initial_node_count=max(1, cpu_nodes), locations=[zone],
                                          config=container_v1.NodeConfig(machine_type=cpu_machine_type,
                                                                         image_type="COS_CONTAINERD"))],
    )


def xpk_pool_name(cluster: str, machine_type: str) -> str:
    """Cluster Toolkit gke-node-pool's default name: "<machine type>-<module id>" with the module
    id `<c>-a4-pool` lowercased and stripped to [a-z0-9-]."""
    return f"{machine_type}-" + re.sub(r"[^a-z0-9-]", "", f"{cluster}-a4-pool".lower())


def _xpk_pool(cluster: str, zone: str, device: XpkDevice, num_nodes: int, spot: bool,
              deployment: str) -> container_v1.NodePool:
    labels = {"cloud.google.com/gke-accelerator": device.accelerator_type}
    if spot:
        labels["cloud.google.com/gke-spot"] = "true"
    return container_v1.NodePool(
        name=xpk_pool_name(cluster, device.machine_type), initial_node_count=num_nodes, locations=[zone],
        config=container_v1.NodeConfig(
            machine_type=device.machine_type, spot=spot, labels=labels, image_type="COS_CONTAINERD",
            disk_type="hyperdisk-balanced", resource_labels=_toolkit_labels(deployment, "gke-node-pool", "compute"),
            accelerators=[container_v1.AcceleratorConfig(accelerator_count=device.accelerators_per_node,
                                                         accelerator_type=device.accelerator_type)],
            taints=[container_v1.NodeTaint(key="nvidia.com/gpu", value="present",
                                           effect=container_v1.NodeTaint.Effect.NO_SCHEDULE)],
        ),
    )
