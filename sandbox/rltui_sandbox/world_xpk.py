"""What `xpk cluster create` / `xpk cluster delete` (xpk 1.16.0 on the Cluster Toolkit path) do
to the sandbox World: gcluster's Terraform applies or destroys the a4 blueprint
(sandbox/rltui_sandbox/toolkit/: the blueprint's resources, the provider's retries, the state);
the plain GKE path xpk takes for a delete without its blueprint is here too.

XpkMixin is mixed into World (world.py); the toolkit package drives the other services through
their methods (create_network, create_router, create_cluster, delete_node_pool, ...).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from google.cloud import container_v1

from rltui_sandbox.grpc_util import InvalidArgument, NotFound
from rltui_sandbox.toolkit.blueprint import Params, pool_name
from rltui_sandbox.toolkit.state import State
from rltui_sandbox.toolkit.terraform import MILESTONES, Terraform
from rltui_sandbox.world_gke import GKE_API
from rltui_sandbox.world_model import region_of
from rltui_sandbox.xpk_names import unique_name


@dataclass(frozen=True)
class XpkDevice:
    machine_type: str
    accelerator_type: str
    accelerators_per_node: int


# xpk --device-type values the sandbox knows; all go through Cluster Toolkit in real xpk.
XPK_DEVICE_TYPES: dict[str, XpkDevice] = {"b200-8": XpkDevice("a4-highgpu-8g", "nvidia-b200", 8)}
XPK_MILESTONES = MILESTONES
TERRAFORM_POLL_REF_S = 10.0  # reference seconds between Terraform's polls (_terraform_poll_s)
STATE_FILE = Path("primary") / "terraform.tfstate"


def xpk_unique_name(project: str, region: str, cluster: str) -> str:
    """xpk's deployment (and blueprint) name: `<cluster>-<h5>` (see xpk_names.unique_name)."""
    return unique_name(project, region, cluster)


