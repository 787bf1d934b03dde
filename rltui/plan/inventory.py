"""What exists now, as the cloud sees it: the plan's resources, and leaks that look like rltui's.

"Owned" means rltui made it, read from the cloud (plan/ownership.py): the GKE cluster carries
`managed-by=rltui` (set right after xpk creates it) or is the one rltui recorded by its unique
id when its own xpk made it (plan/xpkstate.py `owns`), the Lustre instance carries the label,
the IP range the label or its description, rltui's Lustre firewall rule carries it in its
description, the peering reserves rltui's range alone, xpk's blueprint (networks,
subnetworks, firewall rules, Cloud Routers with their NATs, NAT IPs: plan/xpkstate.py
blueprint_names) belongs to a cluster that is rltui's (`cluster_is_rltuis`), the Kubernetes
objects carry `app.kubernetes.io/managed-by=rltui`. What is there and not rltui's is listed
with the command that deletes it by hand (Resource.hand_delete). The blueprint's networks are
listed present or absent; its other parts only when present. An API that is off (ErrorInfo
SERVICE_DISABLED, a fresh project) holds nothing: its resources are absent, not an error. A
leak is something owned that the current env.sh's plan does not know (e.g. left by an earlier
run with another cluster name): `down` must not end with one.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from .. import manifests, words
from ..cloud.rayhealth import has_head_condition, pod_selector, raycluster_health
from ..names import blueprint_names
from . import leftovers, xpkstate
from .context import Context
from .guard import guard_account, is_rltuis
from .ownership import (
    address_marked,
    cluster_marked,
    hand_delete,
    lustre_rule_name,
    marked,
    peering_marked,
    rule_marked,
)

if TYPE_CHECKING:
    from ..cloud.computereads import ComputeReads, Forked
    from ..cost import Estimate, Prices

XPK_NETWORK_SUFFIXES = ("-net-0", "-net-1", "-rdma-net")
K8S_OWNED = "app.kubernetes.io/managed-by"
BLUEPRINT = "xpk's blueprint"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# The cluster states in which its Kubernetes API answers: RECONCILING is GKE upgrading a made
# cluster, its regional control plane still serving (google-cloud-container 2.67.0
# Cluster.Status: "Some work is actively being done on the cluster, such as upgrading the
# master or node software").
KUBE_ANSWERS = ("RUNNING", "RECONCILING")


@dataclass(frozen=True)
class Resource:
    kind: str
    name: str
    state: str          # "absent" when it does not exist
    owned: bool
    leak: bool = False
    detail: str = ""
    created: str = ""   # RFC 3339, from the cloud (GKE cluster, Lustre instance); "": not known
    # "GKE cluster" only: one entry per GPU node of the plan's machine type that exists, its
    # creation time (RFC 3339) or "" when only the node pool's count is known (rltui/cost.py
    # `pool_gpu_nodes`); the cost meter charges GPUs for these alone, each from its own time.
    gpu_nodes: tuple[str, ...] = ()
    # Present and not rltui's: the command that deletes it by hand (plan/ownership.py).
    hand_delete: str = ""
    # What it is a part of, when not of rltui's own making: BLUEPRINT for xpk's blueprint's
    # networks, subnets, rules, routers, NATs and NAT IPs (screens count those per kind).
    part_of: str = ""

    @property
    def present(self) -> bool:
        return self.state != "absent"

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


async def prices(ctx: Context) -> Prices:
    """The plan's unit prices: the state folder's cache when under a day old (kept with the SKUs
    the catalog lacked, so a missing one does not page the catalog again), else the Cloud
    Billing Catalog's (rltui/cloud/billing.py cached_prices)."""
    from ..cloud.billing import cached_prices
    from .folders import cache_dir

    return await cached_prices(ctx.endpoints, ctx.cfg, cache_dir(ctx.root))


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


def cluster_is_rltuis(ctx: Context, name: str, cluster: Any,
                      left: leftovers.Leftovers | None = None) -> bool:
    """Whether the GKE cluster `name` (its container.v1 Cluster, or None when gone) is
    rltui's, as XpkClusterStep.owns decides it from the folder rltui runs xpk from for it:
    labelled, recorded by its unique id (ownership.cluster_marked), or made by the last xpk
    create rltui started there (xpkstate.made_by_own_create). Gone: whether rltui recorded one
    of that name, or what is left of its blueprint (`left`) was made by that last run; its
    blueprint is then rltui's. Never xpk's blueprint file: xpk writes it before Terraform
    runs and keeps it when Terraform fails (plan/xpkstate.py)."""
    cfg = ctx.cfg
    folder = ctx.xpk_dir.parent / name
    rec = xpkstate.read_owned(folder, cfg.project_id, cfg.region, name)
    if cluster is None:
        return rec is not None or (left is not None and leftovers.made_by_own_create(folder, left))
    return cluster_marked(cluster, rec) or xpkstate.made_by_own_create(folder,
                                                                       cluster.create_time)


