"""The sandbox World's Compute Engine networking and Service Networking: VPC networks,
subnetworks, firewall rules, the compute#operation objects the Compute REST surface shows,
global addresses (the allocated ranges of private services access) and the Service Networking
peerings (`gcloud services vpc-peerings`; refusals as in hashicorp/terraform-provider-google
19908, compute networks.removePeering the fallback from there and
GoogleCloudPlatform/magic-modules 18476). GCE's refusal to delete a resource in use is InUse.

Also the auto-mode `default` network that enabling compute.googleapis.com makes, with its four
pre-populated firewall rules (docs.cloud.google.com/vpc/docs/vpc, "Default network";
cloud.google.com/vpc/docs/firewalls#more_rules_default_vpc; the rules' shape from a real
`firewall-rules list` in gist l4rz/29a04343905bf6329a4e9d619ca70d31); see world.py's docstring.

NetworkMixin is mixed into World (world.py) and uses its plumbing (_tick, _commit, _schedule,
_wait, _wait_due, _project, record).
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import time
import uuid
from datetime import datetime
from typing import Any, Sequence

from rltui_sandbox.grpc_util import AlreadyExists, CloudError, FailedPrecondition, InvalidArgument, NotFound
from rltui_sandbox.world_model import (
    Address, Firewall, Network, Peering, Subnet, _Project, _check_gce_name, region_of,
)


SERVICE_NETWORKING = "servicenetworking.googleapis.com"


class InUse(FailedPrecondition):
    """GCE's refusal to delete a resource another one uses (HTTP 400, reason
    resourceInUseByAnotherResource in the REST error's errors[])."""

    compute_reason = "resourceInUseByAnotherResource"


