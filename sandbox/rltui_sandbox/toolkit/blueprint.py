"""The a4 blueprint xpk 1.16.0 writes for `--device-type=b200-8`, as the resources Terraform makes.

Each resource has its Terraform address, its kind, the name it gets in the cloud, the Toolkit
module that declares it (Terraform sends the module in its user agent) and the resources it
depends on. `a4_resources` lists them in an order that respects every dependency; destroy walks
it backwards.

Where each name and argument comes from:
- xpk (pins toolkit v1.94.0) src/xpk/core/blueprint/blueprint_generator.py generate_a4_blueprint,
  rendered in src/xpk/core/blueprint/testing/data/a4.yaml: modules `<c>-net-0` and `<c>-net-1`
  (modules/network/vpc: network_name `<c>-net-i`, mtu 8896, one subnet `<c>-sub-i`
  192.168.0.0/18 and 192.168.64.0/18, secondary ranges pods 10.4.0.0/14 and services
  10.0.32.0/20 on sub-0 only, firewall_rules [`<c>-internal-i`: 192.168.0.0/16, tcp and udp
  0-65535, icmp]), `<c>-rdma-net` (modules/network/gpu-rdma-vpc: 8 subnets `<c>-rdma-sub-i`),
  `<c>-a4-cluster` (modules/scheduler/gke-cluster: prefix_with_deployment_name false,
  name_suffix `<c>`, system_node_pool_machine_type and its min node count from
  --default-pool-cpu-machine-type / --default-pool-cpu-num-nodes (commands/cluster_gcluster.py),
  enable_gcsfuse_csi true, labels {gke_product_type: xpk}), `<c>-a4-pool`
  (modules/compute/gke-node-pool: a4-highgpu-8g, zones [zone], spot, static_node_count, 8 x
  nvidia-b200, disk hyperdisk-balanced), `workload-manager-install` and `workload_configmap`
  (modules/management/kubectl-apply).
- cluster-toolkit v1.94.0 modules/network/vpc main.tf and variables.tf defaults: beside the
  blueprint's own rule, `<network>-fw-allow-internal-traffic` (enable_internal_traffic true,
  network_address_range 10.0.0.0/9, tcp/udp 0-65535 and icmp, "allow traffic between nodes of
  this VPC") and `<network>-fw-allow-iap-ingress` (enable_iap_ssh_ingress true, 35.235.240.0/20,
  tcp 22, "allow TCP access via Identity-Aware Proxy"); a Cloud Router `<network>-router` per
  subnet region (enable_cloud_router true) with one NAT `cloud-nat-<region>` (enable_cloud_nat
  true) over ips_per_nat = 2 regional EXTERNAL addresses `<network>-nat-ips-<region>-<i>`
  labelled with the module's labels (ghpc_module vpc, ghpc_role network). The NAT's
  natIpAllocateOption MANUAL_ONLY and sourceSubnetworkIpRangesToNat ALL_SUBNETWORKS_ALL_IP_RANGES
  are terraform-google-modules/cloud-router's defaults as its nat.tf is commonly described; that
  module's source was not read here (not verified).
- gke-cluster main.tf: `google_container_cluster` named `<c>` in the region
  (cluster_availability_type REGIONAL), remove_default_node_pool = true with
  initial_node_count = 1, addons_config from the module's variables (gcs fuse and persistent
  disk on; filestore, parallelstore, ray operator and Lustre CSI off), resource_labels = labels
  + {ghpc_module: gke-cluster, ghpc_role: scheduler}; `google_container_node_pool`
  "system_node_pools" named `system` (system_node_pool_name), autoscaling total min/max.
  gcluster adds ghpc_blueprint and ghpc_deployment to every module's labels.
- gke-node-pool main.tf: the pool's name is "<machine type>-<module id>"
  (coalesce(var.name, join("-", [machine_type, module_unique_id]))), upgrade_settings
  max_surge 0, max_unavailable 1 (locals), resource_labels + {ghpc_module: gke-node-pool,
  ghpc_role: compute}; it reads data "google_container_cluster" (line 96), as kubectl-apply
  does (main.tf line 163) and the gke-cluster module's own kubectl_apply module.

Simplified here, and said so: every pool lives in the blueprint's one zone (a regional cluster
without system_node_pool_zones spreads the default and system pools over the region's zones);
the kubectl-apply modules' manifests (JobSet, the NCCL installer, the storage CRD, the two
configmaps, the network paramsets) are one timed phase, not Kubernetes objects.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

TOOLKIT_VERSION = "v1.94.0"
# terraform-provider-google(-beta) >= 7.20.0 (gke-cluster versions.tf); the sandbox says 7.40.0.
PROVIDER_VERSION = "7.40.0"
TERRAFORM_VERSION = "1.12.2"  # required_version >= 1.12.2 (gke-cluster versions.tf)
SDK_VERSION = "2.37.0"

NETWORK_ADDRESS_RANGE = "10.0.0.0/9"   # vpc variables.tf network_address_range default
IAP_RANGE = "35.235.240.0/20"          # vpc main.tf allow_iap_ingress
BLUEPRINT_RANGE = "192.168.0.0/16"     # xpk's `<c>-internal-i` rules
IPS_PER_NAT = 2                        # vpc variables.tf ips_per_nat default
# gke-cluster variables.tf system_node_pool_taints default (lines 301-313 at v1.94.0); xpk's
# blueprint does not override it, and patches Kueue and JobSet to tolerate it instead.
SYSTEM_POOL_TAINT = {"key": "components.gke.io/gke-managed-components", "value": "true",
                     "effect": "NO_SCHEDULE"}
RDMA_SUBNETS = 8
ALL_PORTS = [{"IPProtocol": "tcp", "ports": ["0-65535"]}, {"IPProtocol": "udp", "ports": ["0-65535"]},
             {"IPProtocol": "icmp"}]


def user_agent(module: str, provider: str = "google") -> str:
    """What terraform-provider-google sends: the SDK provider's UserAgent ("Terraform/<tf>
    (+https://www.terraform.io) Terraform-Plugin-SDK/<sdk> terraform-provider-<name>/<v>",
    google/provider/provider.go) joined with the module's provider_meta module_name
    (tpgresource.GenerateUserAgentString; each Toolkit module's versions.tf sets
    "blueprints/terraform/hpc-toolkit:<module>/v1.94.0")."""
    return (f"Terraform/{TERRAFORM_VERSION} (+https://www.terraform.io) Terraform-Plugin-SDK/{SDK_VERSION} "
            f"terraform-provider-{provider}/{PROVIDER_VERSION} blueprints/terraform/hpc-toolkit:{module}/"
            f"{TOOLKIT_VERSION}")


@dataclass(frozen=True)
class Res:
    """One resource (or data source) of the blueprint."""

    address: str                    # Terraform's address
    kind: str                       # network, subnet, firewall, nat_ip, router, cluster, node_pool, kubectl
    name: str                       # its name in the cloud
    module: str                     # the Toolkit module that declares it (the user agent's)
    deps: tuple[str, ...] = ()      # addresses it depends on
    spec: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def provider(self) -> str:
        """gke-cluster and gke-node-pool use google-beta for their GKE resources."""
        return "google-beta" if self.kind in ("cluster", "node_pool") else "google"

    @property
    def agent(self) -> str:
        return user_agent(self.module, self.provider)


def pool_name(cluster: str, machine_type: str) -> str:
    """gke-node-pool's default name: "<machine type>-<module id>", the module id `<c>-a4-pool`
    as the Toolkit makes it unique (lowercase, [a-z0-9-])."""
    return f"{machine_type}-" + re.sub(r"[^a-z0-9-]", "", f"{cluster}-a4-pool".lower())


def labels(deployment: str, module: str, role: str) -> dict[str, str]:
    return {"gke_product_type": "xpk", "ghpc_blueprint": deployment, "ghpc_deployment": deployment,
            "ghpc_module": module, "ghpc_role": role}


@dataclass(frozen=True)
class Params:
    project: str
    region: str
    zone: str
    cluster: str
    deployment: str
    num_nodes: int
    spot: bool
    machine_type: str = "a4-highgpu-8g"
    accelerator: str = "nvidia-b200"
    accelerators_per_node: int = 8
    cpu_machine_type: str = "e2-standard-16"
    cpu_nodes: int = 6
    gke_version: str = ""


def _vpc(p: Params, i: int) -> list[Res]:
    c, net = p.cluster, f"{p.cluster}-net-{i}"
    mod = f"module.{net}"
    vpc = f"{mod}.module.vpc.module.vpc"
    network = Res(f"{vpc}.google_compute_network.network", "network", net, "vpc",
                  spec={"mtu": 8896, "description": ""})
    secondary = ([{"rangeName": "pods", "ipCidrRange": "10.4.0.0/14"},
                  {"rangeName": "services", "ipCidrRange": "10.0.32.0/20"}] if i == 0 else [])
    subnet = Res(f"{vpc}.module.subnets.google_compute_subnetwork.subnetwork[\"{p.region}/{c}-sub-{i}\"]",
                 "subnet", f"{c}-sub-{i}", "vpc", (network.address,),
                 spec={"network": net, "region": p.region, "ip_cidr_range": f"192.168.{64 * i}.0/18",
                       "secondary_ranges": secondary})
    rules = [
        (f"{c}-internal-{i}", "", [BLUEPRINT_RANGE], ALL_PORTS),
        (f"{net}-fw-allow-internal-traffic", "allow traffic between nodes of this VPC",
         [NETWORK_ADDRESS_RANGE], ALL_PORTS),
        (f"{net}-fw-allow-iap-ingress", "allow TCP access via Identity-Aware Proxy", [IAP_RANGE],
         [{"IPProtocol": "tcp", "ports": ["22"]}]),
    ]
    firewalls = [Res(f"{vpc}.module.firewall_rules.google_compute_firewall.rules_ingress_egress[\"{name}\"]",
                     "firewall", name, "vpc", (network.address,),
                     spec={"network": net, "description": desc, "source_ranges": ranges, "allowed": allow})
                 for name, desc, ranges, allow in rules]
    ips = [Res(f"{mod}.module.nat_ip_addresses[\"{p.region}\"].google_compute_address.ip[{k}]", "nat_ip",
               f"{net}-nat-ips-{p.region}-{k}", "vpc",
               spec={"region": p.region, "labels": labels(p.deployment, "vpc", "network")})
           for k in range(IPS_PER_NAT)]
    router = Res(f"{mod}.module.cloud_router[\"{p.region}\"].google_compute_router.router", "router",
                 f"{net}-router", "vpc", (network.address, *(ip.address for ip in ips)),
                 spec={"region": p.region, "network": net,
                       "nats": [{"name": f"cloud-nat-{p.region}", "natIps": [ip.name for ip in ips],
                                 "natIpAllocateOption": "MANUAL_ONLY",
                                 "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}]})
    return [network, subnet, *firewalls, *ips, router]


def _rdma(p: Params) -> list[Res]:
    c = p.cluster
    vpc = f"module.{c}-rdma-net.module.vpc.module.vpc"
    network = Res(f"{vpc}.google_compute_network.network", "network", f"{c}-rdma-net", "gpu-rdma-vpc",
                  spec={"mtu": 8896, "description": ""})
    ranges = ipaddress.ip_network("192.168.128.0/18").subnets(new_prefix=21)   # cidrsubnet(range, 3, i)
    subnets = [Res(f"{vpc}.module.subnets.google_compute_subnetwork.subnetwork[\"{p.region}/{c}-rdma-sub-{i}\"]",
                   "subnet", f"{c}-rdma-sub-{i}", "gpu-rdma-vpc", (network.address,),
                   spec={"network": f"{c}-rdma-net", "region": p.region, "ip_cidr_range": str(r),
                         "secondary_ranges": []})
               for i, r in enumerate(ranges)]
    return [network, *subnets]


def _kubectl(address: str, after: tuple[str, ...]) -> Res:
    """A kubectl-apply module: its data "google_container_cluster" and its manifests."""
    return Res(address, "kubectl", address.rsplit(".", 1)[-1], "kubectl-apply", after)


def a4_resources(p: Params) -> list[Res]:
    """Every resource of the a4 blueprint, each after the ones it depends on."""
    c = p.cluster
    net0, net1, rdma = _vpc(p, 0), _vpc(p, 1), _rdma(p)
    # The cluster uses net-0's subnet and, through additional_networks, net-1's and the RDMA
    # subnets (blueprint_generator.py: additional_networks = concat([net-1], rdma-net's)).
    subnet_deps = tuple(r.address for r in (*net0, *net1, *rdma) if r.kind == "subnet")
    cluster = Res(f"module.{c}-a4-cluster.google_container_cluster.gke_cluster", "cluster", c, "gke-cluster",
                  subnet_deps, spec={"labels": labels(p.deployment, "gke-cluster", "scheduler")})
    system = Res(f"module.{c}-a4-cluster.google_container_node_pool.system_node_pools[0]", "node_pool",
                 "system", "gke-cluster", (cluster.address,),
                 spec={"machine_type": p.cpu_machine_type, "node_count": max(1, p.cpu_nodes),
                       "labels": labels(p.deployment, "gke-cluster", "scheduler"),
                       # gke-cluster variables.tf system_node_pool_taints' default (xpk sets none).
                       "taints": [SYSTEM_POOL_TAINT]})
    gpu = Res(f"module.{c}-a4-pool.google_container_node_pool.node_pool[0]", "node_pool",
              pool_name(c, p.machine_type), "gke-node-pool", (cluster.address,),
              spec={"machine_type": p.machine_type, "node_count": p.num_nodes, "spot": p.spot,
                    "accelerator": p.accelerator, "accelerators_per_node": p.accelerators_per_node,
                    "labels": labels(p.deployment, "gke-node-pool", "compute")})
    kubectl = [_kubectl(f"module.{c}-a4-cluster.module.kubectl_apply", (cluster.address,)),
               _kubectl("module.workload-manager-install", (cluster.address,)),
               _kubectl("module.workload_configmap", (cluster.address,))]
    return [*net0, *net1, *rdma, cluster, system, gpu, *kubectl]
