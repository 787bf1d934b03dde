"""The sandbox's Compute Engine REST API (compute.v1): networks, subnetworks, global addresses,
firewall rules and their Operation objects, over the World, as aiohttp routes under /compute/v1/;
Cloud Routers with their NATs and regional addresses are in rest_compute_routers, the pieces
both share (URLs, ids, error JSON, list pages) in rest_compute_common.

`google.cloud.compute_v1` clients reach it unmodified with
`client_options={"api_endpoint": "http://127.0.0.1:PORT"}` and
`credentials=google.auth.credentials.AnonymousCredentials()`: the REST transport keeps an
explicit `http://` scheme (transports/rest_base.py: `host = f"{url_scheme}://{host}" if not
url_match_items["scheme"] else host`) and requests `/compute/v1/projects/{project}/...`.

Where each behaviour comes from:

- Paths, methods, parameters and resource fields: the compute.v1 discovery document shipped in
  google-api-python-client 2.202.0 (`googleapiclient/discovery_cache/documents/compute.v1.json`):
  Network (id as a string, selfLink, autoCreateSubnetworks - "If not set, a legacy network is
  created", which the sandbox refuses -, subnetworks URLs, peerings[] {name, network, state
  ACTIVE|INACTIVE, stateDetails, autoCreateRoutes, exchangeSubnetRoutes, ...}, mtu 1300-8896
  default 1460), Subnetwork (secondaryIpRanges[] {rangeName, ipCidrRange}, taken on insert and
  shown when set), Address (status RESERVING|RESERVED|IN_USE, addressType, purpose, prefixLength,
  network URL, labels, labelFingerprint, description; a global address's labels are taken on
  insert, as the vpc modules' Terraform sends them), Firewall, Operation (kind compute#operation, status
  PENDING|RUNNING|DONE, targetLink, error.errors[] {code, message}, httpErrorStatusCode),
  list pages (maxResults 0-500, default 500; nextPageToken), aggregatedList's `items` keyed by
  scope ("regions/us-east1": {"subnetworks": [...]}), and globalOperations.wait ("waits for no
  more than the default deadline (2 minutes)" - here two PROFILE minutes at the sandbox's speed).
- Errors are Google's error JSON, `{"error": {"code": 404, "message": "The resource
  'projects/P/global/networks/N' was not found", "errors": [{"message": ..., "domain": "global",
  "reason": "notFound"}]}}` (SOURCES.md#gcloud-missing-resource; the same JSON the real
  gcloud was seen to parse), 409 alreadyExists, 400 invalid, 400 resourceInUseByAnotherResource
  for deleting a network, subnet or address in use ("Error 400: The network resource '...' is
  already being used by '...', resourceInUseByAnotherResource", as terraform prints it), and 403
  for a disabled API with `"status": "PERMISSION_DENIED"` and the google.rpc.ErrorInfo in
  `details` (see rltui_sandbox.services for the wording and its sources). google-api-core's
  `from_http_response` turns these into NotFound / Conflict(AlreadyExists) / BadRequest /
  Forbidden(PermissionDenied) with `exc.reason` from the ErrorInfo.
- insert/delete answer with an Operation: RUNNING until the latency profile's time for
  address_create / address_delete (0.5 min each), else DONE at once (networks, subnetworks and
  firewalls have no profile entry).

Found here by experiment (google-cloud-compute 1.57): `ExtendedOperation.result()` polls through
`transport._global_operations_client`, a GlobalOperationsClient the transport builds WITHOUT
the caller's client_options (compute_v1/services/*/transports/base.py), i.e. against
compute.googleapis.com. A caller of a local endpoint must hand it one that points here:
`sandbox_compute_clients` does, through that same private attribute.

Every call is counted in the record as `compute:<resource>.<method>` (e.g.
`compute:globalAddresses.insert`), and each Operation is recorded as compute.<collection>.<verb>,
with the caller's User-Agent (and x-goog-api-client) as its agent (record.py).
regions.get and machineTypes.get (read-only, for `rltui up --check`): see the comment above
DEFAULT_QUOTAS.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from typing import Any

from aiohttp import web

from rltui_sandbox import services as apis
from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import CloudError, InvalidArgument
from rltui_sandbox.record import Record
from rltui_sandbox.rest_compute_common import (
    BASE, Route, basename, error_json, filtered, gce_id, list_response, url,
)
from rltui_sandbox.rest_compute_reservations import add_reservation_routes
from rltui_sandbox.rest_compute_routers import (
    add_router_routes, aggregated, label_fingerprint, regional_address_json,
)
from rltui_sandbox.rest_util import body_of, request_agent
from rltui_sandbox.world import (
    Address,
    Firewall,
    Network,
    Peering,
    Subnet,
    World,
)

__all__ = ["add_compute_routes", "sandbox_compute_clients", "network_json", "address_json", "firewall_json",
           "subnet_json", "operation_json", "error_json", "BASE"]

PREFIX = "/compute/v1/projects/{project}"
USER = "sandbox-user@example.com"



# ---- resource JSON (compute.v1 schemas) ------------------------------------------------------------


def network_json(net: Network, peerings: list[Peering]) -> dict[str, Any]:
    base = f"{BASE}/projects/{net.project}"
    mtu = net.mtu or (8896 if net.created_by == "xpk" else 1460)
    body: dict[str, Any] = {
        "kind": "compute#network", "id": gce_id(net.project, net.name), "name": net.name,
        "selfLink": f"{base}/global/networks/{net.name}", "selfLinkWithId": f"{base}/global/networks/"
        f"{gce_id(net.project, net.name)}", "autoCreateSubnetworks": net.auto_create_subnetworks,
        "subnetworks": [f"{base}/regions/{s.region}/subnetworks/{s.name}" for s in net.subnets],
        "routingConfig": {"routingMode": "REGIONAL"}, "mtu": mtu,
        "networkFirewallPolicyEnforcementOrder": "AFTER_CLASSIC_FIREWALL",
        # gcloud's own display columns (its networks list/describe add them client-side)
        "x_gcloud_bgp_routing_mode": "REGIONAL",
        "x_gcloud_subnet_mode": "AUTO" if net.auto_create_subnetworks else "CUSTOM",
    }
    if net.description:
        body["description"] = net.description
    if peerings:
        body["peerings"] = [{
            "name": p.name, "network": f"{BASE}/projects/{p.project}-tp/global/networks/servicenetworking",
            "state": "ACTIVE" if p.status == "ACTIVE" else "INACTIVE",
            "stateDetails": "[2026-12-01T00:00:00.000-08:00]: Connected." if p.status == "ACTIVE" else "",
            "autoCreateRoutes": True, "exchangeSubnetRoutes": True, "exportCustomRoutes": False,
            "importCustomRoutes": False, "exportSubnetRoutesWithPublicIp": False,
            "importSubnetRoutesWithPublicIp": False, "stackType": "IPV4_ONLY",
        } for p in peerings]
    return body


def subnet_json(project: str, sub: Subnet) -> dict[str, Any]:
    net = ipaddress.IPv4Network(sub.ip_cidr_range, strict=False)
    base = f"{BASE}/projects/{project}"
    return {
        "kind": "compute#subnetwork", "id": gce_id(project, sub.region, sub.name), "name": sub.name,
        "network": f"{base}/global/networks/{sub.network}", "ipCidrRange": sub.ip_cidr_range,
        "gatewayAddress": str(net.network_address + 1), "region": f"{base}/regions/{sub.region}",
        "selfLink": f"{base}/regions/{sub.region}/subnetworks/{sub.name}", "privateIpGoogleAccess": False,
        "fingerprint": hashlib.blake2b(f"{sub}".encode(), digest_size=6).hexdigest(),
        "stackType": "IPV4_ONLY", "purpose": "PRIVATE",
        **({"secondaryIpRanges": [dict(r) for r in sub.secondary_ranges]} if sub.secondary_ranges else {}),
    }


def address_json(addr: Address) -> dict[str, Any]:
    base = f"{BASE}/projects/{addr.project}"
    body: dict[str, Any] = {
        "kind": "compute#address", "id": gce_id(addr.project, "address", addr.name), "name": addr.name,
        "address": addr.address, "prefixLength": addr.prefix_length, "purpose": addr.purpose,
        "addressType": "INTERNAL", "network": f"{base}/global/networks/{addr.network}", "status": addr.status,
        "selfLink": f"{base}/global/addresses/{addr.name}", "ipVersion": "IPV4",
        "labelFingerprint": label_fingerprint(addr.labels),
    }
    if addr.labels:
        body["labels"] = dict(addr.labels)
    if addr.description:
        body["description"] = addr.description
    return body


def firewall_json(rule: Firewall) -> dict[str, Any]:
    base = f"{BASE}/projects/{rule.project}"
    body: dict[str, Any] = {
        "kind": "compute#firewall", "id": gce_id(rule.project, "firewall", rule.name), "name": rule.name,
        "creationTimestamp": rule.creation_timestamp, "description": rule.description,
        "network": f"{base}/global/networks/{rule.network}", "priority": rule.priority,
        "direction": rule.direction, "logConfig": {"enable": False}, "disabled": rule.disabled,
        "selfLink": f"{base}/global/firewalls/{rule.name}",
    }
    for key, value in (("sourceRanges", rule.source_ranges), ("destinationRanges", rule.destination_ranges),
                       ("sourceTags", rule.source_tags), ("targetTags", rule.target_tags),
                       ("allowed", rule.allowed), ("denied", rule.denied)):
        if value:
            body[key] = value
    return body


def operation_json(project: str, op: dict[str, Any]) -> dict[str, Any]:
    where = f"regions/{op['region']}" if op.get("region") else "global"
    body = {
        "kind": "compute#operation", "id": op["id"], "name": op["name"], "operationType": op["operationType"],
        "targetLink": url(op["target"]), "targetId": gce_id(op["target"]), "status": op["status"], "user": USER,
        "progress": op["progress"], "insertTime": op["insertTime"], "startTime": op["startTime"],
        "selfLink": f"{BASE}/projects/{project}/{where}/operations/{op['name']}",
    }
    if op.get("region"):
        body["region"] = f"{BASE}/projects/{project}/regions/{op['region']}"
    for key in ("endTime", "error", "httpErrorStatusCode", "httpErrorMessage"):
        if key in op:
            body[key] = op[key]
    return body


# ---- the routes -------------------------------------------------------------------------------------------


def add_compute_routes(app: web.Application, world: World, *, record: Record | None = None,
                       faults: Faults | None = None) -> None:
    """Mount the compute.v1 routes on `app` (any aiohttp app: the daemon's shares the Kubernetes
    API's port). `record` defaults to the World's."""
    rec = record if record is not None else world.record
    speed = float(getattr(world.clock, "speed", 60.0))

    def route(method: str, path: str, name: str, fn: Route) -> None:
        async def handle(request: web.Request) -> web.StreamResponse:
            rec.count(f"compute:{name}")
            project = request.match_info["project"]
            try:
                if faults is not None and faults.hit(f"compute:{name}"):
                    raise _Unavailable(f"sandbox fault injection: compute:{name} answered 503; retry")
                world.require_service(project, apis.COMPUTE)
                with rec.acting_as(request_agent(request)):
                    return await fn(request, world.resolve_project(project))
            except CloudError as exc:
                status, body = error_json(exc)
                return web.json_response(body, status=status)

        app.router.add_route(method, PREFIX + path, handle)

    def op_response(project: str, op: dict[str, Any]) -> web.Response:
        return web.json_response(operation_json(project, op))

    def peerings_of(project: str, network: str) -> list[Peering]:
        return world.list_peerings(project, network)

    # -- networks
    async def networks_get(request: web.Request, project: str) -> web.Response:
        name = request.match_info["network"]
        return web.json_response(network_json(world.get_network(project, name), peerings_of(project, name)))

    async def networks_list(request: web.Request, project: str) -> web.Response:
        items = [network_json(n, peerings_of(project, n.name)) for n in world.list_networks(project)]
        return list_response(request, "compute#networkList", items, f"{BASE}/projects/{project}/global/networks")

    async def networks_insert(request: web.Request, project: str) -> web.Response:
        body = await body_of(request)
        name = str(body.get("name") or "")
        if "autoCreateSubnetworks" not in body:
            raise InvalidArgument("Invalid value for field 'resource.autoCreateSubnetworks': unset. The sandbox does "
                                  "not emulate legacy networks (the API makes one when it is not set).")
        world.create_network(project, name, auto_create_subnetworks=bool(body["autoCreateSubnetworks"]),
                             mtu=int(body.get("mtu") or 0), description=str(body.get("description") or ""))
        return op_response(project, world.start_compute_op(
            project, "insert", f"projects/{project}/global/networks/{name}", done=True))

    async def networks_delete(request: web.Request, project: str) -> web.Response:
        name = request.match_info["network"]
        world.delete_network(project, name, cascade_subnets=False)
        return op_response(project, world.start_compute_op(
            project, "delete", f"projects/{project}/global/networks/{name}", done=True))

    async def networks_remove_peering(request: web.Request, project: str) -> web.Response:
        name = request.match_info["network"]
        body = await body_of(request)
        world.remove_peering(project, name, str(body.get("name") or ""))
        return op_response(project, world.start_compute_op(
            project, "removePeering", f"projects/{project}/global/networks/{name}", done=True))

    route("GET", "/global/networks", "networks.list", networks_list)
    route("POST", "/global/networks", "networks.insert", networks_insert)
    route("GET", "/global/networks/{network}", "networks.get", networks_get)
    route("DELETE", "/global/networks/{network}", "networks.delete", networks_delete)
    route("POST", "/global/networks/{network}/removePeering", "networks.removePeering", networks_remove_peering)

    # -- subnetworks
    async def subnets_get(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        return web.json_response(subnet_json(project, world.get_subnet(project, m["region"], m["subnetwork"])))

    async def subnets_list(request: web.Request, project: str) -> web.Response:
        region = request.match_info["region"]
        items = [subnet_json(project, s) for s in world.list_subnets(project, region)]
        return list_response(request, "compute#subnetworkList", items,
                     f"{BASE}/projects/{project}/regions/{region}/subnetworks")

    async def subnets_aggregated(request: web.Request, project: str) -> web.Response:
        subs = filtered([subnet_json(project, s) for s in world.list_subnets(project)],
                         request.query.get("filter", ""))
        scopes: dict[str, dict[str, Any]] = {}
        for sub in subs:
            scope = "regions/" + basename(sub["region"])
            scopes.setdefault(scope, {"subnetworks": []})["subnetworks"].append(sub)
        return web.json_response({"kind": "compute#subnetworkAggregatedList",
                                  "id": f"projects/{project}/aggregated/subnetworks", "items": scopes,
                                  "selfLink": f"{BASE}/projects/{project}/aggregated/subnetworks"})

    async def subnets_insert(request: web.Request, project: str) -> web.Response:
        region = request.match_info["region"]
        body = await body_of(request)
        name = str(body.get("name") or "")
        world.create_subnet(project, region, name, network=basename(body.get("network")),
                            ip_cidr_range=str(body.get("ipCidrRange") or ""),
                            secondary_ranges=[dict(r) for r in body.get("secondaryIpRanges") or []])
        return op_response(project, world.start_compute_op(
            project, "insert", f"projects/{project}/regions/{region}/subnetworks/{name}", region=region, done=True))

    async def subnets_delete(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        world.delete_subnet(project, m["region"], m["subnetwork"])
        return op_response(project, world.start_compute_op(
            project, "delete", f"projects/{project}/regions/{m['region']}/subnetworks/{m['subnetwork']}",
            region=m["region"], done=True))

    route("GET", "/aggregated/subnetworks", "subnetworks.aggregatedList", subnets_aggregated)
    route("GET", "/regions/{region}/subnetworks", "subnetworks.list", subnets_list)
    route("POST", "/regions/{region}/subnetworks", "subnetworks.insert", subnets_insert)
    route("GET", "/regions/{region}/subnetworks/{subnetwork}", "subnetworks.get", subnets_get)
    route("DELETE", "/regions/{region}/subnetworks/{subnetwork}", "subnetworks.delete", subnets_delete)

    # -- global addresses
    async def addresses_get(request: web.Request, project: str) -> web.Response:
        return web.json_response(address_json(world.get_address(project, request.match_info["address"])))

    async def addresses_list(request: web.Request, project: str) -> web.Response:
        items = [address_json(a) for a in world.list_addresses(project)]
        return list_response(request, "compute#addressList", items, f"{BASE}/projects/{project}/global/addresses")

    async def addresses_insert(request: web.Request, project: str) -> web.Response:
        body = await body_of(request)
        addr_type = body.get("addressType") or "EXTERNAL"  # the API's default (discovery: addressType)
        if addr_type != "INTERNAL":
            raise InvalidArgument("the sandbox emulates INTERNAL global addresses only (VPC_PEERING ranges)")
        op = world.insert_address(project, str(body.get("name") or ""), network=basename(body.get("network")),
                                  purpose=str(body.get("purpose") or "VPC_PEERING"),
                                  prefix_length=int(body.get("prefixLength") or 16),
                                  address=body.get("address") or None,
                                  labels={str(k): str(v) for k, v in (body.get("labels") or {}).items()},
                                  description=str(body.get("description") or ""))
        return op_response(project, op)

    async def addresses_delete(request: web.Request, project: str) -> web.Response:
        return op_response(project, world.remove_address(project, request.match_info["address"]))

    async def addresses_aggregated(request: web.Request, project: str) -> web.Response:
        """Regional addresses by region, and the global ones under "global" (rest_compute_routers)."""
        items = [address_json(a) for a in world.list_addresses(project)]
        items += [regional_address_json(a) for a in world.list_regional_addresses(project)]
        return aggregated(request, "compute#addressAggregatedList", "addresses", project, "addresses", items,
                          lambda item: "regions/" + basename(item["region"]) if "region" in item else "global")

    route("GET", "/aggregated/addresses", "addresses.aggregatedList", addresses_aggregated)
    route("GET", "/global/addresses", "globalAddresses.list", addresses_list)
    route("POST", "/global/addresses", "globalAddresses.insert", addresses_insert)
    route("GET", "/global/addresses/{address}", "globalAddresses.get", addresses_get)
    route("DELETE", "/global/addresses/{address}", "globalAddresses.delete", addresses_delete)

    # -- firewalls
    async def firewalls_get(request: web.Request, project: str) -> web.Response:
        return web.json_response(firewall_json(world.get_firewall(project, request.match_info["firewall"])))

    async def firewalls_list(request: web.Request, project: str) -> web.Response:
        items = [firewall_json(f) for f in world.list_firewalls(project)]
        return list_response(request, "compute#firewallList", items, f"{BASE}/projects/{project}/global/firewalls")

    async def firewalls_insert(request: web.Request, project: str) -> web.Response:
        b = await body_of(request)
        rule = Firewall(project, str(b.get("name") or ""), basename(b.get("network") or "global/networks/default"),
                        direction=str(b.get("direction") or "INGRESS"), priority=int(b.get("priority", 1000)),
                        source_ranges=list(b.get("sourceRanges") or []),
                        destination_ranges=list(b.get("destinationRanges") or []),
                        source_tags=list(b.get("sourceTags") or []), target_tags=list(b.get("targetTags") or []),
                        allowed=list(b.get("allowed") or []), denied=list(b.get("denied") or []),
                        description=str(b.get("description") or ""), disabled=bool(b.get("disabled")))
        made = world.create_firewall(project, rule)
        return op_response(project, world.start_compute_op(
            project, "insert", f"projects/{project}/global/firewalls/{made.name}", done=True))

    async def firewalls_delete(request: web.Request, project: str) -> web.Response:
        name = request.match_info["firewall"]
        world.delete_firewall(project, name)
        return op_response(project, world.start_compute_op(
            project, "delete", f"projects/{project}/global/firewalls/{name}", done=True))

    add_router_routes(route, world, op_response)

    route("GET", "/global/firewalls", "firewalls.list", firewalls_list)
    route("POST", "/global/firewalls", "firewalls.insert", firewalls_insert)
    route("GET", "/global/firewalls/{firewall}", "firewalls.get", firewalls_get)
    route("DELETE", "/global/firewalls/{firewall}", "firewalls.delete", firewalls_delete)

    # -- regions and machine types (read by `rltui up --check`: rltui/plan/checks.py)
    async def regions_get(request: web.Request, project: str) -> web.Response:
        return web.json_response(region_json(world, project, request.match_info["region"]))

    async def machine_types_get(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        return web.json_response(machine_type_json(world, project, m["zone"], m["machineType"]))

    route("GET", "/regions/{region}", "regions.get", regions_get)
    add_reservation_routes(route, world.reservations)
    route("GET", "/zones/{zone}/machineTypes/{machineType}", "machineTypes.get", machine_types_get)

    # -- operations
    wait_s = min(120.0, 120.0 / speed)  # "the default deadline (2 minutes)", in profile minutes

    async def global_op_get(request: web.Request, project: str) -> web.Response:
        return op_response(project, world.get_compute_op(project, request.match_info["operation"]))

    async def global_op_wait(request: web.Request, project: str) -> web.Response:
        return op_response(project, await world.wait_compute_op(project, request.match_info["operation"],
                                                               timeout=wait_s))

    async def region_op_get(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        return op_response(project, world.get_compute_op(project, m["operation"], m["region"]))

    async def region_op_wait(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        return op_response(project, await world.wait_compute_op(project, m["operation"], m["region"],
                                                               timeout=wait_s))

    route("GET", "/global/operations/{operation}", "globalOperations.get", global_op_get)
    route("POST", "/global/operations/{operation}/wait", "globalOperations.wait", global_op_wait)
    route("GET", "/regions/{region}/operations/{operation}", "regionOperations.get", region_op_get)
    route("POST", "/regions/{region}/operations/{operation}/wait", "regionOperations.wait", region_op_wait)


class _Unavailable(CloudError):
    code = "UNAVAILABLE"


# ---- regions.get and machineTypes.get -------------------------------------------------------------------
#
# Region: {kind compute#region, id, creationTimestamp, name, description, status UP|DOWN, zones[]
# (URLs), quotas[] {metric, limit, usage} (doubles), selfLink, supportsPzs} - the compute.v1
# Region and Quota schemas (google-cloud-compute 1.57 compute_v1.types.Region / Quota; the REST
# reference docs.cloud.google.com/compute/docs/reference/rest/v1/regions/get; a gcloud dump of a
# real region's quotas in that shape: pastebin.com/9MY1rdpX). Only metrics of the Quota.metric
# enum are listed (google-cloud-compute compute_v1.types.Quota.Metric, generated from the
# discovery document, as gcloud's compute messages are): it has PREEMPTIBLE_NVIDIA_H100_GPUS but
# no B200, H200 or H100 MEGA metric, so regions.get says nothing of those GPUs; Google publishes
# them through Cloud Quotas (sandbox/rltui_sandbox/grpc_quotas.py). World.quotas keeps them for the
# node pools' late quota failure (world_gke_pools) and for Cloud Quotas.
# The sandbox's limits: World.quotas where set (`rltui sandbox start --quota METRIC=LIMIT`),
# else DEFAULT_QUOTAS - a sandbox choice large enough for the codelab (a real new project has far
# less GPU quota: that is not emulated). Usage: the GPUs of the World's node pools that are up,
# counted as world_gke_pools counts them for its late quota failure; other metrics report 0.
# Zones: "<region>-a|b|c|d|f" in every region (a sandbox choice: real regions have three or four
# of these letters, e.g. us-east1-b|c|d, us-central1-a|b|c|f).
#
# MachineType: {kind compute#machineType, id, name, description, guestCpus, memoryMb, zone,
# selfLink, isSharedCpu, maximumPersistentDisks, maximumPersistentDisksSizeGb, accelerators[]
# {guestAcceleratorType, guestAcceleratorCount}} (compute_v1.types.MachineType). Sizes from
# the machine-family pages: a4-highgpu-8g 224 vCPUs, 3,968 GB, 8 x nvidia-b200 (Compute Engine
# "Accelerator-optimized machine family", A4); e2-standard-4 4 vCPUs, 16 GB ("General-purpose
# machine family", E2). Which zones offer a type: every zone, unless the World's
# `machine_type_zones` {type: {zone, ...}} says otherwise (set by tests); an unknown type or zone is
# 404 notFound, as machineTypes.get answers for a type a zone lacks.

DEFAULT_QUOTAS: dict[str, float] = {
    "CPUS": 5000.0, "PREEMPTIBLE_CPUS": 0.0, "E2_CPUS": 5000.0, "IN_USE_ADDRESSES": 200.0,
    "STATIC_ADDRESSES": 21.0, "INTERNAL_ADDRESSES": 200.0,
}


def _listed(metric: str) -> bool:
    """A metric regions.get can answer (compute_v1 Quota.Metric)."""
    from google.cloud import compute_v1

    return metric in compute_v1.Quota.Metric.__members__
MACHINE_TYPES: dict[str, dict[str, Any]] = {
    "a4-highgpu-8g": {"guestCpus": 224, "memoryMb": 3968 * 1024, "description": "224 vCPUs, 3968 GB RAM",
                      "accelerators": [{"guestAcceleratorType": "nvidia-b200", "guestAcceleratorCount": 8}]},
    "e2-standard-4": {"guestCpus": 4, "memoryMb": 16384, "description": "Efficient Instance, 4 vCPUs, 16 GB RAM"},
}


class _NotFound(CloudError):
    code = "NOT_FOUND"


def _gpu_usage(world: World, project: str, region: str) -> dict[str, float]:
    from rltui_sandbox.world_gke_pools import _POOL_UP, _pool_gpus, gpu_quota_metric
    from rltui_sandbox.world_model import region_of

    used: dict[str, float] = {}
    for cluster in world.list_clusters(project, "-"):
        if region_of(cluster.location) != region:
            continue
        for np in cluster.node_pools:
            metric = gpu_quota_metric(np)
            if metric and np.status in _POOL_UP:
                used[metric] = used.get(metric, 0.0) + _pool_gpus(np)
    return used


def _zones(region: str) -> list[str]:
    return [f"{region}-{letter}" for letter in "abcdf"]


def region_json(world: World, project: str, region: str) -> dict[str, Any]:
    if not re.fullmatch(r"[a-z]+-[a-z]+[0-9]+", region):
        raise _NotFound(f"The resource 'projects/{project}/regions/{region}' was not found")
    limits = {**DEFAULT_QUOTAS, **{k: float(v) for k, v in world.quotas.items()}}
    used = _gpu_usage(world, project, region)
    return {
        "kind": "compute#region", "id": gce_id("region", region), "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": region, "description": region, "status": "UP",
        "zones": [url(f"projects/{project}/zones/{z}") for z in _zones(region)],
        "quotas": [{"metric": metric, "limit": limit, "usage": used.get(metric, 0.0)}
                   for metric, limit in sorted(limits.items()) if _listed(metric)],
        "selfLink": url(f"projects/{project}/regions/{region}"), "supportsPzs": False,
    }


def machine_type_json(world: World, project: str, zone: str, name: str) -> dict[str, Any]:
    spec = MACHINE_TYPES.get(name)
    offered = world.machine_type_zones
    region = zone.rsplit("-", 1)[0]
    if spec is None or zone not in _zones(region) or (name in offered and zone not in offered[name]):
        raise _NotFound(f"The resource 'projects/{project}/zones/{zone}/machineTypes/{name}' was not found")
    body = {"kind": "compute#machineType", "id": gce_id("machineType", zone, name), "name": name,
            "zone": zone, "selfLink": url(f"projects/{project}/zones/{zone}/machineTypes/{name}"),
            "isSharedCpu": False, "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": "263168",
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00", **spec}
    return body


def sandbox_compute_clients(endpoint: str) -> dict[str, Any]:
    """google.cloud.compute_v1 clients for a sandbox's Compute endpoint ("http://127.0.0.1:PORT"),
    with AnonymousCredentials, whose ExtendedOperation polling also reaches it (see the module
    docstring: the library's own polling client ignores client_options)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    opts = {"api_endpoint": endpoint}
    creds = AnonymousCredentials()
    global_ops = compute_v1.GlobalOperationsClient(client_options=opts, credentials=creds)
    region_ops = compute_v1.RegionOperationsClient(client_options=opts, credentials=creds)
    out: dict[str, Any] = {"global_operations": global_ops, "region_operations": region_ops}
    for key, cls in (("networks", compute_v1.NetworksClient), ("subnetworks", compute_v1.SubnetworksClient),
                     ("global_addresses", compute_v1.GlobalAddressesClient),
                     ("firewalls", compute_v1.FirewallsClient), ("routers", compute_v1.RoutersClient),
                     ("addresses", compute_v1.AddressesClient)):
        client = cls(client_options=opts, credentials=creds)
        services = getattr(client._transport, "_extended_operations_services", None)
        if isinstance(services, dict):
            services["global_operations"] = global_ops
            services["region_operations"] = region_ops
        out[key] = client
    return out

