"""The Lustre CSI driver is per node: enabling the add-on on a running cluster reaches existing
nodes only when they are recreated (UpdateNodePool to the same version, as xpk does); a Spot
replacement made after enablement has it; and the driver's LNet port must agree with the
instance (gke_support_enabled needs the legacy port 6988).

The tests share one sandbox and run in file order.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.cloud import container_v1, lustre_v1
from kubernetes import client

from rltui_sandbox.nodes import CSI_NODEID, LUSTRE_DRIVER
from rltui_sandbox.world import region_of

pytestmark = [pytest.mark.timeout(90, func_only=True)]


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box(controller_profile=tools.profile(spot_replace=50.0))  # a Spot node is back after ~1 s
    box.xpk_cluster(tools.config())
    return box


@pytest.fixture(scope="module")
def core(box) -> client.CoreV1Api:
    return client.CoreV1Api(box.api())


def _lustre(box, tools, instance_id: str, gke_support: bool) -> str:
    """An ACTIVE instance; returns its IP."""
    cfg = tools.config()
    inst = lustre_v1.Instance(filesystem="lustre", capacity_gib=cfg.lustre_capacity, per_unit_storage_throughput=1000,
                              network=f"projects/{tools.project}/global/networks/default",
                              gke_support_enabled=gke_support)
    op = box.fn(box.world.create_lustre_instance, tools.project, cfg.zone, instance_id, inst)
    box.call(box.world.wait_operation(op.name), timeout=30)
    got = box.fn(box.world.get_lustre_instance, tools.project, cfg.zone, instance_id)
    return got.mount_point.split("@", 1)[0]


def _volume(core: client.CoreV1Api, tools, name: str, instance_id: str, ip: str) -> None:
    cfg = tools.config()
    core.create_persistent_volume({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "9000Gi"}, "accessModes": ["ReadWriteMany"],
                 "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "default", "name": name},
                 "csi": {"driver": LUSTRE_DRIVER, "volumeHandle": f"{tools.project}/{cfg.zone}/{instance_id}",
                         "volumeAttributes": {"ip": ip, "filesystem": "lustre"}}}})
    core.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": name,
                 "resources": {"requests": {"storage": "9000Gi"}}}})


def _pod(name: str, claim: str, node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node,
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "busybox:1.36",
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}


def _gpu_nodes(core: client.CoreV1Api) -> list[Any]:
    return sorted((n for n in core.list_node().items if "cloud.google.com/gke-accelerator" in n.metadata.labels),
                  key=lambda n: n.metadata.name)


def _has_driver(node: Any) -> bool:
    return LUSTRE_DRIVER in json.loads((node.metadata.annotations or {}).get(CSI_NODEID) or "{}")


def _failed_mount(core, tools, pod: str, needle: str) -> str:
    def found() -> str | None:
        hits = [e.message for e in tools.events_for(core, pod) if e.reason == "FailedMount" and needle in e.message]
        return hits[-1] if hits else None
    return tools.wait_for(found, 10, f"a FailedMount of {pod} saying {needle!r}")


def _running(core, tools, pod: str) -> None:
    tools.wait_for(lambda: core.read_namespaced_pod(pod, "default").status.phase == "Running", 10, f"{pod} to run")
    assert not [e for e in tools.events_for(core, pod) if e.reason == "FailedMount"]


def test_existing_nodes_lack_the_driver_until_recreated(box, core, tools) -> None:
    cfg = tools.config()
    _volume(core, tools, "plain", "plain-lustre", _lustre(box, tools, "plain-lustre", gke_support=False))
    box.enable_addons(cfg, ray=False, lustre=True, recreate=False)
    old, other = (n.metadata.name for n in _gpu_nodes(core))
    assert not any(_has_driver(n) for n in core.list_node().items)  # created before the add-on was on

    core.create_namespaced_pod("default", _pod("before", "plain", old))
    message = _failed_mount(core, tools, "before", "not found in the list of registered CSI drivers")
    assert message == ('MountVolume.SetUp failed for volume "plain" : kubernetes.io/csi: mounter.SetUpAt failed to '
                       f"get CSI client: driver name {LUSTRE_DRIVER} not found in the list of registered CSI drivers")

    # A Spot replacement made now has the driver; its neighbour still does not.
    gone = core.read_node(other).metadata.uid
    code, body = box.post_preempt({"node": other})
    assert code == 200, body
    # The node shows NotReady through its graceful shutdown, then goes; a new one (uid) comes back.
    back = tools.wait_for(lambda: (n := core.read_node(other)).metadata.uid != gone and n, 10,
                          f"{other} to come back")
    assert _has_driver(back) and not _has_driver(core.read_node(old))

    # xpk's remedy: upgrade every pool to its own version. The pod on the old node is killed with it.
    box.recreate_nodes(cfg)
    assert all(_has_driver(n) for n in core.list_node().items)
    reasons = {e.reason for e in tools.events_for(core, old)}
    assert {"NodeNotReady", "UpgradeNodes"} <= reasons
    tools.wait_for(lambda: not [p for p in core.list_namespaced_pod("default").items
                                if p.metadata.name == "before"], 10, "the pod on the recreated node to go")
    pools = box.fn(box.world.list_node_pools, tools.project, region_of(cfg.zone), cfg.cluster_name)
    assert {p.status for p in pools} == {container_v1.NodePool.Status.RUNNING}

    core.create_namespaced_pod("default", _pod("after", "plain", old))
    _running(core, tools, "after")
    core.delete_namespaced_pod("after", "default")


def test_the_lnet_port_must_agree_with_the_instance(box, core, tools) -> None:
    cfg = tools.config()
    node = _gpu_nodes(core)[0].metadata.name
    _volume(core, tools, "legacy", "legacy-lustre", _lustre(box, tools, "legacy-lustre", gke_support=True))

    core.create_namespaced_pod("default", _pod("no-legacy-port", "legacy", node))
    message = _failed_mount(core, tools, "no-legacy-port", "exit status 5")
    assert message.startswith('MountVolume.MountDevice failed for volume "legacy" : rpc error: code = Internal '
                              'desc = Could not mount "')
    assert f"on node {node}: mount failed: exit status 5" in message
    assert message.endswith("failed: Input/output error\nIs the MGS running?")
    core.delete_namespaced_pod("no-legacy-port", "default")

    # Turn the legacy port on (as `--enable-legacy-lustre-port` does) and recreate the nodes.
    region = region_of(cfg.zone)
    box.call(box.world.wait_cluster_idle(tools.project, region, cfg.cluster_name), timeout=30)
    op = box.fn(box.world.update_addons, tools.project, region, cfg.cluster_name, container_v1.AddonsConfig(
        lustre_csi_driver_config=container_v1.LustreCsiDriverConfig(enabled=True, enable_legacy_lustre_port=True)))
    box.call(box.world.wait_cluster_operation(tools.project, region, op.name), timeout=30)
    gone = core.read_node(node).metadata.uid
    box.recreate_nodes(cfg)
    # A pod bound to the node before its replacement is registered goes with the old one (the
    # clean-clone run that showed it: NotFound for 10 s): wait for the new node, as the first
    # test waits for its Spot replacement.
    tools.wait_for(lambda: (n := core.read_node(node)).metadata.uid != gone and _has_driver(n), 10,
                   f"{node} to be recreated with the driver")

    core.create_namespaced_pod("default", _pod("legacy-port", "legacy", node))
    _running(core, tools, "legacy-port")
    # ... and now the instance made without gke_support_enabled is the one out of reach.
    core.create_namespaced_pod("default", _pod("plain-on-legacy", "plain", node))
    _failed_mount(core, tools, "plain-on-legacy", "Is the MGS running?")
