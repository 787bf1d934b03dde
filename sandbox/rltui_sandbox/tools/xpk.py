"""A fake `xpk` 1.16.0 for the sandbox: `cluster create|delete|list` and `version`, with xpk's argv.

What it imitates, from AI-Hypercomputer/xpk 1.16.0 (src/xpk/...):
- the parser: every `cluster create` / `cluster delete` flag of parser/cluster.py and
  parser/common.py (tests/data/xpk_1.16.0_flags.json is the list; unused ones are accepted and
  ignored), including the BooleanOptionalAction pairs (--dry-run/--no-dry-run, --quiet, ...);
- the console (utils/console.py): every line is `[XPK] ...`; xpk_exit prints
  `[XPK] Exiting XPK cleanly` (0) or `[XPK] XPK failed, error code N`; main.py prints
  `[XPK] Starting xpk v1.16.0` first (core/updates.py) and `[XPK] XPK Done.` after a command that
  returns without xpk_exit (`version`);
- `cluster create` for b200-8 (commands/cluster.py): "Creating the cluster using Cluster Toolkit.
  Machine Type: a4-highgpu-8g ...", then commands/cluster_gcluster.py: the gcloud credential
  directory check ("Failed to find gcloud credential directory. ..." and exit 1; real xpk checks
  only ~/.config/gcloud, the fake checks $CLOUDSDK_CONFIG when set, so the sandbox can keep its
  own), the state layout `./xpkclusters/blueprints/<project>-<region>/<cluster>-<h5>.yaml` plus a
  folder of that name (the a4 blueprint's dependencies), and `./xpkclusters/gcluster-out/`
  (uploads/<prefix>/ staged copies, <prefix>/<deployment>/ the deployment gcluster creates);
  h5 = xpk's hash_string of `<project>-<region>-<cluster>` lowercased (utils/objects.py). There
  is no `./xpkclusters/<cluster>` folder. gcluster's Terraform output is relayed as the sandbox
  reaches each milestone; a deploy that fails prints core/cluster_toolkit/native_manager.py's
  "Running gcluster command: ... failed with code 1." and exits 1. `--dry-run` writes the
  blueprint (generate_blueprint runs) and prints "Blueprint file: ..." and the commands it would run;
- `cluster delete` (commands/cluster.py cluster_delete): with that blueprint, "Deleting <c> cluster
  using Cluster Toolkit..." and gcluster destroy (cluster, firewall rules, networks; the blueprint
  stays, as xpk never removes it); without it, the plain GKE path (`gcloud beta container clusters
  delete`, then xpk's subnet clean-up that matches only `<c>-<location>-sub-*`): the Toolkit's
  networks stay. Neither path asks for confirmation in the sandbox (xpk asks only when the cluster
  runs xpk workloads; --force also sets quiet). A cluster already deleted (rltui's down deletes
  it through the GKE API first) changes nothing on the Toolkit path: xpk looks for the blueprint
  only (commands/cluster.py cluster_delete, lines 600-603) and runs gcluster destroy without a
  GKE call of its own (commands/cluster_gcluster.py cluster_delete, lines 178-227;
  core/gcluster_manager.py destroy_deployment, 135-143), which then removes the firewall rules
  and networks (world_xpk.xpk_cluster_delete says what of Terraform's part is not verified). On
  the plain path its first call, `gcloud container clusters get-credentials` (commands/common.py
  set_cluster_command, lines 28-50), fails and xpk exits with that code.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from rltui_sandbox.tools import ControlError, call, control_url as resolve_url, run
from rltui_sandbox.tools import xpk_capacity as xc
from rltui_sandbox.tools import xpk_gcloud as xg
from rltui_sandbox.tools.xpk_commands import XpkExit, relay, say, xpk_exit
from rltui_sandbox.xpk_names import TOOLKIT_MACHINE_TYPES, prefix_path, unique_name
from rltui_sandbox.xpk_names import zone_to_region as region_of

XPK_VERSION = "1.16.0"
TOOLKIT_VERSION = "v1.94.0"  # core/blueprint/blueprint_generator.py cluster_toolkit_version
STATE_DIR = "xpkclusters"
BLUEPRINT_DEPENDENCIES = ("config-map.yaml.tftpl", "nccl-rdma-installer-a4.yaml", "storage_crd.yaml")  # blueprints/a4

# `cluster create` flags of xpk 1.16.0 the fake accepts but does not act on (beyond those below).
_CREATE_VALUES = {
    "--autoprovisioning-max-chips": int, "--autoprovisioning-min-chips": int, "--cluster-cpu-machine-type": str,
    "--cluster-state-gcs-bucket": str, "--cpu-limit": int, "--custom-cluster-arguments": str,
    "--custom-nodepool-arguments": str, "--custom-tpu-nodepool-arguments": str, "--gke-version": str,
    "--host-maintenance-interval": str, "--memory-limit": str, "--mtc-gcs-bucket": str, "--mtc-ramdisk-size": str,
    "--mtc-toleration-key": str, "--num-cubes": int, "--num-slices": int, "--pathways-gce-machine-type": str,
    "--private-endpoint-subnetwork": str, "--reservation": str, "--tensorboard-name": str,
    "--tensorboard-region": str,
}
_CREATE_SWITCHES = (
    "--adapt-from-ct", "--create-vertex-tensorboard", "--enable-autoprovisioning", "--enable-gcpfilestore-csi-driver",
    "--enable-gcsfuse-csi-driver", "--enable-legacy-lustre-port", "--enable-lustre-csi-driver",
    "--enable-master-global-access", "--enable-mtc", "--enable-parallelstore-csi-driver", "--enable-pathways",
    "--enable-pd-csi-driver", "--enable-private-endpoint", "--enable-workload-identity", "--flex", "--force",
    "--ignore-nodepool-creation-errors", "--managed-mldiagnostics", "--on-demand", "--private", "--spot",
    "--super-slicing",
)
# parser/common.py add_shared_arguments: on every cluster command.
_SHARED_BOOLEANS = ("--dependency-auto-download", "--dry-run", "--quiet", "--sandbox-kubeconfig",
                    "--skip-validation")


# ---- the parser ------------------------------------------------------------------------------------


def _shared(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", type=str, default=None, help="GCE project name (default: gcloud's project)")
    parser.add_argument("--project-number", type=str, default=None)
    parser.add_argument("--zone", type=str, default=None, help="GCE zone, e.g. us-east1-b")
    for flag in _SHARED_BOOLEANS:
        parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="xpk", description="xpk command")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{cluster,version}")
    commands.add_parser("version", help="Get version of xpk.")
    cluster = commands.add_parser("cluster", help="Commands around creating, deleting, and viewing clusters.")
    sub = cluster.add_subparsers(dest="subcommand", required=True, metavar="{create,delete,list}")

    create = sub.add_parser("create", help="Create cloud clusters.")
    create.add_argument("--cluster", type=str, required=True)
    device = create.add_mutually_exclusive_group(required=True)
    device.add_argument("--device-type", type=str)
    device.add_argument("--tpu-type", type=str)
    create.add_argument("--num-nodes", type=int, default=2)
    create.add_argument("--default-pool-cpu-machine-type", type=str, default="e2-standard-16")
    create.add_argument("--default-pool-cpu-num-nodes", type=int, default=6)
    create.add_argument("--authorized-networks", action="extend", nargs="+", type=str)
    create.add_argument("--namespace", type=str, default="default")
    for flag, kind in _CREATE_VALUES.items():
        create.add_argument(flag, type=kind)
    for flag in _CREATE_SWITCHES:
        create.add_argument(flag, action="store_true")
    _shared(create)

    delete = sub.add_parser("delete", help="Delete cloud clusters.")
    delete.add_argument("--cluster", type=str, required=True)
    delete.add_argument("--cluster-state-gcs-bucket", type=str)
    delete.add_argument("--namespace", type=str, default="default")
    delete.add_argument("--force", action="store_true", help="skip the confirmation")
    _shared(delete)

    listing = sub.add_parser("list", help="List cloud clusters.")
    _shared(listing)
    return parser


# ---- state on disk (commands/cluster_gcluster.py) ---------------------------------------------------


def gcloud_config_dir() -> Path:
    """The directory the credential check looks for: $CLOUDSDK_CONFIG, else ~/.config/gcloud."""
    return Path(os.environ.get("CLOUDSDK_CONFIG") or os.path.expanduser("~/.config/gcloud"))


def blueprints_path() -> Path:
    return Path(STATE_DIR, "blueprints").resolve()


def gcluster_working_dir() -> Path:
    return Path(STATE_DIR, "gcluster-out").resolve()


def blueprint_file(project: str, region: str, cluster: str) -> Path:
    return blueprints_path() / prefix_path(project, region) / f"{unique_name(project, region, cluster)}.yaml"


def prepare_directories() -> None:
    blueprints_path().mkdir(parents=True, exist_ok=True)
    gcluster_working_dir().mkdir(parents=True, exist_ok=True)


def check_gcloud_authenticated() -> None:
    if not gcloud_config_dir().exists():
        say(f"Failed to find gcloud credential directory. {gcloud_config_dir()} {blueprints_path()} "
            f"{gcluster_working_dir()}")
        say('Please authenticate to gcloud ("gcloud auth application-default login") and then run your command.')
        xpk_exit(1)


def _blueprint_text(args: argparse.Namespace, project: str, zone: str, deployment: str) -> str:
    region, c = region_of(zone), args.cluster
    machine_type = TOOLKIT_MACHINE_TYPES[args.device_type]
    doc = {
        "blueprint_name": deployment,
        "toolkit_modules_url": "github.com/GoogleCloudPlatform/cluster-toolkit",
        "toolkit_modules_version": TOOLKIT_VERSION,
        "vars": {"project_id": project, "deployment_name": deployment, "region": region, "zone": zone,
                 "labels": {"gke_product_type": "xpk"}},
        "deployment_groups": [{"group": "primary", "modules": [
            {"id": f"{c}-net-0", "source": "modules/network/vpc"},
            {"id": f"{c}-net-1", "source": "modules/network/vpc"},
            {"id": f"{c}-rdma-net", "source": "modules/network/gpu-rdma-vpc"},
            {"id": f"{c}-a4-cluster", "source": "modules/scheduler/gke-cluster", "use": [f"{c}-net-0"],
             "settings": {"system_node_pool_machine_type": args.default_pool_cpu_machine_type,
                          "prefix_with_deployment_name": False, "name_suffix": c}},
            {"id": f"{c}-a4-pool", "source": "modules/compute/gke-node-pool", "use": [f"{c}-a4-cluster"],
             "settings": {"machine_type": machine_type, "zones": [zone], "spot": args.capacity == xc.SPOT,
                          "reservation_affinity": xc.reservation_affinity(args.reservation),
                          "static_node_count": args.num_nodes}},
            {"id": "workload-manager-install", "source": "modules/management/kubectl-apply"},
            {"id": "workload_configmap", "source": "modules/management/kubectl-apply"},
        ]}],
    }
    # JSON is YAML: the file parses as the blueprint xpk writes, without a YAML writer here.
    return "# rltui sandbox: the shape of xpk 1.16.0's a4 blueprint (generate_a4_blueprint)\n" + \
        json.dumps(doc, indent=2) + "\n"


def generate_blueprint(args: argparse.Namespace, project: str, zone: str) -> tuple[Path, Path]:
    region = region_of(zone)
    deployment = unique_name(project, region, args.cluster)
    path = blueprint_file(project, region, args.cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_blueprint_text(args, project, zone, deployment), encoding="utf-8")
    deps = path.with_suffix("")
    deps.mkdir(exist_ok=True)
    for name in BLUEPRINT_DEPENDENCIES:
        (deps / name).write_text(f"# {name} of xpk {XPK_VERSION}'s a4 blueprint (placeholder)\n", encoding="utf-8")
    return path, deps


# ---- commands ---------------------------------------------------------------------------------------


def _where(args: argparse.Namespace) -> tuple[str, str]:
    """add_zone_and_project: the flags, else gcloud's own config (the real gcloud's)."""
    project = args.project or xg.config_value("project")
    zone = args.zone or xg.config_value("compute/zone")
    if not project:
        raise SystemExit("You must specify the project in the project flag or set it with 'gcloud config set "
                         "project <project>'")
    if not zone:
        raise SystemExit("You must specify the zone in the zone flag or set it with 'gcloud config set "
                         "compute/zone <zone>'")
    say(f"Working on {project} and {zone}")
    return project, zone


def _gcluster_task(command: str) -> None:
    """core/commands.py's announcement of a gcluster run (native_manager streams it live)."""
    say(f"Task: `gcluster execution` is implemented by `{command}`. Streaming output and input live.")


