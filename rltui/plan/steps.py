"""The codelab's steps, each by its name: probe the cloud, apply, destroy.

Graph (arrows: "needs"; ~ "alongside": pulled into the run and blocked by its failure, not
waited for):

    enable_apis -> xpk_cluster
                -> network_ready -> addons ~ xpk_cluster --------------------+
                                 -> credentials ~ xpk_cluster -> secret -----+-> raycluster
                                                              -> pv_pvc -----+   -> dashboard
                                 -> ip_range -> peering -> lustre_instance -> pv_pvc

The Lustre chain waits only for xpk's network, not for xpk to finish; the addons and the
credentials wait for xpk's control plane (the addon update goes in before xpk's GPU pool, so
its nodes need no recreation: AddonsStep). Down runs the graph backwards: the GKE cluster goes
through the GKE API once the Kubernetes objects are gone, while Lustre is deleted; only xpk's
networks (network_ready's row: `xpk cluster delete`, which finds the cluster gone and removes
the rest) wait for the peering, the range and Lustre, which would otherwise keep the network
in use.
"""

from __future__ import annotations

from .context import Context
from .step import Step
from .steps_base import ContextStep, _gke_lock
from .steps_cluster import (AddonsStep, CredentialsStep, EnableApisStep, XpkClusterStep,
                            gke_version)
from .steps_kube import DashboardStep, PvPvcStep, RayClusterStep, SecretStep
from .steps_lustre import IpRangeStep, LustreInstanceStep, NetworkReadyStep, PeeringStep

__all__ = [
    "AddonsStep", "ContextStep", "CredentialsStep", "DashboardStep", "EnableApisStep",
    "IpRangeStep", "LustreInstanceStep", "NetworkReadyStep", "PeeringStep", "PvPvcStep",
    "RayClusterStep", "STEP_TYPES", "SecretStep", "XpkClusterStep", "build_plan", "gke_version",
    "_gke_lock",
]


STEP_TYPES: tuple[type[ContextStep], ...] = (
    EnableApisStep, XpkClusterStep, NetworkReadyStep, IpRangeStep, PeeringStep,
    LustreInstanceStep, AddonsStep, CredentialsStep, SecretStep, PvPvcStep, RayClusterStep,
    DashboardStep,
)


def build_plan(ctx: Context) -> list[Step]:
    return [t(ctx) for t in STEP_TYPES]
