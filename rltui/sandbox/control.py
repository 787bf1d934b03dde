"""The sandbox's control API: what the fake `gcloud` and `xpk` executables ask the World to do.

Every route is `POST /_sandbox/op/<name>` with a JSON object of arguments. The answer is JSON
lines: any number of `{"say": text[, "end": ""]}` (progress, printed as it happens), then one
`{"result": ...}` or `{"error": {"code", "message"[, "reason", "metadata"]}}`. Resources come back as the REST APIs'
camelCase JSON (rest_compute's shapes for Compute), so the tools can format them the way gcloud does.
Each operation first checks that the API(s) behind it are enabled in the project (`_OP_APIS`):
vpc-peerings need servicenetworking, networks/addresses compute, lustre lustre, clusters
container, xpk container and compute - a disabled one is refused with SERVICE_DISABLED. A client that hangs up (a
killed xpk) cancels the World coroutine: the milestones it reached stay, as with the real xpk.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import grpc
from aiohttp import web
from google.cloud import container_v1, lustre_v1

from rltui.sandbox import services as apis
from rltui.sandbox.faults import Faults
from rltui.sandbox.rest_compute import address_json, network_json
from rltui.sandbox.world import (
    SERVICE_NETWORKING, CloudError, InvalidArgument, NotFound, Peering, World, project_number, region_of,
)

__all__ = ["add_control_routes", "ADDONS", "XPK_FAULT_CHANNEL"]

log = logging.getLogger(__name__)

COMPUTE = "https://www.googleapis.com/compute/v1"
GKE = "https://container.googleapis.com/v1"
XPK_FAULT_CHANNEL = "xpk"
POLL_S = 0.1  # how soon a hung-up client is noticed while an operation waits

# gcloud --update-addons names -> (AddonsConfig field, key that holds the switch)
ADDONS: dict[str, tuple[str, str]] = {
    "RayOperator": ("ray_operator_config", "enabled"),
    "LustreCsiDriver": ("lustre_csi_driver_config", "enabled"),
    "GcsFuseCsiDriver": ("gcs_fuse_csi_driver_config", "enabled"),
    "GcpFilestoreCsiDriver": ("gcp_filestore_csi_driver_config", "enabled"),
    "GcePersistentDiskCsiDriver": ("gce_persistent_disk_csi_driver_config", "enabled"),
    "ParallelstoreCsiDriver": ("parallelstore_csi_driver_config", "enabled"),
    "BackupRestore": ("gke_backup_agent_config", "enabled"),
    "NodeLocalDNS": ("dns_cache_config", "enabled"),
    "HttpLoadBalancing": ("http_load_balancing", "disabled"),
    "HorizontalPodAutoscaling": ("horizontal_pod_autoscaling", "disabled"),
}

SERVICE_TITLES = apis.TITLES

# control operation name prefix -> the APIs it needs enabled (checked before it runs)
_OP_APIS: dict[str, tuple[str, ...]] = {
    "peerings.": (apis.SERVICE_NETWORKING,),
    "networks.": (apis.COMPUTE,),
    "addresses.": (apis.COMPUTE,),
    "lustre.": (apis.LUSTRE,),
    "clusters.": (apis.CONTAINER,),
    "xpk.": (apis.CONTAINER, apis.COMPUTE),
}

Say = Callable[..., None]
Op = Callable[["_Ctx", dict[str, Any], Say], Awaitable[Any]]
_OPS: dict[str, Op] = {}


@dataclass
class _Ctx:
    world: World
    faults: Faults | None
    kube_api_url: str
    kube_token: str
    origin: str  # this app's own URL, the Kubernetes API when kube_api_url is ""


def _op(name: str) -> Callable[[Op], Op]:
    def register(fn: Op) -> Op:
        _OPS[name] = fn
        return fn
    return register


def add_control_routes(app: web.Application, world: World, faults: Faults | None,
                       kube_api_url: str, kube_token: str) -> None:
    """Mount POST /_sandbox/op/{name} on `app`. kube_api_url "" means `app` itself serves the
    Kubernetes API (its URL is only known once bound)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        ctx = _Ctx(world, faults, kube_api_url, kube_token, str(request.url.origin()))
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


