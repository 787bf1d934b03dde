"""The sandbox's Compute Engine zonal reservations: reservations.get and reservations.list, over
the World's `reservations`, mounted by rest_compute's add_compute_routes with its `route`.

Paths and fields: google-cloud-compute 1.57.0 (services/reservations/transports/rest_base.py:
GET /compute/v1/projects/{project}/zones/{zone}/reservations[/{reservation}]; types/compute.py
Reservation {kind, id, creationTimestamp, name, selfLink, zone (URL), status CREATING|DELETING|
INVALID|READY|UPDATING, specificReservationRequired ("If the field is set, then only VMs that
target the reservation by name can consume"), specificReservation AllocationSpecificSKUReservation
{count, inUseCount (int64: strings in JSON), instanceProperties {machineType: "name only"}}}).
A missing one is 404 notFound "The resource 'projects/P/zones/Z/reservations/N' was not found",
as every compute get (rest_compute).

The World's `reservations` maps (project, zone) to {name: Reserved}; tests set it, as they set
`machine_type_zones`. Not emulated: insert/delete/resize (a reservation is made outside rltui,
so the sandbox has no command for it yet), shared reservations, aggregated lists, blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from rltui_sandbox.grpc_util import NotFound
from rltui_sandbox.rest_compute_common import BASE, AddRoute, gce_id, list_response, url

__all__ = ["Reserved", "add_reservation_routes", "reservation_json"]


@dataclass(frozen=True)
class Reserved:
    machine_type: str             # e.g. a4-highgpu-8g
    count: int
    in_use: int = 0
    specific_required: bool = True
    status: str = "READY"


def reservation_json(project: str, zone: str, name: str, r: Reserved) -> dict[str, Any]:
    path = f"projects/{project}/zones/{zone}/reservations/{name}"
    return {"kind": "compute#reservation", "id": gce_id("reservation", project, zone, name), "name": name,
            "creationTimestamp": "2026-01-01T00:00:00.000-08:00", "selfLink": url(path),
            "zone": url(f"projects/{project}/zones/{zone}"), "status": r.status,
            "specificReservationRequired": r.specific_required,
            "specificReservation": {"count": str(r.count), "inUseCount": str(r.in_use),
                                    "instanceProperties": {"machineType": r.machine_type}}}


def add_reservation_routes(route: AddRoute, reservations: dict[tuple[str, str], dict[str, Reserved]]) -> None:
    async def get(request: web.Request, project: str) -> web.Response:
        zone, name = request.match_info["zone"], request.match_info["reservation"]
        found = reservations.get((project, zone), {}).get(name)
        if found is None:
            raise NotFound(f"The resource 'projects/{project}/zones/{zone}/reservations/{name}' was not found")
        return web.json_response(reservation_json(project, zone, name, found))

    async def list_(request: web.Request, project: str) -> web.Response:
        zone = request.match_info["zone"]
        items = [reservation_json(project, zone, n, r) for n, r in sorted(reservations.get((project, zone), {}).items())]
        return list_response(request, "compute#reservationList", items,
                             f"{BASE}/projects/{project}/zones/{zone}/reservations")

    route("GET", "/zones/{zone}/reservations", "reservations.list", list_)
    route("GET", "/zones/{zone}/reservations/{reservation}", "reservations.get", get)
