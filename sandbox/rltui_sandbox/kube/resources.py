"""The resource types the fake API server knows, and the discovery documents kubectl reads."""

from __future__ import annotations

from dataclasses import dataclass, field

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class ResourceType:
    plural: str
    singular: str
    kind: str
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Subresources beyond the object itself ("status", "log", "portforward").
    subresources: tuple[str, ...] = ()
    # Custom resources have no strategic-merge patch (the real server answers 415).
    custom: bool = False
    # Field selectors the real server accepts beyond metadata.name / metadata.namespace.
    fields: tuple[str, ...] = field(default=())
    # The verbs discovery lists (a review kind is create-only and never stored).
    verbs: tuple[str, ...] = tuple(VERBS)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def qualified(self) -> str:
        """How the real server names the resource in messages: `pods`, `rayclusters.ray.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("namespaces", "namespace", "Namespace", namespaced=False, short_names=("ns",),
                 subresources=("status",), fields=("status.phase",)),
    ResourceType("nodes", "node", "Node", namespaced=False, short_names=("no",),
                 subresources=("status",), fields=("spec.unschedulable",)),
    ResourceType("pods", "pod", "Pod", short_names=("po",), categories=("all",),
                 subresources=("status", "log", "portforward"),
                 fields=("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                         "spec.serviceAccountName", "status.phase", "status.podIP",
                         "status.nominatedNodeName")),
    ResourceType("services", "service", "Service", short_names=("svc",), categories=("all",),
                 subresources=("status",), fields=("spec.clusterIP", "spec.type")),
    ResourceType("secrets", "secret", "Secret", fields=("type",)),
    ResourceType("persistentvolumes", "persistentvolume", "PersistentVolume", namespaced=False,
                 short_names=("pv",), subresources=("status",)),
    ResourceType("persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim",
                 short_names=("pvc",), subresources=("status",)),
    ResourceType("events", "event", "Event", short_names=("ev",),
                 fields=("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                         "involvedObject.uid", "involvedObject.apiVersion",
                         "involvedObject.resourceVersion", "involvedObject.fieldPath",
                         "reason", "reportingComponent", "source", "type")),
    ResourceType("daemonsets", "daemonset", "DaemonSet", group="apps", short_names=("ds",),
                 categories=("all",), subresources=("status",)),
    ResourceType("configmaps", "configmap", "ConfigMap", short_names=("cm",)),
    ResourceType("serviceaccounts", "serviceaccount", "ServiceAccount", short_names=("sa",),
                 subresources=("token",)),
    ResourceType("deployments", "deployment", "Deployment", group="apps", short_names=("deploy",),
                 categories=("all",), subresources=("status",)),
    ResourceType("replicasets", "replicaset", "ReplicaSet", group="apps", short_names=("rs",),
                 categories=("all",), subresources=("status",)),
    ResourceType("roles", "role", "Role", group=RBAC_GROUP),
    ResourceType("rolebindings", "rolebinding", "RoleBinding", group=RBAC_GROUP),
    ResourceType("clusterroles", "clusterrole", "ClusterRole", group=RBAC_GROUP, namespaced=False),
    ResourceType("clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", group=RBAC_GROUP,
                 namespaced=False),
    # A review: POST answers it (rbac.py), nothing is stored (kubectl auth can-i posts these).
    ResourceType("selfsubjectaccessreviews", "", "SelfSubjectAccessReview", group="authorization.k8s.io",
                 namespaced=False, verbs=("create",)),
    ResourceType("rayclusters", "raycluster", "RayCluster", group="ray.io", categories=("all",),
                 subresources=("status",), custom=True),
)
# Kinds whose POST is answered, never stored.
REVIEWS = ("selfsubjectaccessreviews",)

BY_PLURAL: dict[str, ResourceType] = {r.plural: r for r in RESOURCES}


def resource(plural_key: str) -> ResourceType:
    """Look up `pods`, `rayclusters` or `rayclusters.ray.io`; KeyError when unknown."""
    plural, _, group = plural_key.partition(".")
    rtype = BY_PLURAL[plural]
    if group and group != rtype.group:
        raise KeyError(plural_key)
    return rtype


def find(group: str, version: str, plural: str) -> ResourceType | None:
    rtype = BY_PLURAL.get(plural)
    if rtype is None or rtype.group != group or rtype.version != version:
        return None
    return rtype


def groups() -> dict[str, list[ResourceType]]:
    """Resource types by group version (`v1`, `apps/v1`, `ray.io/v1`)."""
    out: dict[str, list[ResourceType]] = {}
    for r in RESOURCES:
        out.setdefault(r.api_version, []).append(r)
    return out


_SUB_VERBS = {"status": ["get", "patch", "update"], "log": ["get"], "portforward": ["create", "get"],
              "token": ["create"]}
_SUB_KINDS = {"log": "Pod", "portforward": "PodPortForwardOptions", "token": "TokenRequest"}


def resource_list(group_version: str) -> dict:
    """The APIResourceList kubectl's RESTMapper reads for one group version."""
    resources: list[dict] = []
    for r in groups().get(group_version, []):
        entry = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                 "kind": r.kind, "verbs": list(r.verbs)}
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        resources.append(entry)
        for sub in r.subresources:
            sub_entry = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                         "kind": _SUB_KINDS.get(sub, r.kind), "verbs": _SUB_VERBS[sub]}
            if sub == "token":
                sub_entry.update(group="authentication.k8s.io", version="v1")
            resources.append(sub_entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": resources}


def api_group_list() -> dict:
    out = []
    for gv in groups():
        if "/" not in gv:
            continue
        name, version = gv.split("/")
        ver = {"groupVersion": gv, "version": version}
        out.append({"name": name, "versions": [ver], "preferredVersion": ver})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}
