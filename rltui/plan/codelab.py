"""What the codelab fixes for every project: the four APIs it enables (step 1, `gcloud services
enable`). The plan, the preflight and the equivalent script all read them here."""

from __future__ import annotations

APIS = ("container.googleapis.com", "lustre.googleapis.com", "compute.googleapis.com",
        "servicenetworking.googleapis.com")

# The codelab's own order, one step after the other (sandbox/SOURCES.md#codelab-workflow:
# 2 APIs, 3 xpk cluster create, 4 addons, 5 IP range, 6 peering, 7 Lustre, 8 PV/PVC, 9
# RayCluster, 10 submit through the dashboard's port-forward). The credentials come before the
# first kubectl, the Secret with the PV/PVC; network_ready is a wait of rltui's own (xpk has
# made the network by then). The codelab opens no firewall for Lustre; the GKE Lustre CSI guide
# and Cluster Toolkit's Lustre example do (plan/steps_lustre.py), so the rule comes with the
# peering here. bench/time_to_training.py runs the plan's steps in this order.
CODELAB_ORDER = ("enable_apis", "xpk_cluster", "addons", "network_ready", "ip_range", "peering",
                 "lustre_firewall", "lustre_instance", "credentials", "secret", "pv_pvc", "raycluster",
                 "dashboard")