class NetworkMixin:
    """VPC networks, subnets, firewall rules, compute operations, global addresses and
    Service Networking peerings (mixed into World)."""

    # ---- VPC networks ----------------------------------------------------------------------------

    def create_network(self, project: str, name: str, *, subnets: Sequence[Subnet] = (),
                       created_by: str = "", auto_create_subnetworks: bool = False, mtu: int = 0,
                       description: str = "") -> Network:
        """An auto-mode network (auto_create_subnetworks) gets one subnet per AUTO_SUBNETS region."""
        self._tick()
        _check_gce_name("network", name)
        p = self._project(project)
        if name in p.networks:
            raise AlreadyExists(f"The resource '{p.networks[name].path}' already exists")
        if mtu and not 1300 <= mtu <= 8896:  # compute.v1 Network.mtu: "minimum 1300 ... maximum 8896"
            raise InvalidArgument(f"Invalid value for field 'resource.mtu': '{mtu}'. Must be between 1300 and 8896.")
        if auto_create_subnetworks and not subnets:
            subnets = [Subnet(name, r, c) for r, c in AUTO_SUBNETS]
        p.networks[name] = Network(project, name, [copy.copy(s) for s in subnets], created_by,
                                   auto_create_subnetworks, mtu, description)
        self._commit()
        return copy.deepcopy(p.networks[name])

    def _network(self, project: str, name: str) -> Network:
        net = self._project(project).networks.get(name)
        if net is None:
            raise NotFound(f"The resource 'projects/{project}/global/networks/{name}' was not found")
        return net

    def get_network(self, project: str, name: str) -> Network:
        self._tick()
        return copy.deepcopy(self._network(project, name))

    def list_networks(self, project: str) -> list[Network]:
        self._tick()
        return [copy.deepcopy(n) for _, n in sorted(self._project(project).networks.items())]

    def delete_network(self, project: str, name: str, *, cascade_subnets: bool = True) -> None:
        """Refused while an address, peering, firewall rule, Cloud Router, cluster or Lustre instance uses it, as
        GCE does ("Error 400: The network resource '...' is already being used by '...',
        resourceInUseByAnotherResource"). cascade_subnets=False (the Compute REST path) also
        refuses a custom-mode network that still has subnets; xpk's teardown takes them along."""
        self._tick()
        net = self._network(project, name)
        p = self._project(project)
        users = [a.path for a in p.addresses.values() if a.network == name]
        users += [f.path for f in p.firewalls.values() if f.network == name]
        users += [r.path for _, r in sorted(p.routers.items()) if r.network == name]
        users += [f"{net.path}/peerings/{x.name}" for x in p.peerings.values() if x.network == name]
        users += [c.self_link for c in p.clusters.values() if c.network == name]
        users += [i.name for q in self._projects.values() for i in q.instances.values() if i.network == net.path]
        if not cascade_subnets and not net.auto_create_subnetworks:
            users += [f"projects/{project}/regions/{s.region}/subnetworks/{s.name}" for s in net.subnets]
        if users:
            raise InUse(f"The network resource '{net.path}' is already being used by '{users[0]}'")
        del p.networks[name]
        self._commit()

    def remove_peering(self, project: str, network: str, peering: str) -> None:
        """compute networks.removePeering: drop the peering from the consumer side at once - the
        known fallback when Service Networking refuses to delete the connection
        (hashicorp/terraform-provider-google 19908, GoogleCloudPlatform/magic-modules 18476).
        The Service Networking connection is this same peering here, so it goes too; whether the
        real producer side lingers is not verified."""
        self._tick()
        self._network(project, network)
        p = self._project(project)
        key = next((k for k, x in p.peerings.items() if x.network == network and x.name == peering), None)
        if key is None:
            # Wording not verified against GCE.
            raise InvalidArgument(f"There is no peering named '{peering}' on network "
                                  f"'projects/{project}/global/networks/{network}'")
        del p.peerings[key]
        self._commit()

    # ---- subnetworks ------------------------------------------------------------------------------

    def create_subnet(self, project: str, region: str, name: str, *, network: str, ip_cidr_range: str,
                      secondary_ranges: Sequence[dict[str, str]] = ()) -> Subnet:
        """compute subnetworks.insert into a custom-mode network (names are unique per region).
        secondary_ranges: compute.v1 SubnetworkSecondaryRange {rangeName, ipCidrRange} ("The name
        must be ... unique within the subnetwork"), e.g. GKE's pods and services ranges."""
        self._tick()
        _check_gce_name("subnetwork", name)
        net = self._network(project, network)
        if any(s.name == name and s.region == region for n in self._project(project).networks.values()
               for s in n.subnets):
            raise AlreadyExists(f"The resource 'projects/{project}/regions/{region}/subnetworks/{name}' already exists")
        try:
            ipaddress.IPv4Network(ip_cidr_range)
        except ValueError:
            raise InvalidArgument(f"Invalid value for field 'resource.ipCidrRange': '{ip_cidr_range}'. "
                                  "Invalid IPCidrRange.") from None
        net.subnets.append(Subnet(name, region, ip_cidr_range, secondary_ranges=_secondary(secondary_ranges)))
        self._commit()
        return self.get_subnet(project, region, name)

    def _subnet(self, project: str, region: str, name: str) -> tuple[Network, Subnet]:
        for net in self._project(project).networks.values():
            for sub in net.subnets:
                if sub.name == name and sub.region == region:
                    return net, sub
        raise NotFound(f"The resource 'projects/{project}/regions/{region}/subnetworks/{name}' was not found")

    def get_subnet(self, project: str, region: str, name: str) -> Subnet:
        self._tick()
        net, sub = self._subnet(project, region, name)
        return dataclasses.replace(copy.deepcopy(sub), network=net.name)

    def list_subnets(self, project: str, region: str | None = None) -> list[Subnet]:
        """Every subnet of the project (sorted by region, name), or one region's."""
        self._tick()
        subs = [dataclasses.replace(copy.deepcopy(s), network=n.name) for n in self._project(project).networks.values()
                for s in n.subnets if region is None or s.region == region]
        return sorted(subs, key=lambda s: (s.region, s.name))

    def delete_subnet(self, project: str, region: str, name: str) -> None:
        """Refused while a GKE cluster uses it."""
        self._tick()
        net, sub = self._subnet(project, region, name)
        path = f"projects/{project}/regions/{region}/subnetworks/{name}"
        users = [c.self_link for c in self._project(project).clusters.values()
                 if c.subnetwork == name and region_of(c.location) == region]
        if users:
            raise InUse(f"The subnetwork resource '{path}' is already being used by '{users[0]}'")
        net.subnets.remove(sub)
        self._commit()

    # ---- firewall rules ---------------------------------------------------------------------------

    def create_firewall(self, project: str, rule: Firewall) -> Firewall:
        """compute firewalls.insert: the network must exist; exactly one of allowed/denied."""
        self._tick()
        _check_gce_name("firewall", rule.name)
        p = self._project(project)
        if rule.name in p.firewalls:
            raise AlreadyExists(f"The resource '{p.firewalls[rule.name].path}' already exists")
        self._network(project, rule.network)
        if bool(rule.allowed) == bool(rule.denied):
            raise InvalidArgument("Invalid value for field 'resource': exactly one of 'allowed' or 'denied' "
                                  "must be set")  # wording not verified
        if rule.direction not in ("INGRESS", "EGRESS"):
            raise InvalidArgument(f"Invalid value for field 'resource.direction': '{rule.direction}'")
        made = dataclasses.replace(rule, project=project, creation_timestamp=rule.creation_timestamp or _gce_now())
        if made.direction == "INGRESS" and not (made.source_ranges or made.source_tags):
            made.source_ranges = ["0.0.0.0/0"]  # the API's default for an ingress rule without sources
        p.firewalls[made.name] = made
        self._commit()
        return copy.deepcopy(made)

    def get_firewall(self, project: str, name: str) -> Firewall:
        self._tick()
        rule = self._project(project).firewalls.get(name)
        if rule is None:
            raise NotFound(f"The resource 'projects/{project}/global/firewalls/{name}' was not found")
        return copy.deepcopy(rule)

    def list_firewalls(self, project: str, network: str | None = None) -> list[Firewall]:
        self._tick()
        return [copy.deepcopy(f) for _, f in sorted(self._project(project).firewalls.items())
                if network is None or f.network == network]

    def delete_firewall(self, project: str, name: str) -> None:
        self.get_firewall(project, name)
        del self._project(project).firewalls[name]
        self._commit()

    # ---- GCE Operation objects (the Compute REST surface shows them) -----------------------------

    @staticmethod
    def new_compute_op_name() -> str:
        return f"operation-{int(time.time() * 1000)}-{uuid.uuid4().hex[:13]}-{uuid.uuid4().hex[:8]}-" \
               f"{uuid.uuid4().hex[:8]}"

    def start_compute_op(self, project: str, verb: str, target: str, *, region: str = "",
                         done: bool = False, name: str | None = None) -> dict[str, Any]:
        """A compute#operation for `verb` ("insert", "delete", "removePeering") on `target`
        ("projects/P/global/addresses/N"); recorded as compute.<collection>.<verb>."""
        name = name or self.new_compute_op_name()
        collection = target.split("/")[-2]
        op = {"name": name, "id": str(int(uuid.uuid4().hex[:15], 16)), "operationType": verb, "target": target,
              "region": region, "status": "RUNNING", "progress": 0, "insertTime": _gce_now(),
              "startTime": _gce_now(), "rec": self.record.start(f"compute.{collection}.{verb}", target)}
        self._project(project).compute_ops[name] = op
        if done:
            self._finish_compute_op(project, name)
        self._commit()
        return dict(op)

    def _finish_compute_op(self, project: str, name: str | None, error: CloudError | None = None,
                           http_status: int = 0) -> None:
        op = self._project(project).compute_ops.get(name or "")
        if op is None or op["status"] == "DONE":
            return
        op.update(status="DONE", progress=100, endTime=_gce_now())
        if error is not None:
            op["error"] = {"errors": [{"code": getattr(error, "compute_reason", "") or error.code,
                                       "message": error.message}]}
            op["httpErrorStatusCode"], op["httpErrorMessage"] = http_status or 400, error.code.replace("_", " ")
        self.record.end(int(op["rec"]), error.message if error is not None else None)

    def get_compute_op(self, project: str, name: str, region: str = "") -> dict[str, Any]:
        self._tick()
        op = self._project(project).compute_ops.get(name)
        if op is None or op.get("region", "") != region:
            where = f"regions/{region}" if region else "global"
            raise NotFound(f"The resource 'projects/{project}/{where}/operations/{name}' was not found")
        return dict(op)

    async def wait_compute_op(self, project: str, name: str, region: str = "",
                              timeout: float | None = None) -> dict[str, Any]:
        """globalOperations.wait: returns when DONE or after `timeout` (the API waits up to 2 minutes)."""
        self.get_compute_op(project, name, region)
        ops = self._project(project).compute_ops
        try:
            await self._wait(lambda: ops[name]["status"] == "DONE", timeout)
        except TimeoutError:
            pass
        return self.get_compute_op(project, name, region)

    def insert_address(self, project: str, name: str, *, network: str, purpose: str = "VPC_PEERING",
                       prefix_length: int = 16, address: str | None = None, labels: dict[str, str] | None = None,
                       description: str = "") -> dict[str, Any]:
        """globalAddresses.insert: RESERVING now, RESERVED and the operation DONE after address_create."""
        self._tick()
        op_name = self.new_compute_op_name()
        self._begin_create_address(project, name, network=network, purpose=purpose, prefix_length=prefix_length,
                                   address=address, compute_op=op_name, labels=labels, description=description)
        return self.start_compute_op(project, "insert", f"projects/{project}/global/addresses/{name}", name=op_name)

    def remove_address(self, project: str, name: str) -> dict[str, Any]:
        """globalAddresses.delete: gone and the operation DONE after address_delete."""
        self._tick()
        op_name = self.new_compute_op_name()
        self._begin_delete_address(project, name, compute_op=op_name)
        return self.start_compute_op(project, "delete", f"projects/{project}/global/addresses/{name}", name=op_name)

    # ---- global addresses (allocated ranges for private services access) ------------------------

    async def create_address(self, project: str, name: str, *, network: str, purpose: str = "VPC_PEERING",
                             prefix_length: int = 16, address: str | None = None,
                             labels: dict[str, str] | None = None, description: str = "") -> Address:
        """Reserve a global range (takes address_create); the address is 10.x.0.0 unless given."""
        self._tick()
        seq = self._begin_create_address(project, name, network=network, purpose=purpose, prefix_length=prefix_length,
                                         address=address, labels=labels, description=description)
        await self._wait_due(seq)
        return self.get_address(project, name)

    def _begin_create_address(self, project: str, name: str, *, network: str, purpose: str, prefix_length: int,
                              address: str | None, compute_op: str | None = None,
                              labels: dict[str, str] | None = None, description: str = "") -> int:
        _check_gce_name("address", name)
        p = self._project(project)
        if name in p.addresses:
            raise AlreadyExists(f"The resource '{p.addresses[name].path}' already exists")
        self._network(project, network)
        if purpose not in ("VPC_PEERING", "PRIVATE_SERVICE_CONNECT"):
            raise InvalidArgument(f"purpose {purpose!r} is invalid: use VPC_PEERING for private services access")
        if purpose == "VPC_PEERING" and not 8 <= prefix_length <= 24:
            raise InvalidArgument(f"prefix_length {prefix_length} is invalid: a VPC_PEERING range needs /8 to /24")
        if address is None:
            address = f"10.{p.next_range}.0.0"
            p.next_range += 1
        else:
            try:
                ipaddress.IPv4Address(address)
            except ValueError:
                raise InvalidArgument(f"address {address!r} is not an IPv4 address") from None
        p.addresses[name] = Address(project, name, network, purpose, prefix_length, address, "RESERVING",
                                    dict(labels or {}), description)
        args: dict[str, Any] = {"project": project, "name": name}
        if compute_op:
            args["compute_op"] = compute_op
        else:
            args["rec"] = self.record.start("compute.addresses.insert", f"projects/{project}/global/addresses/{name}")
        seq = self._schedule("address_reserved", args, key="address_create")
        self._commit()
        return seq

    def _on_address_reserved(self, project: str, name: str, compute_op: str | None = None,
                             rec: int | None = None) -> None:
        if name in self._project(project).addresses:
            self._project(project).addresses[name].status = "RESERVED"
        self._finish_compute_op(project, compute_op)
        if rec is not None:
            self.record.end(rec)

    def get_address(self, project: str, name: str) -> Address:
        self._tick()
        addr = self._project(project).addresses.get(name)
        if addr is None:
            raise NotFound(f"The resource 'projects/{project}/global/addresses/{name}' was not found")
        return copy.deepcopy(addr)

    def list_addresses(self, project: str) -> list[Address]:
        self._tick()
        return [copy.deepcopy(a) for _, a in sorted(self._project(project).addresses.items())]

    async def delete_address(self, project: str, name: str) -> None:
        """Release a range (takes address_delete); refused while a peering uses it."""
        await self._wait_due(self._begin_delete_address(project, name))

    def _begin_delete_address(self, project: str, name: str, compute_op: str | None = None) -> int:
        addr = self.get_address(project, name)
        p = self._project(project)
        for peering in p.peerings.values():
            if name in peering.ranges:
                raise InUse(
                    f"The address resource '{addr.path}' is already being used by "
                    f"'projects/{project}/global/networks/{peering.network}/peerings/{peering.name}'"
                )
        args: dict[str, Any] = {"project": project, "name": name}
        if compute_op:
            args["compute_op"] = compute_op
        else:
            args["rec"] = self.record.start("compute.addresses.delete", addr.path)
        seq = self._schedule("address_gone", args, key="address_delete")
        self._commit()
        return seq

    def _on_address_gone(self, project: str, name: str, compute_op: str | None = None,
                         rec: int | None = None) -> None:
        self._project(project).addresses.pop(name, None)
        self._finish_compute_op(project, compute_op)
        if rec is not None:
            self.record.end(rec)

    # ---- service networking peerings -------------------------------------------------------------

    def _check_ranges(self, project: str, network: str, ranges: Sequence[str]) -> None:
        if not ranges:
            raise InvalidArgument("ranges must name at least one allocated range")
        p = self._project(project)
        for name in ranges:
            addr = p.addresses.get(name)
            if addr is None:
                raise NotFound(f"Allocated range '{name}' not found in project {project}")
            if addr.purpose != "VPC_PEERING" or addr.network != network:
                raise InvalidArgument(f"Allocated range '{name}' is not a VPC_PEERING range of network {network}")
            if addr.status != "RESERVED":
                raise FailedPrecondition(f"Allocated range '{name}' is still being reserved")

    async def connect_peering(self, project: str, network: str, ranges: Sequence[str],
                              service: str = SERVICE_NETWORKING) -> Peering:
        """`gcloud services vpc-peerings connect` (takes peering_connect)."""
        self._tick()
        self._network(project, network)
        self._check_ranges(project, network, ranges)
        p = self._project(project)
        key = f"{network}|{service}"
        if key in p.peerings:
            raise FailedPrecondition(
                "Cannot modify allocated ranges in CreateConnection. Please use UpdateConnection."
            )
        p.peerings[key] = Peering(project, network, service, list(ranges), "CONNECTING")
        self._commit()
        await self._recorded_wait("servicenetworking.connect", project, network, "peering_connect",
                                  self._schedule("peering_active", {"project": project, "key": key,
                                                                    "ranges": list(ranges)}, key="peering_connect"))
        return self.get_peering(project, network, service)

    async def update_peering(self, project: str, network: str, ranges: Sequence[str],
                             service: str = SERVICE_NETWORKING, force: bool = False) -> Peering:
        """`gcloud services vpc-peerings update [--force]`: dropping a range in use needs force."""
        peering = self.get_peering(project, network, service)
        self._check_ranges(project, network, ranges)
        dropped = set(peering.ranges) - set(ranges)
        if dropped and not force and self._lustre_on(project, network):
            raise FailedPrecondition(
                f"ranges {sorted(dropped)} are in use by producer services; use --force to remove them"
            )
        await self._recorded_wait("servicenetworking.update", project, network, "peering_connect",
                                  self._schedule("peering_active", {"project": project, "key": f"{network}|{service}",
                                                                    "ranges": list(ranges)}, key="peering_connect"))
        return self.get_peering(project, network, service)

    def _on_peering_active(self, project: str, key: str, ranges: list[str]) -> None:
        peering = self._project(project).peerings.get(key)
        if peering is not None:
            peering.status, peering.ranges = "ACTIVE", list(ranges)

    def get_peering(self, project: str, network: str, service: str = SERVICE_NETWORKING) -> Peering:
        self._tick()
        peering = self._project(project).peerings.get(f"{network}|{service}")
        if peering is None:
            raise NotFound(f"No peering of network {network} with {service} in project {project}")
        return copy.deepcopy(peering)

    def list_peerings(self, project: str, network: str | None = None) -> list[Peering]:
        self._tick()
        items = sorted(self._project(project).peerings.items())
        return [copy.deepcopy(x) for _, x in items if network is None or x.network == network]

    async def delete_peering(self, project: str, network: str, service: str = SERVICE_NETWORKING) -> None:
        """Takes peering_delete; refused while a Lustre instance on the network exists in ANY state
        (DELETING included), and for `peering_release_lag` after the last one is gone, with the
        real text (SOURCES.md#servicenetworking-peering-delete: it succeeds only after the Lustre
        instance is fully gone, sometimes minutes later; hashicorp/terraform-provider-google #19908). compute networks.removePeering is the known fallback."""
        self.get_peering(project, network, service)
        users = self._lustre_on(project, network)
        released = self._project(project).producer_released.get(network)
        held = released is not None and time.time() < released + self.clock.seconds("peering_release_lag")
        if users or held:
            raise FailedPrecondition(
                "Failed to delete connection; Producer services (e.g. CloudSQL, Cloud Memstore, etc.) "
                "are still using this connection."
            )
        key = f"{network}|{service}"
        self._project(project).peerings[key].status = "DELETING"
        self._commit()
        await self._recorded_wait("servicenetworking.delete", project, network, "peering_delete",
                                  self._schedule("peering_gone", {"project": project, "key": key}, key="peering_delete"))

    async def _recorded_wait(self, kind: str, project: str, network: str, key: str, seq: int) -> None:
        """Wait for a scheduled peering change, as one operation of the record named by its
        profile key (the peering's calls are long-running on the wire, but the record had no
        operation for them, so a benchmark counted their time as unexplained)."""
        with self.record.operation(kind, f"projects/{project}/global/networks/{network}", key=key):
            await self._wait_due(seq)

    def _on_peering_gone(self, project: str, key: str) -> None:
        self._project(project).peerings.pop(key, None)

    def _lustre_on(self, project: str, network: str) -> list[str]:
        path = f"projects/{project}/global/networks/{network}"
        return [i.name for q in self._projects.values() for i in q.instances.values() if i.network == path]


