"""Fail before spending: what the cloud can tell about the plan before anything is created
(`rltui up --check` and the Start screen). Every check reads; none creates, enables or changes.

A check is passed (ok True), failed (ok False: the cloud says the plan cannot run as it is) or
unknown (ok None: what it needs cannot be read, e.g. its API is off - `--check` never turns one
on; `up` does, and then knows). Where each answer comes from:

- Quotas: Compute Engine regions.get `quotas[]` (cloud/quotas.py) for CPUs and addresses. Spot
  GPUs are not there for the newest families (no B200, H200 or H100 MEGA metric in compute v1's
  Quota.Metric; cloud/quotas.py has the sources): they are read from the Cloud Quotas API, metric
  compute.googleapis.com/preemptible_gpus_per_gpu_family, gpu_family NVIDIA_B200 for b200-8, and
  reported unknown, with the console page and the gcloud command, where that API is off or the
  family's value is not known. The GPUs needed are NUM_NODES x GPUS_PER_NODE, against the limit
  (what is in use is not read there). Which quota a Spot VM counts against: the preemptible one
  once it is granted ("After Compute Engine grants you preemptible CPU quota in that region, all
  preemptible VMs count against that quota"), the standard one where none is ("In regions where
  you don't have preemptible CPU quota, you can use standard CPU quota to launch preemptible
  VMs": docs.cloud.google.com/compute/docs/instances/create-use-preemptible, "Preemptible CPU
  quotas"; that Spot VMs' GPUs do the same: "To prevent Spot VMs from consuming your quotas for
  standard VMs' CPUs, GPUs, and disks, consider requesting preemptible quota for Spot VMs",
  docs.cloud.google.com/compute/docs/instances/create-use-spot). So a preemptible limit of 0
  (none granted) sends the check to the family's standard quota (compute.googleapis.com/
  gpus_per_gpu_family, GPUS-PER-GPU-FAMILY-per-project-region), and the check says which quota
  it judged; a granted preemptible limit is judged alone, even when short (the standard quota
  does not make up the difference, by the first sentence quoted). CPUs: xpk's default CPU pool,
  `--default-pool-cpu-num-nodes` (default 6: xpk 1.16.0 parser/cluster.py) x e2-standard-4's 4
  vCPUs, against CPUS. Whether an A4 Spot node's 224 vCPUs also count against CPUS or
  PREEMPTIBLE_CPUS is NOT verified: not counted. Addresses: xpk makes the cluster with private
  nodes off (`enable_private_nodes=bool(args.private)`, xpk src/xpk/commands/cluster_gcluster.py;
  rltui passes no --private), so every node has an external IP, and the blueprint's vpc module
  reserves 2 static external NAT IPs per network (net-0, net-1: ips_per_nat 2), used by its Cloud
  NATs: IN_USE_ADDRESSES must hold the nodes and the 4 NAT IPs, STATIC_ADDRESSES the 4 NAT IPs
  (the compute v1 metric names; what each counts is as rltui reads Compute Engine's quota page,
  not re-read word for word here). Lustre capacity (lustre.googleapis.com/capacity) is not
  checked: rltui does not read it (cloud/quotas.py), and a check that is always unknown would be
  counted among what `up` makes known once it enables an API, which it never does.
- Permissions: Resource Manager projects.testIamPermissions with the permissions of each step,
  xpk's Terraform included: what the a4 blueprint's modules make (cluster-toolkit v1.94.0
  network/vpc: networks, subnetworks, firewall rules (which also need the network's
  compute.networks.updatePolicy), a Cloud Router with its NAT (a router update) and the regional
  NAT addresses it uses; network/gpu-rdma-vpc; scheduler/gke-cluster and compute/gke-node-pool)
  and the operations Terraform polls. Their names are from the IAM permission reference pages
  (docs.cloud.google.com/iam/docs/roles-permissions/<service>: serviceusage, container, compute,
  servicenetworking, lustre; the compute ones as public custom roles for the same Terraform
  resources list them too) and GKE's "API permissions" page (kubernetes-engine/docs/reference/
  api-permissions: clusters.create needs container.clusters.create and iam.serviceAccounts.actAs;
  nodePools.create and nodePools.delete need container.clusters.update).
- Names taken: the cluster, the network, the address and the Lustre instance, with ownership
  decided as plan/inventory.py and the teardown decide it (the `managed-by=rltui` label; xpk's
  state in rltui's folder for the network; for the IP range its label, or a description
  starting with "managed-by=rltui", plan/ownership.py RULE_MARK). Taken by rltui is fine: `up`
  resumes it. A range with the name but without the mark is not rltui's: the teardown leaves it
  (IpRangeStep.destroy) and `up` does not adopt it, so the check fails with the command that
  deletes it by hand.
- Permissions of the IP range and the peering: the Private Services Access "Required
  permissions" list (compute.globalAddresses.create, compute.globalAddresses.createInternal,
  compute.networks.use, servicenetworking.services.addPeering, among others:
  docs.cloud.google.com/sql/docs/mysql/configure-private-services-access); rltui also sets the
  range's labels with globalAddresses.setLabels when the insert drops them (cloud/network.py
  create_address), deletes the range (compute.globalAddresses.deleteInternal, an INTERNAL
  address) and, when Service Networking will not delete the connection, removes the peering
  from the network itself (compute networks.removePeering: compute.networks.removePeering).
  The Lustre firewall rule (LustreFirewallStep) is rltui's own insert on xpk's network:
  compute.firewalls.create (and the network's compute.networks.updatePolicy, as for xpk's
  rules); its delete is the teardown's compute.firewalls.delete.
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
NAT_IPS = 4                     # the a4 blueprint's: 2 networks x ips_per_nat 2
QUOTAS_CONSOLE = "https://console.cloud.google.com/iam-admin/quotas"

# Step -> the permissions it needs on the project (see the module docstring for the sources).
STEP_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "enable APIs": ("serviceusage.services.enable", "serviceusage.services.list"),
    "GKE cluster (xpk)": ("container.clusters.create", "container.clusters.get", "container.clusters.update",
                          "container.operations.get", "iam.serviceAccounts.actAs"),
    "xpk's networks (Terraform)": (
        "compute.networks.create", "compute.networks.get", "compute.networks.updatePolicy",
        "compute.subnetworks.create", "compute.subnetworks.get",
        "compute.firewalls.create", "compute.firewalls.get",
        "compute.routers.create", "compute.routers.get", "compute.routers.update",
        "compute.addresses.create", "compute.addresses.get", "compute.addresses.use",
        "compute.globalOperations.get", "compute.regionOperations.get"),
    "IP range": ("compute.globalAddresses.create", "compute.globalAddresses.createInternal",
                 "compute.globalAddresses.get", "compute.globalAddresses.setLabels",
                 "compute.networks.use"),
    "VPC peering": ("servicenetworking.services.addPeering",),
    "Lustre instance": ("lustre.instances.create", "lustre.instances.get", "lustre.operations.get"),
    "Lustre firewall rule": ("compute.firewalls.create", "compute.firewalls.get",
                             "compute.networks.updatePolicy"),
    "Kubernetes objects": ("container.persistentVolumes.create", "container.persistentVolumeClaims.create",
                           "container.secrets.create", "container.thirdPartyObjects.create"),
    "submit (port-forward)": ("container.pods.portForward",),
    "teardown": ("container.clusters.delete", "lustre.instances.delete", "compute.globalAddresses.delete",
                 "compute.globalAddresses.deleteInternal", "servicenetworking.services.deleteConnection",
                 "compute.networks.removePeering", "compute.networks.delete",
                 "compute.subnetworks.delete", "compute.firewalls.delete", "compute.routers.delete",
                 "compute.addresses.delete"),
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
    from .checks_capacity import reservation_checks

    parts = await asyncio.gather(_quota_checks(ctx, enabled), _permission_checks(ctx),
                                 _name_checks(ctx, enabled), _machine_check(ctx, enabled),
                                 reservation_checks(ctx, enabled), return_exceptions=True)
    out: list[Check] = []
    for what, part in zip(("quotas", "permissions", "names", "machine type", "reservation"), parts,
                          strict=True):
        if isinstance(part, BaseException):
            if isinstance(part, asyncio.CancelledError):
                raise part
            out.append(Check(what, None, f"could not be read: {str(part)[:160]}", "run the check again"))
        else:
            out += part
    await quota_adapter(ctx).aclose()
    return out


def _off(api: str) -> str:
    return f"{api.removesuffix('.googleapis.com')} API is off: known once `up` enables it"


async def _quota_checks(ctx: Context, enabled: set[str]) -> list[Check]:
    """The Spot GPU quota (Cloud Quotas) and the region's CPU and address quotas (Compute's
    regions.get), read at once."""
    cfg = ctx.cfg
    cpus = XPK_DEFAULT_POOL_NODES * DEFAULT_POOL_CPUS
    nodes = cfg.num_nodes + XPK_DEFAULT_POOL_NODES
    names = ("CPU quota (CPUS)", "address quota (IN_USE_ADDRESSES)", "static address quota (STATIC_ADDRESSES)")

    async def region() -> dict[str, Quota] | None:
        return await quota_adapter(ctx).region_quotas(cfg.region) if COMPUTE in enabled else None

    gpu, quotas = await asyncio.gather(_gpu_check(ctx), region())
    if COMPUTE not in enabled:
        return [gpu] + [Check(n, None, _off(COMPUTE), "") for n in names]
    if quotas is None:
        return [gpu] + [Check(n, None, f"{cfg.region}'s quotas could not be read", "") for n in names]

    def need(name: str, metric: str, wanted: float, what: str) -> Check:
        q: Quota | None = quotas.get(metric)
        fix = f"request more {metric} quota in {cfg.region} ({QUOTAS_CONSOLE}?project={cfg.project_id})"
        if q is None:
            return Check(name, None, f"{cfg.region} lists no {metric} quota ({wanted:g} needed: {what})", fix)
        detail = f"{wanted:g} needed ({what}), {q.free:g} free of {q.limit:g} in {cfg.region}"
        return Check(name, True, detail) if q.free >= wanted else Check(name, False, detail, fix)

    return [gpu, need(names[0], "CPUS", cpus, f"xpk's {XPK_DEFAULT_POOL_NODES} e2-standard-4 nodes"),
            need(names[1], "IN_USE_ADDRESSES", nodes + NAT_IPS,
                 f"{nodes} nodes' external IPs and the blueprint's {NAT_IPS} NAT IPs"),
            need(names[2], "STATIC_ADDRESSES", NAT_IPS, f"the blueprint's {NAT_IPS} NAT IPs")]


async def _gpu_check(ctx: Context) -> Check:
    """The Spot GPU quota of the device's family in the region, from the Cloud Quotas API
    (cloud/quotas.py): the preemptible quota where one is granted, else the standard one (see
    the module docstring); unknown, with where to look, when it cannot be read."""
    from ..capacity import ON_DEMAND, RESERVATION
    from ..cloud.quotas import GPU_FAMILIES, PREEMPTIBLE_GPUS_METRIC
    from .checks_capacity import on_demand_gpus, reservation_gpus

    cfg = ctx.cfg
    accel = cfg.device.accelerator
    family = GPU_FAMILIES.get(accel)
    gpus = cfg.num_nodes * cfg.gpus_per_node
    mode = cfg.capacity_type.mode
    title = f"{'GPU' if mode in (ON_DEMAND, RESERVATION) else 'Spot GPU'} quota ({family or accel})"
    console = f"{QUOTAS_CONSOLE}?project={cfg.project_id}"
    where = (f"see {console} (Preemptible GPUs per GPU family) or `gcloud quotas info list"
             f" --service=compute.googleapis.com --project={cfg.project_id}`")
    if mode == RESERVATION:
        return reservation_gpus(title, gpus, where)
    if family is None:
        return Check(title, None, f"{gpus} needed; the gpu_family of {accel} in Cloud Quotas is not known"
                                  " to rltui", where)
    try:
        got = await quota_adapter(ctx).gpu_family_quotas(cfg.region, family)
    except Exception as exc:  # noqa: BLE001 - e.g. no cloudquotas.quotas.get: unknown, with the reason
        return Check(title, None, f"Cloud Quotas could not be read: {str(exc)[:160]}", where)
    if mode == ON_DEMAND:
        return on_demand_gpus(title, got, gpus, cfg.region, family, where)
    pre, std = got.preemptible, got.standard
    if pre.limit is None and pre.why == "off":
        return Check(title, None, f"{gpus} needed; the Cloud Quotas API, where Google lists this quota,"
                                  " is off (`--check` turns nothing on)",
                     f"gcloud services enable cloudquotas.googleapis.com --project={cfg.project_id},"
                     f" then check again (or see {console})")
    if pre.limit is None:
        return Check(title, None, f"{gpus} needed; Cloud Quotas lists no {PREEMPTIBLE_GPUS_METRIC}"
                                  f" for {family} in {cfg.region}", where)
    unread = "what is in use is not read"
    if pre.limit > 0:   # granted: every Spot VM counts against it, and only it
        detail = f"{gpus} needed, {pre.limit:g} granted in {cfg.region} ({pre.quota_id}; {unread})"
        if pre.limit >= gpus:
            return Check(title, True, detail)
        return Check(title, False, detail + "; with preemptible quota granted, Spot VMs do not use"
                     " the standard quota", f"request more Spot {family} GPUs in {cfg.region}: {where}")
    # None granted as preemptible: Spot VMs use the family's standard quota.
    none = f"{gpus} needed; no preemptible quota granted in {cfg.region}, so Spot VMs use the standard quota"
    if std.limit is None:
        return Check(title, None, f"{none}, which Cloud Quotas does not list for {family}", where)
    detail = f"{none}: {std.limit:g} granted ({std.quota_id}; {unread})"
    if std.limit >= gpus:
        return Check(title, True, detail)
    return Check(title, False, detail, f"request Spot (preemptible) or standard {family} GPUs in"
                                      f" {cfg.region}: {where}")


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
    from . import leftovers
    from .inventory import cluster_is_rltuis
    from .ownership import address_marked, hand_delete

    cfg = ctx.cfg

    async def maybe(api: str, call: Callable[[], Awaitable[Any]]) -> Any:
        return await call() if api in enabled else None

    cluster, network, address, lustre = await asyncio.gather(
        maybe(CONTAINER, ctx.gke.get), maybe(COMPUTE, lambda: ctx.network.network(cfg.network)),
        maybe(COMPUTE, lambda: ctx.network.address(cfg.address_name)),
        maybe(LUSTRE, lambda: ctx.lustre.get(cfg.lustre_instance_id)))
    # Whose the cluster (and so xpk's networks) is: its label or rltui's record of it, never
    # xpk's blueprint file (inventory.cluster_is_rltuis); gone, what its blueprint left.
    left = await leftovers.find(ctx) if cluster is None and COMPUTE in enabled else None
    ours = cluster_is_rltuis(ctx, cfg.cluster_name, cluster, left)

    def name(kind: str, value: str, found: Any, owned: bool, api: str, fix: str) -> Check:
        title = f"name: {kind} {value}"
        if found is None or found is False:
            return Check(title, True, "free" if api in enabled else "free (its API is off: nothing of it exists)")
        if owned:
            return Check(title, True, "exists, made by rltui: up resumes it")
        return Check(title, False, "taken by something rltui did not make", fix)

    inst_owned = bool(lustre is not None and lustre.labels.get("managed-by") == "rltui")
    address_name = name("IP range", cfg.address_name, address, address_marked(address or None), COMPUTE, "")
    if address_name.ok is False:
        address_name = Check(address_name.name, False,
                             "exists, not rltui's (no managed-by=rltui label or description): up will"
                             " refuse to adopt it; delete it by hand or pick another name (it is"
                             " google-managed-services-<network>: set CLUSTER_NAME in env.sh)",
                             hand_delete("IP range", cfg.address_name, cfg))
    return [
        name("GKE cluster", cfg.cluster_name, cluster, ours, CONTAINER, "set CLUSTER_NAME to another name in env.sh"),
        name("VPC network", cfg.network, network, ours, COMPUTE, "set CLUSTER_NAME in env.sh (xpk names the network"
             " after it)"),
        address_name,
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
