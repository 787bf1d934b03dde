"""The sandbox's Service Networking REST API (servicenetworking.googleapis.com v1), for the real
`gcloud services vpc-peerings connect|list|update|delete` - the same World peerings the fake
gcloud's control routes use (world_network.py: connect_peering, update_peering, delete_peering,
with the Lustre-still-using-it refusal of SOURCES.md#servicenetworking-peering-delete).

Paths and bodies: the servicenetworking.v1 discovery document (google-api-python-client 2.202.0,
`googleapiclient/discovery_cache/documents/servicenetworking.v1.json`):
- POST  v1/{parent=services/*}/connections               (create; body Connection {network,
        reservedPeeringRanges}) -> Operation
- GET   v1/{parent=services/*}/connections?network=projects/{number}/global/networks/{n}  (list;
        `network` is required - "projects/{project}" may be a number or an ID)
- PATCH v1/{name=services/*/connections/*}?force=&updateMask=  (patch = `update [--force]`)
- POST  v1/{name=services/*/connections/*}                (deleteConnection; body {consumerNetwork})
- GET   v1/{name=operations/*}
Connection JSON: {network: "projects/<NUMBER>/global/networks/<n>", peering:
"servicenetworking-googleapis-com", reservedPeeringRanges, service: "services/<service>"}.

The World's peering calls take the profile's peering_connect / peering_delete time and are
coroutines: each request starts one as a task behind an Operation named
`operations/pssn.p24-<number>-<uuid>` (the shape gcloud prints, e.g. "Operation
"operations/pssn.p24-123-..." finished successfully." - the `p24` part is not verified), done with
the Connection (or Empty) as `response`, or with the refusal as `error` {code, message}. Whether
Google refuses a bad range at request time or in the operation is not verified: the sandbox's
checks run inside the task, so both `connect` and `--async` see them in the operation. The
gate is servicenetworking.googleapis.com in the network's project. Counted as
`servicenetworking:<method>`.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any, Awaitable

import grpc
from aiohttp import web

from rltui_sandbox import services as apis
from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import CloudError, InvalidArgument, NotFound, rpc_code
from rltui_sandbox.record import Record
from rltui_sandbox.rest_util import RestApi, body_of
from rltui_sandbox.world import Peering, World, project_number

__all__ = ["servicenetworking_app", "connection_json"]

_NETWORK = re.compile(r"^projects/(?P<project>[^/]+)/global/networks/(?P<network>[^/]+)$")
CONNECTION_TYPE = "type.googleapis.com/google.cloud.servicenetworking.v1.Connection"
EMPTY_TYPE = "type.googleapis.com/google.protobuf.Empty"


def connection_json(p: Peering) -> dict[str, Any]:
    return {"network": f"projects/{project_number(p.project)}/global/networks/{p.network}", "peering": p.name,
            "reservedPeeringRanges": list(p.ranges), "service": f"services/{p.service}"}


def servicenetworking_app(world: World, *, record: Record | None = None,
                          faults: Faults | None = None) -> web.Application:
    api = RestApi("servicenetworking", None, world, record=record, faults=faults)
    ops: dict[str, dict[str, Any]] = {}
    tasks: set[asyncio.Task[Any]] = set()

    def network_of(value: Any) -> tuple[str, str]:
        match = _NETWORK.match(str(value or ""))
        if match is None:
            raise InvalidArgument(f"network {value!r} is invalid: expected projects/{{project}}/global/networks/"
                                  "{network}")
        project = world.resolve_project(match["project"])
        world.require_service(project, apis.SERVICE_NETWORKING)
        return project, match["network"]

    def start(project: str, work: Awaitable[Any]) -> dict[str, Any]:
        name = f"operations/pssn.p24-{project_number(project)}-{uuid.uuid4()}"
        ops[name] = {"name": name, "done": False}

        async def run() -> None:
            try:
                result = await work
            except CloudError as exc:
                code = exc.status_code if exc.code in grpc.StatusCode.__members__ else grpc.StatusCode.UNKNOWN
                ops[name] = {"name": name, "done": True, "error": {"code": rpc_code(code), "message": exc.message}}
                return
            response = ({"@type": CONNECTION_TYPE, **connection_json(result)} if isinstance(result, Peering)
                        else {"@type": EMPTY_TYPE})
            ops[name] = {"name": name, "done": True, "response": response}

        task = asyncio.ensure_future(run())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return dict(ops[name])

    def service_of(m: dict[str, str]) -> str:
        return m["service"]

    async def create(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        project, network = network_of(body.get("network"))
        ranges = [str(r) for r in body.get("reservedPeeringRanges") or []]
        return start(project, world.connect_peering(project, network, ranges, service_of(m)))

    async def list_(request: web.Request, m: dict[str, str]) -> Any:
        if not request.query.get("network"):
            raise InvalidArgument("network is required: projects/{project}/global/networks/{network}")
        project, network = network_of(request.query["network"])
        world.get_network(project, network)
        # "services/-" lists every peering service (servicenetworking v1 discovery document,
        # services.connections.list); gcloud sends it when --service is left out.
        peerings = [p for p in world.list_peerings(project, network) if service_of(m) in ("-", p.service)]
        return {"connections": [connection_json(p) for p in peerings]}

    async def patch(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        project, network = network_of(body.get("network"))
        ranges = [str(r) for r in body.get("reservedPeeringRanges") or []]
        force = request.query.get("force", "false").lower() == "true"
        return start(project, world.update_peering(project, network, ranges, service_of(m), force=force))

    async def delete(request: web.Request, m: dict[str, str]) -> Any:
        body = await body_of(request)
        project, network = network_of(body.get("consumerNetwork"))
        return start(project, world.delete_peering(project, network, service_of(m)))

    async def op_get(request: web.Request, m: dict[str, str]) -> Any:
        name = f"operations/{m['operation']}"
        if name not in ops:
            raise NotFound(f"Operation '{name}' was not found")
        return dict(ops[name])

    base = "/v1/services/{service:[^/:]+}/connections"
    api.route("POST", base, "services.connections.create", create)
    api.route("GET", base, "services.connections.list", list_)
    api.route("PATCH", base + "/{connection:[^/:]+}", "services.connections.patch", patch)
    api.route("POST", base + "/{connection:[^/:]+}", "services.connections.deleteConnection", delete)
    api.route("POST", base + "/{connection:[^/:]+}:deleteConnection", "services.connections.deleteConnection",
              delete)
    api.route("GET", "/v1/operations/{operation}", "operations.get", op_get)

    async def on_cleanup(app: web.Application) -> None:
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    api.app.on_cleanup.append(on_cleanup)
    return api.app
