"""Plumbing shared by the sandbox's REST surfaces for the real gcloud (rest_lustre, rest_container,
rest_servicenetworking, rest_serviceusage, rest_resourcemanager): one aiohttp Application per
API, each on its own loopback port, because their paths collide (lustre and container both answer
`/v1/projects/*/locations/*/operations/*`; serviceusage and servicenetworking both
`/v1/operations/*`) and gcloud's `CLOUDSDK_API_ENDPOINT_OVERRIDES_<API>` for these APIs is the
host root (SOURCES.md#real-gcloud-offline).

- Authorization: any `Bearer` token, or none, is the project owner's, except a token GKE's metadata
  server issued, which stands for its principal: the GKE, IAM and Resource Manager surfaces check
  its roles (iam_authz).
- Errors are Google's JSON error (AIP-193, https://cloud.google.com/apis/design/errors#http_mapping):
  `{"error": {"code": <HTTP>, "message", "status": <google.rpc code name>, "details":
  [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason", "domain", "metadata"}]}}`,
  the HTTP status from the same table (NOT_FOUND 404, ALREADY_EXISTS 409, INVALID_ARGUMENT and
  FAILED_PRECONDITION 400, PERMISSION_DENIED 403, UNIMPLEMENTED 501, ...).
- Kubernetes Engine's errors (RestApi(..., legacy_errors=True), rest_container) also carry the
  older `errors: [{"message", "domain": "global", "reason"}]` beside status/details: Terraform
  decides "busy, retry" from errors[].reason == "failedPrecondition"
  (terraform-provider-google v7.40.0 google/tpgresource/utils.go IsFailedPreconditionError), and
  GKE's REST errors carry these words, as the provider prints them ("googleapi: Error <code>:
  <message>, <reason>"): failedPrecondition (hashicorp/terraform-provider-google 3650, 10366: "...
  is currently upgrading cluster ...", "... is currently deleting a node pool ..."), notFound
  (terraform-provider-google 7851), alreadyExists (terraform-google-modules/
  terraform-google-kubernetes-engine 367), badRequest for INVALID_ARGUMENT (GoogleCloudPlatform/
  ai-on-gke 820, terraform-google-kubernetes-engine 2016, rancher/rancher 12720), accessNotConfigured
  for a disabled API (banzaicloud/cloudinfo 378, GoogleCloudPlatform/k8s-config-connector 492),
  forbidden for any other PERMISSION_DENIED (GKE's IAM refusal, "Error 403: Required
  \"container.clusters.get\" permission(s) for ..., forbidden", 2i2c-org/infrastructure 488; IAM and
  Resource Manager alike, GoogleCloudPlatform/k8s-config-connector 273), aborted for IAM's stale etag
  (openshift/installer's "Error 409: There were concurrent policy changes. ..., aborted").
  Any other code gets the lowerCamel of its name (unavailable, ...): not verified.
- The API gate: `world.require_service(project, api)` before any handler runs, so a disabled API
  is refused 403 PERMISSION_DENIED / SERVICE_DISABLED, as the gRPC and Compute surfaces do.
- Each handler runs as its caller: operations it starts record the request's User-Agent (and
  x-goog-api-client) as their agent (record.Record.acting_as, record.caller_agent).
- Every call is counted in the record as `<api>:<method>` (e.g. `lustre:instances.get`), and the
  fault injector may answer one with 503 UNAVAILABLE on that same channel name.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from aiohttp import web
from google.protobuf import json_format

from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import CloudError, InvalidArgument, page
from rltui_sandbox.record import Record, caller_agent

if TYPE_CHECKING:  # world.py imports modules that import this one (the toolkit's error JSON)
    from rltui_sandbox.world import World

__all__ = ["RestApi", "error_body", "body_of", "lro_json", "proto_json", "serve_on_loopback", "HTTP_STATUS",
           "legacy_reason", "request_agent"]

# google.rpc code name -> HTTP status (google/rpc/code.proto's HTTP Mapping comments)
HTTP_STATUS = {
    "OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401,
    "RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400, "ABORTED": 409, "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500,
}


class _Unavailable(CloudError):
    code = "UNAVAILABLE"


# google.rpc code name -> the errors[].reason GKE's REST errors were seen with (sources above).
LEGACY_REASONS = {
    "FAILED_PRECONDITION": "failedPrecondition", "NOT_FOUND": "notFound", "ALREADY_EXISTS": "alreadyExists",
    "INVALID_ARGUMENT": "badRequest", "PERMISSION_DENIED": "forbidden",
}


def legacy_reason(exc: CloudError) -> str:
    """The errors[].reason word for a refusal (see the module docstring for which are verified)."""
    if exc.reason == "SERVICE_DISABLED":
        return "accessNotConfigured"
    if exc.code in LEGACY_REASONS:
        return LEGACY_REASONS[exc.code]
    head, *rest = exc.code.lower().split("_")
    return head + "".join(word.title() for word in rest)


def error_body(exc: CloudError, *, legacy_errors: bool = False) -> tuple[int, dict[str, Any]]:
    """(HTTP status, Google's error JSON) for a refusal; legacy_errors adds `errors[]` (see above)."""
    status = HTTP_STATUS.get(exc.code, 500)
    body: dict[str, Any] = {"code": status, "message": exc.message, "status": exc.code}
    if legacy_errors:
        body["errors"] = [{"message": exc.message, "domain": "global", "reason": legacy_reason(exc)}]
    if exc.reason:
        body["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": exc.reason,
                            "domain": exc.domain, "metadata": exc.metadata}]
    return status, {"error": body}