def _labelled(cluster: Any) -> bool:
    return cluster is not None and marked(cluster.resource_labels)


async def collect(ctx: Context) -> list[Resource]:
    """Every resource of the plan (present or absent), then any leak."""
    resources, _ = await _gather(ctx, with_job=False)
    return resources


async def collect_with_job(ctx: Context, compute: Forked | None = None
                           ) -> tuple[list[Resource], dict[str, Any] | None]:
    """`collect`, and the newest job's summary (plan/jobs.py `job_summary`) when the RayCluster
    exists (a supervised run is known from its record even while the RayCluster recovers).
    `compute`: the Compute reads, already under way in a child process (cloud/computereads.py)."""
    return await _gather(ctx, with_job=True, compute=compute)


async def _gather(ctx: Context, *, with_job: bool, compute: Forked | None = None
                  ) -> tuple[list[Resource], dict[str, Any] | None]:
    """Every call runs as soon as what it needs is known, none waits on an independent one:
    the cloud's lists and gets at once; the peering once its network and Service Networking
    are known; the Kubernetes objects (and the job) once the cluster is known to run, with the
    API token fetched while the cluster is asked for (it does not depend on the cluster)."""
    from ..cloud import computereads

    cfg = ctx.cfg
    cluster_call = asyncio.ensure_future(ctx.gke.get())
    creds_call = asyncio.ensure_future(_fresh_credentials(ctx))
    def here() -> Awaitable[ComputeReads]:
        return computereads.read(ctx.network, cfg.region, cfg.address_name)

    reads_call = asyncio.ensure_future(compute.result(here) if compute is not None else here())
    region = cfg.region
    try:
        (cluster, clusters, reads, lustre_all, peering, (kube_objects, job, nodes), (email, account)
         ) = await asyncio.gather(
            cluster_call, ctx.gke.list(), reads_call, ctx.lustre.list(),
            _peering(ctx, cfg.network, reads_call),
            _kubernetes(ctx, cluster_call, creds_call, with_job), guard_account(ctx))
    finally:
        for call in (cluster_call, creds_call, reads_call):
            _drop(call)
    networks, address, routers = reads.networks, reads.address, reads.routers
    nat_ips, firewalls, subnets = reads.nat_ips, reads.firewalls, reads.subnets
    blueprint = blueprint_names(cfg.cluster_name, region)
    left = leftovers.select(blueprint, routers, nat_ips, firewalls, subnets,
                            [n for n in networks if n.name in blueprint.networks])
    ours = cluster_is_rltuis(ctx, cfg.cluster_name, cluster, left)
    count, gpu_nodes = _node_count(cfg, cluster, nodes)
    out = [Resource("GKE cluster", cfg.cluster_name,
                    cluster.status.name.lower() if cluster else "absent", ours or cluster is None,
                    detail=words.count(count, "node") if cluster else "",
                    created=cluster.create_time if cluster else "", gpu_nodes=gpu_nodes)]
    if cluster is not None and not ours:
        out[0] = replace(out[0], hand_delete=hand_delete("GKE cluster", cfg.cluster_name, cfg))
    # Its node pools, each a row of its own: a GPU pool the budget guard deleted shows absent.
    out += [_owned(cfg, Resource("GKE node pool", str(p.name), p.status.name.lower(), ours,
                                 detail=f"{p.config.machine_type}, {words.count(_pool_nodes(p), 'node')}"))
            for p in (cluster.node_pools if cluster is not None else ())]
    names = {n.name for n in networks}
    parts = [_owned(cfg, Resource("VPC network", name, "present" if name in names else "absent",
                                  ours)) for name in blueprint.networks]
    parts += _blueprint(cfg, left, ours)
    out += [replace(r, part_of=BLUEPRINT) for r in parts]
    address_ours = address_marked(address)
    out.append(_owned(cfg, Resource(
        "IP range", cfg.address_name, "present" if address else "absent", address_ours,
        detail=f"{address.address}/{address.prefix_length}" if address else "")))
    out.append(_owned(cfg, Resource(
        "VPC peering", f"servicenetworking on {cfg.network}", "present" if peering else "absent",
        peering_marked(peering, cfg.address_name, address),
        detail=", ".join(peering.get("reservedPeeringRanges") or []) if peering else "")))
    rule_name = lustre_rule_name(cfg.network)
    rule = next((f for f in firewalls if f.name == rule_name), None)
    out.append(_owned(cfg, Resource(
        "Firewall rule", rule_name, "present" if rule else "absent", rule_marked(rule),
        detail=", ".join(rule.source_ranges) if rule else "")))
    inst = next((i for i in lustre_all if i.name.endswith(f"/instances/{cfg.lustre_instance_id}")),
                None)
    out.append(_owned(cfg, Resource("Lustre instance", cfg.lustre_instance_id,
                                    inst.state.name.lower() if inst else "absent",
                                    bool(inst and marked(inst.labels)),
                                    detail=f"{inst.capacity_gib} GiB" if inst else "",
                                    created=_rfc3339(getattr(inst, "create_time", None)))))
    out += [_owned(cfg, r) for r in kube_objects]
    out.append(_owned(cfg, Resource("Service account", email, "present" if account else "absent",
                                    is_rltuis(account), detail="the budget guard's" if account else "")))
    out += _leaks(ctx, clusters, networks, lustre_all, routers, nat_ips)
    return out, job


