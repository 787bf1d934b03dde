"""Every gcloud and kubectl call xpk 1.16.0 makes on the paths the fake xpk imitates, run with the
REAL tools (so they reach the sandbox only through `rltui sandbox env`'s overrides, as they would
reach Google), in xpk's order and with xpk's handling of their output:

| xpk 1.16.0 source                                  | command                                          |
|----------------------------------------------------|--------------------------------------------------|
| utils/validation.py (not on dry runs)              | `kubectl --help`, `gcloud version`                |
| core/gcloud_context.py add_zone_and_project        | `gcloud config get project` / `compute/zone`      |
|                                                    | (only when --project / --zone are absent)         |
| core/gcloud_context.py get_gke_server_config       | `gcloud container get-server-config` twice (the   |
|                                                    | channel's defaultVersion, then validVersions)     |
| core/gcloud_context.py get_cluster_location        | `gcloud container clusters list --filter=name=C`  |
| core/cluster.py get_cluster_credentials            | get-credentials --dns-endpoint && kubectl config  |
|                                                    | view && kubectl config set-context; `kubectl get  |
|                                                    | pods`; on a failure once more without the flag    |
| commands/common.py set_cluster_command (delete)    | the same chain, 5 tries, no fallback              |
| commands/cluster.py run_gke_cluster_delete_command | `gcloud beta container clusters delete --quiet`   |
| core/network.py delete_cluster_subnets             | `gcloud compute networks subnets list/delete`     |
| commands/cluster.py run_gke_clusters_list_command  | `gcloud container clusters list`                  |

A Cluster Toolkit cluster's DNS endpoint refuses user traffic (Toolkit v1.94.0's gke-cluster
defaults enable_external_dns_endpoint to false), so gcloud refuses `--dns-endpoint` for it and
create falls back to the IP endpoint, while the plain delete path, which has no fallback, fails.
Not imitated: Kueue's install after create (__install_kueue) and the workload listing before a
delete without --force/--quiet; the sandbox's Kubernetes API has no Kueue.
"""

from __future__ import annotations

from typing import Callable

from rltui_sandbox.tools.xpk_commands import run_for_value, run_with_updates, run_with_updates_retry, say
from rltui_sandbox.tools.xpk_commands import xpk_exit
from rltui_sandbox.xpk_names import zone_to_region as region_of

RETRY_WAIT_S = 10  # core/commands.py run_command_with_updates_retry's wait_seconds


def validate_dependencies(dry_run: bool, skip: bool, names: tuple[str, ...]) -> None:
    commands = {"KUBECTL": ["kubectl", "--help"], "GCLOUD": ["gcloud", "version"]}
    if dry_run or skip:
        return
    for name in names:
        code, _ = run_for_value([commands[name]], f"Validate {name} installation.")
        if code != 0:
            say(f"`{name.lower()}` not installed. Please follow  "
                " https://github.com/AI-Hypercomputer/xpk/blob/main/docs/installation.md#1-prerequisites"
                " to install xpk prerequisites.")
            xpk_exit(code)


def config_value(name: str) -> str:
    """`gcloud config get <name>`'s last line (core/gcloud_context.py get_project/get_zone)."""
    code, out = run_for_value([["gcloud", "config", "get", name]], f"Get {name}", hide_error=True)
    lines = out.strip().split("\n") if code == 0 else [""]
    return lines[-1]


def gke_version(project: str, zone: str, requested: str | None, dry_run: bool) -> str:
    """get_gke_server_config + get_gke_control_plane_version: RAPID's default (REGULAR with an
    explicit --gke-version), which must be among the valid versions."""
    channel = "REGULAR" if requested else "RAPID"
    base = ["gcloud", "container", "get-server-config", f"--project={project}", f"--region={region_of(zone)}",
            "--flatten=channels", f"--filter=channels.channel={channel}"]
    outputs = []
    for field, what in (("defaultVersion", "default gke version"), ("validVersions", "valid versions")):
        task = f"Determine server supported GKE versions for {what}"
        code, out = run_for_value([[*base, f"--format=value(channels.{field})"]], task, dry_run=dry_run,
                                  hide_error=True)
        if code != 0:
            say(f"Unable to get server config for {task}.")
            xpk_exit(code)
        outputs.append(out)
    default, valid = outputs[0].strip(), {v.strip() for v in outputs[1].split(";")}
    version = requested or default
    if version not in valid:
        say(f"Planned GKE Version: {version}\n Valid Versions:\n{valid}\nRecommended / Default GKE Version: {default}")
        say(f"Error: Planned GKE Version {version} is not valid.Checks failed: Is Version Valid: False")
        say(f"Please select a gke version from the above list using --gke-version=x argument or rely on the "
            f"default gke version: {default}")
        xpk_exit(1)
    return version


