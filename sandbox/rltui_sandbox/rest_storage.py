"""The sandbox's Cloud Storage JSON API (storage/v1), for the real `gcloud storage` (through
CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE, manage.tool_env) and google-cloud-storage (its
client_options api_endpoint: the host root).

The paths and bodies are the JSON API reference's (https://cloud.google.com/storage/docs/json_api/v1):
- POST /storage/v1/b?project=P (body: a bucket resource, `name` required)       buckets.insert
- GET  /storage/v1/b?project=P                                                 buckets.list
- GET  /storage/v1/b/{bucket}                                                  buckets.get
- GET  /storage/v1/b/{bucket}/o?prefix=&delimiter=&maxResults=&pageToken=      objects.list
  (`prefixes` lists what the delimiter rolled up, as the reference's response says)
- GET  /storage/v1/b/{bucket}/o/{object}  (alt=media: the bytes)               objects.get
- GET  /download/storage/v1/b/{bucket}/o/{object}?alt=media  (the media link gcloud builds:
  googlecloudsdk/api_lib/storage/gcs_json/client.py _get_download_link, SDK 528)
- POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name=N (body: the bytes), or
  uploadType=multipart (multipart/related: the resource's JSON, then the bytes)  objects.insert
gcloud's override for this API includes the version path: its generated client's BASE_URL is
`https://storage.googleapis.com/storage/v1/` (googlecloudsdk/generated_clients/apis/storage/v1/
storage_v1_client.py), and gcs_json/client.py reads `api_endpoint_overrides/storage` as that
(SOURCES.md#gcloud-storage-override).

Errors are the JSON API's own shape (its status-codes page): `{"error": {"code", "message",
"errors": [{"domain": "global", "reason", "message"}]}}`, the reasons notFound, forbidden,
conflict, invalid (world_storage.py says which refusal is which). Calls are counted as
`storage:<collection>.<method>`; the fault injector may answer one with 503 on that channel.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_util import CloudError, InvalidArgument, page
from rltui_sandbox.record import Record
from rltui_sandbox.rest_util import HTTP_STATUS, request_agent
from rltui_sandbox.world import World
from rltui_sandbox.world_model import project_number
from rltui_sandbox.world_storage import Bucket, GcsObject

__all__ = ["storage_app"]

STORAGE_API = "storage.googleapis.com"
# the JSON API's reasons (status-codes page) by google.rpc code, when a refusal names none
_REASONS = {"NOT_FOUND": "notFound", "PERMISSION_DENIED": "forbidden", "ALREADY_EXISTS": "conflict",
            "INVALID_ARGUMENT": "invalid", "FAILED_PRECONDITION": "conditionNotMet", "UNAVAILABLE": "backendError"}

class _Unavailable(CloudError):
    code = "UNAVAILABLE"


Handler = Callable[[web.Request], Awaitable[Any]]


def error_json(exc: CloudError) -> tuple[int, dict[str, Any]]:
    status = HTTP_STATUS.get(exc.code, 500)
    reason = exc.reason or _REASONS.get(exc.code, "backendError")
    return status, {"error": {"code": status, "message": exc.message,
                              "errors": [{"message": exc.message, "domain": "global", "reason": reason}]}}


def bucket_json(base: str, b: Bucket) -> dict[str, Any]:
    return {"kind": "storage#bucket", "id": b.name, "selfLink": f"{base}storage/v1/b/{b.name}", "name": b.name,
            "projectNumber": str(project_number(b.project)), "metageneration": "1", "location": b.location,
            "locationType": "multi-region" if b.location in ("US", "EU", "ASIA") else "region",
            "storageClass": "STANDARD", "etag": "CAE=", "timeCreated": b.created, "updated": b.created,
            "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True},
                                 "publicAccessPrevention": "inherited"}}


def object_json(base: str, bucket: str, o: GcsObject) -> dict[str, Any]:
    quoted = quote(o.name, safe="")
    return {"kind": "storage#object", "id": f"{bucket}/{o.name}/{o.generation}",
            "selfLink": f"{base}storage/v1/b/{bucket}/o/{quoted}",
            "mediaLink": f"{base}download/storage/v1/b/{bucket}/o/{quoted}?generation={o.generation}&alt=media",
            "name": o.name, "bucket": bucket, "generation": str(o.generation), "metageneration": "1",
            "contentType": o.content_type, "storageClass": "STANDARD", "size": str(o.size), "md5Hash": o.md5,
            "etag": "CAE=", "timeCreated": o.created, "updated": o.created, "timeStorageClassUpdated": o.created}


def _base(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}/"


def _int(request: web.Request, name: str) -> int:
    try:
        return int(request.query.get(name, "0") or 0)
    except ValueError:
        raise InvalidArgument(f"Invalid value for {name}: {request.query[name]!r}") from None


def _multipart(content_type: str, body: bytes) -> tuple[dict[str, Any], bytes, str]:
    """(metadata, data, the data part's type) of a multipart/related upload: the object's JSON
    resource, then its bytes (the JSON API's multipart upload). apitools quotes the boundary with
    single quotes (boundary='===...=='), which aiohttp's reader does not take: parsed here."""
    params = dict(p.strip().partition("=")[::2] for p in content_type.split(";")[1:])
    boundary = params.get("boundary", "").strip("'\"").encode()
    if not boundary:
        raise InvalidArgument("A multipart upload needs a boundary in its Content-Type.")
    parts = []
    for chunk in body.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, content = chunk.lstrip(b"\r\n").partition(b"\r\n\r\n")
        if not _:
            head, _, content = chunk.lstrip(b"\n").partition(b"\n\n")
        headers = {k.strip().lower(): v.strip() for k, _s, v in
                   (line.decode("latin-1").partition(":") for line in head.splitlines() if b":" in line)}
        parts.append((headers, content[:-2] if content.endswith(b"\r\n") else content.removesuffix(b"\n")))
    if len(parts) != 2:
        raise InvalidArgument("A multipart upload has the object's metadata, then its data.")
    try:
        meta = json.loads(parts[0][1] or b"{}")
    except ValueError:
        raise InvalidArgument("Invalid JSON payload received.") from None
    return meta, parts[1][1], parts[1][0].get("content-type", "application/octet-stream")


def storage_app(world: World, *, record: Record | None = None, faults: Faults | None = None) -> web.Application:
    rec = record if record is not None else world.record
    app = web.Application(client_max_size=64 * 1024 * 1024)

    def route(method: str, path: str, name: str, fn: Handler) -> None:
        channel = f"storage:{name}"

        async def handle(request: web.Request) -> web.StreamResponse:
            rec.count(channel)
            try:
                if faults is not None and faults.hit(channel):
                    raise _Unavailable(f"sandbox fault injection: {channel} answered 503; retry")
                with Record.acting_as(request_agent(request)):
                    out = await fn(request)
            except CloudError as exc:
                status, body = error_json(exc)
                return web.json_response(body, status=status)
            return out if isinstance(out, web.StreamResponse) else web.json_response(out)

        app.router.add_route(method, path, handle)

    def project_of(request: web.Request) -> str:
        project = request.query.get("project", "")
        if not project:
            raise InvalidArgument("Required parameter: project", reason="required")
        world.require_service(project, STORAGE_API)
        return world.resolve_project(project)

    async def bucket_insert(request: web.Request) -> Any:
        project = project_of(request)
        try:
            body = await request.json() if request.can_read_body else {}
        except ValueError:
            raise InvalidArgument("Invalid JSON payload received.") from None
        if not isinstance(body, dict) or not body.get("name"):
            raise InvalidArgument("Required field: name", reason="required")
        return bucket_json(_base(request), world.create_bucket(project, str(body["name"]),
                                                               str(body.get("location") or "")))

    async def bucket_list(request: web.Request) -> Any:
        chunk, token = page(world.list_buckets(project_of(request)), _int(request, "maxResults"),
                            request.query.get("pageToken", ""))
        out: dict[str, Any] = {"kind": "storage#buckets", "items": [bucket_json(_base(request), b) for b in chunk]}
        if token:
            out["nextPageToken"] = token
        return out

    async def bucket_get(request: web.Request) -> Any:
        return bucket_json(_base(request), world.get_bucket(request.match_info["bucket"]))

    async def object_list(request: web.Request) -> Any:
        bucket = request.match_info["bucket"]
        items, prefixes = world.list_objects(bucket, request.query.get("prefix", ""),
                                             request.query.get("delimiter", ""))
        # One page holds objects and prefixes alike, in name order (maxResults counts both).
        entries = sorted([(o.name, o) for o in items] + [(p, None) for p in prefixes], key=lambda e: e[0])
        chunk, token = page(entries, _int(request, "maxResults"), request.query.get("pageToken", ""))
        out: dict[str, Any] = {"kind": "storage#objects"}
        objects = [object_json(_base(request), bucket, o) for _, o in chunk if o is not None]
        rolled = [name for name, o in chunk if o is None]
        if objects:
            out["items"] = objects
        if rolled:
            out["prefixes"] = rolled
        if token:
            out["nextPageToken"] = token
        return out

    async def object_get(request: web.Request) -> Any:
        bucket = request.match_info["bucket"]
        obj = world.get_object(bucket, request.match_info["object"])
        if request.query.get("alt") == "media" or request.path.startswith("/download/"):
            return web.Response(body=world.object_data(obj), content_type=obj.content_type)
        return object_json(_base(request), bucket, obj)

    async def object_insert(request: web.Request) -> Any:
        bucket = request.match_info["bucket"]
        kind = request.query.get("uploadType", "")
        if kind == "media":
            name, data, content_type = request.query.get("name", ""), await request.read(), request.content_type
        elif kind == "multipart":
            meta, data, content_type = _multipart(request.headers.get("Content-Type", ""), await request.read())
            name = str(meta.get("name") or request.query.get("name", ""))
            content_type = str(meta.get("contentType") or content_type)
        else:
            raise InvalidArgument(f"Upload type {kind!r} is not supported here: use media or multipart"
                                  " (resumable uploads are not acted out)")
        return object_json(_base(request), bucket, world.put_object(bucket, name, data, content_type))

    route("POST", "/storage/v1/b", "buckets.insert", bucket_insert)
    route("GET", "/storage/v1/b", "buckets.list", bucket_list)
    route("GET", "/storage/v1/b/{bucket}", "buckets.get", bucket_get)
    route("GET", "/storage/v1/b/{bucket}/o", "objects.list", object_list)
    route("GET", "/storage/v1/b/{bucket}/o/{object:.+}", "objects.get", object_get)
    route("GET", "/download/storage/v1/b/{bucket}/o/{object:.+}", "objects.get", object_get)
    route("POST", "/upload/storage/v1/b/{bucket}/o", "objects.insert", object_insert)
    return app