# ---- REST-shaped JSON of World objects ------------------------------------------------------------


def _proto_json(cls: Any, msg: Any) -> dict[str, Any]:
    # REST omits fields at their defaults; enums by name; int64 as strings (as gcloud shows them).
    return json.loads(cls.to_json(msg, use_integers_for_enums=False, always_print_fields_with_no_presence=False))


def _stable_id(*parts: str) -> str:
    return str(int(hashlib.blake2b("/".join(parts).encode(), digest_size=7).hexdigest(), 16))


def peering_json(p: Peering) -> dict[str, Any]:
    return {"network": f"projects/{project_number(p.project)}/global/networks/{p.network}", "peering": p.name,
            "reservedPeeringRanges": list(p.ranges), "service": f"services/{p.service}"}


def service_json(project: str, name: str) -> dict[str, Any]:
    parent = f"projects/{project_number(project)}"
    return {"name": f"{parent}/services/{name}", "parent": parent, "state": "ENABLED",
            "config": {"name": name, "title": apis.title(name)}}


def cluster_json(c: container_v1.Cluster) -> dict[str, Any]:
    return _proto_json(container_v1.Cluster, c)


def instance_json(i: lustre_v1.Instance) -> dict[str, Any]:
    return _proto_json(lustre_v1.Instance, i)


def _long_op(kind: str, project: str) -> str:
    # The names serviceusage/servicenetworking give their operations.
    return f"operations/{kind}.p2-{project_number(project)}-{uuid.uuid4()}"


def _code_name(number: int) -> str:
    return next((c.name for c in grpc.StatusCode if c.value[0] == number), "UNKNOWN")