def request_agent(request: web.Request) -> str:
    """The caller's user agent: the User-Agent header as received, then x-goog-api-client."""
    return caller_agent(request.headers.get("User-Agent"), request.headers.get("x-goog-api-client"))


async def body_of(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    try:
        data = await request.json()
    except ValueError:
        raise InvalidArgument("Invalid JSON payload received.") from None
    if not isinstance(data, dict):
        raise InvalidArgument("Invalid JSON payload received: the body must be a JSON object.")
    return data


def list_body(key: str, items: list[Any], size: int, token: str,
              convert: Callable[[Any], Any]) -> dict[str, Any]:
    """A REST list response: one page of `items` under `key`, and `nextPageToken` only while
    more remain (AIP-158, as the list methods' discovery documents describe them)."""
    chunk, next_token = page(items, size, token)
    out: dict[str, Any] = {key: [convert(i) for i in chunk]}
    if next_token:
        out["nextPageToken"] = next_token
    return out


def proto_json(msg: Any) -> dict[str, Any]:
    """The proto3 JSON mapping of a proto-plus or raw protobuf message (camelCase, enums by name,
    int64 as strings, defaults omitted) - what Google's REST front ends answer."""
    raw = type(msg).pb(msg) if hasattr(type(msg), "pb") else msg
    return json_format.MessageToDict(raw, preserving_proto_field_name=False)


def lro_json(op: Any) -> dict[str, Any]:
    """A google.longrunning.Operation as REST JSON (`metadata`/`response` with their `@type`)."""
    return proto_json(op)


Handler = Callable[[web.Request, dict[str, str]], Awaitable[Any]]


class RestApi:
    """One API's aiohttp Application. `route(method, path, name, fn, project=...)` registers a
    handler that counts `<prefix>:<name>`, may be faulted, passes the API gate for the project in
    the path, and turns a CloudError into Google's error JSON. `fn(request, match_info)` returns
    a JSON-able object (or a web.Response)."""

    def __init__(self, prefix: str, api: str | None, world: World, *, record: Record | None = None,
                 faults: Faults | None = None, legacy_errors: bool = False) -> None:
        self.prefix, self.api, self.world = prefix, api, world
        self.record = record if record is not None else world.record
        self.faults = faults
        self.legacy_errors = legacy_errors
        self.app = web.Application(client_max_size=8 * 1024 * 1024)

    def route(self, method: str, path: str, name: str, fn: Handler, *, gate: bool = True) -> None:
        channel = f"{self.prefix}:{name}"

        async def handle(request: web.Request) -> web.StreamResponse:
            self.record.count(channel)
            m = dict(request.match_info)
            try:
                if self.faults is not None and self.faults.hit(channel):
                    raise _Unavailable(f"sandbox fault injection: {channel} answered 503; retry")
                project = m.get("project")
                if gate and self.api and project and project != "-":
                    self.world.require_service(project, self.api)
                if project:
                    m["project"] = self.world.resolve_project(project)
                with Record.acting_as(request_agent(request)):
                    out = await fn(request, m)
            except CloudError as exc:
                status, body = error_body(exc, legacy_errors=self.legacy_errors)
                return web.json_response(body, status=status)
            if isinstance(out, web.StreamResponse):
                return out
            return web.json_response(out)

        self.app.router.add_route(method, path, handle)


def loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


async def serve_on_loopback(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start `app` on a fresh loopback port; returns (runner to clean up, "http://127.0.0.1:PORT")."""
    sock = loopback_socket()
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner, f"http://127.0.0.1:{sock.getsockname()[1]}"
