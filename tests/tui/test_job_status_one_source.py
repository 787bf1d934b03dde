"""The header's job and the Job screen's "Last job" come from one source, the app's
`job_status` topic (with the newest step record): after a submit the header said `job PENDING`
while the Job screen said RUNNING. The newest answer wins for both, read from the screen."""

from __future__ import annotations

import pytest

from rltui.seam import JobStatusUpdate
from rltui.widgets.jobstrip import JobStrip
from tests.tui import samples_monitor as S
from tests.tui.screentext import region_text, screen_lines

JOB = "raysubmit_9fQk2LrT7uVw1XyZ"


async def header_and_strip(app, pilot) -> tuple[str, str]:
    """The header's row, and the strip as shown (below 110 columns the panes stack: scrolled
    into view first)."""
    strip = app.screen.query_one(JobStrip)
    app.screen.query_one("#job-body").scroll_to_widget(strip, animate=False, immediate=True)
    await pilot.pause()
    return screen_lines(app)[0], region_text(app, strip)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_the_header_and_the_job_screen_say_the_same_status(wizard_app, size):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=size) as pilot:
        await app.switch_mode("job")
        await pilot.pause()
        app.reset_job(JOB)                                   # what submit_job does
        await pilot.pause()
        header, strip = await header_and_strip(app, pilot)
        assert "PENDING" in header and "PENDING" in strip, (header, strip)

        app.bus.job_status.publish(JobStatusUpdate(JOB, "RUNNING"))   # follow_logs starts
        await pilot.pause()
        header, strip = await header_and_strip(app, pilot)
        assert "RUNNING" in header and "PENDING" not in header, header
        assert "RUNNING" in strip, strip

        app.bus.step_records.publish(S.step_records())       # the log's steps: 5 of 20
        app.bus.job_status.publish(JobStatusUpdate(JOB, "RECOVERING", recovery=""))
        await pilot.pause()
        header, strip = await header_and_strip(app, pilot)
        assert "RECOVERING 5/20" in header and "RUNNING" not in header, header
        assert "RECOVERING" in strip and "5/20" in strip, strip

        app.bus.job_status.publish(JobStatusUpdate(JOB, "SUCCEEDED"))  # the follower's end
        await pilot.pause()
        header, strip = await header_and_strip(app, pilot)
        assert "SUCCEEDED 5/20" in header and "SUCCEEDED" in strip, (header, strip)
