"""What exists now, as the cloud sees it: the plan's resources, and leaks that look like rltui's.

"Owned" means rltui made it, read from the cloud: the GKE cluster and the Lustre instance carry
`managed-by=rltui` (the cluster gets it right after xpk creates it), xpk's networks belong to
a cluster that is rltui's (by that label, or by xpk's own state in rltui's folder for it:
plan/xpkstate.py), the Kubernetes objects carry `app.kubernetes.io/managed-by=rltui`. An API
that is off (ErrorInfo SERVICE_DISABLED, a fresh project) holds nothing: its resources are
absent, not an error. A leak is something owned that the current env.sh's
plan does not know (e.g. left by an earlier run with another cluster name): `down` must
not end with one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from .. import manifests
from . import xpkstate
from .context import Context

if TYPE_CHECKING:
    from ..cost import Estimate, Prices

XPK_NETWORK_SUFFIXES = ("-net-0", "-net-1", "-rdma-net")
K8S_OWNED = "app.kubernetes.io/managed-by"


@dataclass(frozen=True)
class Resource:
    kind: str
    name: str
    state: str          # "absent" when it does not exist
    owned: bool
    leak: bool = False
    detail: str = ""
    created: str = ""   # RFC 3339, from the cloud (GKE cluster, Lustre instance); "": not known

    @property
    def present(self) -> bool:
        return self.state != "absent"

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


async def prices(ctx: Context) -> Prices:
    """The plan's unit prices: the state folder's cache when under a day old, else the Cloud
    Billing Catalog's (rltui/cloud/billing.py), then cached. Blocking file I/O runs in a thread."""
    from ..cloud.billing import BillingAdapter
    from ..cost import cache_file, load_cached, save_cached, wanted
    from .folders import cache_dir

    catalog = "sandbox" if ctx.endpoints.grpc_target else "google"
    path = cache_file(cache_dir(ctx.root), ctx.cfg, catalog)
    cached = await asyncio.to_thread(load_cached, path)
    if cached is not None:
        return cached
    adapter = BillingAdapter(ctx.endpoints)
    try:
        fresh = await adapter.prices(wanted(ctx.cfg))
    finally:
        await adapter.close()
    if not fresh.missing:  # a partial answer is shown, not kept for a day
        try:
            await asyncio.to_thread(save_cached, path, fresh)
        except OSError as exc:  # a read-only state folder: the prices are still good now
            logging.getLogger(__name__).warning("prices not cached in %s: %s", path, exc)
    return fresh


async def cost(ctx: Context, resources: list[Resource],
               pending: asyncio.Future[Prices] | None = None) -> Estimate | None:
    """What exists costs per hour and has cost since it was created (rltui/cost.py `estimate`),
    at the prices `pending` will give (shielded: a caller cancelled does not cancel the read
    others wait on), else `prices(ctx)`'s; None when they cannot be read (the reason goes to
    the log: the meter is a nicety, never an error on screen)."""
    from ..cloud.errors import CloudError
    from ..cost import estimate

    try:
        unit = await (asyncio.shield(pending) if pending is not None else prices(ctx))
    except CloudError as exc:
        logging.getLogger(__name__).warning("no prices: %s", exc.message)
        return None
    return estimate(ctx.cfg, unit, resources)


def _xpk_state(ctx: Context, cluster: str) -> bool:
    """xpk's blueprint for `cluster` in the folder rltui runs xpk from for it."""
    folder = ctx.xpk_dir.parent / cluster
    return xpkstate.has_state(folder, ctx.cfg.project_id, ctx.cfg.region, cluster)


def _labelled(cluster: Any) -> bool:
    return cluster is not None and cluster.resource_labels.get("managed-by") == "rltui"


async def collect(ctx: Context) -> list[Resource]:
    """Every resource of the plan (present or absent), then any leak."""
    resources, _ = await _gather(ctx, with_job=False)
    return resources


