"""The sandbox World's Cloud Routers, their Cloud NATs and regional static addresses: what
Cluster Toolkit's vpc module makes beside a network (modules/network/vpc/main.tf v1.94.0:
module "nat_ip_addresses", regional EXTERNAL addresses `<network>-nat-ips-<region>-<i>` with the
blueprint's labels, and module "cloud_router", router `<network>-router` with one NAT
`cloud-nat-<region>` over those addresses).

Fields and states follow the compute.v1 discovery document (google-api-python-client 2.202.0,
googleapiclient/discovery_cache/documents/compute.v1.json, revision 20261106): Router {name,
network, region, nats[], description, creationTimestamp}; RouterNat {name, natIps ("A list of
URLs of the IP resources used for this Nat service"), natIpAllocateOption MANUAL_ONLY|AUTO_ONLY
("When choosing AUTO_ONLY, then nat_ip should be empty"), sourceSubnetworkIpRangesToNat
ALL_SUBNETWORKS_ALL_IP_RANGES|ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES|LIST_OF_SUBNETWORKS};
Address {addressType EXTERNAL|INTERNAL ("If unspecified, defaults to EXTERNAL"), status
RESERVING|RESERVED|IN_USE ("An IN_USE address is currently being used by another resource"),
users ("The URLs of the resources that are using this address"), labels, description}.
A NAT's defaults are those of terraform-google-modules/terraform-google-cloud-router nat.tf,
which Cluster Toolkit calls: MANUAL_ONLY when it names IPs (else AUTO_ONLY) and
ALL_SUBNETWORKS_ALL_IP_RANGES. Fields of a NAT the sandbox does not model (logConfig,
minPortsPerVm, ...) are kept as sent.

update_router is routers.patch ("JSON merge patch format", discovery document): the NATs and
the description, as gcloud's `routers nats create` and Terraform's google_compute_router_nat
send them.

Refusals: a regional address a NAT uses cannot be deleted, as GCE's InUse ("The address
resource '...' is already being used by '...'", reason resourceInUseByAnotherResource: see
world_network.InUse); the network's refusal while a router uses it is in world_network
delete_network. Routers and regional addresses are made and deleted at once (no profile key:
the latency profile has none, and their real durations, seconds, were not measured here).

The external addresses are INVENTED: taken in order from the documentation ranges of RFC 5737
(203.0.113.0/24, then 198.51.100.0/24, then 192.0.2.0/24), never a real Google address, unique
across the sandbox's projects.

RouterMixin is mixed into World (world.py) and uses its plumbing (_tick, _commit, _project,
_projects) and world_network's _network.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rltui_sandbox.grpc_util import AlreadyExists, InvalidArgument, NotFound, ResourceExhausted
from rltui_sandbox.world_model import Network, RegionalAddress, Router, _check_gce_name, _Project
from rltui_sandbox.world_network import InUse, _gce_now

# RFC 5737 documentation ranges, in the order the sandbox hands out their addresses.
DOCUMENTATION_RANGES = ("203.0.113.0/24", "198.51.100.0/24", "192.0.2.0/24")
NAT_ALLOCATE_OPTIONS = ("MANUAL_ONLY", "AUTO_ONLY")
NAT_SOURCE_RANGES = ("ALL_SUBNETWORKS_ALL_IP_RANGES", "ALL_SUBNETWORKS_ALL_PRIMARY_IP_RANGES",
                     "LIST_OF_SUBNETWORKS")
_ADDRESS_REF = re.compile(r"(?:^|/)regions/(?P<region>[^/]+)/addresses/(?P<name>[^/]+)$")
# Label syntax as GKE's (world_gke): GCE's Address.labels "must comply with RFC1035"; the exact
# rule and its refusal's wording were not verified for addresses.
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def _region_key(region: str, name: str) -> str:
    return f"{region}/{name}"


class RouterMixin:
    """Cloud Routers with their NATs, and regional static addresses (mixed into World)."""

    if TYPE_CHECKING:  # World's plumbing and world_network's lookup, as this mixin uses them
        _projects: dict[str, _Project]

        def _tick(self) -> None:
            raise NotImplementedError

        def _commit(self) -> None:
            raise NotImplementedError

        def _project(self, project: str) -> _Project:
            raise NotImplementedError

        def _network(self, project: str, name: str) -> Network:
            raise NotImplementedError

    # ---- regional addresses ----------------------------------------------------------------------

    def create_regional_address(self, project: str, region: str, name: str, *, address_type: str = "EXTERNAL",
                                labels: Mapping[str, str] | None = None, description: str = "") -> RegionalAddress:
        """addresses.insert: RESERVED at once, with an invented external address (module docstring)."""
        self._tick()
        _check_gce_name("address", name)
        if not region:
            raise InvalidArgument("Invalid value for field 'region': ''.")
        p = self._project(project)
        key = _region_key(region, name)
        path = f"projects/{project}/regions/{region}/addresses/{name}"
        if key in p.regional_addresses:
            raise AlreadyExists(f"The resource '{path}' already exists")
        if address_type != "EXTERNAL":
            raise InvalidArgument(f"Invalid value for field 'resource.addressType': '{address_type}'. The sandbox "
                                  "emulates EXTERNAL regional addresses only (Cluster Toolkit's NAT IPs).")
        labels = dict(labels or {})
        for k, v in labels.items():
            if not _LABEL_KEY.match(k) or not _LABEL_VALUE.match(v):
                raise InvalidArgument(f"Invalid value for field 'resource.labels': {k!r}={v!r}. Keys start with a "
                                      "lowercase letter; keys and values use up to 63 lowercase letters, digits, "
                                      "'_' or '-'.")  # wording not verified
        made = RegionalAddress(project, region, name, self._free_external_address(), address_type, "RESERVED",
                               labels, description, [], _gce_now())
        p.regional_addresses[key] = made
        self._commit()
        return copy.deepcopy(made)

    def _free_external_address(self) -> str:
        used = {a.address for q in self._projects.values() for a in q.regional_addresses.values()}
        for cidr in DOCUMENTATION_RANGES:
            for host in ipaddress.IPv4Network(cidr).hosts():
                if str(host) not in used:
                    return str(host)
        raise ResourceExhausted("The sandbox's invented external addresses (RFC 5737's three /24 documentation "
                                "ranges) are all in use.")

    def _regional_address(self, project: str, region: str, name: str) -> RegionalAddress:
        addr = self._project(project).regional_addresses.get(_region_key(region, name))
        if addr is None:
            raise NotFound(f"The resource 'projects/{project}/regions/{region}/addresses/{name}' was not found")
        return addr

    def get_regional_address(self, project: str, region: str, name: str) -> RegionalAddress:
        self._tick()
        return copy.deepcopy(self._regional_address(project, region, name))

    def list_regional_addresses(self, project: str, region: str | None = None) -> list[RegionalAddress]:
        """Every regional address of the project (sorted by region, name), or one region's."""
        self._tick()
        items = [a for a in self._project(project).regional_addresses.values() if region is None or a.region == region]
        return [copy.deepcopy(a) for a in sorted(items, key=lambda a: (a.region, a.name))]

    def delete_regional_address(self, project: str, region: str, name: str) -> None:
        """Refused (InUse) while a router's NAT uses it."""
        self._tick()
        addr = self._regional_address(project, region, name)
        users = self._nat_users(self._project(project)).get(addr.path, [])
        if users:
            raise InUse(f"The address resource '{addr.path}' is already being used by '{users[0]}'")
        del self._project(project).regional_addresses[_region_key(region, name)]
        self._commit()

    # ---- routers ---------------------------------------------------------------------------------

    def create_router(self, project: str, region: str, name: str, *, network: str,
                      nats: Iterable[Mapping[str, Any]] = (), description: str = "") -> Router:
        """routers.insert: the network must exist, and every NAT IP be a regional address of the
        same region that no other router's NAT uses; those addresses become IN_USE."""
        self._tick()
        _check_gce_name("router", name)
        p = self._project(project)
        key = _region_key(region, name)
        path = f"projects/{project}/regions/{region}/routers/{name}"
        if key in p.routers:
            raise AlreadyExists(f"The resource '{path}' already exists")
        self._network(project, network)
        made = self._nats(p, region, path, nats)
        p.routers[key] = Router(project, region, name, network, made, description, _gce_now())
        self._refresh_nat_users(p)
        self._commit()
        return copy.deepcopy(p.routers[key])

    def update_router(self, project: str, region: str, name: str, *, nats: Iterable[Mapping[str, Any]] | None = None,
                      description: str | None = None) -> Router:
        """routers.patch: the NATs (all of them, as the body lists them) and/or the description.
        `gcloud compute routers nats create` and Terraform's google_compute_router_nat add a NAT
        this way (resource_compute_router_nat.go v7.40.0 PatchCreateEncoder appends it to the
        router's `nats` and PATCHes the router)."""
        self._tick()
        router = self._router(project, region, name)
        p = self._project(project)
        if nats is not None:
            router.nats = self._nats(p, region, router.path, nats)
            self._refresh_nat_users(p)
        if description is not None:
            router.description = description
        self._commit()
        return copy.deepcopy(router)

    def _nats(self, p: _Project, region: str, router_path: str,
              nats: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        made = [self._nat(p, region, router_path, nat) for nat in nats]
        names = [nat["name"] for nat in made]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"Invalid value for field 'resource.nats': two NATs are named "
                                  f"'{next(n for n in names if names.count(n) > 1)}'.")  # wording not verified
        taken = [ip for nat in made for ip in nat["natIps"]]
        if len(set(taken)) != len(taken):
            raise InvalidArgument("Invalid value for field 'resource.nats': an address is named by two NATs.")
        return made

    def _nat(self, p: _Project, region: str, router_path: str, nat: Mapping[str, Any]) -> dict[str, Any]:
        """One NAT as stored: its IPs by name, its options defaulted (module docstring)."""
        out = copy.deepcopy(dict(nat))
        _check_gce_name("nat", str(out.get("name") or ""))
        ips: list[str] = []
        for ref in out.get("natIps") or []:
            match = _ADDRESS_REF.search(str(ref))
            ip_region, ip = (match["region"], match["name"]) if match else (region, str(ref))
            if ip_region != region:
                raise InvalidArgument(f"Invalid value for field 'resource.nats.natIps': '{ref}'. The address must be "
                                      f"in the router's region {region}.")  # wording not verified
            addr = p.regional_addresses.get(_region_key(region, ip))
            if addr is None:
                raise NotFound(f"The resource 'projects/{p.id}/regions/{region}/addresses/{ip}' was not found")
            others = [u for u in self._nat_users(p).get(addr.path, []) if u != router_path]
            if others:
                raise InUse(f"The address resource '{addr.path}' is already being used by '{others[0]}'")
            ips.append(ip)
        option = str(out.get("natIpAllocateOption") or ("MANUAL_ONLY" if ips else "AUTO_ONLY"))
        if option not in NAT_ALLOCATE_OPTIONS:
            raise InvalidArgument(f"Invalid value for field 'resource.nats.natIpAllocateOption': '{option}'.")
        if option == "AUTO_ONLY" and ips:
            raise InvalidArgument("Invalid value for field 'resource.nats.natIps': AUTO_ONLY takes no NAT IPs.")
        if option == "MANUAL_ONLY" and not ips:
            raise InvalidArgument("Invalid value for field 'resource.nats.natIps': MANUAL_ONLY needs at least one "
                                  "NAT IP.")  # wording not verified
        source = str(out.get("sourceSubnetworkIpRangesToNat") or "ALL_SUBNETWORKS_ALL_IP_RANGES")
        if source not in NAT_SOURCE_RANGES:
            raise InvalidArgument(f"Invalid value for field 'resource.nats.sourceSubnetworkIpRangesToNat': '{source}'.")
        out.update(natIps=ips, natIpAllocateOption=option, sourceSubnetworkIpRangesToNat=source)
        return out

    def _nat_users(self, p: _Project) -> dict[str, list[str]]:
        """Regional address path -> the self paths of the routers whose NATs use it."""
        users: dict[str, list[str]] = {}
        for router in sorted(p.routers.values(), key=lambda r: r.path):
            for nat in router.nats:
                for ip in nat.get("natIps") or []:
                    path = f"projects/{p.id}/regions/{router.region}/addresses/{ip}"
                    if router.path not in users.setdefault(path, []):
                        users[path].append(router.path)
        return users

    def _refresh_nat_users(self, p: _Project) -> None:
        """Each regional address IN_USE with its users while a NAT uses it, else RESERVED."""
        users = self._nat_users(p)
        for addr in p.regional_addresses.values():
            addr.users = list(users.get(addr.path, []))
            addr.status = "IN_USE" if addr.users else "RESERVED"

    def _router(self, project: str, region: str, name: str) -> Router:
        router = self._project(project).routers.get(_region_key(region, name))
        if router is None:
            raise NotFound(f"The resource 'projects/{project}/regions/{region}/routers/{name}' was not found")
        return router

    def get_router(self, project: str, region: str, name: str) -> Router:
        self._tick()
        return copy.deepcopy(self._router(project, region, name))

    def list_routers(self, project: str, region: str | None = None) -> list[Router]:
        """Every router of the project (sorted by region, name), or one region's."""
        self._tick()
        items = [r for r in self._project(project).routers.values() if region is None or r.region == region]
        return [copy.deepcopy(r) for r in sorted(items, key=lambda r: (r.region, r.name))]

    def delete_router(self, project: str, region: str, name: str) -> None:
        """routers.delete: its NATs go with it, and their addresses are RESERVED again."""
        self._tick()
        self._router(project, region, name)
        p = self._project(project)
        del p.routers[_region_key(region, name)]
        self._refresh_nat_users(p)
        self._commit()