class XpkMixin:
    """xpk's cluster create and delete (mixed into World)."""

    terraform_poll_ref_s = TERRAFORM_POLL_REF_S   # tests widen it to make a race certain

    def _tf_state(self, deployment: str, deployment_dir: str | None) -> State:
        """The deployment's Terraform state: in gcluster's deployment folder when xpk names it,
        else kept by this World (World-level callers)."""
        memory: dict[str, dict[str, Any]] = self.__dict__.setdefault("_tf_memory", {})
        path = Path(deployment_dir) / STATE_FILE if deployment_dir else None
        return State(path, memory.setdefault(deployment, {}))

    async def xpk_cluster_create(self, project: str, zone: str, cluster: str, *, num_nodes: int,
                                 device_type: str = "b200-8", spot: bool = True,
                                 default_pool_cpu_machine_type: str = "e2-standard-16",
                                 default_pool_cpu_num_nodes: int = 6, deployment: str = "",
                                 gke_version: str = "", deployment_dir: str | None = None,
                                 progress: Callable[[str], None] | None = None) -> container_v1.Cluster:
        """`gcluster deploy`: Terraform applies the a4 blueprint (toolkit/terraform.py): the
        networks by xpk_networks, the control plane by xpk_control_plane, the default pool
        removed, the system pool, the GPU pool by xpk_node_pool, the kubectl-apply modules by
        xpk_done (minutes after start). A rerun applies the blueprint again: what the state has is
        kept, what is tainted is replaced, and drift (addons, labels) is put back. A failed call
        raises TerraformFailed with Terraform's error output. Progress lines are Terraform's."""
        device = XPK_DEVICE_TYPES.get(device_type)
        if device is None:
            raise InvalidArgument(f"device type {device_type!r} is not known; try one of {sorted(XPK_DEVICE_TYPES)}")
        if num_nodes < 1:
            raise InvalidArgument(f"num_nodes must be >= 1, got {num_nodes}")
        say = progress or (lambda _line: None)
        region = region_of(zone)
        deployment = deployment or xpk_unique_name(project, region, cluster)
        params = Params(project, region, zone, cluster, deployment, num_nodes, spot, device.machine_type,
                        device.accelerator_type, device.accelerators_per_node, default_pool_cpu_machine_type,
                        default_pool_cpu_num_nodes, gke_version)
        self._project(project)
        tf = Terraform(self, params, self._tf_state(deployment, deployment_dir), say, self._poll_lag)  # type: ignore[arg-type]
        await tf.apply()
        self._emit("xpk_cluster_ready", project, region, cluster, zone=zone,
                   node_pool=pool_name(cluster, device.machine_type))
        if self.gke_auto_upgrade and self.running_cluster_operation(project, region, cluster) is None:
            self.start_gke_upgrade(project, region, cluster)
        return self.get_cluster(project, region, cluster)

    @contextlib.contextmanager
    def _phase(self, kind: str, target: str, key: str) -> Iterator[None]:
        """A phase of xpk's create that the profile times but no API call of the sandbox's
        stands for, as one operation of the record named by its profile key."""
        with self.record.operation(kind, target, key=key):
            yield

    def _poll_lag(self, gke_target: str) -> None:
        """The wait from the cluster's last GKE operation's DONE to the Terraform poll that saw it
        (at most _terraform_poll_s), recorded so that the modelled poll is not taken for real time."""
        done = self.record.last_end(gke_target)
        if done is not None:
            self.record.span("xpk.terraform_poll", gke_target, done, key="terraform_poll")

    def _terraform_poll_s(self) -> float:
        """Real seconds between Terraform's polls of a GKE operation: the Google provider waits
        on one with its configured PollInterval, 10 s (hashicorp/terraform-provider-google
        google/transport/config.go `c.PollInterval = 10 * time.Second`; tpgresource
        OperationWait -> StateChangeConf{PollInterval}; services/container
        ContainerOperationWait)."""
        return self.terraform_poll_ref_s / self.clock.speed

    async def xpk_cluster_delete(self, project: str, zone: str, cluster: str, *, delete_networks: bool = True,
                                 deployment_dir: str | None = None,
                                 progress: Callable[[str], None] | None = None) -> None:
        """delete_networks=True: the Toolkit path, `gcluster destroy` of the deployment's state
        (toolkit/terraform.py destroy: the data sources first, so a cluster already deleted
        through the GKE API fails it before anything is deleted; then the node pools, the
        cluster, routers, NAT IPs, firewall rules, subnets and networks). A network still used
        (a peering, a range, another's firewall rule) fails it, with the rest deleted.
        False: the plain GKE path xpk takes without its blueprint (`gcloud beta container
        clusters delete`, no retry: a busy cluster fails it; the Toolkit networks stay, since
        xpk's delete_cluster_subnets only matches `<c>-<location>-sub-*`)."""
        say = progress or (lambda _line: None)
        region = region_of(zone)
        if delete_networks:
            deployment = xpk_unique_name(project, region, cluster)
            params = Params(project, region, zone, cluster, deployment, 1, True)
            tf = Terraform(self, params, self._tf_state(deployment, deployment_dir), say,  # type: ignore[arg-type]
                           self._poll_lag)
            await tf.destroy()
            return
        if f"{region}/{cluster}" not in self._project(project).clusters:
            raise NotFound(f"ResponseError: code=404, message=Not found: projects/{project}/locations/{region}/"
                           f"clusters/{cluster}. Could not find [{cluster}] in [{region}].")
        op = self.delete_cluster(project, region, cluster)
        say(f"Deleting cluster {cluster}...")
        await self.wait_cluster_operation(project, region, op.name)
        say(f"Deleted [{GKE_API}/projects/{project}/zones/{region}/clusters/{cluster}].")


def xpk_pool_name(cluster: str, machine_type: str) -> str:
    """Cluster Toolkit gke-node-pool's default name (toolkit/blueprint.py pool_name)."""
    return pool_name(cluster, machine_type)
