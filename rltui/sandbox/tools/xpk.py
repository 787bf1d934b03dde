"""A fake `xpk` for the sandbox: `cluster create|delete|list` and `version`, with xpk's argv.

Like the real xpk on the Cluster Toolkit path (b200-8), `cluster create` keeps its state under
`./xpkclusters/` of the directory it runs in, and `cluster delete` deletes the networks only
when it finds that state there; from elsewhere it deletes the GKE cluster alone and the
networks stay. Progress is printed as the sandbox reaches each milestone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from rltui.sandbox.tools import ControlError, call, control_url as resolve_url, property_value, run

XPK_VERSION = "0.14.0"
STATE_DIR = "xpkclusters"


def say(text: str) -> None:
    sys.stdout.write(f"[XPK] {text}\n")
    sys.stdout.flush()


def relay(text: str, end: str = "\n") -> None:
    """Print the sandbox's progress lines; main prints the exit line itself."""
    if text != "[XPK] Exiting XPK cleanly":
        sys.stdout.write(text + end)
        sys.stdout.flush()


def state_dir(cluster: str) -> Path:
    """Where this cluster's Toolkit state lives, relative to the current directory."""
    return Path(STATE_DIR) / cluster


def _shared(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", default=None, help="GCE project name (default: gcloud's project)")
    parser.add_argument("--zone", default=None, help="GCE zone, e.g. us-east1-b")
    parser.add_argument("--dry-run", action="store_true", help="print what would run; change nothing")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xpk", description="xpk (rltui sandbox fake)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{cluster,version}")
    commands.add_parser("version", help="Get version of xpk.")
    cluster = commands.add_parser("cluster", help="Commands around creating, deleting, and viewing clusters.")
    sub = cluster.add_subparsers(dest="subcommand", required=True, metavar="{create,delete,list}")

    create = sub.add_parser("create", help="Create cloud clusters.")
    device = create.add_mutually_exclusive_group(required=True)
    device.add_argument("--device-type")
    device.add_argument("--tpu-type")
    create.add_argument("--cluster", required=True)
    create.add_argument("--num-nodes", type=int, default=2)
    create.add_argument("--default-pool-cpu-machine-type", default="e2-standard-16")
    create.add_argument("--default-pool-cpu-num-nodes", type=int, default=6)
    for flag in ("--spot", "--on-demand", "--flex", "--enable-lustre-csi-driver", "--enable-gcsfuse-csi-driver",
                 "--enable-gcpfilestore-csi-driver", "--enable-parallelstore-csi-driver",
                 "--enable-workload-identity", "--private", "--enable-pathways"):
        create.add_argument(flag, action="store_true")
    for flag in ("--reservation", "--gke-version", "--cluster-state-gcs-bucket", "--custom-cluster-arguments",
                 "--custom-nodepool-arguments"):
        create.add_argument(flag)
    create.add_argument("--num-slices", type=int, default=1)
    _shared(create)

    delete = sub.add_parser("delete", help="Delete cloud clusters.")
    delete.add_argument("--cluster", required=True)
    delete.add_argument("--force", action="store_true", help="skip the confirmation")
    _shared(delete)

    listing = sub.add_parser("list", help="List cloud clusters.")
    _shared(listing)
    return parser


def _where(args: argparse.Namespace, properties: Path | None) -> tuple[str, str]:
    project = args.project or property_value("project", properties)
    zone = args.zone or property_value("compute/zone", properties)
    if not project or not zone:
        missing = "--project" if not project else "--zone"
        raise ControlError("INVALID_ARGUMENT", f"{missing} is required (gcloud has no default for it)")
    return project, zone


def cluster_create(args: argparse.Namespace, url: str, properties: Path | None) -> int:
    project, zone = _where(args, properties)
    if args.tpu_type:
        raise ControlError("INVALID_ARGUMENT", "the sandbox emulates GPU clusters only: use --device-type=b200-8")
    say(f"Starting xpk v{XPK_VERSION} (rltui sandbox)")
    say(f"Working on {project=} and {zone}")
    if args.dry_run:
        say(f"Would create {args.cluster} with {args.num_nodes} x {args.device_type} via Cluster Toolkit")
        return 0
    # The Toolkit writes its blueprint first, so a create that dies still leaves state to delete from.
    folder = state_dir(args.cluster)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deployment.json").write_text(json.dumps({
        "project": project, "zone": zone, "cluster": args.cluster, "device_type": args.device_type,
        "num_nodes": args.num_nodes, "spot": args.spot, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }, indent=1), encoding="utf-8")
    say(f"Cluster Toolkit blueprint written to {folder.resolve()}")
    call(url, "xpk.create", {
        "project": project, "zone": zone, "cluster": args.cluster, "num_nodes": args.num_nodes,
        "device_type": args.device_type, "spot": args.spot,
        "default_pool_cpu_machine_type": args.default_pool_cpu_machine_type,
    }, relay)
    return 0


def cluster_delete(args: argparse.Namespace, url: str, properties: Path | None) -> int:
    project, zone = _where(args, properties)
    folder = state_dir(args.cluster)
    if not args.force:
        sys.stdout.write(f"[XPK] Planning to delete cluster {args.cluster} in project {project}. "
                         "Do you wish to delete: y (yes) / n (no):\n")
        sys.stdout.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            say("Skipping delete command.")
            return 0
    with_networks = folder.is_dir()
    if not with_networks:
        say(f"No Cluster Toolkit state for {args.cluster} under {Path(STATE_DIR).resolve()}: deleting the GKE "
            f"cluster only. Networks {args.cluster}-net-0, {args.cluster}-net-1 and {args.cluster}-rdma-net are "
            "NOT deleted; run xpk cluster delete from the directory where xpk cluster create ran to remove them.")
    if args.dry_run:
        return 0
    call(url, "xpk.delete", {"project": project, "zone": zone, "cluster": args.cluster,
                             "delete_networks": with_networks}, relay)
    if with_networks:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


def cluster_list(args: argparse.Namespace, url: str, properties: Path | None) -> int:
    project, zone = _where(args, properties)
    clusters = call(url, "xpk.list", {"project": project, "zone": zone})
    rows = [("NAME", "LOCATION", "STATUS")] + [(c["name"], c.get("location", ""), c.get("status", ""))
                                               for c in clusters]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
    return 0


def main(argv: list[str] | None = None, control_url: str | None = None,
         properties: Path | str | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)  # exits 2 on usage errors
    if args.command == "version":
        say(f"xpk version: {XPK_VERSION}")
        return 0
    props = Path(properties) if properties else None
    actions = {"create": cluster_create, "delete": cluster_delete, "list": cluster_list}
    try:
        code = actions[args.subcommand](args, resolve_url(control_url), props)
    except ControlError as exc:
        say(f"{exc.code}: {exc.message}")
        code = 1
    except KeyboardInterrupt:
        code = 130
    if code == 0:
        say("Exiting XPK cleanly")
    else:
        say(f"XPK failed, error code {code}")
    return code


if __name__ == "__main__":
    run(main)
