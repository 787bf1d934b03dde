"""The sandbox's Managed Lustre REST API (lustre.googleapis.com v1), for the real `gcloud lustre`.

Lustre ships no discovery document; the paths are the `google.api.http` rules its own Python
client encodes (google-cloud-lustre, lustre_v1/services/lustre/transports/rest_base.py):

- POST   /v1/{parent=projects/*/locations/*}/instances  (?instanceId=&requestId=, body: Instance)
- GET    /v1/{name=projects/*/locations/*/instances/*}
- GET    /v1/{parent=projects/*/locations/*}/instances  (?pageSize=&pageToken=; location `-` = all)
- DELETE /v1/{name=projects/*/locations/*/instances/*}  (?requestId=)
- POST   /v1/{name=projects/*/locations/*/instances/*}:exportData  (body: ExportDataRequest)
- GET    /v1/{name=projects/*/locations/*/operations/*}, GET /v1/{name=projects/*/locations/*}/operations,
  DELETE .../operations/*, POST .../operations/*:cancel  (the google.longrunning mixin rules there)

Bodies are the proto3 JSON mapping of lustre_v1 messages (camelCase; `Instance.to_json`), and
operations are google.longrunning.Operation JSON with `metadata`/`response` `@type`d. The
instance state machine (CREATING -> ACTIVE after the profile's lustre_create, quota and late
failures, DELETING) is the World's, shared with the gRPC surface (grpc_lustre.py).
Calls are counted as `lustre:<collection>.<method>`; the API gate is lustre.googleapis.com.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from google.cloud import lustre_v1

from rltui_sandbox import services as apis
from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import InvalidArgument
from rltui_sandbox.record import Record
from rltui_sandbox.rest_util import RestApi, body_of, list_body, lro_json, proto_json
from rltui_sandbox.world import World

__all__ = ["lustre_app"]

LOC = "/v1/projects/{project}/locations/{location}"


def _size(request: web.Request) -> int:
    try:
        return int(request.query.get("pageSize", "0") or 0)
    except ValueError:
        raise InvalidArgument(f"Invalid value for pageSize: {request.query['pageSize']!r}") from None


def lustre_app(world: World, *, record: Record | None = None, faults: Faults | None = None) -> web.Application:
    api = RestApi("lustre", apis.LUSTRE, world, record=record, faults=faults)

    async def create(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        instance_id = request.query.get("instanceId", "")
        if not instance_id:
            raise InvalidArgument("instance_id is required")
        inst = lustre_v1.Instance.from_json(_json(body), ignore_unknown_fields=True)
        op = world.create_lustre_instance(m["project"], m["location"], instance_id, inst,
                                          request_id=request.query.get("requestId", ""))
        return lro_json(op)

    async def get(request: web.Request, m: dict[str, str]) -> Any:
        return proto_json(world.get_lustre_instance(m["project"], m["location"], m["instance"]))

    async def list_(request: web.Request, m: dict[str, str]) -> Any:
        return list_body("instances", world.list_lustre_instances(m["project"], m["location"]),
                         _size(request), request.query.get("pageToken", ""), proto_json)

    async def delete(request: web.Request, m: dict[str, str]) -> Any:
        return lro_json(world.delete_lustre_instance(m["project"], m["location"], m["instance"],
                                                     request_id=request.query.get("requestId", "")))

    async def export(request: web.Request, m: dict[str, str]) -> Any:
        req = lustre_v1.ExportDataRequest.from_json(_json(await body_of(request)), ignore_unknown_fields=True)
        return lro_json(world.export_lustre_data(m["project"], m["location"], m["instance"], req.lustre_path.path,
                                                 req.gcs_path.uri, request_id=req.request_id))

    def op_name(m: dict[str, str]) -> str:
        return f"projects/{m['project']}/locations/{m['location']}/operations/{m['operation']}"

    async def op_get(request: web.Request, m: dict[str, str]) -> Any:
        return lro_json(world.get_operation(op_name(m)))

    async def op_list(request: web.Request, m: dict[str, str]) -> Any:
        return list_body("operations", world.list_operations(f"projects/{m['project']}/locations/{m['location']}"),
                         _size(request), request.query.get("pageToken", ""), lro_json)

    async def op_delete(request: web.Request, m: dict[str, str]) -> Any:
        world.delete_operation(op_name(m))
        return {}

    async def op_cancel(request: web.Request, m: dict[str, str]) -> Any:
        world.cancel_operation(op_name(m))
        return {}

    api.route("POST", LOC + "/instances", "instances.create", create)
    api.route("GET", LOC + "/instances", "instances.list", list_)
    api.route("GET", LOC + "/instances/{instance}", "instances.get", get)
    api.route("DELETE", LOC + "/instances/{instance}", "instances.delete", delete)
    api.route("POST", LOC + "/instances/{instance:[^/:]+}:exportData", "instances.exportData", export)
    api.route("GET", LOC + "/operations", "operations.list", op_list)
    api.route("GET", LOC + "/operations/{operation}", "operations.get", op_get)
    api.route("DELETE", LOC + "/operations/{operation}", "operations.delete", op_delete)
    # aiohttp's `{operation}` stops at "/" but not at ":": match ":cancel" by a regex.
    api.route("POST", LOC + "/operations/{operation:[^/:]+}:cancel", "operations.cancel", op_cancel)
    return api.app


def _json(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body)
