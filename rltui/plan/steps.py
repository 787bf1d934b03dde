"""The codelab's steps, each by its name: probe the cloud, apply, destroy.

Up (arrows: "needs"; ~ "alongside": pulled into the run and blocked by its failure, not
waited for):

    enable_apis -> xpk_cluster -> addons ---------------------------------------+
                               -> lustre_firewall (and ip_range) ---------------+
                -> network_ready -> credentials ~ xpk_cluster -> secret --------+-> raycluster
                                                              -> pv_pvc --------+   -> dashboard
                                 -> ip_range -> peering -> lustre_instance -> pv_pvc

The Lustre chain waits only for xpk's network, and the Secret and the PV/PVC only for its
control plane (Kubernetes objects, not GKE operations: steps_kube.py); nothing that changes
the GKE cluster runs while xpk does (the addons wait for its exit: AddonsStep), and every wait
on what xpk makes ends as soon as no xpk is at work (ContextStep.wait_for_xpk).

Beside them, guard_account (after enable_apis): the budget guard's service account, which
`rltui submit --down-after/--max-cost` makes; up skips it, down removes it (steps_guard.py).

Down runs the graph backwards: the RayCluster and the other Kubernetes objects, the Lustre
instance, the peering, the IP range and rltui's firewall rule, then `xpk cluster delete` while
the cluster still exists (xpk_cluster's row: the cluster and its whole blueprint), then
whatever of the blueprint is left, by its names (network_ready's row). Without xpk's state,
an rltui cluster goes through the GKE API and its blueprint by name. What is not rltui's is
kept (plan/ownership.py). The Kubernetes objects vanish with the cluster: the cluster's,
Lustre's and the firewall rule's rows wait for them to settle, not to succeed
(`destroy_after`), so a RayCluster stuck Terminating on a lost Spot node or a refused
Kubernetes call never keeps the GPU nodes, the NAT or Lustre billed.
"""

from __future__ import annotations

from .context import Context
from .step import Step
from .steps_addons import AddonsStep, gke_version
from .steps_base import ContextStep, _gke_lock
from .steps_cluster import CredentialsStep, EnableApisStep, XpkClusterStep
from .steps_guard import GuardAccountStep
from .steps_kube import DashboardStep, PvPvcStep, RayClusterStep, SecretStep
from .steps_lustre import IpRangeStep, LustreFirewallStep, LustreInstanceStep, NetworkReadyStep, PeeringStep

__all__ = [
    "STEP_TYPES",
    "AddonsStep",
    "ContextStep",
    "CredentialsStep",
    "DashboardStep",
    "EnableApisStep",
    "GuardAccountStep",
    "IpRangeStep",
    "LustreFirewallStep",
    "LustreInstanceStep",
    "NetworkReadyStep",
    "PeeringStep",
    "PvPvcStep",
    "RayClusterStep",
    "SecretStep",
    "XpkClusterStep",
    "_gke_lock",
    "build_plan",
    "gke_version",
]


STEP_TYPES: tuple[type[ContextStep], ...] = (
    EnableApisStep, XpkClusterStep, NetworkReadyStep, IpRangeStep, PeeringStep,
    LustreInstanceStep, LustreFirewallStep, AddonsStep, CredentialsStep, SecretStep, PvPvcStep,
    RayClusterStep, DashboardStep, GuardAccountStep,
)


def build_plan(ctx: Context) -> list[Step]:
    return [t(ctx) for t in STEP_TYPES]