def _runner_init() -> None:
    say("Initializing native command runner...")
    say("gcluster dependency ensured.")


def _speed(url: str) -> float:
    try:
        return float(call(url, "info", {}).get("speed") or 1.0)
    except ControlError:
        return 1.0


def cluster_create(args: argparse.Namespace, url: str) -> None:
    xg.validate_dependencies(args.dry_run, args.skip_validation, ("KUBECTL", "GCLOUD"))
    say(f"Starting cluster create for cluster {args.cluster}:")
    project, zone = _where(args)
    if args.tpu_type or args.device_type not in TOOLKIT_MACHINE_TYPES:
        raise ControlError("INVALID_ARGUMENT", f"the sandbox emulates {', '.join(sorted(TOOLKIT_MACHINE_TYPES))} "
                           "only (xpk's Cluster Toolkit path): use --device-type=b200-8")
    version = xg.gke_version(project, zone, args.gke_version, args.dry_run)
    region = region_of(zone)
    say(f"Creating the cluster using Cluster Toolkit. Machine Type: {TOOLKIT_MACHINE_TYPES[args.device_type]} ...")
    check_gcloud_authenticated()
    prepare_directories()
    _runner_init()
    args.capacity = xc.capacity_type(args, project, zone)
    if args.capacity == xc.FLEX_START:
        raise ControlError("INVALID_ARGUMENT", "the sandbox does not emulate xpk's flex-start pool (queued "
                           "provisioning through Kueue): use --spot, --on-demand or --reservation")
    path, deps = generate_blueprint(args, project, zone)
    prefix, deployment = prefix_path(project, region), unique_name(project, region, args.cluster)
    work = gcluster_working_dir()
    deploy_cmd = f"gcluster deploy {work}/{prefix}/{deployment} --download-dependencies --auto-approve"
    if args.dry_run:
        say(f"Blueprint file: {path}")
    else:
        _deploy(args, url, project, zone, version, path, deps, deploy_cmd)
    xpk_exit(xg.get_cluster_credentials(project, args.cluster, zone, args.dry_run))


