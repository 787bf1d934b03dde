"""The names Google will be asked for, derived from env.sh before anything is made, and the
limits each must keep: so that a CLUSTER_NAME xpk's Terraform cannot use is refused by `rltui
check`, the Configure screen and `up --check`, not after the VPC exists. Pure (no I/O).

What xpk 1.16.0's a4 blueprint (Cluster Toolkit v1.94.0) names, c = CLUSTER_NAME, r = REGION
(xpk src/xpk/core/blueprint/blueprint_generator.py generate_a4_blueprint; the modules under
cluster-toolkit v1.94.0 modules/):
- network/vpc, once per `<c>-net-0` and `<c>-net-1`: subnet `<c>-sub-i`, firewall rules
  `<c>-internal-i`, `<c>-net-i-fw-allow-internal-traffic` and `<c>-net-i-fw-allow-iap-ingress`
  (main.tf locals allow_internal_traffic / allow_iap_ingress: "${local.network_name}-fw-..."),
  NAT IPs `<c>-net-i-nat-ips-<r>-0|1` (module nat_ip_addresses), router `<c>-net-i-router`;
- network/gpu-rdma-vpc: `<c>-rdma-net`, subnets `<c>-rdma-sub-0..7`;
- compute/gke-node-pool: the pool's name defaults to "<machine type>-<module id>" (main.tf:
  join("-", [var.machine_type, local.module_unique_id])), the module id being `<c>-a4-pool`:
  `a4-highgpu-8g-<c>-a4-pool`;
- every module's labels carry `ghpc_deployment`, the deployment name `<c>-<h5>` (xpk
  cluster_gcluster.py get_unique_name: h5 from utils/objects.py hash_string).
rltui's own: the IP range `google-managed-services-<network>` (config.py address_name).

The limits:
- Compute Engine resource names (networks, subnets, firewalls, routers, addresses): RFC 1035,
  at most 63 characters (terraform-provider-google v7.40.0 google/verify/validation.go
  ValidateGCEName, `^(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)$`, citing
  cloud.google.com/compute/docs/naming-resources#resource-name-format).
- GKE node pool names: at most 40 characters (terraform-provider-google's node pool resource
  keeps name_prefix + its generated suffix within "GKE's 40-character limit for NodePool.name",
  as GoogleCloudPlatform/magic-modules states it; not read in Google's API reference here).
- Label values: at most 63 characters (Resource Manager's labels overview, "Values can be empty,
  and have a maximum length of 63 characters"; not re-read here).
Only the b200-8 device type takes the Cluster Toolkit path in xpk 1.16.0 (sandbox/xpk_names.py
TOOLKIT_MACHINE_TYPES); for the others only the IP range is checked here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

GCE_NAME_MAX = 63
GKE_POOL_MAX = 40
LABEL_VALUE_MAX = 63
RDMA_SUBNETS = 8
TOOLKIT_MACHINE_TYPES = {"b200-8": "a4-highgpu-8g"}


@dataclass(frozen=True)
class Derived:
    """One name Google will be asked for: `what` it is, the `name`, its `limit` and `rule`."""

    what: str
    name: str
    limit: int
    rule: str
    base: str = "CLUSTER_NAME"   # the env.sh variable it grows from

    @property
    def over(self) -> int:
        return len(self.name) - self.limit


def hash_string(text: str, length: int) -> str:
    """xpk's utils/objects.py hash_string: the sha256 as a number, its last `length` base-36
    digits (0-9a-z), zero-padded."""
    value = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    digits = ""
    while value > 0 and len(digits) < length:
        value, index = divmod(value, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[index] + digits
    return digits.zfill(length).lower()


def unique_name(project: str, region: str, cluster: str) -> str:
    """xpk's deployment name `<c>-<h5>` (commands/cluster_gcluster.py get_unique_name)."""
    return f"{cluster}-{hash_string(f'{project}-{region}-{cluster}'.lower(), 5)}"


