"""What the real apiserver does per kind on create/update: validation and defaults."""

from __future__ import annotations

import base64
import re
from typing import Any

from rltui_sandbox.kube import rbac, workloads
from rltui_sandbox.kube.errors import invalid
from rltui_sandbox.kube.resources import ResourceType

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Fields the real API requires, per resource (path, message).
_REQUIRED: dict[str, list[tuple[str, ...]]] = {
    "pods": [("spec", "containers")],
    "persistentvolumes": [("spec", "capacity"), ("spec", "accessModes")],
    "persistentvolumeclaims": [("spec", "accessModes"), ("spec", "resources", "requests", "storage")],
    "services": [("spec", "ports")],
    "daemonsets": [("spec", "selector"), ("spec", "template")],
    "rayclusters": [("spec", "headGroupSpec")],
    "events": [("involvedObject",)],
}


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def validate_name(rtype: ResourceType, name: str) -> None:
    if rtype.plural in ("services", "namespaces"):
        pattern, what, example = (_LABEL_1035, "RFC 1035 label", "my-name") if rtype.plural == "services" \
            else (_LABEL_1123, "RFC 1123 label", "my-name")
        limit = 63
    else:
        pattern, what, example, limit = _SUBDOMAIN, "RFC 1123 subdomain", "example.com", 253
    if len(name) > limit or not pattern.match(name):
        raise invalid(rtype, name, "metadata.name", "FieldValueInvalid",
                      f'Invalid value: "{name}": a lowercase {what} must consist of lower case '
                      f"alphanumeric characters, '-' or '.', and must start and end with an "
                      f"alphanumeric character (e.g. '{example}')")


def validate(rtype: ResourceType, obj: dict) -> None:
    name = obj["metadata"]["name"]
    for path in _REQUIRED.get(rtype.plural, []):
        value = _dig(obj, path)
        if value in (None, "", [], {}):
            raise invalid(rtype, name, ".".join(path), "FieldValueRequired", "Required value")
    if rtype.plural in (*workloads.WORKLOADS, "configmaps"):
        workloads.validate(rtype, obj)
    elif rtype.plural in rbac.RBAC_KINDS:
        rbac.validate(rtype, obj)


def _default_pod(obj: dict) -> None:
    obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    for container in spec.get("containers") or []:
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")


def _default_service(obj: dict, serial: int) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if "clusterIP" not in spec:
        spec["clusterIP"] = f"10.96.{serial // 250 % 250}.{serial % 250 + 2}"
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    obj["status"] = {"loadBalancer": {}}


def _default_secret(obj: dict) -> None:
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _default_event(obj: dict, now: str) -> None:
    # What client-go's event recorder fills in; saves the toy controller the bookkeeping.
    if not obj.get("eventTime") and not obj.get("lastTimestamp"):
        obj["firstTimestamp"] = obj["lastTimestamp"] = now
    obj.setdefault("count", 1)
    obj.setdefault("type", "Normal")


def defaults_on_create(rtype: ResourceType, obj: dict, serial: int) -> None:
    """Fill defaults and reset status the way the real strategies' PrepareForCreate do."""
    plural = rtype.plural
    if plural == "pods":
        _default_pod(obj)
    elif plural == "services":
        _default_service(obj, serial)
    elif plural == "secrets":
        _default_secret(obj)
    elif plural == "events":
        _default_event(obj, obj["metadata"]["creationTimestamp"])
    elif plural == "namespaces":
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif plural == "persistentvolumes":
        obj["spec"].setdefault("persistentVolumeReclaimPolicy", "Retain")
        obj["spec"].setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Available"}
    elif plural == "persistentvolumeclaims":
        obj["spec"].setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}
    elif plural == "daemonsets":
        obj["status"] = {"currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                         "numberMisscheduled": 0, "numberReady": 0}
    elif plural in workloads.WORKLOADS:
        workloads.defaults_on_create(rtype, obj)
    elif rtype.has_status:
        obj.pop("status", None)


def defaults_on_update(rtype: ResourceType, old: dict, new: dict) -> None:
    """Keep what an update may not drop (a Service's cluster IP), and secrets' stringData."""
    if rtype.plural == "services":
        spec, old_spec = new.setdefault("spec", {}), old.get("spec", {})
        for key in ("clusterIP", "clusterIPs"):
            if key not in spec and key in old_spec:
                spec[key] = old_spec[key]
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    elif rtype.plural == "secrets":
        _default_secret(new)
    elif rtype.plural in workloads.WORKLOADS:
        workloads.defaults_on_update(rtype, new)


# The volume-source members of PersistentVolumeSpec (core/v1; the kubernetes client's
# V1PersistentVolumeSpec): together they are the inlined `PersistentVolumeSource`.
PV_SOURCE_FIELDS = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume",
    "flocker", "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs",
    "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume",
)


