"""The frame every wizard screen shares: header, step bar, body, footer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from ..widgets.chrome import HeaderInfo, StepBar, WizardHeader

if TYPE_CHECKING:
    from ..app import RLTuiApp


class WizardScreen(Screen):
    """Subclasses set MODE and TITLE and implement compose_body().

    Data arrives on the app's signals (`self.app.bus.<topic>`): subscribe in on_mount with
    `self.app.bus.<topic>.subscribe(self, callback)`. Screens never call a client: they ask
    the app for actions (`self.app.run_action(...)`) and render what is published.
    """

    MODE = ""
    TITLE = ""

    @property
    def wizard(self) -> "RLTuiApp":
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        from ..app import PAGES

        yield WizardHeader(id="wizard-header")
        yield StepBar(PAGES, self.MODE)
        yield from self.compose_body()
        yield Footer()

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

    def on_resize(self) -> None:
        self._fit_width()

    def on_screen_resume(self) -> None:
        self._fit_width()

    def _fit_width(self) -> None:
        narrow = self.app.size.width < self.NARROW_BELOW
        self.set_class(narrow, "-narrow")
        self.set_class(not narrow, "-wide")

    def _header(self, info: HeaderInfo) -> None:
        self.query_one(WizardHeader).info = info

    def on_step_bar_selected(self, message: StepBar.Selected) -> None:
        self.wizard.switch_mode(message.mode)
