"""make_app(store): the fake kube-apiserver over HTTP, for the `kubernetes` client and kubectl."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from rltui_sandbox.kube import discovery, errors, openapi, protowire, rbac, serviceaccounts, tables
from rltui_sandbox.kube.errors import KubeError
from rltui_sandbox.kube.portforward import handle_portforward
from rltui_sandbox.kube.resources import REVIEWS, ResourceType, find
from rltui_sandbox.kube.serviceaccounts import User
from rltui_sandbox.kube.store import KubeStore
from rltui_sandbox.record import Record

STORE = web.AppKey("store", KubeStore)
# The request's user when it is not the owner (auth.guard_middleware sets it).
USER = web.RequestKey("kube_user", User)
SETTINGS = web.AppKey("settings", dict)
# The sandbox's record (record.py), when the daemon gives one: a counter per verb and resource.
RECORD = web.AppKey("record", Record)
# kube-apiserver's --min-request-timeout: a watch without timeoutSeconds ends after this.
DEFAULT_WATCH_SECONDS = 1800.0
PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}
_FAULTS = {
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
}


@dataclass
class Target:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None
    watch_path: bool  # the legacy /watch/ prefix


def _true(value: str | None) -> bool:
    return value in ("true", "True", "1")


def error_response(exc: KubeError) -> web.Response:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return web.json_response(exc.status(), status=exc.code, headers=headers)


def _not_found_path() -> web.Response:
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain")


def parse_target(group: str, version: str, tail: str) -> Target | None:
    parts = [p for p in tail.split("/") if p]
    watch_path = bool(parts) and parts[0] == "watch"
    if watch_path:
        parts = parts[1:]
    if not parts:
        return None
    if parts[0] == "namespaces" and len(parts) >= 3 and parts[2] not in ("status", "finalize"):
        namespace, rest = parts[1], parts[2:]
    else:
        namespace, rest = None, parts
    if len(rest) > 3:
        return None
    rtype = find(group, version, rest[0])
    if rtype is None:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if (namespace is not None) != rtype.namespaced and name is not None:
        return None
    if namespace is not None and not rtype.namespaced:
        return None
    if sub is not None and sub not in rtype.subresources:
        return None
    return Target(rtype, namespace, name, sub, watch_path)


def _maybe_fault(store: KubeStore, channel: str) -> None:
    faults = store.faults
    if faults is None or not faults.hit(channel):
        return
    code = faults.choice(channel, (500, 503, 429))
    reason, message = _FAULTS[code]
    details = {"retryAfterSeconds": 1} if code == 429 else {}
    raise KubeError(code, reason, message, details, retry_after=1 if code == 429 else None)


def _count(request: web.Request, verb: str, target: Target) -> None:
    """One call in the record as `kube:<VERB>:<resource>[/<sub>][@<user>]` (no user: the
    owner's credentials, i.e. rltui, kubectl, gcloud, xpk). A GET without a name is a LIST, or
    a WATCH with ?watch=1 (or the /watch/ prefix), as the API server names its verbs
    (k8s.io/apiserver pkg/endpoints/request/requestinfo.go: "if there's no name on the request
    and we thought it was a get before, then the actual verb is a list or a watch")."""
    record = request.app.get(RECORD)
    if record is not None:
        sub = f"/{target.sub}" if target.sub else ""
        user = request.get(USER)  # a ServiceAccount's (e.g. the job supervisor's): counted apart
        who = f"@{user.name}" if user is not None else ""
        record.count(f"kube:{verb}:{target.rtype.plural}{sub}{who}")


async def _body(request: web.Request) -> Any:
    if "protobuf" in request.content_type or "cbor" in request.content_type:
        # kubectl's typed writes (`kubectl create namespace|secret ...`) send protobuf, which this
        # server cannot decode; client-go does not fall back, so say what works instead.
        raise KubeError(415, "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types include: "
                        "application/json, application/yaml (the rltui sandbox speaks no protobuf: "
                        "use kubectl apply -f / create -f)")
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        if "yaml" in request.content_type:
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(data, separators=(",", ":")), status=status,
                        content_type="application/json")


def _render(request: web.Request, target: Target, objs: list[dict], rv: Any, single: bool) -> web.Response:
    if tables.wants_table(request.headers.get("Accept", "")):
        return _json(tables.table(target.rtype, objs, rv, request.query.get("includeObject", "Metadata")))
    if single:
        return _json(objs[0])
    return _json({"kind": target.rtype.list_kind, "apiVersion": target.rtype.api_version,
                  "metadata": {"resourceVersion": str(rv)}, "items": objs})


async def _serve_watch(request: web.Request, store: KubeStore, target: Target) -> web.StreamResponse:
    """A watch as the API server streams it (Kubernetes API concepts, "Efficient detection of
    changes", "Watch bookmarks"): without a resourceVersion (or "0") the current objects first
    as ADDED; `timeoutSeconds` (else the server's own limit) ends the stream normally, after
    which a client resumes from the last resourceVersion it saw; one too old for the history
    is a single ERROR event carrying a 410 Status ("clients must handle the case by
    recognizing the status code 410 Gone, clearing their local cache, performing a new get or
    list operation"); with allowWatchBookmarks, BOOKMARK events carry the newest
    resourceVersion while nothing the watch selects changes. Not imitated: the real history
    is a time window (etcd keeps "the last 5 minutes by default"), the store's a count."""
    q = request.query
    settings = request.app[SETTINGS]
    rtype, loop = target.rtype, asyncio.get_running_loop()
    field_selector = q.get("fieldSelector")
    if target.name is not None:  # GET .../pods/NAME?watch=1
        name_term = f"metadata.name={target.name}"
        field_selector = f"{field_selector},{name_term}" if field_selector else name_term
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    try:
        watcher = store.watch(rtype.plural, target.namespace, q.get("resourceVersion"),
                              q.get("labelSelector"), field_selector)
    except KubeError as exc:
        if exc.code != 410:
            raise
        # Like the real server: a 200 stream carrying one ERROR event with the 410 Status.
        await response.prepare(request)
        await response.write(json.dumps({"type": "ERROR", "object": exc.status()}).encode() + b"\n")
        await response.write_eof()
        return response
    as_table = tables.wants_table(request.headers.get("Accept", ""))
    include_object = q.get("includeObject", "Metadata")
    bookmarks = _true(q.get("allowWatchBookmarks"))
    deadline = loop.time() + float(q.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
    next_bookmark = loop.time() + settings["bookmark_interval"] if bookmarks else float("inf")
    await response.prepare(request)
    try:
        while (now := loop.time()) < deadline:
            if request.transport is None or request.transport.is_closing():
                break
            wait = min(deadline, next_bookmark, now + settings["tick"]) - now
            try:
                item = await watcher.next(max(wait, 0.0))
            except StopAsyncIteration:
                break
            if item is None:
                if bookmarks and loop.time() >= next_bookmark and not watcher.pending():
                    mark = {"kind": rtype.kind, "apiVersion": rtype.api_version,
                            "metadata": {"resourceVersion": str(store.resource_version)}}
                    await response.write(json.dumps({"type": "BOOKMARK", "object": mark}).encode() + b"\n")
                    next_bookmark = loop.time() + settings["bookmark_interval"]
                continue
            kind, obj = item
            if as_table:
                obj = tables.table(rtype, [obj], obj["metadata"]["resourceVersion"], include_object)
            await response.write(json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n")
            if store.faults is not None and store.faults.hit(f"kube:WATCH-CUT:{rtype.plural}"):
                break  # an injected cut: the stream just ends after a complete line
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client hung up
    finally:
        watcher.close()
    return response


async def _serve_log(request: web.Request, store: KubeStore, target: Target) -> web.StreamResponse:
    q = request.query
    ns, pod = target.namespace or "default", target.name or ""
    tail = int(q["tailLines"]) if q.get("tailLines") else None
    limit = int(q["limitBytes"]) if q.get("limitBytes") else None
    container = q.get("container") or None
    if not _true(q.get("follow")):
        text = await store.read_log(ns, pod, container, tail)
        data = text.encode()
        return web.Response(body=data[:limit] if limit else data, content_type="text/plain")
    chunks = store.follow_log(ns, pod, container, tail, tick=request.app[SETTINGS]["tick"])
    first = await chunks.__anext__()  # raises 400/404 before the stream starts
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    sent = 0
    try:
        chunk = first
        while True:
            if chunk:
                data = chunk.encode()
                if limit is not None:
                    data = data[: max(limit - sent, 0)]
                await response.write(data)
                sent += len(data)
                if limit is not None and sent >= limit:
                    break
            elif request.transport is None or request.transport.is_closing():
                break
            chunk = await chunks.__anext__()
    except StopAsyncIteration:
        pass
    except ConnectionResetError:
        return response  # the client hung up
    finally:
        await chunks.aclose()
    await response.write_eof()
    return response


async def _dispatch(request: web.Request, store: KubeStore, target: Target) -> web.StreamResponse:
    q, method, rtype = request.query, request.method, target.rtype
    ns, name, sub = target.namespace, target.name, target.sub
    dry_run = bool(q.get("dryRun"))
    watching = method == "GET" and (target.watch_path or _true(q.get("watch")))
    verb = "WATCH" if watching else method
    _count(request, "LIST" if verb == "GET" and name is None and sub is None else verb, target)
    user = request.get(USER)
    if user is not None:  # a ServiceAccount's token: RBAC decides (the owner's tokens may do all)
        name_attr = name or ("" if method not in ("GET", "DELETE") else rbac.selector_name(q.get("fieldSelector")))
        rbac.check(store, rbac.Attributes(user, rbac.request_verb(method, name is not None, watching),
                                          ns or "", rtype.group, rtype.plural, sub or "", name_attr))
    _maybe_fault(store, f"kube:{verb}:{rtype.plural}" + (f"/{sub}" if sub else ""))
    if rtype.plural in REVIEWS:
        if method != "POST" or name is not None:
            raise KubeError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if "protobuf" in request.content_type:  # kubectl auth can-i sends nothing else
            try:
                review = protowire.access_review(await request.read())
            except protowire.ProtoError as exc:
                raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None
        else:
            review = await _body(request)
        return _json(rbac.access_review(store, user, review), 201)
    if sub == "token":
        if method != "POST":
            raise KubeError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return _json(await serviceaccounts.token_request(store, ns or "default", name or "", await _body(request)), 201)
    if sub == "portforward":
        return await handle_portforward(request, store, ns or "default", name or "")
    if sub == "log":
        if method != "GET":
            raise KubeError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        return await _serve_log(request, store, target)
    if watching:
        return await _serve_watch(request, store, target)
    if method == "GET" and name is None:
        objs = store.list_sync(rtype.plural, ns, q.get("labelSelector"), q.get("fieldSelector"))
        return _render(request, target, objs, store.resource_version, single=False)
    if method == "GET":
        obj = await store.get(rtype.plural, name, ns)
        return _render(request, target, [obj], obj["metadata"]["resourceVersion"], single=True)
    if method == "POST" and name is None:
        obj = await store.create(rtype.plural, await _body(request), ns, dry_run=dry_run)
        return _json(obj, 201)
    if method == "PUT" and name is not None:
        body = await _body(request)
        if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
            body["metadata"].setdefault("name", name)
            if body["metadata"]["name"] != name:
                raise errors.bad_request(f"the name of the object ({body['metadata']['name']}) does not "
                                         f"match the name on the URL ({name})")
        return _json(await store.replace(rtype.plural, body, ns, subresource=sub, dry_run=dry_run))
    if method == "PATCH" and name is not None:
        patch_type = PATCH_TYPES.get(request.content_type)
        if patch_type is None:
            raise KubeError(415, "UnsupportedMediaType",
                            f"the body of the request was in an unknown format - accepted media types "
                            f"include: {', '.join(PATCH_TYPES)}")
        existed = store.list_sync(rtype.plural, ns, field_selector=f"metadata.name={name}")
        obj = await store.patch(rtype.plural, name, await _body(request), ns, patch_type=patch_type,
                                subresource=sub, dry_run=dry_run)
        return _json(obj, 200 if existed or patch_type != "apply" else 201)
    if method == "DELETE":
        return await _delete(request, store, target, dry_run)
    raise KubeError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


async def _delete(request: web.Request, store: KubeStore, target: Target, dry_run: bool) -> web.Response:
    options = await _body(request) or {}
    propagation = request.query.get("propagationPolicy") or options.get("propagationPolicy") or "Background"
    dry_run = dry_run or bool(options.get("dryRun"))
    rtype = target.rtype
    if target.name is not None:
        obj = await store.delete(rtype.plural, target.name, target.namespace, propagation=propagation,
                                 preconditions=options.get("preconditions"), dry_run=dry_run)
        return _json(obj)
    doomed = store.list_sync(rtype.plural, target.namespace, request.query.get("labelSelector"),
                             request.query.get("fieldSelector"))
    gone = [await store.delete(rtype.plural, o["metadata"]["name"], o["metadata"].get("namespace"),
                               propagation=propagation, dry_run=dry_run) for o in list(doomed)]
    return _json({"kind": rtype.list_kind, "apiVersion": rtype.api_version,
                  "metadata": {"resourceVersion": str(store.resource_version)}, "items": gone})


async def _resource(request: web.Request) -> web.StreamResponse:
    store = request.app[STORE]
    group = request.match_info.get("group", "")
    version = request.match_info["version"]
    target = parse_target(group, version, request.match_info["tail"])
    if target is None:
        return _not_found_path()
    try:
        return await _dispatch(request, store, target)
    except KubeError as exc:
        return error_response(exc)


async def _on_shutdown(app: web.Application) -> None:
    app[STORE].close()


def make_app(store: KubeStore, *, bookmark_interval: float = 60.0, tick: float = 1.0,
             issuer: Any = None, record: Record | None = None) -> web.Application:
    """The API server app. `tick` bounds how long an idle watch/follow takes to notice a hang-up.
    With `issuer` (auth.TokenIssuer), requests over https need its bearer tokens and Kubernetes
    paths are not served over plain http (see auth.guard_middleware). With `record`
    (record.Record), every request is counted there (`kube:LIST:pods`, `kube:WATCH:pods`, ...)."""
    from rltui_sandbox.kube.auth import guard_middleware

    middlewares = [guard_middleware(issuer, store)] if issuer is not None else []
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=middlewares)
    app[STORE] = store
    app[SETTINGS] = {"bookmark_interval": bookmark_interval, "tick": tick}
    if record is not None:
        app[RECORD] = record
    discovery.add_routes(app)
    openapi.add_routes(app)
    app.router.add_route("*", "/api/{version:v1}/{tail:.*}", _resource)
    app.router.add_route("*", "/apis/{group}/{version}/{tail:.*}", _resource)
    app.on_shutdown.append(_on_shutdown)
    return app


async def start(store: KubeStore, host: str = "127.0.0.1", port: int = 0, *,
                bookmark_interval: float = 60.0, tick: float = 1.0, tls: Any = None,
                issuer: Any = None, record: Record | None = None) -> tuple[web.AppRunner, str]:
    """Serve `store` on host:port (0 = ephemeral); returns the runner (to `cleanup()`) and URL.
    With `tls` (tls.SandboxTLS) and `issuer` it is https with bearer tokens, as GKE's is."""
    if tls is not None and issuer is None:
        raise ValueError("an https Kubernetes API checks tokens: give an issuer")
    app = make_app(store, bookmark_interval=bookmark_interval, tick=tick, issuer=issuer, record=record)
    runner = web.AppRunner(app, shutdown_timeout=5.0, access_log=None)
    await runner.setup()
    ssl_context = tls.server_context() if tls is not None else None
    await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
    bound = runner.addresses[0][1]
    return runner, f"{'https' if tls is not None else 'http'}://{host}:{bound}"