# ---- helpers kept out of the class -----------------------------------------------------------------


# An auto-mode network's subnets: the sandbox makes two of the per-region ones (10.128.0.0/9 ranges).
AUTO_SUBNETS = (("us-east1", "10.142.0.0/20"), ("us-central1", "10.128.0.0/20"))


def _secondary(ranges: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """Secondary ranges as stored ({rangeName, ipCidrRange}); a bad name or CIDR, or a name
    twice, is refused (wording not verified)."""
    out: list[dict[str, str]] = []
    for item in ranges:
        name, cidr = str(item.get("rangeName") or ""), str(item.get("ipCidrRange") or "")
        _check_gce_name("secondaryIpRanges", name)
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            raise InvalidArgument(f"Invalid value for field 'resource.secondaryIpRanges.ipCidrRange': '{cidr}'. "
                                  "Invalid IPCidrRange.") from None
        if any(r["rangeName"] == name for r in out):
            raise InvalidArgument(f"Invalid value for field 'resource.secondaryIpRanges': the name '{name}' is "
                                  "used twice.")
        out.append({"rangeName": name, "ipCidrRange": cidr})
    return out


def _gce_now() -> str:
    """creationTimestamp/insertTime as GCE writes them (RFC 3339 with an offset)."""
    return datetime.now().astimezone().isoformat(timespec="milliseconds")


def _default_firewalls(project: str) -> list[Firewall]:
    """The default network's four pre-populated rules (cloud.google.com/vpc/docs/firewalls
    #more_rules_default_vpc; shapes from a real listing, gist l4rz/29a04343905bf6329a4e9d619ca70d31)."""
    any_ip = ["0.0.0.0/0"]
    return [
        Firewall(project, "default-allow-internal", "default", priority=65534, source_ranges=["10.128.0.0/9"],
                 allowed=[{"IPProtocol": "tcp", "ports": ["0-65535"]}, {"IPProtocol": "udp", "ports": ["0-65535"]},
                          {"IPProtocol": "icmp"}],
                 description="Allow internal traffic on the default network"),
        Firewall(project, "default-allow-ssh", "default", priority=65534, source_ranges=any_ip,
                 allowed=[{"IPProtocol": "tcp", "ports": ["22"]}], description="Allow SSH from anywhere"),
        Firewall(project, "default-allow-rdp", "default", priority=65534, source_ranges=any_ip,
                 allowed=[{"IPProtocol": "tcp", "ports": ["3389"]}], description="Allow RDP from anywhere"),
        Firewall(project, "default-allow-icmp", "default", priority=65534, source_ranges=any_ip,
                 allowed=[{"IPProtocol": "icmp"}], description="Allow ICMP from anywhere"),
    ]


def _add_default_network(p: _Project, *, private_services_access: bool) -> None:
    """The auto-mode `default` network and its firewall rules (what enabling compute makes);
    private_services_access adds the harness shortcut (a /16 range and the peering)."""
    project = p.id
    p.default_network_made = True
    if "default" not in p.networks:
        p.networks["default"] = Network(project, "default", [Subnet("default", r, c) for r, c in AUTO_SUBNETS],
                                        auto_create_subnetworks=True)
    now = _gce_now()
    for rule in _default_firewalls(project):
        p.firewalls.setdefault(rule.name, dataclasses.replace(rule, creation_timestamp=now))
    if private_services_access:
        p.addresses["google-managed-services-default"] = Address(
            project, "google-managed-services-default", "default", "VPC_PEERING", 16, "10.80.0.0")
        p.peerings[f"default|{SERVICE_NETWORKING}"] = Peering(
            project, "default", SERVICE_NETWORKING, ["google-managed-services-default"])
