"""The Monitor shows the budget guard's line where it shows the recovery line (the job strip's
second line): whole where it fits, else its short form (the strip is 43 columns at 80x24, 63 from
120x40), with the whole line as the strip's tooltip."""

from __future__ import annotations

from rltui.plan.guard import guard_line, guard_short
from rltui.seam import JobStatusUpdate
from rltui.widgets.jobstrip import JobStrip
from tests.tui import samples_monitor as S
from tests.tui.test_monitor import open_monitor, publish_all

GUARD = {"state": "watching", "down_after": "gpus", "limit_usd": 500.0, "spend_usd": 412.3, "currency": "USD",
         "pools": {"a4-highgpu-8g-ray-a4-gpu-spot-a4-pool": "present"}}


async def test_the_strip_shows_what_the_guard_will_do_and_what_was_spent(wizard_app):
    line, short = guard_line(GUARD), guard_short(GUARD)
    assert short == "guard: ~$412 of $500; GPUs go at end"
    for size, wanted in (((80, 24), short), ((120, 40), short)):
        app = wizard_app(S.HEADER)
        async with app.run_test(size=size) as pilot:
            await open_monitor(app, pilot)
            publish_all(app)
            app.bus.job_status.publish(JobStatusUpdate(S.JOB_ID, "SUCCEEDED", guard=line, guard_short=short))
            await pilot.pause()
            await pilot.pause()
            strip = app.screen.query_one(JobStrip)
            rows = [r.plain for r in strip.render().split("\n")]
            where = next((r for r in rows if wanted in r), None)
            assert where is not None, (size, strip.size.width, rows)
            assert where.index(wanted) + len(wanted) <= strip.size.width, (size, strip.size.width, where)
            assert strip.tooltip == line and len(line) > strip.size.width
            # A new job: the old one's guard goes with it.
            app.bus.job_status.publish(JobStatusUpdate("rltui-other", "PENDING", reset=True))
            await pilot.pause()
            assert "guard" not in strip.render().plain and strip.tooltip is None
