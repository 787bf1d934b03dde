"""The frame every wizard screen shares: header, page bar, body, footer."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.events import Resize

from ..widgets.chrome import HeaderInfo, PageBar, WizardHeader
from ..widgets.fullview import FullView, copy_lines
from ..widgets.inputframe import DrawsInputNow
from ..widgets.keybar import KeyBar

if TYPE_CHECKING:
    from ..app import RLTuiApp

PANE_ACTIONS = ("full_screen", "copy_pane")


def env_path_text(path: str) -> Text:
    """How a screen names env.sh: its path, after an "env.sh" label only when the path does
    not end with that name already (the default, `env.sh`, read "env.sh  env.sh")."""
    if path.endswith("env.sh"):
        return Text(path)
    return Text("env.sh  ", style="dim").append(path)


def stylesheet(module_file: str) -> str:
    """A screen's own rules, beside its module (start.py -> start.tcss), as an absolute path:
    Textual resolves a relative CSS_PATH beside whichever subclass is instantiated."""
    return str(Path(module_file).with_suffix(".tcss"))


class WizardScreen(DrawsInputNow):
    """Subclasses set MODE and TITLE and implement compose_body().

    Data arrives on the app's signals (`self.app.bus.<topic>`): subscribe in on_mount with
    `self.app.bus.<topic>.subscribe(self, callback)`. Screens never call a client: they ask
    the app for actions (`self.app.run_action(...)`) and render what is published.
    """

    MODE = ""
    TITLE = ""
    # priority: a focused TextArea or Input would take ctrl+y (redo) first
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+o", "full_screen", "full screen", priority=True,
                tooltip="Open the focused pane full-screen (lines wrap; escape closes)"),
        Binding("ctrl+y", "copy_pane", "copy", priority=True,
                tooltip="Copy the focused pane (OSC 52)"),
    ]

    @property
    def wizard(self) -> RLTuiApp:
        # The screens run in RLTuiApp only. No isinstance check: app.py is the layer above
        # (import-linter), so it is named for the type checker alone.
        return cast("RLTuiApp", self.app)

    def compose(self) -> ComposeResult:
        from . import PAGES

        self._fit_width()   # before the children exist: restyling them all costs the first frame
        yield WizardHeader(id="wizard-header")
        yield PageBar(PAGES, self.MODE)
        yield from self.compose_body()
        yield KeyBar()

    def compose_body(self) -> ComposeResult:
        raise NotImplementedError

    def on_mount(self) -> None:
        self.wizard.bus.header.subscribe(self, self._header)
        self._header(self.wizard.header_info)
        self._fit_width()

    # Layout classes by width ("-narrow" below NARROW_BELOW columns): set on mount, on each
    # resize and when shown again. Textual's HORIZONTAL_BREAKPOINTS only follow Resize events,
    # which a screen built after the terminal got its size may never receive.
    NARROW_BELOW = 110

    def on_resize(self, event: Resize) -> None:
        self._fit_width()

    def on_screen_resume(self) -> None:
        self._fit_width()

    def _fit_width(self) -> None:
        narrow = self.app.size.width < self.NARROW_BELOW
        if self.has_class("-narrow") == narrow and self.has_class("-wide") != narrow:
            return
        self.set_class(narrow, "-narrow")
        self.set_class(not narrow, "-wide")

    def _header(self, info: HeaderInfo) -> None:
        self.query_one(WizardHeader).info = info

    def on_page_bar_selected(self, message: PageBar.Selected) -> None:
        self.wizard.switch_mode(message.mode)

    # --- the pane protocol (widgets/fullview.py): ctrl+o full screen, ctrl+y copy ---

    def focused_pane(self) -> tuple[DOMNode, tuple[str, list[str]] | None] | None:
        """The focused widget's nearest ancestor (itself included) that has `pane_text`, and
        what it shows; None when no such widget has focus."""
        node: DOMNode | None = self.focused
        while node is not None and node is not self:
            pane_text = getattr(node, "pane_text", None)
            if callable(pane_text):
                return node, pane_text()
            node = node.parent
        # The screen's own pane (Provision: the selected step's output and command).
        own = getattr(self, "pane_text", None)
        return (self, own()) if callable(own) else None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A screen's own `check_action` decides its own actions; the pane keys stay the
        frame's (below), whether or not it calls super()."""
        super().__init_subclass__(**kwargs)
        own: Callable[[WizardScreen, str, tuple[object, ...]], bool | None] | None = \
            cls.__dict__.get("check_action")
        if own is None or getattr(own, "_pane_aware", False):
            return

        def check_action(self: WizardScreen, action: str,
                         parameters: tuple[object, ...]) -> bool | None:
            if action in PANE_ACTIONS:
                return WizardScreen.check_action(self, action, parameters)
            return own(self, action, parameters)

        # A deliberate monkeypatch, which mypy forbids by design (a mark on a function, a
        # method replaced on the class).
        check_action._pane_aware = True  # type: ignore[attr-defined]
        cls.check_action = check_action  # type: ignore[method-assign]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """ctrl+o and ctrl+y are in the footer (and answer) only while a pane has focus; the
        palette's entries always answer, and say when there is nothing to open."""
        if action in PANE_ACTIONS:
            return self.focused_pane() is not None
        return True

    def _pane_or_say(self) -> tuple[DOMNode, str, list[str]] | None:
        found = self.focused_pane()
        if found is None:
            self.notify("this part of the screen has no text to open: move the focus (tab) to"
                        " a pane such as a log", title="Nothing to show", severity="warning")
            return None
        node, text = found
        if text is None:
            self.notify("the pane has nothing to show yet", title="Nothing to show",
                        severity="warning")
            return None
        return node, text[0], text[1]

    def action_full_screen(self) -> None:
        pane = self._pane_or_say()
        if pane is not None:
            node, title, lines = pane
            line = getattr(node, "pane_line", None)   # e.g. the log's search match
            self.app.push_screen(FullView(title, lines,
                                          at_end=bool(getattr(node, "PANE_AT_END", False)),
                                          at_line=line() if callable(line) else None))

    def action_copy_pane(self) -> None:
        # A screen may name what ctrl+y copies first (Provision: the equivalent command).
        special = getattr(self, "copy_text", None)
        chosen = special() if callable(special) else None
        if chosen is not None:
            what, text = chosen
            copy_lines(self.app, what, text.splitlines())
            return
        pane = self._pane_or_say()
        if pane is not None:
            node, title, lines = pane
            copy_lines(self.app, title, lines,
                       keep_end=bool(getattr(node, "PANE_AT_END", False)))

    def pane_commands(self) -> Iterable[SystemCommand]:
        """The palette's entries for the pane protocol (the app lists them on every screen)."""
        yield SystemCommand("Open the focused pane full-screen",
                            "Long lines wrap; escape closes (ctrl+o)", self.action_full_screen)
        yield SystemCommand("Copy the focused pane",
                            "To the clipboard by OSC 52 (ctrl+y)", self.action_copy_pane)
