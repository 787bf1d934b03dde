"""Deterministic inventories and teardown events: cluster ray-a4-gpu-spot, a Lustre instance
that is not rltui's (precious-data), and a leak left by an earlier env.sh."""

from __future__ import annotations

from rltui.plan.inventory import Resource
from rltui.plan.runner import RunEvent, RunResult
from rltui.plan.step import StepState as S

P, C = "team-rl-sandbox-42", "ray-a4-gpu-spot"
NET = f"{C}-net-0"
AT = 1_700_000_000.0


def inventory_before() -> list[Resource]:
    return [
        Resource("GKE cluster", C, "running", True, detail="9 nodes"),
        Resource("VPC network", f"{C}-net-0", "present", True),
        Resource("VPC network", f"{C}-net-1", "present", True),
        Resource("VPC network", f"{C}-rdma-net", "present", True),
        Resource("IP range", f"google-managed-services-{NET}", "present", True,
                 detail="10.92.0.0/24"),
        Resource("VPC peering", f"servicenetworking on {NET}", "present", True),
        Resource("Lustre instance", "precious-data", "active", False, detail="18000 GiB"),
        Resource("RayCluster", C, "ready", True, detail="8/8 workers ready"),
        Resource("PersistentVolumeClaim", "precious-data-pvc", "bound", True),
        Resource("PersistentVolume", "precious-data-pv", "bound", True),
        Resource("Secret", f"{C}-job-secrets", "absent", True),
        Resource("Lustre instance", "rl-old-lustre", "active", True, leak=True,
                 detail="us-east1-b"),
    ]


def inventory_after() -> list[Resource]:
    """The leak scan after a clean teardown of a plan that was all rltui's."""
    return [Resource(r.kind, r.name if r.kind != "Lustre instance" else "rl-demo-gpu-lustre",
                     "absent", True) for r in inventory_before() if not r.leak]


def inventory_after_left() -> list[Resource]:
    """What the leak scan finds when a teardown could not delete everything: the leak (it
    belongs to another env.sh's plan) and the GKE cluster xpk failed to delete."""
    return [Resource("GKE cluster", C, "running", True, detail="9 nodes"),
            *inventory_after()[1:],
            Resource("Lustre instance", "rl-old-lustre", "active", True, leak=True, detail="us-east1-b")]


def inventory_deleting() -> list[Resource]:
    """Asked again mid-teardown: the Kubernetes objects gone, the Lustre instance DELETING (its
    delete operation runs), the rest still there."""
    gone = ("RayCluster", "PersistentVolumeClaim", "PersistentVolume", "Secret")
    out = [Resource(r.kind, r.name, "absent", True) if r.kind in gone else r
           for r in inventory_before() if r.name != "precious-data"]
    out.insert(5, Resource("Lustre instance", "rl-demo-gpu-lustre", "deleting", True,
                           detail="18000 GiB"))
    return out


LUSTRE = "rl-demo-gpu-lustre"
# The titles `down` gives its rows (Step.down_title): what is deleted, by its name.
T = {"raycluster": f"RayCluster {C}", "secret": f"Secret {C}-job-secrets",
     "pv_pvc": f"PVC {LUSTRE}-pvc, PV {LUSTRE}-pv", "lustre_instance": f"Lustre instance {LUSTRE}",
     "peering": f"VPC peering servicenetworking on {NET}",
     "ip_range": f"IP range google-managed-services-{NET}",
     "xpk_cluster": f"GKE cluster {C} (xpk cluster delete)",
     "network_ready": f"VPC networks {NET}, -net-1, -rdma-net",
     "enable_apis": "Enabled APIs", "addons": "Addons (RayOperator + Lustre CSI)"}

# (name, expected_s, final state, elapsed_s, message)
DELETIONS = [
    ("raycluster", 60.0, S.DESTROYED, 48.0, "deleted"),
    ("addons", 0.0, S.SKIPPED, 0.0, "kept: they go with the GKE cluster"),
    ("secret", 12.0, S.DESTROYED, 1.0, "deleted"),
    ("pv_pvc", 12.0, S.DESTROYED, 2.0, "deleted"),
    ("lustre_instance", 300.0, S.DESTROYED, 291.0, "deleted"),
    ("peering", 60.0, S.DESTROYED, 58.0, "deleted"),
    ("ip_range", 30.0, S.DESTROYED, 27.0, "deleted"),
    ("xpk_cluster", 900.0, S.DESTROYED, 871.0, "deleted"),
    ("network_ready", 0.0, S.DESTROYED, 0.0, "deleted by xpk cluster delete"),
    ("enable_apis", 0.0, S.SKIPPED, 0.0, "kept: other things in the project may use them"),
]


def event(name: str, title: str, state: S, elapsed: float, expected: float, message: str,
          kind: str = "state", line: str | None = None, progress: float | None = None) -> RunEvent:
    return RunEvent(name, title, state, AT, elapsed, expected, message, progress, line, kind)


def events_mid() -> list[RunEvent | str]:
    """Jobs stopped, the Kubernetes objects deleted, Lustre deleting, the network's users waiting."""
    out: list[RunEvent | str] = ["stopping job raysubmit_3F7a1 (RUNNING)"]
    out.append(event("raycluster", T["raycluster"], S.DESTROYED, 48.0, 60.0, "deleted"))
    out.append(event("addons", T["addons"], S.SKIPPED, 0.0, 0.0,
                     "kept: they go with the GKE cluster"))
    out.append(event("secret", T["secret"], S.DESTROYED, 1.0, 12.0, "deleted"))
    out.append(event("pv_pvc", T["pv_pvc"], S.DESTROYED, 2.0, 12.0, "deleted"))
    out.append(event("lustre_instance", T["lustre_instance"], S.DESTROYING, 130.0, 300.0,
                     "state DELETING"))
    out.append(event("peering", T["peering"], S.WAITING, 0.0, 60.0,
                     f"waits: {T['lustre_instance']}"))
    out.append(event("xpk_cluster", T["xpk_cluster"], S.WAITING, 0.0, 900.0,
                     f"waits: {T['ip_range']}, {T['peering']}"))
    out.append(event("network_ready", T["network_ready"], S.WAITING, 0.0, 0.0,
                     f"waits: {T['xpk_cluster']}"))
    return out


def events_done() -> list[RunEvent | str]:
    out: list[RunEvent | str] = ["stopping job raysubmit_3F7a1 (RUNNING)"]
    for name, expected, state, elapsed, message in DELETIONS:
        out.append(event(name, T[name], state, elapsed, expected, message))
    out.insert(5, event("xpk_cluster", T["xpk_cluster"], S.DESTROYING, 10.0, 900.0,
                        "deleting", kind="line", line=f"[XPK] Deleting cluster {C}"))
    return out


def result_ok() -> RunResult:
    return RunResult("down", True, {n: st for n, _e, st, _el, _m in DELETIONS},
                     {n: m for n, _e, _st, _el, m in DELETIONS}, 1011.0)
