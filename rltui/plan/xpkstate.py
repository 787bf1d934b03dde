"""What xpk 1.16.0 leaves in the folder it ran in, and the names its B200 blueprint gives.

On the Cluster Toolkit path (b200-8) `xpk cluster create` writes
`xpkclusters/blueprints/<project>-<region>/<cluster>-<h5>.yaml` (and a folder of that name)
plus Terraform state under `xpkclusters/gcluster-out/`; `cluster delete` deletes the networks
only when it finds that blueprint (xpk src/xpk/commands/cluster_gcluster.py: blueprints_path,
get_unique_name, get_prefix_path, created_by_gcluster). There is no `xpkclusters/<cluster>`.

The a4 blueprint (xpk src/xpk/core/blueprint/blueprint_generator.py, generate_a4_blueprint)
makes `<c>-net-0` (subnet `<c>-sub-0`, firewall `<c>-internal-0`), `<c>-net-1` (`<c>-sub-1`,
`<c>-internal-1`) and `<c>-rdma-net` (subnets `<c>-rdma-sub-0..7`: modules/network/gpu-rdma-vpc,
no firewall rule, no router). net-0 and net-1 are Cluster Toolkit v1.94.0's
modules/network/vpc, whose defaults add to each (main.tf and variables.tf):
- the firewall rules `<net>-fw-allow-internal-traffic` (enable_internal_traffic, default true)
  and `<net>-fw-allow-iap-ingress` (enable_iap_ssh_ingress, default true): main.tf locals,
  lines 101-160;
- a Cloud Router `<net>-router` in the subnet's region (enable_cloud_router, default true;
  main.tf module "cloud_router", lines 257-280) with one NAT `cloud-nat-<region>`
  (enable_cloud_nat, default true) using
- `ips_per_nat` (default 2) regional external addresses `<net>-nat-ips-<region>-<i>`
  (main.tf module "nat_ip_addresses", lines 240-255).
Pure: no I/O but `exists`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

_CHARSET = "0123456789abcdefghijklmnopqrstuvwxyz"
RDMA_SUBNETS = 8


def hash_string(text: str, length: int) -> str:
    """xpk's utils/objects.py hash_string: the sha256 as a number, its last `length` base-36
    digits (0-9a-z), zero-padded."""
    value = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    digits = ""
    while value > 0 and len(digits) < length:
        value, index = divmod(value, 36)
        digits = _CHARSET[index] + digits
    return digits.zfill(length).lower()


def unique_name(project: str, region: str, cluster: str) -> str:
    return f"{cluster}-{hash_string(f'{project}-{region}-{cluster}'.lower(), 5)}"


def blueprint_file(xpk_dir: Path, project: str, region: str, cluster: str) -> Path:
    prefix = f"{project}-{region}".lower()
    return Path(xpk_dir) / "xpkclusters" / "blueprints" / prefix / (
        unique_name(project, region, cluster) + ".yaml")


def has_state(xpk_dir: Path, project: str, region: str, cluster: str) -> bool:
    """Would `xpk cluster delete`, run in `xpk_dir`, find this cluster's blueprint?"""
    return blueprint_file(xpk_dir, project, region, cluster).is_file()


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
