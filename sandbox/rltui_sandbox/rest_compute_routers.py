"""The sandbox's Compute Engine REST routes for Cloud Routers (with their Cloud NATs) and regional
addresses, over the World (world_routers), mounted by rest_compute's add_compute_routes with its
`route` (the record's counter, faults, the API gate, the caller's agent, Google's error JSON).

Paths, methods and fields: the compute.v1 discovery document (google-api-python-client 2.202.0,
googleapiclient/discovery_cache/documents/compute.v1.json, revision 20261106):
- routers.list/insert  GET|POST projects/{project}/regions/{region}/routers
  routers.get/delete   GET|DELETE projects/{project}/regions/{region}/routers/{router}
  routers.aggregatedList GET projects/{project}/aggregated/routers
  Router {kind "compute#router", id, creationTimestamp, name, description, region (URL; "not
  settable as a field in the request body": a body's region is ignored, as Terraform's
  resource_compute_router.go v7.40.0 sends one), network (URL), nats[] (RouterNat: natIps as
  URLs), selfLink}
- addresses.list/insert GET|POST projects/{project}/regions/{region}/addresses
  addresses.get/delete  GET|DELETE projects/{project}/regions/{region}/addresses/{address}
  addresses.aggregatedList GET projects/{project}/aggregated/addresses (in rest_compute, which
  adds the global addresses under scope "global": `gcloud compute addresses list` reads only this
  method and says "By default, global addresses and addresses from all regions are listed",
  Cloud SDK 528 surface/compute/addresses/list.py, MultiScopeLister with aggregation_service
  addresses)
  Address {kind "compute#address", id, creationTimestamp, name, description, address, status
  RESERVING|RESERVED|IN_USE, region (URL), selfLink, users (URLs), labels, labelFingerprint,
  networkTier ("If this field is not specified, it is assumed to be PREMIUM"), addressType,
  ipVersion}. Terraform's google_compute_address sends its labels in the insert's body
  (resource_compute_address.go v7.40.0, `obj["labels"] = effectiveLabelsProp`), so insert takes them.
Insert and delete answer with a regional Operation that is DONE at once (no profile key; see
world_routers), polled through the existing regionOperations routes.

- routers.patch PATCH projects/{project}/regions/{region}/routers/{router}: `nats` and
  `description` as the body gives them (the other fields of a patch are ignored); how
  `gcloud compute routers nats create` and Terraform's google_compute_router_nat add a NAT.

Not emulated: routers.update, BGP, interfaces, STANDARD-tier or INTERNAL regional addresses, an
address given in the insert's body; several addresses in one `gcloud compute addresses create`
(gcloud sends those as one POST to /batch/compute/v1, which the sandbox does not serve).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from rltui_sandbox.grpc_util import InvalidArgument
from rltui_sandbox.rest_compute_common import BASE, AddRoute, basename, filtered, gce_id, list_response, url
from rltui_sandbox.rest_util import body_of
from rltui_sandbox.world import RegionalAddress, Router, World

__all__ = ["add_router_routes", "label_fingerprint", "regional_address_json", "router_json"]


def label_fingerprint(labels: dict[str, str]) -> str:
    """Base64 of 8 bytes that change with the labels: the shape of GCE's labelFingerprint (a
    "hash of the labels set used for optimistic locking", discovery document); GCE's own hash
    function is not reproduced."""
    digest = hashlib.sha256(json.dumps(dict(sorted(labels.items())), separators=(",", ":")).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def router_json(router: Router) -> dict[str, Any]:
    project, region = router.project, router.region
    nats = []
    for nat in router.nats:
        shown = dict(nat)
        shown["natIps"] = [url(f"projects/{project}/regions/{region}/addresses/{ip}") for ip in nat.get("natIps", [])]
        nats.append(shown)
    body: dict[str, Any] = {
        "kind": "compute#router", "id": gce_id(project, "router", region, router.name),
        "creationTimestamp": router.creation_timestamp, "name": router.name,
        "region": url(f"projects/{project}/regions/{region}"),
        "network": url(f"projects/{project}/global/networks/{router.network}"),
        "selfLink": url(router.path), "encryptedInterconnectRouter": False,
    }
    if router.description:
        body["description"] = router.description
    if nats:
        body["nats"] = nats
    return body


def regional_address_json(addr: RegionalAddress) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "compute#address", "id": gce_id(addr.project, "address", addr.region, addr.name),
        "creationTimestamp": addr.creation_timestamp, "name": addr.name, "address": addr.address,
        "status": addr.status, "region": url(f"projects/{addr.project}/regions/{addr.region}"),
        "selfLink": url(addr.path), "networkTier": "PREMIUM", "addressType": addr.address_type,
        "ipVersion": "IPV4", "labelFingerprint": label_fingerprint(addr.labels),
    }
    if addr.description:
        body["description"] = addr.description
    if addr.labels:
        body["labels"] = dict(addr.labels)
    if addr.users:
        body["users"] = [url(u) for u in addr.users]
    return body


def aggregated(request: web.Request, kind: str, key: str, project: str, collection: str,
               items: list[dict[str, Any]], scope_of: Callable[[dict[str, Any]], str]) -> web.Response:
    """An aggregatedList answer: `items` keyed by scope ("regions/us-east1": {key: [...]}), after
    the request's `filter`; one page (as rest_compute's subnetworks.aggregatedList)."""
    scopes: dict[str, dict[str, Any]] = {}
    for item in filtered(items, request.query.get("filter", "")):
        scopes.setdefault(scope_of(item), {key: []})[key].append(item)
    return web.json_response({"kind": kind, "id": f"projects/{project}/aggregated/{collection}", "items": scopes,
                              "selfLink": f"{BASE}/projects/{project}/aggregated/{collection}"})


def add_router_routes(route: AddRoute, world: World,
                      op_response: Callable[[str, dict[str, Any]], web.Response]) -> None:
    """Mount routers.* and the regional addresses.* (but aggregatedList, in rest_compute) with
    rest_compute's `route`; `op_response` answers with a compute#operation."""

    def done_op(project: str, verb: str, target: str, region: str) -> web.Response:
        return op_response(project, world.start_compute_op(project, verb, target, region=region, done=True))

    # -- routers
    async def routers_get(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        return web.json_response(router_json(world.get_router(project, m["region"], m["router"])))

    async def routers_list(request: web.Request, project: str) -> web.Response:
        region = request.match_info["region"]
        items = [router_json(r) for r in world.list_routers(project, region)]
        return list_response(request, "compute#routerList", items,
                             f"{BASE}/projects/{project}/regions/{region}/routers")

    async def routers_aggregated(request: web.Request, project: str) -> web.Response:
        items = [router_json(r) for r in world.list_routers(project)]
        return aggregated(request, "compute#routerAggregatedList", "routers", project, "routers", items,
                          lambda item: "regions/" + basename(item["region"]))

    async def routers_insert(request: web.Request, project: str) -> web.Response:
        region = request.match_info["region"]
        body = await body_of(request)
        name = str(body.get("name") or "")
        network = basename(body.get("network"))
        if not network:
            raise InvalidArgument("Invalid value for field 'resource.network': ''. A router needs a network.")
        nats = [dict(n) for n in body.get("nats") or []]
        world.create_router(project, region, name, network=network, nats=nats,
                            description=str(body.get("description") or ""))
        return done_op(project, "insert", f"projects/{project}/regions/{region}/routers/{name}", region)

    async def routers_patch(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        body = await body_of(request)
        nats = [dict(n) for n in body["nats"] or []] if "nats" in body else None
        description = str(body["description"] or "") if "description" in body else None
        world.update_router(project, m["region"], m["router"], nats=nats, description=description)
        return done_op(project, "patch", f"projects/{project}/regions/{m['region']}/routers/{m['router']}",
                       m["region"])

    async def routers_delete(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        world.delete_router(project, m["region"], m["router"])
        return done_op(project, "delete", f"projects/{project}/regions/{m['region']}/routers/{m['router']}",
                       m["region"])

    route("GET", "/aggregated/routers", "routers.aggregatedList", routers_aggregated)
    route("GET", "/regions/{region}/routers", "routers.list", routers_list)
    route("POST", "/regions/{region}/routers", "routers.insert", routers_insert)
    route("GET", "/regions/{region}/routers/{router}", "routers.get", routers_get)
    route("PATCH", "/regions/{region}/routers/{router}", "routers.patch", routers_patch)
    route("DELETE", "/regions/{region}/routers/{router}", "routers.delete", routers_delete)

    # -- regional addresses
    async def addresses_get(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        return web.json_response(regional_address_json(world.get_regional_address(project, m["region"], m["address"])))

    async def addresses_list(request: web.Request, project: str) -> web.Response:
        region = request.match_info["region"]
        items = [regional_address_json(a) for a in world.list_regional_addresses(project, region)]
        return list_response(request, "compute#addressList", items,
                             f"{BASE}/projects/{project}/regions/{region}/addresses")

    async def addresses_insert(request: web.Request, project: str) -> web.Response:
        region = request.match_info["region"]
        body = await body_of(request)
        name = str(body.get("name") or "")
        tier = str(body.get("networkTier") or "PREMIUM")
        if tier != "PREMIUM":
            raise InvalidArgument(f"Invalid value for field 'resource.networkTier': '{tier}'. The sandbox emulates "
                                  "PREMIUM addresses only.")
        if body.get("address"):
            raise InvalidArgument("Invalid value for field 'resource.address': the sandbox picks a regional "
                                  "address itself and does not promote a given one.")
        world.create_regional_address(project, region, name, address_type=str(body.get("addressType") or "EXTERNAL"),
                                      labels={str(k): str(v) for k, v in (body.get("labels") or {}).items()},
                                      description=str(body.get("description") or ""))
        return done_op(project, "insert", f"projects/{project}/regions/{region}/addresses/{name}", region)

    async def addresses_delete(request: web.Request, project: str) -> web.Response:
        m = request.match_info
        world.delete_regional_address(project, m["region"], m["address"])
        return done_op(project, "delete", f"projects/{project}/regions/{m['region']}/addresses/{m['address']}",
                       m["region"])

    route("GET", "/regions/{region}/addresses", "addresses.list", addresses_list)
    route("POST", "/regions/{region}/addresses", "addresses.insert", addresses_insert)
    route("GET", "/regions/{region}/addresses/{address}", "addresses.get", addresses_get)
    route("DELETE", "/regions/{region}/addresses/{address}", "addresses.delete", addresses_delete)
