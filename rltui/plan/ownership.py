"""Whose a resource is, read from the cloud, and how a user deletes one that is not rltui's.

rltui deletes only what it made. Its mark, where the API has room for one:

- the GKE cluster: the resource label `managed-by=rltui` (XpkClusterStep sets it after xpk),
  or its unique Cluster.id being the one rltui recorded when its own xpk made it
  (plan/xpkstate.py `owns`); xpk's blueprint in rltui's folder is no proof (xpk writes it
  before Terraform runs, and keeps it when Terraform fails);
- the Lustre instance: the label `managed-by=rltui`;
- the IP range (a global address): the label, or its description starting with RULE_MARK,
  both set in the insert itself (IpRangeStep): the description is kept at creation, while
  the labels of a global address are documented as set only after it ("Labels cannot be set
  in a create": terraform-provider-google v7.40.0
  google/services/compute/resource_compute_global_address.go, lines 343-347);
- the Lustre firewall rule: compute.v1 Firewall has no labels field, so its description
  starts with RULE_MARK;
- the VPC peering: a Service Networking connection has no labels (servicenetworking v1
  Connection: network, reservedPeeringRanges, peering, service). rltui's connect names one
  range, its own (PeeringStep): the connection is rltui's when it reserves that range and
  nothing else, and that range is rltui's. A connection with another range in it serves
  someone else too. The network's ownership cannot decide it alone: rltui peers a network
  that is not its own when env.sh names one (NETWORK_NAME), and a connection made by hand on
  rltui's network reserves a range of its own;
- xpk's blueprint (networks, subnets, firewall rules, routers with their NATs, NAT IPs):
  rltui's when its cluster is;
- the Kubernetes objects: `app.kubernetes.io/managed-by=rltui` (manifests.MANAGED_BY).

Something with the expected name but without the mark is "not rltui's": shown, left alone,
with the command that deletes it by hand (`hand_delete`). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from shlex import join
from typing import Any

MANAGED_BY = {"managed-by": "rltui"}
RULE_MARK = "managed-by=rltui"
K8S_OWNED = "app.kubernetes.io/managed-by"
GCE_NAME_MAX = 63   # compute resource names: [a-z]([-a-z0-9]{0,61}[a-z0-9])? (RFC 1035)


def marked(labels: Mapping[str, str] | None) -> bool:
    """A label set carrying rltui's `managed-by=rltui`."""
    return dict(labels or {}).get("managed-by") == "rltui"


def cluster_marked(cluster: Any, owned: Any) -> bool:
    """A container.v1 Cluster that is rltui's: labelled, or the one `owned` (an
    xpkstate.Owned record, or None) names by its unique id."""
    from .xpkstate import owns

    return cluster is not None and (marked(cluster.resource_labels) or owns(owned, cluster))


def address_marked(address: Any) -> bool:
    """A compute.v1 Address that is rltui's: its label, or its description (RULE_MARK)."""
    return address is not None and (
        marked(getattr(address, "labels", None))
        or str(getattr(address, "description", "") or "").startswith(RULE_MARK))


def rule_marked(rule: Any) -> bool:
    return rule is not None and str(getattr(rule, "description", "") or "").startswith(RULE_MARK)


def k8s_marked(obj: Mapping[str, Any] | None) -> bool:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return bool(labels.get(K8S_OWNED) == "rltui")


def peering_marked(peering: Mapping[str, Any] | None, range_name: str,
                   range_obj: Any) -> bool:
    """The connection reserves rltui's range and nothing else, and that range is rltui's."""
    if not peering:
        return False
    ranges = list(peering.get("reservedPeeringRanges") or [])
    return ranges == [range_name] and address_marked(range_obj)


def lustre_rule_name(network: str) -> str:
    """`<network>-allow-lustre-traffic`, the name Cluster Toolkit v1.94.0's
    examples/gke-managed-lustre.yaml gives its Lustre rule (lustre_firewall_rule); past 63
    characters, cut and ended with a hash of the whole, so it stays unique and valid."""
    name = f"{network}-allow-lustre-traffic"
    if len(name) <= GCE_NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:GCE_NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"


def hand_delete(kind: str, name: str, cfg: Any, *, region: str = "", router: str = "",
                network: str = "") -> str:
    """The command a user runs to delete a resource rltui leaves alone."""
    p = f"--project={cfg.project_id}"
    region = region or cfg.region
    gcloud: dict[str, list[str]] = {
        "GKE cluster": ["container", "clusters", "delete", name, f"--region={region}"],
        "VPC network": ["compute", "networks", "delete", name],
        "Subnetwork": ["compute", "networks", "subnets", "delete", name, f"--region={region}"],
        "Firewall rule": ["compute", "firewall-rules", "delete", name],
        "Cloud Router": ["compute", "routers", "delete", name, f"--region={region}"],
        "Cloud NAT": ["compute", "routers", "nats", "delete", name, f"--router={router}",
                      f"--region={region}"],
        "NAT IP": ["compute", "addresses", "delete", name, f"--region={region}"],
        "IP range": ["compute", "addresses", "delete", name, "--global"],
        "VPC peering": ["services", "vpc-peerings", "delete",
                        "--service=servicenetworking.googleapis.com",
                        f"--network={network or cfg.network}"],
        "Lustre instance": ["lustre", "instances", "delete", name, f"--location={cfg.zone}"],
        "GKE node pool": ["container", "node-pools", "delete", name, f"--cluster={cfg.cluster_name}",
                          f"--region={region}"],
        "Service account": ["iam", "service-accounts", "delete", name],
    }
    if kind in gcloud:
        return join(["gcloud", *gcloud[kind], p, "--quiet"])
    plural = {"RayCluster": "raycluster", "PersistentVolumeClaim": "pvc",
              "PersistentVolume": "pv", "Secret": "secret"}.get(kind, kind.lower())
    return join(["kubectl", "delete", plural, name, f"--context={kube_context(cfg)}"])


def kube_context(cfg: Any) -> str:
    """The kubeconfig context `gcloud container clusters get-credentials` writes for this
    regional cluster, gke_<project>_<region>_<cluster> (Google Cloud SDK 528
    lib/googlecloudsdk/api_lib/container/util.py line 444, ClusterConfig.KUBECONTEXT_FORMAT
    'gke_{project}_{zone}_{cluster}', the zone being the cluster's location): a hand-delete
    acts on this cluster, whatever kubectl's current context is."""
    return f"gke_{cfg.project_id}_{cfg.region}_{cfg.cluster_name}"


def not_rltuis(why: str, command: str) -> str:
    """The words of a row down leaves alone."""
    return f"not rltui's ({why}): left alone; to delete it by hand: {command}"
