"""The kubelet's volume manager: no container starts before every volume of its pod is mounted.
A Lustre PersistentVolume mounts only where the Lustre CSI driver is registered on the node,
its instance is ACTIVE, the PV names the instance's IP and filesystem, and the node's LNet port
matches the instance; otherwise FailedMount, in the words of the driver's troubleshooting guide."""

from __future__ import annotations

import hashlib

from google.cloud import lustre_v1

from rltui_sandbox import nodes as gke
from rltui_sandbox.kuberay.pods import _Gone, _meta

LustreState = lustre_v1.Instance.State


class VolumeManager:
    """KubeRayController's volume mounting, part of the kubelet role."""

    def _mount_problem(self, pod: dict) -> tuple[str, str, str] | None:
        """(stage, volume, kubelet's failure text) for the first volume that cannot be mounted, or None.

        Lustre volumes fail as the Lustre CSI driver's troubleshooting guide shows them
        (GoogleCloudPlatform/lustre-csi-driver docs/troubleshooting.md):
        - the node has no driver registered (the add-on is off, or the node predates its
          enablement and was not recreated): "MountVolume.SetUp failed ... mounter.SetUpAt failed
          to get CSI client: driver name lustre.csi.storage.gke.io not found in the list of
          registered CSI drivers";
        - the node's LNet port and the instance disagree: an instance made WITH
          gke_support_enabled is reached only on the legacy port 6988 (LustreCsiDriverConfig
          .enable_legacy_lustre_port docstring), so a node without it, or a node with it facing an
          instance without gke_support_enabled (inferred: the two ends listen on different ports;
          not stated by a source), cannot reach the MGS: "MountVolume.MountDevice failed ... rpc
          error: code = Internal desc = Could not mount ... mount failed: exit status 5 ...
          Input/output error / Is the MGS running?", the guide's "cannot connect" case, whose
          remedy names the gke-support-enabled flag.
        """
        ns = _meta(pod)["namespace"]
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        for vol in (pod.get("spec") or {}).get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvcs = self.store.list_sync("persistentvolumeclaims", ns, field_selector=f"metadata.name={claim}")
            pv_name = (pvcs[0].get("spec") or {}).get("volumeName") if pvcs else None
            pvs = self.store.list_sync("persistentvolumes", field_selector=f"metadata.name={pv_name}") \
                if pv_name else []
            if not pvs or (pvcs[0].get("status") or {}).get("phase") != "Bound":
                return "SetUp", vol["name"], f'persistentvolumeclaim "{claim}" is not bound'
            csi = (pvs[0].get("spec") or {}).get("csi") or {}
            if csi.get("driver") != gke.LUSTRE_DRIVER:
                continue
            node = self._node(node_name)
            if not self.nodes.lustre_csi_enabled() or not gke.has_lustre_driver(node):
                return "SetUp", pv_name, (f"kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name "
                                          f"{gke.LUSTRE_DRIVER} not found in the list of registered CSI drivers")
            handle = csi.get("volumeHandle", "")
            inst = self.nodes.lustre(handle)
            if inst is None:
                return "SetUp", pv_name, (f"rpc error: code = NotFound desc = Managed Lustre instance "
                                          f'"{handle}" (volumeHandle) not found')
            if inst.state != LustreState.ACTIVE:
                return "SetUp", pv_name, (f"rpc error: code = Unavailable desc = Managed Lustre instance "
                                          f'"{handle}" is {inst.state.name}, not ACTIVE')
            attrs = csi.get("volumeAttributes") or {}
            ip, fs = attrs.get("ip", ""), attrs.get("filesystem", "")
            want_ip, want_fs = inst.mount_point.split("@", 1)[0], inst.filesystem
            if (ip, fs) != (want_ip, want_fs):
                return "SetUp", pv_name, (f"rpc error: code = Internal desc = mount of {ip}@tcp:/{fs} failed: "
                                          f"Managed Lustre instance \"{handle}\" serves {inst.mount_point} "
                                          f"(fix volumeAttributes ip/filesystem of PersistentVolume {pv_name})")
            wanted_port = 6988 if inst.gke_support_enabled else 988
            if gke.lnet_port(node) != wanted_port:
                source = f"{ip}@tcp:/{fs}"
                target = (f"/var/lib/kubelet/plugins/kubernetes.io/csi/{gke.LUSTRE_DRIVER}/"
                          f"{hashlib.sha256(handle.encode()).hexdigest()}/globalmount")
                return "MountDevice", pv_name, (
                    f'rpc error: code = Internal desc = Could not mount "{source}" at "{target}" on node '
                    f"{node_name}: mount failed: exit status 5\nMounting command: mount\nMounting arguments: "
                    f"-t lustre {source} {target}\nOutput: mount.lustre: mount {source} at {target} failed: "
                    "Input/output error\nIs the MGS running?")
        return None

    async def _mount_volumes(self, uid: str, ns: str, name: str, node_name: str) -> None:
        """Kubelet's volume manager: no container starts before every volume is mounted."""
        while True:
            token = self._changed
            pod = await self._pod(uid, ns, name)
            problem = self._mount_problem(pod)
            if problem is None:
                break
            stage, volume, text = problem
            await self._waiting(uid, ns, name, "ContainerCreating")
            await self._event(pod, "Warning", "FailedMount",
                              f'MountVolume.{stage} failed for volume "{volume}" : {text}', "kubelet", node_name)
            await self._until_change(token)
        node = self._node(node_name)
        if node is None:
            raise _Gone
        await self._waiting(uid, ns, name, "ContainerCreating", pod_ip=self._pod_ip(node, uid))
