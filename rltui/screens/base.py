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

    def _header(self, info: HeaderInfo) -> None:
        self.query_one(WizardHeader).info = info

    def on_step_bar_selected(self, message: StepBar.Selected) -> None:
        self.wizard.switch_mode(message.mode)