async def collect_with_job(ctx: Context) -> tuple[list[Resource], dict[str, Any] | None]:
    """`collect`, and the newest job's summary (plan/jobs.py `job_summary`) when the RayCluster
    exists (a supervised run is known from its record even while the RayCluster recovers)."""
    return await _gather(ctx, with_job=True)


async def _gather(ctx: Context, *, with_job: bool
                  ) -> tuple[list[Resource], dict[str, Any] | None]:
    """Every call runs as soon as what it needs is known, none waits on an independent one:
    the cloud's lists and gets at once; the peering once its network and Service Networking
    are known; the Kubernetes objects (and the job) once the cluster is known to run, with the
    API token fetched while the cluster is asked for (it does not depend on the cluster)."""
    cfg = ctx.cfg
    cluster_call = asyncio.ensure_future(ctx.gke.get())
    creds_call = asyncio.ensure_future(_fresh_credentials(ctx))
    try:
        (cluster, clusters, networks, lustre_all, address, peering,
         (kube_objects, job)) = await asyncio.gather(
            cluster_call, ctx.gke.list(), ctx.network.networks(), ctx.lustre.list(),
            ctx.network.address(cfg.address_name), _peering(ctx, cfg.network),
            _kubernetes(ctx, cluster_call, creds_call, with_job))
    finally:
        for call in (cluster_call, creds_call):
            _drop(call)
    ours = _labelled(cluster) or _xpk_state(ctx, cfg.cluster_name)
    out = [Resource("GKE cluster", cfg.cluster_name,
                    cluster.status.name.lower() if cluster else "absent", ours or cluster is None,
                    detail=f"{sum(p.initial_node_count for p in cluster.node_pools)} nodes"
                    if cluster else "", created=cluster.create_time if cluster else "")]
    names = {n.name for n in networks}
    for name in xpkstate.blueprint_names(cfg.cluster_name).networks:
        out.append(Resource("VPC network", name, "present" if name in names else "absent",
                            ours or name not in names))
    out.append(Resource("IP range", cfg.address_name, "present" if address else "absent", True,
                        detail=f"{address.address}/{address.prefix_length}" if address else ""))
    out.append(Resource("VPC peering", f"servicenetworking on {cfg.network}",
                        "present" if peering else "absent", True))
    inst = next((i for i in lustre_all if i.name.endswith(f"/instances/{cfg.lustre_instance_id}")),
                None)
    out.append(Resource("Lustre instance", cfg.lustre_instance_id,
                        inst.state.name.lower() if inst else "absent",
                        bool(inst and inst.labels.get("managed-by") == "rltui") or inst is None,
                        detail=f"{inst.capacity_gib} GiB" if inst else "",
                        created=_rfc3339(getattr(inst, "create_time", None))))
    out += kube_objects
    out += _leaks(ctx, clusters, networks, lustre_all)
    return out, job


def _rfc3339(value: Any) -> str:
    """A proto-plus Timestamp field (a datetime; unset: the epoch or None) as RFC 3339."""
    if value is None or not hasattr(value, "isoformat") or getattr(value, "year", 1970) <= 1970:
        return ""
    return str(value.isoformat())


async def _fresh_credentials(ctx: Context) -> Any:
    """ADC with a token (Endpoints.credentials, refreshed as cloud/kube.py
    `gke_configuration` refreshes it), or None when that fails here: the Kubernetes connection
    then loads them itself and reports what is wrong, as it did before."""
    from google.auth.transport.requests import Request

    def load() -> Any:
        creds = ctx.endpoints.credentials()
        creds.refresh(Request())
        return creds

    try:
        return await asyncio.to_thread(load)
    except Exception:  # noqa: BLE001 - only a head start: the connection asks again
        return None


async def _peering(ctx: Context, network: str) -> Any:
    """Known only where it can exist: the network is there and Service Networking is on. The
    connection list is asked at the same time as those two; its answer (or its refusal, e.g.
    SERVICE_DISABLED) is dropped when either says it cannot exist."""
    from ..cloud.network import SERVICE_NETWORKING

    early = asyncio.ensure_future(ctx.network.peering(network))
    try:
        net, apis = await asyncio.gather(ctx.network.network(network),
                                         ctx.network.enabled_apis())
        if net is None or SERVICE_NETWORKING not in apis:
            return None
        return await early
    finally:
        _drop(early)
        await asyncio.wait([early])   # a dropped call ends here, not after collect returned