def cluster_location(project: str, cluster: str, zone: str, dry_run: bool) -> str:
    code, out = run_for_value([["gcloud", "container", "clusters", "list", f"--project={project}",
                                f"--filter=name={cluster}", "--format=value(location)"]],
                              "Find cluster region or zone", dry_run=dry_run, dry_value=region_of(zone))
    if code != 0:
        say("Error: Unable to determine cluster region or zone")
        xpk_exit(code)
    return zone if zone in out.strip().splitlines() else region_of(zone)


def _credentials_chain(cluster: str, location: str, project: str, dns_endpoint: bool) -> list[list[str]]:
    flag = ["--dns-endpoint"] if dns_endpoint else []
    return [["gcloud", "container", "clusters", "get-credentials", cluster, f"--location={location}", *flag,
             f"--project={project}"],
            ["kubectl", "config", "view"],
            ["kubectl", "config", "set-context", "--current", "--namespace=default"]]


def get_cluster_credentials(project: str, cluster: str, zone: str, dry_run: bool) -> int:
    """core/cluster.py get_cluster_credentials: the DNS endpoint first, checked with kubectl."""
    location = cluster_location(project, cluster, zone, dry_run)
    task = f"get-credentials-dns-endpoint to cluster {cluster}"
    code = run_with_updates(_credentials_chain(cluster, location, project, True), task, verbose=False,
                            dry_run=dry_run)
    if code != 0 or run_with_updates([["kubectl", "get", "pods"]], "Test kubectl credentials", verbose=False,
                                     dry_run=dry_run) != 0:
        say("Detected error. Retrying without --dns-endpoint flag...")
        code = run_with_updates(_credentials_chain(cluster, location, project, False), task, verbose=False,
                                dry_run=dry_run)
        if code != 0:
            return code
    say("Finished get-credentials and kubectl setup.")
    return 0


def set_cluster_command(project: str, cluster: str, zone: str, dry_run: bool, wait_s: Callable[[], float]) -> int:
    """commands/common.py set_cluster_command: --dns-endpoint only, five tries."""
    task = f"get-credentials to cluster {cluster}"
    chain = _credentials_chain(cluster, cluster_location(project, cluster, zone, dry_run), project, True)
    code = run_with_updates_retry(chain, task, verbose=False, dry_run=dry_run, wait_s=wait_s(),
                                  shown_wait_s=RETRY_WAIT_S)
    if code != 0:
        say(f"{task} returned ERROR {code}")
    return code


def gke_cluster_delete(project: str, cluster: str, zone: str, dry_run: bool) -> int:
    """run_gke_cluster_delete_command, then delete_cluster_subnets."""
    location = cluster_location(project, cluster, zone, dry_run)
    code = run_with_updates([["gcloud", "beta", "container", "clusters", "delete", cluster,
                              f"--project={project}", f"--location={location}", "--quiet"]], "Cluster Delete",
                            dry_run=dry_run)
    if code != 0:
        say(f"Cluster delete request returned ERROR {code}")
        return 1
    pattern = f"{cluster}-{cluster_location(project, cluster, zone, dry_run)}-sub-*"
    code, out = run_for_value([["gcloud", "compute", "networks", "subnets", "list", f"--filter=name~{pattern}",
                                f"--project={project}"]], "Get All Subnets", dry_run=dry_run, dry_value="")
    if code != 0:
        say(f"Get All Subnets returned ERROR {code}")
        say("Listing all subnets failed!")
        return code
    for name in [line.split(" ")[0] for line in out.splitlines()[1:] if line.strip()]:
        if run_with_updates([["gcloud", "compute", "networks", "subnets", "delete", name,
                              f"--region={region_of(zone)}", f"--project={project}", "--quiet"]],
                            "Delete Cluster Subnet", verbose=False, dry_run=dry_run) != 0:
            say("Delete Cluster Subnet request returned ERROR 1")
            return 1
        say(f"Deleted existing subnet {name}")
    return 0


def clusters_list(project: str, zone: str, dry_run: bool) -> int:
    code = run_with_updates([["gcloud", "container", "clusters", "list", f"--project={project}",
                              f"--filter=location~{region_of(zone)}.*"]], "Cluster List", dry_run=dry_run)
    if code != 0:
        say(f"Cluster list request returned ERROR {code}")
        return 1
    return 0

