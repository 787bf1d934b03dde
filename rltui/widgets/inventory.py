"""What exists now, as the cloud says: one row per resource, whose it is, leaks in red.

Rows are rltui.plan.inventory.Resource values. Only present resources are listed (absent
ones are counted); rltui's own, someone else's ("left alone") and leaks look different. The
many small parts of xpk's blueprint that are rltui's (10 subnetworks, 6 firewall rules, ...:
Resource.part_of) take one row per kind, so the cluster, Lustre and the RayCluster stay in view;
the full view (ctrl+o) lists each.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

KIND_W = 22      # "PersistentVolumeClaim"
STATE_W = 11
OWNER_W = 27
# Narrow terminals: names keep their width (the cluster name is what the user types), the
# other columns shorten in this order, then the detail goes.
SHORT_KIND = {"GKE cluster": "GKE", "VPC network": "network", "VPC peering": "peering",
              "Lustre instance": "Lustre", "PersistentVolumeClaim": "PVC",
              "PersistentVolume": "PV"}
SHORT_OWNER_W = 9
def folded(present: list[Any]) -> list[Any]:
    """`present` with the parts of one whole (Resource.part_of: xpk's blueprint) that are
    rltui's in one row per kind ("10 of xpk's blueprint"), in the place of the first; leaks and
    what is not rltui's keep their rows."""
    def key(r: Any) -> tuple[str, str] | None:
        part_of = getattr(r, "part_of", "")
        return (r.kind, part_of) if part_of and r.owned and not r.leak else None

    groups: dict[tuple[str, str], list[Any]] = {}
    for r in present:
        if (k := key(r)) is not None:
            groups.setdefault(k, []).append(r)
    out: list[Any] = []
    for r in present:
        k = key(r)
        group = groups[k] if k is not None else [r]
        if len(group) == 1:
            out.append(r)
        elif group[0] is r:
            states = {g.state for g in group}
            out.append(replace(r, name=f"{len(group)} of {k[1] if k else ''}",
                               state=states.pop() if len(states) == 1 else "present", detail=""))
    return out


def left_behind(resources: Iterable[Any]) -> list[Any]:
    """What a teardown must not leave: present and rltui's (the plan's, or a leak)."""
    return [r for r in resources if r.present and (r.owned or r.leak)]


def owner_label(resource: Any, short: bool = False) -> str:
    if resource.leak:
        return "LEAK" if short else "LEAK: not in env.sh's plan"
    if resource.owned:
        return "rltui"
    return "not ours" if short else "not rltui's (left alone)"


def kind_label(kind: str, short: bool) -> str:
    return SHORT_KIND.get(kind, kind) if short else kind


@dataclass(frozen=True)
class Columns:
    kind_w: int
    name_w: int
    state_w: int
    owner_w: int
    detail_w: int
    short_kind: bool
    short_owner: bool


def columns(resources: list[Any], width: int) -> Columns:
    """The widest layout whose name column holds every name whole: full labels first, then
    short owners, then short kinds; the detail takes what is left (none below 4 columns).
    Only when even that cannot hold a name are the longest names cut."""
    name_max = max(len(r.name) for r in resources)
    state_w = max(max(len(r.state) for r in resources) + 1, 7)
    detail_max = max(len(r.detail) for r in resources)
    for short_owner, short_kind in ((False, False), (True, False), (True, True)):
        kinds = [kind_label(r.kind, short_kind) for r in resources]
        kind_w = max(len(k) for k in kinds) + 1
        owner_w = SHORT_OWNER_W if short_owner else OWNER_W
        fixed = 1 + kind_w + state_w + owner_w
        wants_detail = min(detail_max, 14)
        if fixed + name_max + 1 + wants_detail <= width or (short_kind and
                                                            fixed + name_max + 1 <= width):
            break
    name_w = max(10, min(name_max, width - fixed - 1))
    detail_w = width - fixed - name_w - 1
    return Columns(kind_w, name_w, state_w, owner_w, detail_w if detail_w >= 4 else 0,
                   short_kind, short_owner)


class InventoryView(Widget):
    """The inventory table; `resources` None means "not asked yet"."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"inventory--header", "inventory--owned", "inventory--foreign",
                         "inventory--leak", "inventory--muted"}
    DEFAULT_CSS = """
    InventoryView { height: auto; }
    InventoryView > .inventory--header { color: $text-muted; text-style: bold; }
    InventoryView > .inventory--owned { color: $text; }
    InventoryView > .inventory--foreign { color: $text-muted; text-style: italic; }
    InventoryView > .inventory--leak { color: $error; text-style: bold; }
    InventoryView > .inventory--muted { color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._resources: list[Any] | None = None

    @property
    def resources(self) -> list[Any] | None:
        return None if self._resources is None else list(self._resources)

    def set_resources(self, resources: Iterable[Any]) -> None:
        self._resources = list(resources)
        self.refresh(layout=True)

    def pane_text(self) -> tuple[str, list[str]] | None:
        """The full view (ctrl+o) and copy (ctrl+y): every row whole, absent ones too."""
        if not self._resources:
            return None
        lines = [f"{r.kind}  {r.name}  {r.state}  {owner_label(r)}"
                 + (f"  {r.detail}" if r.detail else "") for r in self._resources]
        return "What exists now", lines

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Text:
        return Text("\n").join(self._lines(self.size.width))

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"inventory--{name}")

    def _lines(self, width: int) -> list[Text]:
        if self._resources is None:
            return [Text(" asking the cloud what exists…", style=self._style("muted"))]
        present = folded([r for r in self._resources if r.present])
        absent = len(self._resources) - len([r for r in self._resources if r.present])
        if not present:
            return [Text(" nothing of this plan exists", style=self._style("muted"))]
        col = columns(present, width)
        head = Text(f" {'kind':<{col.kind_w}}{'name':<{col.name_w + 1}}{'state':<{col.state_w}}"
                    f"{'whose':<{col.owner_w}}{'detail' if col.detail_w else ''}".rstrip(),
                    style=self._style("header"))
        lines = [head]
        for r in present:
            tone = "leak" if r.leak else ("owned" if r.owned else "foreign")
            name = r.name if len(r.name) <= col.name_w else r.name[: col.name_w - 1] + "…"
            detail = (r.detail if len(r.detail) <= col.detail_w
                      else r.detail[: max(0, col.detail_w - 1)] + "…")
            row = (f" {kind_label(r.kind, col.short_kind):<{col.kind_w}}{name:<{col.name_w + 1}}"
                   f"{r.state:<{col.state_w}}{owner_label(r, col.short_owner):<{col.owner_w}}"
                   f"{detail if col.detail_w else ''}").rstrip()
            lines.append(Text(row, style=self._style(tone)))
        if absent:
            lines.append(Text(f" (and {absent} more in the plan: absent)", style=self._style("muted")))
        return lines