def _drop(call: asyncio.Future[Any]) -> None:
    """Cancel a call whose answer is no longer wanted; one that ended has its error read, so
    that asyncio does not report it as never retrieved."""
    if not call.done():
        call.cancel()
    elif not call.cancelled():
        call.exception()


async def _kubernetes(ctx: Context, cluster_call: asyncio.Future[Any],
                      creds_call: asyncio.Future[Any], with_job: bool
                      ) -> tuple[list[Resource], dict[str, Any] | None]:
    """The plan's Kubernetes objects, asked at once; with `with_job`, the job's summary asked
    alongside them and kept only when the RayCluster exists (else cancelled)."""
    from .jobs import job_summary

    cfg = ctx.cfg
    wanted = [("RayCluster", "rayclusters", cfg.cluster_name),
              ("PersistentVolumeClaim", "persistentvolumeclaims", cfg.pvc_name),
              ("PersistentVolume", "persistentvolumes", cfg.pv_name),
              ("Secret", "secrets", manifests.secret_name(cfg))]
    cluster = await cluster_call
    if cluster is None or cluster.status.name != "RUNNING":
        return [Resource(kind, name, "absent", True) for kind, _, name in wanted], None
    kube = await ctx.kube(cluster, await creds_call)
    job_call = asyncio.ensure_future(job_summary(ctx)) if with_job else None
    try:
        objs = await asyncio.gather(*(kube.get(plural, name) for _, plural, name in wanted))
        out = [_kube_resource(kind, plural, name, obj)
               for (kind, plural, name), obj in zip(wanted, objs, strict=True)]
        job = None
        if job_call is not None and out[0].present:
            job = await job_call
    finally:
        if job_call is not None:
            _drop(job_call)
    return out, job


def _kube_resource(kind: str, plural: str, name: str, obj: Any) -> Resource:
    if obj is None:
        return Resource(kind, name, "absent", True)
    owned = (obj.get("metadata", {}).get("labels") or {}).get(K8S_OWNED) == "rltui"
    if plural == "rayclusters":
        from ..cloud.kube import raycluster_health

        health = raycluster_health(obj)
        return Resource(kind, name, "ready" if health.ready else "not ready", owned,
                        detail=health.message)
    state = "present"
    if plural in ("persistentvolumeclaims", "persistentvolumes"):
        state = ((obj.get("status") or {}).get("phase") or "present").lower()
    return Resource(kind, name, state, owned)


def _leaks(ctx: Context, clusters: list[Any], networks: list[Any],
           lustre_all: list[Any]) -> list[Resource]:
    cfg = ctx.cfg
    leaks = []
    owned_clusters = set()
    for c in clusters:
        if c.name != cfg.cluster_name and _labelled(c):
            owned_clusters.add(c.name)
            leaks.append(Resource("GKE cluster", c.name, c.status.name.lower(), True, leak=True,
                                  detail=f"{c.location}, labelled managed-by=rltui"))
    for inst in lustre_all:
        name = inst.name.rsplit("/", 1)[-1]
        if name != cfg.lustre_instance_id and inst.labels.get("managed-by") == "rltui":
            leaks.append(Resource("Lustre instance", name, inst.state.name.lower(), True, leak=True,
                                  detail=inst.name.split("/")[3]))
    for net in networks:
        name = net.name
        for suffix in XPK_NETWORK_SUFFIXES:
            if name.endswith(suffix):
                other = name[: -len(suffix)]
                if other != cfg.cluster_name and (other in owned_clusters
                                                  or _xpk_state(ctx, other)):
                    leaks.append(Resource("VPC network", name, "present", True, leak=True,
                                          detail=f"made by xpk for cluster {other}"))
    return leaks
