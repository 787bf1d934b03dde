"""Pieces the sandbox's Compute Engine REST modules share (rest_compute, rest_compute_routers):
resource URLs and ids, Google's error JSON for compute, list pages and their `filter`. Where each
behaviour comes from is in rest_compute's module docstring.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from rltui_sandbox.grpc_util import CloudError, InvalidArgument, page

__all__ = ["BASE", "MAX_RESULTS", "AddRoute", "Route", "basename", "error_json", "filtered", "gce_id", "list_response",
           "url"]

BASE = "https://www.googleapis.com/compute/v1"
MAX_RESULTS = 500

# google.rpc code name -> (HTTP status, compute errors[].reason)
_HTTP = {
    "NOT_FOUND": (404, "notFound"),
    "ALREADY_EXISTS": (409, "alreadyExists"),
    "INVALID_ARGUMENT": (400, "invalid"),
    "FAILED_PRECONDITION": (400, "resourceNotReady"),  # the reason word is not verified
    "PERMISSION_DENIED": (403, "forbidden"),
    "RESOURCE_EXHAUSTED": (429, "rateLimitExceeded"),
    "UNAVAILABLE": (503, "backendError"),
}


def gce_id(*parts: str) -> str:
    """A stable uint64 id, as a string (compute.v1 ids are `"format": "uint64"`)."""
    return str(int(hashlib.blake2b("/".join(parts).encode(), digest_size=7).hexdigest(), 16))


def url(path: str) -> str:
    return f"{BASE}/{path}"


def error_json(exc: CloudError) -> tuple[int, dict[str, Any]]:
    """(HTTP status, Google's error JSON) for a refusal."""
    status, reason = _HTTP.get(exc.code, (500, "backendError"))
    item = {"message": exc.message, "domain": "global", "reason": getattr(exc, "compute_reason", "") or reason}
    body: dict[str, Any] = {"code": status, "message": exc.message, "errors": [item]}
    if exc.reason == "SERVICE_DISABLED":
        # compute's errors[] says accessNotConfigured (fog/fog 3996); its domain is not verified.
        item.update(domain="usageLimits", reason="accessNotConfigured",
                    extendedHelp="https://console.developers.google.com")
    if exc.code == "PERMISSION_DENIED" or exc.reason:
        body["status"] = exc.code
    if exc.reason:
        body["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": exc.reason,
                            "domain": exc.domain, "metadata": exc.metadata}]
    return status, {"error": body}


def basename(value: Any) -> str:
    return str(value or "").rstrip("/").rsplit("/", 1)[-1]


_FILTER = re.compile(r'^\(?\s*(?P<field>[A-Za-z.]+)\s*(?P<op>=|!=|eq|ne)\s*(?P<value>"[^"]*"|\'[^\']*\'|\S+?)\s*\)?$')


def filtered(items: list[dict[str, Any]], expression: str) -> list[dict[str, Any]]:
    """One `field = value` / `field != value` (AIP-160, exact) or `field eq regex` / `ne` (RE2
    full match) expression, as the discovery document's `filter` describes; more is refused."""
    if not expression.strip():
        return items
    match = _FILTER.match(expression.strip())
    if match is None:
        raise InvalidArgument(f"Invalid value for field 'filter': '{expression}'. The sandbox understands one "
                              "'field = value', 'field != value', 'field eq regex' or 'field ne regex'.")
    field, op, value = match["field"], match["op"], match["value"].strip("\"'")

    def get(item: dict[str, Any]) -> str:
        cur: Any = item
        for part in field.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return ""
        return ("true" if cur else "false") if isinstance(cur, bool) else str(cur)

    if op in ("=", "!="):
        keep = [i for i in items if (get(i) == value) == (op == "=")]
    else:
        pattern = re.compile(value)
        keep = [i for i in items if bool(pattern.fullmatch(get(i))) == (op == "eq")]
    return keep


def list_response(request: web.Request, kind: str, items: list[dict[str, Any]], self_link: str) -> web.Response:
    items = filtered(items, request.query.get("filter", ""))
    try:
        size = int(request.query.get("maxResults", MAX_RESULTS))
    except ValueError:
        raise InvalidArgument(f"Invalid value for field 'maxResults': '{request.query['maxResults']}'") from None
    if not 0 <= size <= MAX_RESULTS:
        raise InvalidArgument(f"Invalid value for field 'maxResults': '{size}'. Must be in the range [0, 500].")
    chunk, token = page(items, size or MAX_RESULTS, request.query.get("pageToken", ""))
    body: dict[str, Any] = {"kind": kind, "id": self_link.split("/compute/v1/", 1)[-1], "items": chunk,
                            "selfLink": self_link}
    if token:
        body["nextPageToken"] = token
    return web.json_response(body)


# A route's handler: (request, the project as the World knows it) -> response.
Route = Callable[[web.Request, str], Awaitable[web.StreamResponse]]
# rest_compute's `route(method, path, name, handler)`: counts, gates, records the caller, errors.
AddRoute = Callable[[str, str, str, Route], None]
