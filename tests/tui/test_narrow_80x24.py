"""What 80x24 cut, whole again (and still whole at 120x40), read from the rendered screen:
Configure's footer keeps `] next` (the screen's keys lose the word the screen says first),
the Job screen's inputs and its preview's tabs (the panes stack below 110 columns), and the
header's cost per hour (the app's own name gives way first)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.widgets import Input, Tabs

from rltui.widgets.chrome import CostInfo, HeaderInfo
from rltui.widgets.keybar import compact
from tests.tui import samples_job as J
from tests.tui.conftest import HEADER, SIZE_IDS, SIZES
from tests.tui.samples_configure import codelab_state
from tests.tui.screentext import region_text, screen_lines
from tests.tui.test_job import RecordingApp, open_job

AT = 1_764_590_400.0


def test_compact_drops_only_the_word_the_screen_says():
    assert [compact(d) for d in ("save env.sh", "reload env.sh", "search log", "delete all",
                                 "full screen", "run / retry")] == [
        "save", "reload", "search", "delete all", "full screen", "run / retry"]


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_configures_footer_keeps_next(wizard_app, size):
    app = wizard_app()
    async with app.run_test(size=size) as pilot:
        await app.switch_mode("configure")
        await pilot.pause()
        app.bus.config.publish(codelab_state())
        await pilot.pause()
        app.screen.set_focus(None)   # the screen's keys, as before a field is chosen
        await pilot.pause()
        footer = screen_lines(app)[-1]
        for hint in ("^s save", "^l reload", "[ prev", "] next", "? help", "^q quit", "^p palette"):
            assert hint in footer, footer


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_job_screens_inputs_and_preview_tabs_are_whole(size):
    app = RecordingApp()
    async with app.run_test(size=size) as pilot:
        screen = await open_job(app, pilot)
        for box in screen.query(Input):
            # Beside the preview (120 columns and up) the form keeps 60 columns and a path as
            # long as the codelab's folder shows its end, as it did before; stacked, all of it.
            if not box.value or (size[0] >= 110 and box.id == "input-CHECKPOINT_DIR"):
                continue
            box.focus()   # scrolled into view, the cursor at the end: a cut value loses its start
            await pilot.pause()
            assert region_text(app, box).strip() == box.value, (box.id, region_text(app, box))
        tabs = screen.query_one(Tabs)
        screen.query_one("#job-body").scroll_to_widget(tabs, animate=False)
        await pilot.pause()
        shown = region_text(app, tabs)
        for name in ("run_nemo_rl.sh", ".rayignore", "ray_runtime_env_nemo.json"):
            assert name in shown, shown


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("mode", ["SANDBOX", "Google Cloud"])
async def test_the_header_keeps_the_cost_per_hour(wizard_app, size, mode):
    cost = CostInfo(per_hour=325.02, since=1650.04, at=AT - 3600, plan_per_hour=332.42)
    header: HeaderInfo = replace(HEADER, mode=mode, job="RUNNING 12/20", cost=cost, now=AT)
    app = wizard_app(header)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        top = screen_lines(app)[0]
        for part in ("ray-a4-gpu-spot", "RUNNING 12/20", "$1,975 est", "($325.02/h)", "12:04"):
            assert part in top, top