def _pv_source(spec: dict) -> dict:
    return {k: spec[k] for k in PV_SOURCE_FIELDS if spec.get(k) is not None}


def _source_diff(old: dict, new: dict, path: str = "") -> list[str]:
    """A line per changed leaf ("-" old, "+" new): the sandbox's stand-in for the go-cmp diff."""
    lines: list[str] = []
    for key in sorted(set(old) | set(new), key=str):
        where = f"{path}.{key}" if path else str(key)
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            lines += _source_diff(a, b, where)
        elif a != b:
            if a is not None:
                lines.append(f"-  {where}: {a!r}")
            if b is not None:
                lines.append(f"+  {where}: {b!r}")
    return lines


def validate_update(rtype: ResourceType, old: dict, new: dict) -> None:
    """What the real ValidateXxxUpdate functions refuse on an update (PUT and every PATCH).

    PersistentVolume, after kubernetes/kubernetes pkg/apis/core/validation/validation.go
    ValidatePersistentVolumeUpdate: the volume source (`spec.csi`, `spec.nfs`, ...) is
    immutable - field.Forbidden(spec.persistentvolumesource, "spec.persistentvolumesource is
    immutable after creation\\n<diff>") - except that a CSI source without
    controllerExpandSecretRef may gain one; `volumeMode` is immutable too (field path
    "volumeMode", as the real code spells it). The real message ends with a go-cmp diff of
    the two sources after a newline; the sandbox writes its own line diff there, so match
    only the first line. Labels, annotations, claimRef, capacity, reclaim policy etc. stay
    mutable. Deployments, ReplicaSets, ConfigMaps: workloads.validate_update; bindings:
    rbac.validate_update.
    """
    if rtype.plural in (*workloads.WORKLOADS, "configmaps"):
        return workloads.validate_update(rtype, old, new)
    if rtype.plural in rbac.RBAC_KINDS:
        return rbac.validate_update(rtype, old, new)
    if rtype.plural != "persistentvolumes":
        return
    name = new["metadata"]["name"]
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    old_src, new_src = _pv_source(old_spec), _pv_source(new_spec)
    old_csi, new_csi = old_src.get("csi"), new_src.get("csi")
    if isinstance(old_csi, dict) and isinstance(new_csi, dict) \
            and old_csi.get("controllerExpandSecretRef") is None \
            and new_csi.get("controllerExpandSecretRef") is not None:
        new_src = {**new_src, "csi": {k: v for k, v in new_csi.items() if k != "controllerExpandSecretRef"}}
    if old_src != new_src:
        diff = "\n".join(_source_diff(old_src, new_src))
        raise invalid(rtype, name, "spec.persistentvolumesource", "FieldValueForbidden",
                      "Forbidden: spec.persistentvolumesource is immutable after creation\n" + diff)
    old_mode = old_spec.get("volumeMode", "Filesystem")
    new_mode = new_spec.get("volumeMode", "Filesystem")
    if old_mode != new_mode:
        raise invalid(rtype, name, "volumeMode", "FieldValueInvalid",
                      f'Invalid value: "{new_mode}": field is immutable')
