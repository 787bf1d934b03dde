"""A Provision run (ctrl+r, the Run button, ctrl+k's run without a step) while Configure holds
unsaved edits asks first, for the run provisions what env.sh holds: save and run (only while
the form is valid, else it says what to fix), run the saved env.sh, or cancel. Without edits
it runs at once (tests/tui/test_provision.py)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Button

from rltui.widgets.steps import StepsView
from tests.tui.conftest import SIZE_IDS, SIZES
from tests.tui.samples_configure import codelab_state
from tests.tui.samples_provision import plan_idle
from tests.tui.test_configure import RecordingApp, open_configure, paste_into
from tests.tui.test_provision import _record


async def edited_then_provision(app: RecordingApp, pilot: Any, edits: dict[str, str]) -> Any:
    configure = await open_configure(app, pilot, codelab_state())
    for name, value in edits.items():
        await paste_into(pilot, configure, name, value)
    await app.switch_mode("provision")
    await pilot.pause()
    app.bus.plan.publish(plan_idle())
    await pilot.pause()
    return configure


def asking(app: RecordingApp) -> bool:
    return type(app.screen).__name__ == "RunWithUnsavedEdits"  # screens/run_prompt.py


def prompt_text(app: RecordingApp) -> str:
    assert asking(app), app.screen
    return app.screen.text().plain


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_a_run_with_unsaved_edits_asks_and_save_and_run_saves_first(size):
    app = RecordingApp()
    runs = _record(app, "start_provision")
    async with app.run_test(size=size) as pilot:
        configure = await edited_then_provision(app, pilot, {"NUM_NODES": "16"})
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert runs == [] and app.saved == []   # nothing runs before the answer
        text = prompt_text(app)
        assert "1 unsaved change on Configure (NUM_NODES)" in text
        assert "s: save and run · r: run the saved env.sh · Escape: cancel" in text
        box = app.screen.query_one("#run-prompt-box")
        assert box.region.right <= size[0] and box.region.bottom <= size[1]
        assert not app.screen.query_one("#run-save", Button).disabled
        await pilot.press("s")
        await pilot.pause()
        assert app.saved == [{"NUM_NODES": "16"}] and runs == [((), {})]
        assert app.screen is not configure and not asking(app)


async def test_run_the_saved_file_or_cancel():
    app = RecordingApp()
    runs = _record(app, "start_provision")
    async with app.run_test(size=(80, 24)) as pilot:
        configure = await edited_then_provision(app, pilot, {"NUM_NODES": "16"})
        await pilot.press("ctrl+r")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert runs == [] and not asking(app)

        app.screen.query_one(StepsView).select("lustre_instance", by_user=True)
        await pilot.pause()
        await pilot.press("ctrl+k")   # a run without a step asks too
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert runs == [((), {"skip": frozenset({"lustre_instance"})})] and app.saved == []
        assert configure.changes() == {"NUM_NODES": "16"}   # still there, still unsaved


async def test_save_and_run_is_off_while_the_form_has_problems_and_says_why():
    app = RecordingApp()
    runs = _record(app, "start_provision")
    async with app.run_test(size=(80, 24)) as pilot:
        await edited_then_provision(app, pilot, {"ZONE": "us-east1", "CLUSTER_NAME": "Ray_Cluster",
                                                 "LUSTRE_CAPACITY": "10000"})
        await pilot.press("ctrl+r")
        await pilot.pause()
        text = prompt_text(app)
        assert "3 unsaved changes on Configure" in text
        assert "Save and run is off: 3 problems on Configure (ZONE, CLUSTER_NAME, LUSTRE_CAPACITY)" in text
        assert app.screen.query_one("#run-save", Button).disabled
        await pilot.press("s")
        await pilot.pause()
        assert asking(app) and runs == [] and app.saved == []   # the question stays
        assert "fix" in list(app._notifications)[-1].message
        await pilot.press("r")
        await pilot.pause()
        assert runs == [((), {})] and app.saved == []


async def test_without_edits_a_run_starts_at_once():
    app = RecordingApp()
    runs = _record(app, "start_provision")
    async with app.run_test(size=(80, 24)) as pilot:
        await edited_then_provision(app, pilot, {})
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert runs == [((), {})] and not asking(app)