def _pool_nodes(pool: Any) -> int:
    """A container.v1 NodePool's nodes: initial_node_count per zone of its locations (the
    count NodePool keeps; rltui/cost.py `pool_gpu_nodes` reads it the same way)."""
    return int(pool.initial_node_count) * max(1, len(pool.locations))


def _node_count(cfg: Any, cluster: Any, nodes: list[dict[str, Any]] | None
                ) -> tuple[int, tuple[str, ...]]:
    """The cluster's node count and its GPU nodes, one creation time (RFC 3339) each: from the
    Kubernetes Nodes when they could be read (the GPU ones carry the label
    cloud.google.com/gke-accelerator = the device's accelerator; metadata.creationTimestamp),
    else from the node pools (their create-time initial_node_count: rltui/cost.py
    `pool_gpu_nodes`), which a Spot stockout or a scale-down makes wrong."""
    from ..cost import pool_gpu_nodes

    if cluster is None:
        return 0, ()
    if nodes is None:
        return (sum(p.initial_node_count for p in cluster.node_pools),
                pool_gpu_nodes(cluster, cfg.device.machine_type))
    gpu = tuple(str(meta.get("creationTimestamp") or "") for meta in
                ((n.get("metadata") or {}) for n in nodes)
                if (meta.get("labels") or {}).get(ACCELERATOR_LABEL) == cfg.device.accelerator)
    return len(nodes), gpu


def _owned(cfg: Any, r: Resource, **where: str) -> Resource:
    """An absent resource counts as rltui's (nothing to keep); a present one not rltui's
    carries the command that deletes it by hand."""
    if not r.present:
        return replace(r, owned=True)
    if r.owned or r.leak:
        return r
    name = r.name.split(" on ", 1)[0] if r.kind == "Cloud NAT" else r.name
    return replace(r, hand_delete=hand_delete(r.kind, name, cfg, **where))


def _blueprint(cfg: Any, left: leftovers.Leftovers, ours: bool) -> list[Resource]:
    """The blueprint's Cloud Routers, their NATs, NAT IPs, firewall rules and subnetworks that
    are there (the networks are listed on their own)."""
    out = []
    for router in left.routers:
        out.append(_owned(cfg, Resource("Cloud Router", router.name, "present", ours,
                                        detail=router.network.rsplit("/", 1)[-1])))
        for nat in router.nats:
            # A NAT is billed from its router's creation (compute.v1 Router.creationTimestamp).
            out.append(_owned(cfg, Resource("Cloud NAT", f"{nat.name} on {router.name}",
                                            "present", ours,
                                            detail=f"{len(nat.nat_ips)} NAT IPs",
                                            created=str(router.creation_timestamp or "")),
                              router=router.name))
    for address in left.nat_ips:
        out.append(_owned(cfg, Resource("NAT IP", address.name,
                                        str(address.status or "present").lower(), ours,
                                        detail=address.address,
                                        created=str(address.creation_timestamp or ""))))
    for rule in left.firewalls:
        out.append(_owned(cfg, Resource("Firewall rule", rule.name, "present", ours,
                                        detail=rule.network.rsplit("/", 1)[-1])))
    for subnet in left.subnets:
        out.append(_owned(cfg, Resource("Subnetwork", subnet.name, "present", ours,
                                        detail=subnet.network.rsplit("/", 1)[-1])))
    return out


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


