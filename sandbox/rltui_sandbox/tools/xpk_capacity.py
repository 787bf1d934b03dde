"""xpk 1.16.0's capacity type for `cluster create`, as the fake xpk's blueprint needs it.

- src/xpk/core/capacity.py get_capacity_type: `--on-demand`, `--reservation`, `--spot`, `--flex`
  counted; more than one prints "ERROR: User specified more than one of the following
  arguments. Please specify only one of `--reservation=$RESERVATION_NAME`, `--on-demand`,
  `--flex` or `--spot`." and commands/cluster_gcluster.py generate_blueprint then prints
  "Capacity type is invalid." and exits with that code (1); none is UNKNOWN (the a4 blueprint
  then asks for neither Spot nor a reservation).
- A reservation is looked up first (core/reservation.py verify_reservations_exist ->
  _get_reservation_cached): `gcloud beta compute reservations describe NAME --project=P
  --zone=Z --format="json(specificReservation,aggregateReservation,status,deploymentType,
  resourcePolicies)"`, run with the REAL gcloud (its compute override sends the beta surface to
  the sandbox's compute routes too: gcloud 528 apis_internal._BuildEndpointOverride keeps an
  override with a path as it is); a failed command, empty output or a status other than READY
  prints "Describe reservation NAME failed" and "Please confirm that your reservation name NAME
  is correct." and returns 1. A name with a project or blocks
  (`projects/P/reservations/N/reservationBlocks/B`: parse_reservation) is not imitated.
- blueprint_generator.py generate_a4_blueprint and _getblock_reservation_affinity: the GPU pool's
  `spot` is capacity_type == SPOT; `reservation_affinity` is SPECIFIC_RESERVATION naming the
  reservation, else NO_RESERVATION; FLEX_START swaps the static node count for
  get_dws_flex_start() (queued provisioning, min 0 nodes), which the sandbox does not build.
"""

from __future__ import annotations

import argparse
import json

from rltui_sandbox.tools.xpk_commands import run_for_value, say, xpk_exit

ON_DEMAND, RESERVATION, SPOT, FLEX_START, UNKNOWN = "on_demand", "reservation", "spot", "flex_start", "unknown"
DESCRIBE_FORMAT = "json(specificReservation,aggregateReservation,status,deploymentType,resourcePolicies)"


def _reservation_ready(name: str, project: str, zone: str, dry_run: bool) -> bool:
    argv = ["gcloud", "beta", "compute", "reservations", "describe", name, f"--project={project}",
            f"--zone={zone}", f"--format={DESCRIBE_FORMAT}"]
    dry = json.dumps({"specificReservation": {"count": 100, "inUseCount": 0, "instanceProperties": {}},
                      "status": "READY", "deploymentType": "DENSE"})
    code, output = run_for_value([argv], f"Get reservation {name}", dry_run=dry_run, dry_value=dry)
    if code != 0 or not output.strip():
        return False
    try:
        data = json.loads(output)
    except ValueError:
        return False
    return bool(data) and data.get("status") == "READY"


def capacity_type(args: argparse.Namespace, project: str, zone: str) -> str:
    """The capacity type, or exit 1 as xpk does (see the module docstring)."""
    kinds: list[str] = []
    if args.on_demand:
        kinds.append(ON_DEMAND)
    if args.reservation:
        for name in (r.strip() for r in args.reservation.split(",")):
            if not _reservation_ready(name, project, zone, args.dry_run):
                say(f"Describe reservation {name} failed")
                say(f"Please confirm that your reservation name {name} is correct.")
                say("Capacity type is invalid.")
                xpk_exit(1)
        kinds.append(RESERVATION)
    if args.spot:
        kinds.append(SPOT)
    if args.flex:
        kinds.append(FLEX_START)
    if len(kinds) > 1:
        say("ERROR: User specified more than one of the following arguments. Please specify only one of"
            " `--reservation=$RESERVATION_NAME`, `--on-demand`, `--flex` or `--spot`.")
        say("Capacity type is invalid.")
        xpk_exit(1)
    return kinds[0] if kinds else UNKNOWN


def reservation_affinity(reservation: str | None) -> dict[str, object]:
    """_getblock_reservation_affinity."""
    if not reservation:
        return {"consume_reservation_type": "NO_RESERVATION", "specific_reservations": []}
    return {"consume_reservation_type": "SPECIFIC_RESERVATION", "specific_reservations": [{"name": reservation}]}