def _deploy(args: argparse.Namespace, url: str, project: str, zone: str, version: str, path: Path, deps: Path,
            deploy_cmd: str) -> None:
    """gcm.stage_files + gcm.deploy: gcluster's Terraform, as the sandbox reaches each milestone."""
    region = region_of(zone)
    prefix, deployment = prefix_path(project, region), unique_name(project, region, args.cluster)
    work = gcluster_working_dir()
    say("Staging (sending) blueprint file to gcluster's working directory...")
    uploads = work / "uploads" / prefix
    uploads.mkdir(parents=True, exist_ok=True)
    staged = uploads / path.name
    say(f"Copying a file from {path} to {staged}.")
    shutil.copy(path, staged)
    say(f"Copying directory from {deps} to {uploads / deps.name}.")
    shutil.copytree(deps, uploads / deps.name, dirs_exist_ok=True)
    say("Staging blueprint completed!")
    say(f"File path in gcluster's working directory: {staged}")
    say(f"Deploying blueprint from path {staged} ...")
    say("Creating deployment resources...")
    _gcluster_task(f"gcluster create -o {work}/{prefix} {staged} -w --force")
    folder = work / prefix / deployment
    (folder / "primary").mkdir(parents=True, exist_ok=True)
    (folder / ".ghpc").mkdir(exist_ok=True)
    shutil.copy(staged, folder / ".ghpc" / "artifacts.yaml")
    say("Task: `gcluster execution` terminated with code `0`")
    say("Creating deployment resources completed.")
    say("Deploying resources...")
    _gcluster_task(deploy_cmd)
    try:
        call(url, "xpk.create", {
            "project": project, "zone": zone, "cluster": args.cluster, "num_nodes": args.num_nodes,
            "device_type": args.device_type, "spot": args.capacity == xc.SPOT, "deployment": deployment, "gke_version": version,
            "default_pool_cpu_machine_type": args.default_pool_cpu_machine_type,
            "default_pool_cpu_num_nodes": args.default_pool_cpu_num_nodes,
            "deployment_dir": str(folder),
        }, relay)
    except ControlError as exc:
        relay(exc.message if exc.message.startswith("Error") else f"Error: {exc.code}: {exc.message}")
        say("Task: `gcluster execution` terminated with code `1`")
        say(f"Running gcluster command: {deploy_cmd} failed with code 1.")
        xpk_exit(1)
    say("Task: `gcluster execution` terminated with code `0`")
    say("Deployment completed.")
    say("Deploying blueprint completed!")


