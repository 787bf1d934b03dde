"""KeyBar: the footer line of key hints, one widget (Textual's Footer mounts one per key).

The screen's own keys come first, in the order the screen binds them; help, quit and the
palette sit at the right and stay there at any width, because a key the user cannot find is
the one they need. When the line is too narrow, the screen's keys first lose the word that
names what the screen is about ("save env.sh" on Configure: "save"), then drop from its end.
Order: the focused widget's and the screen's own keys, then the two every pane has (full
screen, copy), then the app's ([ ] prev/next). A click on a hint presses its key, as Footer's do.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

from rich.text import Text
from textual import events
from textual.widget import Widget

PINNED = ("help", "quit")   # actions always shown, before the palette
# Every pane has these two (screens/base.py): they give way to the screen's own keys.
GENERIC_ACTIONS = ("full_screen", "copy_pane")
GAP = "  "
# A description's last word that the screen itself says ("save env.sh" on Configure): it is
# left out when that lets more of the screen's keys fit.
CONTEXT_WORDS = frozenset({"env.sh", "log", "parameters", "step", "pod", "watching"})


def compact(description: str) -> str:
    """"save env.sh" -> "save"; a description without such a last word stays whole."""
    first, _, last = description.rpartition(" ")
    return first if first and last in CONTEXT_WORDS else description


class Hint(NamedTuple):
    key: str        # the binding's key, pressed on click
    display: str    # how the key is shown ("^q")
    description: str
    enabled: bool


class KeyBar(Widget):
    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keybar--key", "keybar--description", "keybar--disabled"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .keybar--key { color: $footer-key-foreground; text-style: bold; }
        & > .keybar--description { color: $footer-description-foreground; }
        & > .keybar--disabled { text-style: dim; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 (Textual's name)
        super().__init__(id=id)
        self._spans: list[tuple[int, int, Hint]] = []   # [start, end) columns -> the hint drawn there

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, _screen: object) -> None:
        self.refresh()

    def hints(self) -> tuple[list[Hint], list[Hint], Hint | None]:
        """(the screen's hints, the pinned ones, the palette's), one per action."""
        app = self.app
        palette_key = app.COMMAND_PALETTE_BINDING if app.ENABLE_COMMAND_PALETTE else None
        seen: set[str] = set()
        left: list[tuple[int, Hint]] = []
        pinned: dict[str, Hint] = {}
        palette = None
        for key, (node, binding, enabled, _tip) in self.screen.active_bindings.items():
            if key == palette_key:
                palette = Hint(key, app.get_key_display(binding), binding.description, enabled)
                continue
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            hint = Hint(key, app.get_key_display(binding), binding.description, enabled)
            if node is app and binding.action in PINNED:
                pinned[binding.action] = hint
            else:
                rank = 2 if node is app else int(binding.action.rpartition(".")[2] in GENERIC_ACTIONS)
                left.append((rank, hint))
        left.sort(key=lambda ranked: ranked[0])   # stable: each rank keeps its binding order
        return [hint for _rank, hint in left], [pinned[k] for k in PINNED if k in pinned], palette

    def render(self) -> Text:
        left, pinned, palette = self.hints()
        width = self.size.width
        self._spans = []
        # The right part first (help, quit, palette: dropped from its start only when even it
        # cannot fit), then the screen's keys from the start while they fit.
        right = [*pinned, *([palette] if palette else [])]
        while right and self._width(right, palette) + 1 > width:
            right.pop(0)
        room = width - self._width(right, palette) - 1
        shown = self._fitting(left, room)
        if len(shown) < len(left):
            tight = self._fitting([h._replace(description=compact(h.description)) for h in left],
                                  room)
            shown = tight if len(tight) > len(shown) else shown
        text = Text(" ", end="", no_wrap=True)
        for hint in shown:
            self._append(text, hint)
        text.append(" " * max(0, width - text.cell_len - self._width(right, palette)))
        for hint in right:
            if hint is palette:
                text.append("▏", style=self.get_component_rich_style("keybar--disabled"))
            self._append(text, hint)
        text.stylize_before(self.rich_style)
        return text

    def _fitting(self, hints: list[Hint], room: int) -> list[Hint]:
        """The hints from the start that fit in `room` columns."""
        shown: list[Hint] = []
        for hint in hints:
            if self._width([*shown, hint], None) > room:
                break
            shown.append(hint)
        return shown

    @staticmethod
    def _width(hints: list[Hint], palette: Hint | None) -> int:
        """Columns the hints take, each with its gap (and the palette's bar)."""
        return sum(len(h.display) + 1 + len(h.description) + len(GAP) + (h is palette) for h in hints)

    def _append(self, text: Text, hint: Hint) -> None:
        start = text.cell_len
        key_style = self.get_component_rich_style("keybar--key")
        desc_style = self.get_component_rich_style("keybar--description")
        if not hint.enabled:
            dim = self.get_component_rich_style("keybar--disabled")
            key_style, desc_style = key_style + dim, desc_style + dim
        text.append(hint.display, style=key_style)
        text.append(f" {hint.description}", style=desc_style)
        self._spans.append((start, text.cell_len, hint))
        text.append(GAP)

    def hint_at(self, x: int) -> Hint | None:
        """The hint drawn at column x by the last render (what the user clicked)."""
        return next((hint for start, end, hint in self._spans if start <= x < end), None)

    def on_click(self, event: events.Click) -> None:
        hint = self.hint_at(event.x)
        if hint is None:
            return
        if hint.enabled:
            self.app.simulate_key(hint.key)
        else:
            self.app.bell()
