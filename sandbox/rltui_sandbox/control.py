"""The sandbox's control API: what the fake `xpk` asks the World to do (gcluster's deploy and
destroy, which have no Google API of their own; every gcloud call xpk makes goes to the real
gcloud and the REST surfaces).

Every route is `POST /_sandbox/op/<name>` with a JSON object of arguments. The answer is JSON
lines: any number of `{"say": text[, "end": ""]}` (progress, printed as it happens), then one
`{"result": ...}` or `{"error": {"code", "message"[, "reason", "metadata"]}}`. Each
operation first checks that the APIs behind it are enabled in the project (`_OP_APIS`: xpk needs
container and compute); a disabled one is refused with SERVICE_DISABLED. A client that hangs up (a
killed xpk) cancels the World coroutine: the milestones it reached stay, as with the real xpk.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterator

from aiohttp import web
from google.cloud import container_v1

from rltui_sandbox import services as apis
from rltui_sandbox.faults import Faults
from rltui_sandbox.record import Record, caller_agent
from rltui_sandbox.world import CloudError, InvalidArgument, World

__all__ = ["add_control_routes", "XPK_FAULT_CHANNEL"]

log = logging.getLogger(__name__)

XPK_FAULT_CHANNEL = "xpk"
POLL_S = 0.1  # how soon a hung-up client is noticed while an operation waits

# control operation name prefix -> the APIs it needs enabled (checked before it runs)
_OP_APIS: dict[str, tuple[str, ...]] = {
    "xpk.": (apis.CONTAINER, apis.COMPUTE),
}

Say = Callable[..., None]
Op = Callable[["_Ctx", dict[str, Any], Say], Awaitable[Any]]
_OPS: dict[str, Op] = {}


@dataclass
class _Ctx:
    world: World
    faults: Faults | None


def _op(name: str) -> Callable[[Op], Op]:
    def register(fn: Op) -> Op:
        _OPS[name] = fn
        return fn
    return register


def add_control_routes(app: web.Application, world: World, faults: Faults | None) -> None:
    """Mount POST /_sandbox/op/{name} on `app`."""

    async def handle(request: web.Request) -> web.StreamResponse:
        ctx = _Ctx(world, faults)
        return await _serve(request, ctx)

    app.router.add_post("/_sandbox/op/{name}", handle)


# ---- the streaming dispatcher ---------------------------------------------------------------------


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _error(code: str, message: str, exc: CloudError | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if exc is not None and exc.reason:
        body.update(reason=exc.reason, metadata=exc.metadata)
    return {"error": body}


def _gate(world: World, name: str, args: dict[str, Any]) -> None:
    project = apis.project_of_args(args)
    for prefix, needed in _OP_APIS.items():
        if name.startswith(prefix) and project:
            for api in needed:
                world.require_service(project, api)


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def _serve(request: web.Request, ctx: _Ctx) -> web.StreamResponse:
    name = request.match_info["name"]
    fn = _OPS.get(name)
    try:
        args = await request.json()
    except ValueError:
        args = None
    if fn is None or not isinstance(args, dict):
        problem = f"unknown control operation {name!r}" if fn is None else "the body must be a JSON object"
        return web.Response(status=404 if fn is None else 400, body=_line(_error("INVALID_ARGUMENT", problem)),
                            content_type="application/x-ndjson")
    try:
        _gate(ctx.world, name, args)
    except CloudError as exc:
        return web.Response(body=_line(_error(exc.code, exc.message, exc)), content_type="application/x-ndjson")
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-store"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    pending: collections.deque[dict[str, Any]] = collections.deque()
    wake = asyncio.Event()

    def say(text: str, end: str = "\n") -> None:
        pending.append({"say": text} if end == "\n" else {"say": text, "end": end})
        wake.set()

    # The operation runs as its caller (the fake xpk names itself: tools.call), so the record's
    # xpk.create/xpk.delete carry that agent; the Terraform inside names its own per call.
    with Record.acting_as(caller_agent(request.headers.get("User-Agent"))):
        task = asyncio.ensure_future(fn(ctx, args, say))
    try:
        while True:
            while pending:
                await response.write(_line(pending.popleft()))
            if task.done():
                break
            if _gone(request):
                return response  # the finally cancels the World coroutine
            wake.clear()
            waiter = asyncio.ensure_future(wake.wait())
            await asyncio.wait({task, waiter}, timeout=POLL_S, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        await response.write(_line(_outcome(name, task)))
        await response.write_eof()
    except ConnectionError:
        pass  # the client hung up mid-answer
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
    return response


def _outcome(name: str, task: asyncio.Future[Any]) -> dict[str, Any]:
    exc = task.exception()
    if exc is None:
        return {"result": task.result()}
    if isinstance(exc, CloudError):
        return _error(exc.code, exc.message, exc)
    if isinstance(exc, (KeyError, TypeError, ValueError)):
        return _error("INVALID_ARGUMENT", f"{name}: bad arguments: {exc!r}")
    log.error("control operation %s failed", name, exc_info=exc)
    return _error("INTERNAL", f"{name}: {exc!r}")


# ---- helpers ---------------------------------------------------------------------------------------


def _str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{key} is required")
    return value


# ---- the fake xpk's operations -----------------------------------------------------------------------


@_op("info")
async def _info(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    return {"projects": ctx.world.projects(), "speed": ctx.world.clock.speed}


class _XpkDied(CloudError):
    code = "ABORTED"


@_op("xpk.create")
async def _xpk_create(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project, zone, cluster = _str(args, "project"), _str(args, "zone"), _str(args, "cluster")
    dies = ctx.faults is not None and ctx.faults.hit(XPK_FAULT_CHANNEL)
    nets = {f"{cluster}-net-0", f"{cluster}-net-1", f"{cluster}-rdma-net"}

    def progress(line: str) -> None:
        say(line)
        # Raising here stops xpk_cluster_create right where it reports progress.
        if dies and nets <= {n.name for n in ctx.world.list_networks(project)}:
            raise _XpkDied(
                f"Error: Cluster Toolkit deployment of {cluster} failed after its networks were created "
                f"(sandbox fault injection, {ctx.faults!r}); run the same command again to resume")

    with _recorded(ctx, "xpk.create", project, zone, cluster):
        created = await ctx.world.xpk_cluster_create(
            project, zone, cluster, num_nodes=int(args.get("num_nodes", 2)),
            device_type=_str(args, "device_type"), spot=bool(args.get("spot")),
            default_pool_cpu_machine_type=args.get("default_pool_cpu_machine_type") or "e2-standard-16",
            default_pool_cpu_num_nodes=int(args.get("default_pool_cpu_num_nodes") or 6),
            deployment=args.get("deployment") or "", gke_version=str(args.get("gke_version") or ""),
            deployment_dir=args.get("deployment_dir") or None, progress=progress)
    return {"name": created.name, "status": container_v1.Cluster.Status(created.status).name}


@_op("xpk.delete")
async def _xpk_delete(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    # gcluster destroy: the cluster, then the blueprint's firewall rules and networks.
    project, zone, cluster = _str(args, "project"), _str(args, "zone"), _str(args, "cluster")
    with _recorded(ctx, "xpk.delete", project, zone, cluster):
        await ctx.world.xpk_cluster_delete(project, zone, cluster, delete_networks=True,
                                           deployment_dir=args.get("deployment_dir") or None, progress=say)
    return None


@contextlib.contextmanager
def _recorded(ctx: _Ctx, kind: str, project: str, zone: str, cluster: str) -> Iterator[None]:
    """A gcluster deploy or destroy as one operation of the sandbox's record (tests count them)."""
    rec = ctx.world.record.start(kind, f"projects/{project}/locations/{zone}/clusters/{cluster}")
    error: str | None = "cancelled: xpk went away"
    try:
        yield
        error = None
    except CloudError as exc:
        error = exc.message
        raise
    finally:
        ctx.world.record.end(rec, error)
