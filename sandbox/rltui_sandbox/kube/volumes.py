"""The PersistentVolume binder: what kube-controller-manager does for statically provisioned volumes."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from rltui_sandbox.kube.resources import resource

if TYPE_CHECKING:
    from rltui_sandbox.kube.store import KubeStore


def key_of(obj: dict) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def bind_volumes(store: KubeStore) -> None:
    """Bind each Pending PVC to its volume (by spec.volumeName, or the PV pre-bound to it)."""
    pv_type, pvc_type = resource("persistentvolumes"), resource("persistentvolumeclaims")
    pvs = store._objects["persistentvolumes"]
    for pvc in list(store._objects["persistentvolumeclaims"].values()):
        if (pvc.get("status") or {}).get("phase") == "Bound" or pvc["metadata"].get("deletionTimestamp"):
            continue
        ns, name = key_of(pvc)
        uid = pvc["metadata"]["uid"]
        wanted = (pvc.get("spec") or {}).get("volumeName")
        if wanted:
            pv = pvs.get(("", wanted))
        else:
            pv = next((p for p in pvs.values() if _claim_of(p) == (ns, name, "")
                       or _claim_of(p) == (ns, name, uid)), None)
        if pv is None or (pv.get("status") or {}).get("phase") not in ("Available", "Pending"):
            continue
        claim = _claim_of(pv)
        if claim is not None and claim not in ((ns, name, ""), (ns, name, uid)):
            continue
        new_pv = copy.deepcopy(pv)
        new_pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": ns, "name": name,
                                      "uid": uid, "apiVersion": "v1",
                                      "resourceVersion": pvc["metadata"]["resourceVersion"]}
        new_pv["status"] = {"phase": "Bound"}
        store._write(pv_type, pv, new_pv)
        new_pvc = copy.deepcopy(pvc)
        notes = new_pvc["metadata"].setdefault("annotations", {})
        notes["pv.kubernetes.io/bind-completed"] = "yes"
        if not wanted:
            notes["pv.kubernetes.io/bound-by-controller"] = "yes"
            new_pvc["spec"]["volumeName"] = pv["metadata"]["name"]
        new_pvc["status"] = {"phase": "Bound", "accessModes": pv["spec"].get("accessModes", []),
                             "capacity": pv["spec"].get("capacity", {})}
        store._write(pvc_type, pvc, new_pvc)


def _claim_of(pv: dict) -> tuple[str, str, str] | None:
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return None
    return ref.get("namespace", ""), ref.get("name", ""), ref.get("uid", "")


def release_volume(store: KubeStore, pvc: dict) -> None:
    """A deleted claim leaves its volume Released (Retain) or deletes it (Delete)."""
    uid = pvc["metadata"]["uid"]
    pv_type = resource("persistentvolumes")
    for pv in list(store._objects["persistentvolumes"].values()):
        claim = _claim_of(pv)
        if claim is None or claim[2] != uid:
            continue
        if pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
            store._delete(pv_type, pv, "Background")
        else:
            new = copy.deepcopy(pv)
            new["status"] = {"phase": "Released"}
            store._write(pv_type, pv, new)


def lose_claim(store: KubeStore, pv: dict) -> None:
    """A deleted volume leaves its bound claim Lost."""
    pvc_type = resource("persistentvolumeclaims")
    for pvc in list(store._objects["persistentvolumeclaims"].values()):
        if (pvc.get("spec") or {}).get("volumeName") == pv["metadata"]["name"] \
                and (pvc.get("status") or {}).get("phase") == "Bound":
            new = copy.deepcopy(pvc)
            new["status"] = {"phase": "Lost"}
            store._write(pvc_type, pvc, new)
