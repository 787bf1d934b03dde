"""What exists now, as the cloud says: one row per resource, whose it is, leaks in red.

Rows are rltui.plan.inventory.Resource values. Only present resources are listed (absent
ones are counted); rltui's own, someone else's ("left alone") and leaks look different.
"""

from __future__ import annotations

from typing import Any, Iterable

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

KIND_W = 22      # "PersistentVolumeClaim"
STATE_W = 11
OWNER_W = 27


def left_behind(resources: Iterable[Any]) -> list[Any]:
    """What a teardown must not leave: present and rltui's (the plan's, or a leak)."""
    return [r for r in resources if r.present and (r.owned or r.leak)]


def owner_label(resource: Any) -> str:
    if resource.leak:
        return "LEAK: not in env.sh's plan"
    return "rltui" if resource.owned else "not rltui's (left alone)"


class InventoryView(Widget):
    """The inventory table; `resources` None means "not asked yet"."""

    COMPONENT_CLASSES = {"inventory--header", "inventory--owned", "inventory--foreign",
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

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Text:
        return Text("\n").join(self._lines(self.size.width))

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"inventory--{name}")

    def _lines(self, width: int) -> list[Text]:
        if self._resources is None:
            return [Text(" asking the cloud what exists…", style=self._style("muted"))]
        present = [r for r in self._resources if r.present]
        absent = len(self._resources) - len(present)
        if not present:
            return [Text(" nothing of this plan exists", style=self._style("muted"))]
        fixed = KIND_W + STATE_W + OWNER_W + 3
        detail_min = min(max(len(r.detail) for r in present), 14)
        name_w = max(10, min(max(len(r.name) for r in present), width - fixed - detail_min))
        detail_w = max(0, width - fixed - name_w - 1)
        head = (f" {'kind':<{KIND_W}}{'name':<{name_w + 1}}{'state':<{STATE_W}}"
                f"{'whose':<{OWNER_W}}detail")
        lines = [Text(head, style=self._style("header"))]
        for r in present:
            tone = "leak" if r.leak else ("owned" if r.owned else "foreign")
            name = r.name if len(r.name) <= name_w else r.name[: name_w - 1] + "…"
            detail = r.detail if len(r.detail) <= detail_w else r.detail[: max(0, detail_w - 1)] + "…"
            row = (f" {r.kind:<{KIND_W}}{name:<{name_w + 1}}{r.state:<{STATE_W}}"
                   f"{owner_label(r):<{OWNER_W}}{detail}")
            lines.append(Text(row, style=self._style(tone)))
        if absent:
            lines.append(Text(f" (and {absent} more in the plan: absent)", style=self._style("muted")))
        return lines
