"""After a teardown the deleted cluster's job leaves every screen: the header shows no job,
the Monitor's log, strip, checkpoints and pods are empty, and a screen built afterwards does
not replay the old job's lines (issue 12: "the header keeps job SUCCEEDED 20/20 after
teardown"; Monitor and Job showed the deleted cluster's job as RUNNING)."""

from __future__ import annotations

from rltui.widgets.checkpoints import CheckpointsList
from rltui.widgets.jobstrip import JobStrip
from rltui.widgets.logpane import JobLogPane
from rltui.widgets.pods import PodsTable
from tests.tui.test_monitor import publish_all, settle


async def test_teardown_clears_the_job_and_the_cluster_from_every_screen(wizard_app):
    app = wizard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.switch_mode("monitor")
        await pilot.pause()
        publish_all(app)
        app.set_header(job="SUCCEEDED 20/20")
        await settle(pilot)
        monitor = app.screen
        assert monitor.query_one(JobLogPane).received > 0
        assert monitor.query_one(PodsTable).pod_rows()
        assert monitor.query_one(CheckpointsList).checkpoints

        app.reset_job(None)      # what _teardown does once the RayCluster is deleted
        app.forget_cluster()
        await settle(pilot)
        assert app.header_info.job == ""
        assert "job " not in monitor.query_one("#wizard-header").render().plain
        pane = monitor.query_one(JobLogPane)
        assert pane.received == 0 and pane.log_widget.line_count == 0
        assert monitor.query_one(JobStrip).job_id is None
        assert "no job yet" in monitor.query_one(JobStrip).render().plain
        assert not monitor.query_one(CheckpointsList).checkpoints
        assert not monitor.query_one(PodsTable).pod_rows()

        # A screen built afterwards replays nothing of the old job.
        await app.switch_mode("job")
        await pilot.pause()
        assert app.screen.query_one(JobStrip).job_id is None
        assert not app.bus.log_lines.history and not app.bus.step_records.history