def cluster_delete(args: argparse.Namespace, url: str) -> None:
    xg.validate_dependencies(args.dry_run, args.skip_validation, ("GCLOUD",))
    say(f"Starting cluster delete for cluster: {args.cluster}")
    project, zone = _where(args)
    region = region_of(zone)
    prepare_directories()  # created_by_gcluster does this before looking
    if blueprint_file(project, region, args.cluster).exists():
        say(f"Deleting {args.cluster} cluster using Cluster Toolkit...")
        check_gcloud_authenticated()
        _runner_init()
        deployment = unique_name(project, region, args.cluster)
        destroy = (f"gcluster destroy {gcluster_working_dir()}/{prefix_path(project, region)}/{deployment} "
                   "--download-dependencies --auto-approve")
        say(f"Destroying {deployment} started...")
        if args.dry_run:
            say(f"executing command {destroy}")
        else:
            _gcluster_task(destroy)
            try:
                folder = gcluster_working_dir() / prefix_path(project, region) / deployment
                call(url, "xpk.delete", {"project": project, "zone": zone, "cluster": args.cluster,
                                         "deployment_dir": str(folder)}, relay)
            except ControlError as exc:
                relay(exc.message)
                say("Task: `gcluster execution` terminated with code `1`")
                say(f"Running gcluster command: {destroy} failed with code 1.")
                xpk_exit(1)
            say("Task: `gcluster execution` terminated with code `0`")
        say(f"Destroying {deployment} completed!")
        xpk_exit(0)
    # The plain GKE path: no blueprint of this cluster in ./xpkclusters.
    code = xg.set_cluster_command(project, args.cluster, zone, args.dry_run,
                                  lambda: xg.RETRY_WAIT_S / _speed(url))
    if code != 0:
        xpk_exit(code)
    if not (args.force or args.quiet):
        say("Get the name of the workloads in the cluster.")
    if xg.gke_cluster_delete(project, args.cluster, zone, args.dry_run) != 0:
        xpk_exit(1)
    say(f"GKE commands done! Cluster {args.cluster} deleted.\n")
    xpk_exit(0)


def cluster_list(args: argparse.Namespace, url: str) -> None:
    xg.validate_dependencies(args.dry_run, args.skip_validation, ("GCLOUD",))
    project, zone = _where(args)
    say(f"For project {project} and zone {zone}:")
    xpk_exit(1 if xg.clusters_list(project, zone, args.dry_run) else 0)


def main(argv: list[str] | None = None, control_url: str | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)  # exits 2 on usage errors
    say(f"Starting xpk v{XPK_VERSION}")
    try:
        if args.command == "version":
            say("xpk_version:", XPK_VERSION)
        else:
            actions = {"create": cluster_create, "delete": cluster_delete, "list": cluster_list}
            try:
                actions[args.subcommand](args, resolve_url(control_url))
            except ControlError as exc:
                say(f"{exc.code}: {exc.message}")
                xpk_exit(1)
        say("XPK Done.")
        return 0
    except XpkExit as done:
        if done.code == 0:
            say("Exiting XPK cleanly")
        else:
            say(f"XPK failed, error code {done.code}")
        return done.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    run(main)