@dataclass(frozen=True)
class BlueprintNames:
    networks: tuple[str, ...]
    subnets: tuple[str, ...]
    firewalls: tuple[str, ...]
    routers: tuple[str, ...] = ()      # in the cluster's region; each with NAT `nat`
    nat_ips: tuple[str, ...] = ()      # regional external addresses, same region
    nat: str = ""

    def all(self) -> tuple[str, ...]:
        return (*self.routers, *self.nat_ips, *self.firewalls, *self.subnets, *self.networks)


VPC_NETWORKS = ("net-0", "net-1")    # the two modules/network/vpc networks of the blueprint
IPS_PER_NAT = 2                      # modules/network/vpc variables.tf ips_per_nat default


def blueprint_names(cluster: str, region: str = "") -> BlueprintNames:
    """Every name the a4 blueprint gives (the routers and NAT IPs need the region)."""
    vpcs = [f"{cluster}-{n}" for n in VPC_NETWORKS]
    return BlueprintNames(
        networks=(f"{cluster}-net-0", f"{cluster}-net-1", f"{cluster}-rdma-net"),
        subnets=(f"{cluster}-sub-0", f"{cluster}-sub-1",
                 *(f"{cluster}-rdma-sub-{i}" for i in range(RDMA_SUBNETS))),
        firewalls=(f"{cluster}-internal-0", f"{cluster}-internal-1",
                   *(f"{net}-fw-allow-{what}" for net in vpcs
                     for what in ("internal-traffic", "iap-ingress"))),
        routers=tuple(f"{net}-router" for net in vpcs) if region else (),
        nat_ips=tuple(f"{net}-nat-ips-{region}-{i}" for net in vpcs
                      for i in range(IPS_PER_NAT)) if region else (),
        nat=f"cloud-nat-{region}" if region else "")


def derived_names(project: str, region: str, cluster: str, network: str,
                  device_type: str) -> list[Derived]:
    """Every derived name with its limit (see the module docstring)."""
    gce = "Compute Engine names are at most 63 characters"
    out = [Derived("rltui's IP range", f"google-managed-services-{network}", GCE_NAME_MAX, gce,
                   "NETWORK_NAME" if network != f"{cluster}-net-0" else "CLUSTER_NAME")]
    machine = TOOLKIT_MACHINE_TYPES.get(device_type)
    if machine is None:
        return out
    names = blueprint_names(cluster, region)
    out.append(Derived("xpk's GPU node pool", f"{machine}-{cluster}-a4-pool", GKE_POOL_MAX,
                       "GKE node pool names are at most 40 characters"))
    for what, group in (("xpk's network", names.networks), ("xpk's subnet", names.subnets),
                        ("xpk's firewall rule", names.firewalls), ("xpk's Cloud Router", names.routers),
                        (f"xpk's NAT IP (in {region})", names.nat_ips)):
        out += [Derived(what, name, GCE_NAME_MAX, gce) for name in group]
    out.append(Derived("the blueprint's label ghpc_deployment", unique_name(project, region, cluster),
                       LABEL_VALUE_MAX, "label values are at most 63 characters"))
    return out


def too_long(project: str, region: str, cluster: str, network: str, device_type: str) -> list[Derived]:
    """The longest name of each kind that breaks its limit, in the order derived."""
    worst: dict[str, Derived] = {}
    for d in derived_names(project, region, cluster, network, device_type):
        if d.over > 0 and (d.what not in worst or d.over > worst[d.what].over):
            worst[d.what] = d
    return list(worst.values())


def message(d: Derived, value: str) -> str:
    """One line for a Problem of `d.base`: the derived name, its length, the limit, and the
    longest value of the variable that fits."""
    fits = len(value) - d.over
    return (f"{value!r} is too long: {d.what} would be {d.name!r}, {len(d.name)} characters;"
            f" {d.rule} ({d.base} at most {fits} here)")
