"""The Teardown inventory counts xpk's blueprint parts that are rltui's per kind (so the cluster,
Lustre and the RayCluster stay in view at 120x40 with 36 resources), while rltui's own Lustre
firewall rule, a leak and what is not rltui's keep rows of their own."""

from __future__ import annotations

from rltui.plan.inventory import BLUEPRINT, Resource
from rltui.widgets.inventory import folded


def part(kind: str, name: str, **kw: object) -> Resource:
    return Resource(kind, name, "present", True, part_of=BLUEPRINT, **kw)  # type: ignore[arg-type]


def test_the_blueprints_parts_take_one_row_per_kind() -> None:
    rows = [Resource("GKE cluster", "c", "running", True),
            *(part("Subnetwork", f"c-rdma-sub-{i}") for i in range(8)),
            part("Firewall rule", "c-internal-0"), part("Firewall rule", "c-internal-1"),
            Resource("Firewall rule", "c-net-0-allow-lustre-traffic", "present", True),
            Resource("Firewall rule", "c-net-0-fw-allow-iap-ingress", "present", False,
                     part_of=BLUEPRINT),
            Resource("Subnetwork", "old-sub-0", "present", True, leak=True, part_of=BLUEPRINT)]
    shown = [(r.kind, r.name) for r in folded(rows)]
    assert shown == [("GKE cluster", "c"), ("Subnetwork", "8 of xpk's blueprint"),
                     ("Firewall rule", "2 of xpk's blueprint"),
                     ("Firewall rule", "c-net-0-allow-lustre-traffic"),
                     ("Firewall rule", "c-net-0-fw-allow-iap-ingress"),
                     ("Subnetwork", "old-sub-0")]


def test_one_part_of_a_kind_keeps_its_name_and_mixed_states_say_present() -> None:
    rows = [part("Cloud Router", "c-net-0-router"),
            Resource("NAT IP", "ip-0", "in_use", True, part_of=BLUEPRINT),
            Resource("NAT IP", "ip-1", "reserved", True, part_of=BLUEPRINT)]
    shown = [(r.kind, r.name, r.state) for r in folded(rows)]
    assert shown == [("Cloud Router", "c-net-0-router", "present"),
                     ("NAT IP", "2 of xpk's blueprint", "present")]
