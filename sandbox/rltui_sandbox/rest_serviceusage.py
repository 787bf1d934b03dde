"""The sandbox's Service Usage REST API (serviceusage.googleapis.com v1), for the real
`gcloud services enable|list` - the same World state as the gRPC ServiceUsage (grpc_serviceusage.py).

Paths: the serviceusage.v1 discovery document (google-api-python-client 2.202.0,
`googleapiclient/discovery_cache/documents/serviceusage.v1.json`):
- GET  v1/{parent=projects/*}/services       (?filter=state:ENABLED|state:DISABLED, pageSize <= 200
                                               (default 50), pageToken)
- GET  v1/{name=projects/*/services/*}
- GET  v1/{parent=projects/*}/services:batchGet (?names=..., at most 30)
- POST v1/{name=projects/*/services/*}:enable
- POST v1/{parent=projects/*}/services:batchEnable (body {"serviceIds": [...]}, at most 20)
- GET  v1/{name=operations/*}, GET v1/operations (the sandbox lists none: the real list is
  "not supported" for most callers - not verified)
Service JSON is google.api.serviceusage.v1.Service in the proto3 JSON mapping (name/parent by
project NUMBER, state ENABLED|DISABLED, config.name/title); operations are google.longrunning
Operation JSON named `operations/acf.p2-<number>-<uuid>`, done after the profile's enable_apis.
The gate is serviceusage.googleapis.com itself (default-enabled). Counted as `serviceusage:<method>`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from google.cloud import service_usage_v1 as su

from rltui_sandbox import services as apis
from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import InvalidArgument
from rltui_sandbox.record import Record
from rltui_sandbox.rest_util import RestApi, body_of, list_body, lro_json, proto_json
from rltui_sandbox.world import World

__all__ = ["serviceusage_app"]

MAX_PAGE, DEFAULT_PAGE = 200, 50
_STATES = {"": None, "state:ENABLED": su.State.ENABLED, "state:DISABLED": su.State.DISABLED}


def serviceusage_app(world: World, *, record: Record | None = None, faults: Faults | None = None) -> web.Application:
    api = RestApi("serviceusage", apis.SERVICE_USAGE, world, record=record, faults=faults)

    def catalog(project: str) -> list[str]:
        return sorted(set(world.list_services(project)) | set(apis.CODELAB_APIS) | set(apis.TITLES))

    async def list_(request: web.Request, m: dict[str, str]) -> Any:
        q = request.query
        try:
            size = int(q.get("pageSize", "0") or 0)
        except ValueError:
            raise InvalidArgument(f"Invalid value for pageSize: {q['pageSize']!r}") from None
        if not 0 <= size <= MAX_PAGE:
            raise InvalidArgument(f"Requested page size cannot exceed {MAX_PAGE}.")
        wanted = q.get("filter", "").replace(" ", "")
        if wanted not in _STATES:
            raise InvalidArgument(f"Invalid filter {q.get('filter')!r}: the allowed filters are state:ENABLED "
                                  "and state:DISABLED")
        items = [world.get_service(m["project"], s) for s in catalog(m["project"])]
        if _STATES[wanted] is not None:
            items = [s for s in items if s.state == _STATES[wanted]]
        return list_body("services", items, size or DEFAULT_PAGE, q.get("pageToken", ""), proto_json)

    async def get(request: web.Request, m: dict[str, str]) -> Any:
        return proto_json(world.get_service(m["project"], m["service"]))

    async def batch_get(request: web.Request, m: dict[str, str]) -> Any:
        names = request.query.getall("names", [])
        if len(names) > 30:
            raise InvalidArgument(f"names lists {len(names)} services: a request can get at most 30")
        return {"services": [proto_json(world.get_service(m["project"], n.rsplit("/", 1)[-1])) for n in names]}

    async def enable(request: web.Request, m: dict[str, str]) -> Any:
        return lro_json(world.start_enable_services(m["project"], [m["service"]], batch=False))

    async def batch_enable(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        ids = body.get("serviceIds")
        if not isinstance(ids, list):
            raise InvalidArgument("serviceIds must be a list of service names")
        return lro_json(world.start_enable_services(m["project"], [str(i) for i in ids], batch=True))

    async def op_get(request: web.Request, m: dict[str, str]) -> Any:
        return lro_json(world.get_operation(f"operations/{m['operation']}"))

    async def op_list(request: web.Request, m: dict[str, str]) -> Any:
        return {"operations": []}

    p = "/v1/projects/{project}/services"
    api.route("GET", p, "services.list", list_)
    api.route("GET", p + ":batchGet", "services.batchGet", batch_get)
    api.route("POST", p + ":batchEnable", "services.batchEnable", batch_enable)
    api.route("POST", p + "/{service:[^/:]+}:enable", "services.enable", enable)
    api.route("GET", p + "/{service:[^/:]+}", "services.get", get)
    api.route("GET", "/v1/operations/{operation}", "operations.get", op_get)
    api.route("GET", "/v1/operations", "operations.list", op_list)
    return api.app