async def _peering(ctx: Context, network: str, reads: asyncio.Future[ComputeReads]) -> Any:
    """Known only where it can exist: the network is there (in the Compute reads) and Service
    Networking is on. The connection list is asked at the same time as those two; its answer
    (or its refusal, e.g. SERVICE_DISABLED) is dropped when either says it cannot exist."""
    from ..cloud.network import SERVICE_NETWORKING

    early = asyncio.ensure_future(ctx.network.peering(network))
    try:
        known, apis = await asyncio.gather(asyncio.shield(reads), ctx.network.enabled_apis())
        if known.network(network) is None or SERVICE_NETWORKING not in apis:
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
                      ) -> tuple[list[Resource], dict[str, Any] | None,
                                 list[dict[str, Any]] | None]:
    """The plan's Kubernetes objects and the cluster's Nodes (None when they cannot be read),
    asked at once while the API answers (KUBE_ANSWERS); with `with_job`, the job's summary
    asked alongside them and kept only when the RayCluster exists (else cancelled)."""
    from .jobs import job_summary

    cfg = ctx.cfg
    wanted = [("RayCluster", "rayclusters", cfg.cluster_name),
              ("PersistentVolumeClaim", "persistentvolumeclaims", cfg.pvc_name),
              ("PersistentVolume", "persistentvolumes", cfg.pv_name),
              ("Secret", "secrets", manifests.secret_name(cfg))]
    cluster = await cluster_call
    if cluster is None or cluster.status.name not in KUBE_ANSWERS:
        return [Resource(kind, name, "absent", True) for kind, _, name in wanted], None, None
    kube = await ctx.kube(cluster, await creds_call)
    job_call = asyncio.ensure_future(job_summary(ctx)) if with_job else None
    try:
        objs, nodes = await asyncio.gather(
            asyncio.gather(*(kube.get(plural, name) for _, plural, name in wanted)),
            _nodes(kube))
        pods = None
        if objs[0] is not None and not has_head_condition(objs[0]):
            # A KubeRay without the HeadPodReady condition (before 1.3, or its gate off): the pods say.
            pods = await kube.list("pods", pod_selector(cfg.cluster_name))
        out = [_kube_resource(kind, plural, name, obj, pods)
               for (kind, plural, name), obj in zip(wanted, objs, strict=True)]
        job = None
        if job_call is not None and out[0].present:
            job = await job_call
    finally:
        if job_call is not None:
            _drop(job_call)
    return out, job, nodes


async def _nodes(kube: Any) -> list[dict[str, Any]] | None:
    """The cluster's Nodes, or None when Kubernetes refuses them (the pools' count stands in)."""
    from ..cloud.errors import CloudError

    try:
        nodes: list[dict[str, Any]] = await kube.list("nodes")
    except CloudError as exc:
        logging.getLogger(__name__).warning("nodes not read: %s", exc.message)
        return None
    return nodes


def _kube_resource(kind: str, plural: str, name: str, obj: Any, pods: list[Any] | None = None) -> Resource:
    if obj is None:
        return Resource(kind, name, "absent", True)
    owned = (obj.get("metadata", {}).get("labels") or {}).get(K8S_OWNED) == "rltui"
    if plural == "rayclusters":
        health = raycluster_health(obj, pods)
        return Resource(kind, name, "ready" if health.ready else "not ready", owned,
                        detail=health.message)
    state = "present"
    if plural in ("persistentvolumeclaims", "persistentvolumes"):
        state = ((obj.get("status") or {}).get("phase") or "present").lower()
    return Resource(kind, name, state, owned)


def _leaks(ctx: Context, clusters: list[Any], networks: list[Any], lustre_all: list[Any],
           routers: list[Any], nat_ips: list[Any]) -> list[Resource]:
    cfg = ctx.cfg
    leaks = []
    owned_clusters = set()
    present = {c.name for c in clusters}
    for c in clusters:
        if c.name != cfg.cluster_name and cluster_is_rltuis(ctx, c.name, c):
            owned_clusters.add(c.name)
            why = "labelled managed-by=rltui" if _labelled(c) else "recorded as rltui's"
            leaks.append(Resource("GKE cluster", c.name, c.status.name.lower(), True, leak=True,
                                  detail=f"{c.location}, {why}"))

    def rltuis(other: str, item: Any) -> bool:
        """Another cluster's blueprint part is rltui's: its cluster is, or (gone) was recorded
        or made the part with rltui's last xpk create for it (`cluster_is_rltuis`)."""
        return other in owned_clusters or (other not in present and cluster_is_rltuis(
            ctx, other, None, leftovers.Leftovers(networks=[item])))

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
                if other != cfg.cluster_name and rltuis(other, net):
                    leaks.append(Resource("VPC network", name, "present", True, leak=True,
                                          detail=f"made by xpk for cluster {other}"))
    # Another rltui cluster's blueprint routers and NAT IPs: `<other>-net-<i>-router`,
    # `<other>-net-<i>-nat-ips-<region>-<j>` (plan/xpkstate.py blueprint_names).
    for kind, items, pattern in (
            ("Cloud Router", routers, r"(.+)-net-[01]-router"),
            ("NAT IP", nat_ips, rf"(.+)-net-[01]-nat-ips-{re.escape(cfg.region)}-\d+")):
        for item in items:
            m = re.fullmatch(pattern, item.name)
            other = m[1] if m else None
            if other and other != cfg.cluster_name and rltuis(other, item):
                leaks.append(Resource(kind, item.name, "present", True, leak=True,
                                      detail=f"made by xpk for cluster {other}"))
    return leaks