class _Failed(CloudError):
    """An operation that finished with an error: carries the error's own code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _str(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{key} is required")
    return value


# ---- gcloud: services, peerings, networks, addresses ------------------------------------------------


@_op("info")
async def _info(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    return {"kube_api": ctx.kube_api_url or ctx.origin, "projects": ctx.world.projects()}


@_op("services.enable")
async def _services_enable(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project = _str(args, "project")
    before = set(ctx.world.list_services(project))
    op = ctx.world.start_enable_services(project, args["services"])
    await ctx.world.wait_operation(op.name)
    enabled = ctx.world.list_services(project)
    if set(enabled) - before:
        say(f'Operation "{op.name}" finished successfully.')
    return [service_json(project, s) for s in enabled]


@_op("services.list")
async def _services_list(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project = _str(args, "project")
    return [service_json(project, s) for s in ctx.world.list_services(project)]


@_op("peerings.connect")
async def _peerings_connect(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project = _str(args, "project")
    p = await ctx.world.connect_peering(project, _str(args, "network"), args["ranges"],
                                        args.get("service") or SERVICE_NETWORKING)
    say(f'Operation "{_long_op("pssn", project)}" finished successfully.')
    return peering_json(p)


@_op("peerings.update")
async def _peerings_update(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project = _str(args, "project")
    p = await ctx.world.update_peering(project, _str(args, "network"), args["ranges"],
                                       args.get("service") or SERVICE_NETWORKING, force=bool(args.get("force")))
    say(f'Operation "{_long_op("pssn", project)}" finished successfully.')
    return peering_json(p)


@_op("peerings.delete")
async def _peerings_delete(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project = _str(args, "project")
    await ctx.world.delete_peering(project, _str(args, "network"), args.get("service") or SERVICE_NETWORKING)
    say(f'Operation "{_long_op("pssn", project)}" finished successfully.')
    return None


@_op("peerings.list")
async def _peerings_list(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project = _str(args, "project")
    network = args.get("network") or None
    if network is not None:
        ctx.world.get_network(project, network)
    return [peering_json(p) for p in ctx.world.list_peerings(project, network)]


@_op("networks.list")
async def _networks_list(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project = _str(args, "project")
    return [network_json(n, ctx.world.list_peerings(project, n.name)) for n in ctx.world.list_networks(project)]


@_op("networks.describe")
async def _networks_describe(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project, name = _str(args, "project"), _str(args, "name")
    return network_json(ctx.world.get_network(project, name), ctx.world.list_peerings(project, name))


@_op("addresses.create")
async def _addresses_create(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    addr = await ctx.world.create_address(
        _str(args, "project"), _str(args, "name"), network=_str(args, "network"),
        purpose=args.get("purpose") or "VPC_PEERING", prefix_length=int(args.get("prefix_length") or 16),
        address=args.get("address") or None)
    return address_json(addr)


@_op("addresses.describe")
async def _addresses_describe(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    return address_json(ctx.world.get_address(_str(args, "project"), _str(args, "name")))


@_op("addresses.delete")
async def _addresses_delete(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    addr = ctx.world.get_address(_str(args, "project"), _str(args, "name"))
    await ctx.world.delete_address(addr.project, addr.name)
    return address_json(addr)


@_op("addresses.list")
async def _addresses_list(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    return [address_json(a) for a in ctx.world.list_addresses(_str(args, "project"))]


# ---- gcloud: Managed Lustre ---------------------------------------------------------------------------


async def _finish(ctx: _Ctx, op_name: str, say: Say) -> None:
    say(f"Waiting for operation [{op_name}] to complete...", end="")
    done = await ctx.world.wait_operation(op_name)
    if done.HasField("error"):
        say("failed.")
        raise _Failed(_code_name(done.error.code), done.error.message)
    say("done.")


@_op("lustre.create")
async def _lustre_create(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project, location, instance_id = _str(args, "project"), _str(args, "location"), _str(args, "instance_id")
    inst = lustre_v1.Instance(
        capacity_gib=int(args["capacity_gib"]), per_unit_storage_throughput=int(args["per_unit_storage_throughput"]),
        filesystem=_str(args, "filesystem"), network=_str(args, "network"),
        gke_support_enabled=bool(args.get("gke_support_enabled")), labels=dict(args.get("labels") or {}),
        description=args.get("description") or "")
    op = ctx.world.create_lustre_instance(project, location, instance_id, inst)
    say(f"Create request issued for: [{instance_id}]")
    if args.get("async"):
        say(f"Check operation [{op.name}] for status.")
        return {"name": op.name, "done": False}
    await _finish(ctx, op.name, say)
    say(f"Created instance [{instance_id}].")
    return instance_json(ctx.world.get_lustre_instance(project, location, instance_id))


@_op("lustre.describe")
async def _lustre_describe(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    return instance_json(ctx.world.get_lustre_instance(_str(args, "project"), _str(args, "location"),
                                                       _str(args, "instance_id")))


@_op("lustre.delete")
async def _lustre_delete(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    instance_id = _str(args, "instance_id")
    op = ctx.world.delete_lustre_instance(_str(args, "project"), _str(args, "location"), instance_id)
    say(f"Delete request issued for: [{instance_id}]")
    if args.get("async"):
        say(f"Check operation [{op.name}] for status.")
        return {"name": op.name, "done": False}
    await _finish(ctx, op.name, say)
    say(f"Deleted instance [{instance_id}].")
    return None


@_op("lustre.list")
async def _lustre_list(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    return [instance_json(i) for i in ctx.world.list_lustre_instances(_str(args, "project"),
                                                                      args.get("location") or "-")]


# ---- gcloud: GKE clusters -------------------------------------------------------------------------------


@_op("clusters.describe")
async def _clusters_describe(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    return cluster_json(ctx.world.get_cluster(_str(args, "project"), _str(args, "location"), _str(args, "name")))


@_op("clusters.list")
async def _clusters_list(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    return [cluster_json(c) for c in ctx.world.list_clusters(_str(args, "project"), args.get("location") or "-")]


def _addons_config(wanted: dict[str, bool]) -> container_v1.AddonsConfig:
    body: dict[str, Any] = {}
    for name, on in wanted.items():
        if name not in ADDONS:
            raise InvalidArgument(f"unknown addon {name!r}: use one of {', '.join(sorted(ADDONS))}")
        field, key = ADDONS[name]
        body[field] = {key: bool(on) if key == "enabled" else not on}
    return container_v1.AddonsConfig(body)


@_op("clusters.update")
async def _clusters_update(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project, location, name = _str(args, "project"), _str(args, "location"), _str(args, "name")
    if not isinstance(args.get("addons"), dict) or not args["addons"]:
        raise InvalidArgument("addons must name at least one addon")
    op = ctx.world.update_addons(project, location, name, _addons_config(args["addons"]))
    if args.get("async"):
        say(f"Updating {name}...")
        return {"name": op.name}
    say(f"Updating {name}...", end="")
    await ctx.world.wait_cluster_operation(project, location, op.name)
    say("done.")
    say(f"Updated [{GKE}/projects/{project}/locations/{location}/clusters/{name}].")
    say("To inspect the contents of your cluster, go to: https://console.cloud.google.com/kubernetes/"
        f"workload_/gcloud/{location}/{name}?project={project}")
    return cluster_json(ctx.world.get_cluster(project, location, name))


@_op("clusters.credentials")
async def _clusters_credentials(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    project, location, name = _str(args, "project"), _str(args, "location"), _str(args, "name")
    cluster = ctx.world.get_cluster(project, location, name)
    if cluster.status not in (container_v1.Cluster.Status.RUNNING, container_v1.Cluster.Status.RECONCILING):
        raise NotFound(f"cluster {name} is {cluster.status.name}: its Kubernetes API is not available; "
                       "wait until it is RUNNING")
    # As gcloud's get-credentials: the server and CA come from the cluster (https://<endpoint>);
    # a World whose clusters have no CA (a test app serving plain http) points at kube_api_url.
    ca = cluster.master_auth.cluster_ca_certificate
    server = f"https://{cluster.endpoint}" if ca else (ctx.kube_api_url or ctx.origin)
    return {"server": server, "ca": ca, "token": ctx.kube_token,
            "context": f"gke_{project}_{location}_{name}"}


# ---- xpk ---------------------------------------------------------------------------------------------------
# What the fake xpk 1.16.0 asks for: `gcluster deploy` / `gcluster destroy` of its a4 blueprint (the
# World's xpk_cluster_create / xpk_cluster_delete, streaming Terraform's lines), and the plain GKE
# delete it falls back to without its blueprint (delete_networks false). Errors come back with the
# text gcluster prints ("Error: ..."): a node pool over GPU quota, a network still in use.


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

    created = await ctx.world.xpk_cluster_create(
        project, zone, cluster, num_nodes=int(args.get("num_nodes", 2)),
        device_type=_str(args, "device_type"), spot=bool(args.get("spot")),
        default_pool_cpu_machine_type=args.get("default_pool_cpu_machine_type") or "e2-standard-16",
        default_pool_cpu_num_nodes=int(args.get("default_pool_cpu_num_nodes") or 6),
        deployment=args.get("deployment") or "", progress=progress)
    return cluster_json(created)


@_op("xpk.delete")
async def _xpk_delete(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    await ctx.world.xpk_cluster_delete(_str(args, "project"), _str(args, "zone"), _str(args, "cluster"),
                                       delete_networks=bool(args.get("delete_networks")), progress=say)
    return None


@_op("xpk.list")
async def _xpk_list(ctx: _Ctx, args: dict[str, Any], say: Say) -> Any:
    region = region_of(_str(args, "zone"))
    return [cluster_json(c) for c in ctx.world.list_clusters(_str(args, "project"), region)]
