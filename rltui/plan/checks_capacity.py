"""`up --check` for CAPACITY's mode (rltui/capacity.py): the reservation it names, and which GPU
quota the mode uses. Every check reads; none creates.

- A reservation (CAPACITY=reservation:NAME): Compute Engine reservations.get in ZONE (xpk 1.16.0
  looks it up the same way before it makes anything: core/reservation.py _get_reservation_cached,
  `gcloud beta compute reservations describe NAME --project --zone`, and takes one whose status
  is not READY for missing). It must be READY, reserve the device's machine type
  (specificReservation.instanceProperties.machineType, "name only"), and have NUM_NODES machines
  not in use (count - inUseCount). xpk's pool targets it by name (blueprint_generator.py
  _getblock_reservation_affinity: SPECIFIC_RESERVATION), which a specific reservation requires
  ("only VMs that target the reservation by name can consume": google-cloud-compute 1.57.0
  Reservation.specific_reservation_required); an automatically consumed one (the field false)
  may have its machines taken first by any matching VM of the project (GKE "Consuming reserved
  zonal resources", reservation affinity `any`), which the check says but does not fail on.
- GPU quota: on demand, the family's standard quota only (preemptible quota is for Spot and
  preemptible VMs: compute/docs/instances/create-use-spot); a reservation's machines are not
  judged here: whether the quota is counted when the reservation is made or when its VMs start
  was not read for this check, so it is unknown, with where to look.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..capacity import RESERVATION
from .preflight import Check

if TYPE_CHECKING:
    from ..cloud.quotas import GpuFamilyQuotas
    from .context import Context

COMPUTE = "compute.googleapis.com"


async def reservation_checks(ctx: Context, enabled: set[str]) -> list[Check]:
    """The reservation CAPACITY names, in ZONE; nothing for the other modes."""
    from .checks import quota_adapter

    cfg = ctx.cfg
    cap = cfg.capacity_type
    if cap.mode != RESERVATION:
        return []
    name, machine, need = cap.reservation, cfg.device.machine_type, cfg.num_nodes
    title = f"reservation {name} in {cfg.zone}"
    if COMPUTE not in enabled:
        return [Check(title, None, "compute API is off: known once `up` enables it", "")]
    found: Any = await quota_adapter(ctx).reservation(cfg.zone, name)
    if found is None:
        return [Check(title, None, "compute API is off: known once `up` enables it", "")]
    fix = (f"check the name with `gcloud compute reservations list --project={cfg.project_id}"
           f" --filter=zone:{cfg.zone}`, or set CAPACITY in env.sh to spot or on-demand")
    if found is False:
        return [Check(title, False, f"no reservation named {name} in {cfg.zone}", fix)]
    status = _enum_name(found.status)
    if status != "READY":
        return [Check(title, False, f"{name} is {status}, not READY", fix)]
    spec = found.specific_reservation
    reserved = spec.instance_properties.machine_type
    if reserved != machine:
        return [Check(title, False, f"{name} reserves {reserved or 'no machine type'}, not {machine}"
                      f" ({cfg.device_type})", fix)]
    free = int(spec.count) - int(spec.in_use_count)
    detail = f"{need} {machine} needed, {free} free of {int(spec.count)}"
    if free < need:
        return [Check(title, False, detail, f"set NUM_NODES to {free} or less, or resize {name}")]
    if not found.specific_reservation_required:
        detail += ("; automatically consumed: other matching VMs of the project may take its"
                   " machines first")
    return [Check(title, True, detail)]


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", value) or "")


def on_demand_gpus(title: str, got: GpuFamilyQuotas, gpus: int, region: str, family: str,
                   where: str) -> Check:
    """On demand: the family's standard GPU quota, the only one on-demand VMs count against."""
    std = got.standard
    if std.limit is None:
        return Check(title, None, f"{gpus} needed; Cloud Quotas lists no standard quota for {family}"
                                  f" in {region}", where)
    detail = f"{gpus} needed, {std.limit:g} granted in {region} ({std.quota_id}; what is in use is not read)"
    if std.limit >= gpus:
        return Check(title, True, detail)
    return Check(title, False, detail, f"request more {family} GPUs in {region}: {where}")


def reservation_gpus(title: str, gpus: int, where: str) -> Check:
    return Check(title, None, f"{gpus} GPUs from the reservation; whether they count against the"
                              " GPU quota again when its VMs start is not checked", where)
