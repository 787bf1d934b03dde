"""The sandbox World's state: the records it keeps per project (VPC networks and their subnets,
global addresses, Service Networking peerings, firewall rules, Cloud Routers with their NATs and
regional addresses as dataclasses; GKE clusters and
operations and Lustre instances as their google-cloud protos), the deadlines it schedules, the
events it emits, and a project's JSON in `world.json` (_project_to_json / _project_from_json;
files written before later fields existed still load).

Also the small helpers more than one service uses: project numbers, the region of a zone, GCE
resource names, a network's resource path. What the services do is in world_network,
world_services, world_gke, world_gke_pools, world_xpk and world_lustre; World (world.py) mixes
them together over one state.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from google.cloud import container_v1, lustre_v1

from rltui_sandbox.grpc_util import InvalidArgument


_GCE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_NETWORK_PATH = re.compile(r"^projects/(?P<project>[^/]+)/global/networks/(?P<network>[^/]+)$")


@dataclass
class Subnet:
    name: str
    region: str
    ip_cidr_range: str
    network: str = ""  # filled in on the copies get_subnet/list_subnets return
    # compute.v1 Subnetwork.secondaryIpRanges: [{"rangeName": "pods", "ipCidrRange": "10.4.0.0/14"}]
    secondary_ranges: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Network:
    project: str
    name: str
    subnets: list[Subnet] = field(default_factory=list)
    created_by: str = ""  # "xpk" for the networks xpk's Cluster Toolkit makes
    auto_create_subnetworks: bool = False  # auto mode (the `default` network is)
    mtu: int = 0  # 0: the GCE default (1460), or 8896 for xpk's networks
    description: str = ""

    @property
    def path(self) -> str:
        return f"projects/{self.project}/global/networks/{self.name}"


@dataclass
class Address:
    project: str
    name: str
    network: str
    purpose: str
    prefix_length: int
    address: str
    status: str = "RESERVED"  # RESERVING while address_create runs
    labels: dict[str, str] = field(default_factory=dict)
    description: str = ""

    @property
    def path(self) -> str:
        return f"projects/{self.project}/global/addresses/{self.name}"


@dataclass
class RegionalAddress:
    """A regional static address (compute.v1 Address in regions/{region}/addresses): the sandbox
    makes EXTERNAL ones only (Cluster Toolkit's NAT IPs). status RESERVED, or IN_USE while a
    Cloud NAT uses it, with `users` the router's self path (compute.v1 Address.status
    RESERVING|RESERVED|IN_USE, Address.users "The URLs of the resources that are using this address")."""

    project: str
    region: str
    name: str
    address: str
    address_type: str = "EXTERNAL"
    status: str = "RESERVED"
    labels: dict[str, str] = field(default_factory=dict)
    description: str = ""
    users: list[str] = field(default_factory=list)  # self paths, projects/P/regions/R/routers/N
    creation_timestamp: str = ""

    @property
    def path(self) -> str:
        return f"projects/{self.project}/regions/{self.region}/addresses/{self.name}"


@dataclass
class Router:
    """A Cloud Router (compute.v1 Router) with its Cloud NATs. Each NAT: {"name", "natIps":
    [regional address NAMES], "natIpAllocateOption": "MANUAL_ONLY" | "AUTO_ONLY",
    "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES" | ...} plus any other
    RouterNat field the caller sent, kept as given."""

    project: str
    region: str
    name: str
    network: str  # the network's name
    nats: list[dict[str, Any]] = field(default_factory=list)
    description: str = ""
    creation_timestamp: str = ""

    @property
    def path(self) -> str:
        return f"projects/{self.project}/regions/{self.region}/routers/{self.name}"


@dataclass
class Peering:
    project: str
    network: str
    service: str
    ranges: list[str]
    status: str = "ACTIVE"  # CONNECTING, ACTIVE, DELETING

    @property
    def name(self) -> str:
        return self.service.replace(".", "-")  # servicenetworking-googleapis-com, as GCE names it


@dataclass
class Firewall:
    """A VPC firewall rule (compute.v1 Firewall). allowed/denied: [{"IPProtocol": "tcp", "ports": ["22"]}]."""

    project: str
    name: str
    network: str
    direction: str = "INGRESS"
    priority: int = 1000
    source_ranges: list[str] = field(default_factory=list)
    destination_ranges: list[str] = field(default_factory=list)
    source_tags: list[str] = field(default_factory=list)
    target_tags: list[str] = field(default_factory=list)
    allowed: list[dict[str, Any]] = field(default_factory=list)
    denied: list[dict[str, Any]] = field(default_factory=list)
    description: str = ""
    disabled: bool = False
    created_by: str = ""
    creation_timestamp: str = ""

    @property
    def path(self) -> str:
        return f"projects/{self.project}/global/firewalls/{self.name}"


@dataclass(frozen=True)
class WorldEvent:
    """A change subscribers hear about. kind: cluster_running, cluster_deleted, node_pool_ready,
    node_pool_deleted, node_pool_failed, node_pool_recreating (data: the pool's, per_node_s,
    version), node_pool_recreated, addons_changed, xpk_cluster_ready, lustre_active, lustre_deleted."""

    kind: str
    project: str
    location: str
    name: str  # the cluster or instance ID
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Project:
    id: str
    networks: dict[str, Network] = field(default_factory=dict)
    addresses: dict[str, Address] = field(default_factory=dict)
    regional_addresses: dict[str, RegionalAddress] = field(default_factory=dict)  # key "region/name"
    routers: dict[str, Router] = field(default_factory=dict)  # key "region/name"
    firewalls: dict[str, Firewall] = field(default_factory=dict)
    peerings: dict[str, Peering] = field(default_factory=dict)  # key "network|service"
    services: set[str] = field(default_factory=set)
    clusters: dict[str, container_v1.Cluster] = field(default_factory=dict)  # key "location/name"
    cluster_ops: dict[str, container_v1.Operation] = field(default_factory=dict)
    instances: dict[str, lustre_v1.Instance] = field(default_factory=dict)  # key full name
    next_range: int = 90  # second octet of the next auto-allocated 10.x.0.0 range
    lustre_hosts: dict[str, int] = field(default_factory=dict)  # range name -> IPs handed out
    compute_ops: dict[str, dict[str, Any]] = field(default_factory=dict)  # GCE Operation state by name
    default_network_made: bool = False  # compute.googleapis.com made `default` once
    # network -> wall time its last Lustre instance went: Service Networking holds the
    # connection a while longer (terraform-provider-google #19908,
    # SOURCES.md#servicenetworking-peering-delete).
    producer_released: dict[str, float] = field(default_factory=dict)
    # IAM (world_iam): service accounts, allow policies, Workload Identity pools; plain JSON.
    iam: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Due:
    at: float  # wall-clock seconds (time.time()), so deadlines survive a restart
    seq: int
    action: str
    args: dict[str, Any]


def _copy(msg: Any) -> Any:
    cls = type(msg)
    return cls.deserialize(cls.serialize(msg))


def project_number(project: str) -> int:
    """A stable 12-digit project number for links (the real API uses numbers there)."""
    return 100_000_000_000 + int(hashlib.blake2b(project.encode(), digest_size=5).hexdigest(), 16) % 900_000_000_000


def pool_vm(cluster: str, pool: str) -> str:
    """A name like the VMs a GKE node pool's instance group makes (gke-<cluster>-<pool>-<hash>-<id>),
    for the failure messages that quote one."""
    return f"gke-{cluster}-{pool}"[:40].rstrip("-") + "-" + uuid.uuid4().hex[:8] + "-" + uuid.uuid4().hex[:4]


def region_of(location: str) -> str:
    """us-east1-b -> us-east1; a region stays itself."""
    return location[:-2] if re.match(r"^[a-z]+-[a-z]+\d+-[a-z]$", location) else location


def _check_gce_name(kind: str, name: str) -> None:
    if not _GCE_NAME.match(name or ""):
        raise InvalidArgument(
            f"Invalid value for field '{kind}.name': {name!r}. Must be a match of regex "
            "'(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"
        )


def _project_to_json(p: _Project) -> dict[str, Any]:
    return {
        "networks": [dataclasses.asdict(n) for n in p.networks.values()],
        "addresses": [dataclasses.asdict(a) for a in p.addresses.values()],
        "firewalls": [dataclasses.asdict(f) for f in p.firewalls.values()],
        "regional_addresses": [dataclasses.asdict(a) for a in p.regional_addresses.values()],
        "routers": [dataclasses.asdict(r) for r in p.routers.values()],
        "peerings": [dataclasses.asdict(x) for x in p.peerings.values()],
        "services": sorted(p.services),
        "clusters": [json.loads(container_v1.Cluster.to_json(c)) for c in p.clusters.values()],
        "cluster_ops": [json.loads(container_v1.Operation.to_json(o)) for o in p.cluster_ops.values()],
        "instances": [json.loads(lustre_v1.Instance.to_json(i)) for i in p.instances.values()],
        "next_range": p.next_range,
        "lustre_hosts": p.lustre_hosts,
        "compute_ops": list(p.compute_ops.values()),
        "default_network_made": p.default_network_made,
        "producer_released": p.producer_released,
        "iam": p.iam,
    }


def _project_from_json(pid: str, d: dict[str, Any]) -> _Project:
    def proto(cls: Any, item: dict[str, Any]) -> Any:
        return cls.from_json(json.dumps(item), ignore_unknown_fields=True)

    p = _Project(pid)
    for n in d["networks"]:
        # Files from before auto_create_subnetworks: `default` was the one auto-mode network.
        n = {"auto_create_subnetworks": n["name"] == "default", **n}
        net = Network(**{**n, "subnets": [Subnet(**s) for s in n["subnets"]]})
        p.networks[net.name] = net
    p.addresses = {a["name"]: Address(**a) for a in d["addresses"]}
    p.peerings = {f"{x['network']}|{x['service']}": Peering(**x) for x in d["peerings"]}
    p.services = set(d["services"])
    for item in d["clusters"]:
        c = proto(container_v1.Cluster, item)
        p.clusters[f"{c.location}/{c.name}"] = c
    p.cluster_ops = {o.name: o for o in (proto(container_v1.Operation, i) for i in d["cluster_ops"])}
    p.instances = {i.name: i for i in (proto(lustre_v1.Instance, x) for x in d["instances"])}
    p.next_range = int(d["next_range"])
    p.lustre_hosts = {k: int(v) for k, v in d["lustre_hosts"].items()}
    # Written since the Compute REST surface (older files have none of these).
    p.firewalls = {f["name"]: Firewall(**f) for f in d.get("firewalls", [])}
    p.compute_ops = {o["name"]: dict(o) for o in d.get("compute_ops", [])}
    p.default_network_made = bool(d.get("default_network_made", "default" in p.networks))
    p.producer_released = {k: float(v) for k, v in d.get("producer_released", {}).items()}
    # Written since Cluster Toolkit's routers and NAT IPs (older files have none).
    p.regional_addresses = {f"{a['region']}/{a['name']}": RegionalAddress(**a) for a in d.get("regional_addresses", [])}
    p.routers = {f"{r['region']}/{r['name']}": Router(**r) for r in d.get("routers", [])}
    p.iam = dict(d.get("iam", {}))  # written since world_iam (older files have none)
    return p
