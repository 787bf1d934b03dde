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
from dataclasses import asdict, dataclass
from typing import Any

from .. import manifests
from . import xpkstate
from .context import Context

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

    @property
    def present(self) -> bool:
        return self.state != "absent"

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _xpk_state(ctx: Context, cluster: str) -> bool:
    """xpk's blueprint for `cluster` in the folder rltui runs xpk from for it."""
    folder = ctx.xpk_dir.parent / cluster
    return xpkstate.has_state(folder, ctx.cfg.project_id, ctx.cfg.region, cluster)


def _labelled(cluster: Any) -> bool:
    return cluster is not None and cluster.resource_labels.get("managed-by") == "rltui"


async def collect(ctx: Context) -> list[Resource]:
    """Every resource of the plan (present or absent), then any leak."""
    cfg = ctx.cfg
    cluster, clusters, networks, lustre_all, address, peering = await asyncio.gather(
        ctx.gke.get(), ctx.gke.list(), ctx.network.networks(), ctx.lustre.list(),
        ctx.network.address(cfg.address_name), _peering(ctx, cfg.network))
    ours = _labelled(cluster) or _xpk_state(ctx, cfg.cluster_name)
    out = [Resource("GKE cluster", cfg.cluster_name,
                    cluster.status.name.lower() if cluster else "absent", ours or cluster is None,
                    detail=f"{sum(p.initial_node_count for p in cluster.node_pools)} nodes"
                    if cluster else "")]
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
                        detail=f"{inst.capacity_gib} GiB" if inst else ""))
    out += await _kubernetes(ctx, cluster)
    out += _leaks(ctx, clusters, networks, lustre_all)
    return out


async def _peering(ctx: Context, network: str) -> Any:
    """Asked only where it can exist: the network is there and Service Networking is on."""
    from ..cloud.network import SERVICE_NETWORKING

    if await ctx.network.network(network) is None:
        return None
    if SERVICE_NETWORKING not in await ctx.network.enabled_apis():
        return None
    return await ctx.network.peering(network)


async def _kubernetes(ctx: Context, cluster: Any) -> list[Resource]:
    cfg = ctx.cfg
    wanted = [("RayCluster", "rayclusters", cfg.cluster_name),
              ("PersistentVolumeClaim", "persistentvolumeclaims", cfg.pvc_name),
              ("PersistentVolume", "persistentvolumes", cfg.pv_name),
              ("Secret", "secrets", manifests.secret_name(cfg))]
    if cluster is None or cluster.status.name != "RUNNING":
        return [Resource(kind, name, "absent", True) for kind, _, name in wanted]
    kube = await ctx.kube()
    out = []
    for kind, plural, name in wanted:
        obj = await kube.get(plural, name)
        if obj is None:
            out.append(Resource(kind, name, "absent", True))
            continue
        owned = (obj.get("metadata", {}).get("labels") or {}).get(K8S_OWNED) == "rltui"
        state = "present"
        if plural == "rayclusters":
            from ..cloud.kube import raycluster_health

            health = raycluster_health(obj)
            state = "ready" if health.ready else "not ready"
            out.append(Resource(kind, name, state, owned, detail=health.message))
            continue
        if plural in ("persistentvolumeclaims", "persistentvolumes"):
            state = ((obj.get("status") or {}).get("phase") or "present").lower()
        out.append(Resource(kind, name, state, owned))
    return out


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
