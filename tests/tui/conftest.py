"""The wizard under test: a deterministic app (no session, a fixed clock) and sample data.

Snapshot and pilot tests build the app with `wizard_app()`, switch to a screen, publish
sample data on `app.bus.<topic>` and compare. Nothing here talks to a cloud or a sandbox.
"""

from __future__ import annotations

import time

import pytest

from rltui.app import RLTuiApp
from rltui.widgets.chrome import HeaderInfo

SIZE = (120, 40)
NARROW = (80, 24)   # a plain terminal, a split Cloud Shell pane: every screen must work here
SIZES = [NARROW, SIZE]
SIZE_IDS = ["80x24", "120x40"]
HEADER = HeaderInfo(mode="SANDBOX", project="team-rl-sandbox-42", cluster="ray-a4-gpu-spot",
                    job="RUNNING 7/20", clock="12:04")


@pytest.fixture
def wizard_app():
    def make(header: HeaderInfo = HEADER) -> RLTuiApp:
        return RLTuiApp(session=None, header=header)
    return make


@pytest.fixture(autouse=True)
def utc_clock_times(monkeypatch):
    """Clock times on screen (saves, events) are local: one zone, so snapshots agree anywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
