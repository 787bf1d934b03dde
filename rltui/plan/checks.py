"""Fail before spending: what the cloud can tell about the plan before anything is created
(`rltui up --check` and the Start screen). Every check reads; none creates, enables or changes.

A check is passed (ok True), failed (ok False: the cloud says the plan cannot run as it is) or
unknown (ok None: what it needs cannot be read, e.g. its API is off - `--check` never turns one
on; `up` does, and then knows). Where each answer comes from:

- Quotas: Compute Engine regions.get `quotas[]` (cloud/quotas.py). Spot VMs count against the
  PREEMPTIBLE_* metrics (world_gke_pools' sources: vanvalenlab/kiosk-console 367 for
  PREEMPTIBLE_NVIDIA_V100_GPUS); a4-highgpu-8g's is PREEMPTIBLE_NVIDIA_B200_GPUS (public notes that
  read real regions: OpenAgentsInc/hydralisk, "Spot B200 Quota: PREEMPTIBLE_NVIDIA_B200_GPUS limit
  64 in asia-southeast1" in another; google-cloud-compute 1.57's Quota.Metric enum predates it, and
  the field is a string). The GPUs needed are NUM_NODES x GPUS_PER_NODE. CPUs: xpk's
  default CPU pool, `--default-pool-cpu-num-nodes` (default 6: xpk 1.16.0 parser/cluster.py) x
  e2-standard-4's 4 vCPUs, against CPUS. Whether an A4 Spot node's 224 vCPUs also count against
  CPUS or PREEMPTIBLE_CPUS is NOT verified: not counted. Addresses: IN_USE_ADDRESSES, one per node
  when the nodes have external IPs (whether xpk's A4 blueprint gives them one is NOT verified), so
  a shortfall is reported as unknown, not failed. Lustre capacity: the Cloud Quotas API reports it
  (cloud/quotas.py): unknown here.
- Permissions: Resource Manager projects.testIamPermissions with the permissions of each step.
  Their names are from the IAM permission reference pages (docs.cloud.google.com/iam/docs/
  roles-permissions/<service>: serviceusage, container, compute, servicenetworking, lustre) and
  GKE's "API permissions" page (kubernetes-engine/docs/reference/api-permissions: clusters.create
  needs container.clusters.create and iam.serviceAccounts.actAs; nodePools.create needs
  container.clusters.update).
- Names taken: the cluster, the network, the address and the Lustre instance, with ownership
  decided as plan/inventory.py decides it (the `managed-by=rltui` label; xpk's state in rltui's
  folder for the network). Taken by rltui is fine: `up` resumes it.
- The zone offering the machine type: machineTypes.get in the configured zone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .preflight import Check

if TYPE_CHECKING:
    from ..cloud.quotas import Quota, QuotaAdapter
    from .context import Context

COMPUTE = "compute.googleapis.com"
CONTAINER = "container.googleapis.com"
LUSTRE = "lustre.googleapis.com"
XPK_DEFAULT_POOL_NODES = 6      # xpk 1.16.0 --default-pool-cpu-num-nodes default
DEFAULT_POOL_CPUS = 4           # e2-standard-4

# Step -> the permissions it needs on the project (see the module docstring for the sources).
STEP_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "enable APIs": ("serviceusage.services.enable", "serviceusage.services.list"),
    "GKE cluster (xpk)": ("container.clusters.create", "container.clusters.get", "container.clusters.update",
                          "container.operations.get", "iam.serviceAccounts.actAs", "compute.networks.create",
                          "compute.subnetworks.create", "compute.firewalls.create"),
    "IP range": ("compute.globalAddresses.create", "compute.globalAddresses.get"),
    "VPC peering": ("servicenetworking.services.addPeering",),
    "Lustre instance": ("lustre.instances.create", "lustre.instances.get", "lustre.operations.get"),
    "Kubernetes objects": ("container.persistentVolumes.create", "container.persistentVolumeClaims.create",
                           "container.secrets.create", "container.thirdPartyObjects.create"),
    "submit (port-forward)": ("container.pods.portForward",),
    "teardown": ("container.clusters.delete", "lustre.instances.delete", "compute.globalAddresses.delete",
                 "compute.networks.delete", "servicenetworking.services.deleteConnection"),
}


# A predefined role that holds each service's permissions, as the IAM pages above list them
# (roles/lustre.admin, roles/container.admin, roles/servicenetworking.networksAdmin; GKE's page
# names roles/iam.serviceAccountUser for actAs). Others: roles/editor.
ROLES = {"lustre": "roles/lustre.admin", "container": "roles/container.admin",
         "servicenetworking": "roles/servicenetworking.networksAdmin", "iam": "roles/iam.serviceAccountUser"}


def quota_adapter(ctx: Context) -> QuotaAdapter:
    from ..cloud.quotas import QuotaAdapter

    return ctx._get("quotas", lambda: QuotaAdapter(ctx.endpoints, ctx.cfg.project_id))


async def cloud_checks(ctx: Context, enabled: set[str]) -> list[Check]:
    """Quotas, permissions, names and the machine type, asked at once."""
    parts = await asyncio.gather(_quota_checks(ctx, enabled), _permission_checks(ctx),
                                 _name_checks(ctx, enabled), _machine_check(ctx, enabled),
                                 return_exceptions=True)
    out: list[Check] = []
    for what, part in zip(("quotas", "permissions", "names", "machine type"), parts, strict=True):
        if isinstance(part, BaseException):
            if isinstance(part, asyncio.CancelledError):
                raise part
            out.append(Check(what, None, f"could not be read: {str(part)[:160]}", "run the check again"))
        else:
            out += part
    quota_adapter(ctx).close()
    return out


def _off(api: str) -> str:
    return f"{api.removesuffix('.googleapis.com')} API is off: known once `up` enables it"


async def _quota_checks(ctx: Context, enabled: set[str]) -> list[Check]:
    cfg = ctx.cfg
    device = cfg.device
    gpu_metric = "PREEMPTIBLE_" + device.accelerator.upper().replace("-", "_") + "_GPUS"
    gpus = cfg.num_nodes * cfg.gpus_per_node
    cpus = XPK_DEFAULT_POOL_NODES * DEFAULT_POOL_CPUS
    nodes = cfg.num_nodes + XPK_DEFAULT_POOL_NODES
    lustre = Check("Lustre capacity quota", None,
                   f"{cfg.lustre_capacity} GiB needed; the Cloud Quotas API reports this quota"
                   " (lustre.googleapis.com), not read by rltui",
                   "console: IAM & Admin > Quotas, filter lustre.googleapis.com")
    names = (f"Spot GPU quota ({gpu_metric})", "CPU quota (CPUS)", "address quota (IN_USE_ADDRESSES)")
    if COMPUTE not in enabled:
        return [Check(n, None, _off(COMPUTE), "") for n in names] + [lustre]
    quotas = await quota_adapter(ctx).region_quotas(cfg.region)
    if quotas is None:
        return [Check(n, None, f"{cfg.region}'s quotas could not be read", "") for n in names] + [lustre]

    def need(name: str, metric: str, wanted: float, fail: bool) -> Check:
        q: Quota | None = quotas.get(metric)
        fix = f"request more {metric} quota in {cfg.region} (console: IAM & Admin > Quotas)"
        if q is None:
            # A region lists only some metrics; one it leaves out was seen to mean none granted
            # (OpenAgentsInc/hydralisk's GCE probe notes: "missing regional quota metrics" for B200
            # in us-east1), but that is not documented: unknown, with the fix.
            return Check(name, None, f"{cfg.region} lists no {metric} quota (likely none granted)", fix)
        detail = f"{wanted:g} needed, {q.free:g} free of {q.limit:g} in {cfg.region}"
        if q.free >= wanted:
            return Check(name, True, detail)
        return Check(name, False if fail else None, detail, fix)

    return [need(names[0], gpu_metric, gpus, True), need(names[1], "CPUS", cpus, True),
            need(names[2], "IN_USE_ADDRESSES", nodes, False), lustre]


async def _permission_checks(ctx: Context) -> list[Check]:
    wanted = {p for perms in STEP_PERMISSIONS.values() for p in perms}
    try:
        held = await quota_adapter(ctx).held_permissions(wanted)
    except Exception as exc:  # noqa: BLE001 - e.g. Resource Manager off: the permissions are unknown
        return [Check("permissions", None, f"testIamPermissions failed: {str(exc)[:160]}",
                      "enable cloudresourcemanager.googleapis.com, or check the IAM page")]
    out = []
    for step, perms in STEP_PERMISSIONS.items():
        missing = [p for p in perms if p not in held]
        roles = sorted({ROLES.get(p.split(".", 1)[0], "roles/editor") for p in missing})
        out.append(Check(f"permissions: {step}", not missing,
                         ("missing " + ", ".join(missing)) if missing else f"{len(perms)} held",
                         f"ask a project owner for {' and '.join(roles)}" if missing else ""))
    return out


async def _name_checks(ctx: Context, enabled: set[str]) -> list[Check]:
    from .inventory import _labelled, _xpk_state

    cfg = ctx.cfg

    async def maybe(api: str, call: Callable[[], Awaitable[Any]]) -> Any:
        return await call() if api in enabled else None

    cluster, network, address, lustre = await asyncio.gather(
        maybe(CONTAINER, ctx.gke.get), maybe(COMPUTE, lambda: ctx.network.network(cfg.network)),
        maybe(COMPUTE, lambda: ctx.network.address(cfg.address_name)),
        maybe(LUSTRE, lambda: ctx.lustre.get(cfg.lustre_instance_id)))
    ours = _labelled(cluster) or _xpk_state(ctx, cfg.cluster_name)

    def name(kind: str, value: str, found: Any, owned: bool, api: str, fix: str) -> Check:
        title = f"name: {kind} {value}"
        if found is None or found is False:
            return Check(title, True, "free" if api in enabled else "free (its API is off: nothing of it exists)")
        if owned:
            return Check(title, True, "exists, made by rltui: up resumes it")
        return Check(title, False, "taken by something rltui did not make", fix)

    inst_owned = bool(lustre is not None and lustre.labels.get("managed-by") == "rltui")
    return [
        name("GKE cluster", cfg.cluster_name, cluster, ours, CONTAINER, "set CLUSTER_NAME to another name in env.sh"),
        name("VPC network", cfg.network, network, ours, COMPUTE, "set NETWORK_NAME (or CLUSTER_NAME) in env.sh"),
        # The address and the peering are rltui's whoever made them (inventory.py: owned=True).
        name("IP range", cfg.address_name, address, True, COMPUTE, ""),
        name("Lustre instance", cfg.lustre_instance_id, lustre, inst_owned, LUSTRE,
             "set LUSTRE_INSTANCE_ID to another name in env.sh"),
    ]


async def _machine_check(ctx: Context, enabled: set[str]) -> list[Check]:
    cfg = ctx.cfg
    machine = cfg.device.machine_type
    title = f"{machine} in {cfg.zone}"
    if COMPUTE not in enabled:
        return [Check(title, None, _off(COMPUTE), "")]
    found = await quota_adapter(ctx).machine_type(cfg.zone, machine)
    if found is None:
        return [Check(title, None, _off(COMPUTE), "")]
    if found is False:
        return [Check(title, False, f"{cfg.zone} does not offer {machine}",
                      f"set ZONE (and REGION) in env.sh to a zone that offers {machine}")]
    gpus = sum(a.guest_accelerator_count for a in found.accelerators)
    return [Check(title, True, f"offered: {found.guest_cpus} vCPUs, {gpus} GPUs")]
