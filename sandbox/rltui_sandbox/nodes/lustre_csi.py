"""The Lustre CSI driver on nodes, and the `lustre-csi-node` DaemonSet of the Lustre CSI add-on.

The Lustre CSI driver is per node: a node registers it only when it is created (or recreated)
while the cluster's LustreCsiDriver add-on is enabled, as the kubelet records in the Node's
`csi.volume.kubernetes.io/nodeid` annotation (when a node gets it: pools.py). The node also
keeps the LNet port its driver was installed with (988, or 6988 with
enable_legacy_lustre_port; LustreCsiDriverConfig docstring, google-cloud-container 2.67.0).
"""

from __future__ import annotations

import json

from rltui_sandbox.kube.store import KubeStore

LUSTRE_CSI = "lustre-csi-node"
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"
CSI_NODEID = "csi.volume.kubernetes.io/nodeid"  # the kubelet's record of the CSI drivers registered on a node
LNET_PORT_NOTE = "rltui_sandbox/lustre-lnet-port"  # the sandbox's own note: the port the driver installed LNet with


def csi_drivers(node: dict | None) -> dict[str, str]:
    raw = ((node or {}).get("metadata", {}).get("annotations") or {}).get(CSI_NODEID, "")
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def has_lustre_driver(node: dict | None) -> bool:
    """Whether the Lustre CSI driver is registered on this node (created after enablement)."""
    return LUSTRE_DRIVER in csi_drivers(node)


def lnet_port(node: dict | None) -> int:
    """The LNet port the node's Lustre driver uses: 6988 with the legacy port, else 988."""
    note = ((node or {}).get("metadata", {}).get("annotations") or {}).get(LNET_PORT_NOTE, "988")
    return int(note) if str(note).isdigit() else 988


def lustre_daemonset() -> dict:
    labels = {"k8s-app": LUSTRE_CSI}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": LUSTRE_CSI, "namespace": "kube-system",
                     "labels": {**labels, "addonmanager.kubernetes.io/mode": "Reconcile"}},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"priorityClassName": "system-node-critical",
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "lustre-csi-driver",
                                     "image": "gke.gcr.io/lustre-csi-driver:v1.0.0-gke.0",
                                     "args": [f"--driver-name={LUSTRE_DRIVER}", "--node=true"]}]}}},
    }


async def sync_lustre_daemonset(store: KubeStore, enabled: bool) -> None:
    """The add-on's node DaemonSet: present (one ready pod per node) iff the add-on is enabled."""
    exists = bool(store.list_sync("daemonsets", "kube-system", field_selector=f"metadata.name={LUSTRE_CSI}"))
    if not enabled:
        if exists:
            await store.delete("daemonsets", LUSTRE_CSI, "kube-system")
        return
    if not exists:
        await store.create("daemonsets", lustre_daemonset(), "kube-system")
    count = len(store.list_sync("nodes"))
    await store.patch_status("daemonsets", LUSTRE_CSI, {
        "currentNumberScheduled": count, "desiredNumberScheduled": count, "numberAvailable": count,
        "numberMisscheduled": 0, "numberReady": count, "updatedNumberScheduled": count,
        "observedGeneration": 1}, "kube-system")
