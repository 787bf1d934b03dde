"""The cost meter on screen: the header's running total (fitting 80 columns, "est" kept), Start's
"about $X/h while it runs" before `up`, Teardown's "deleting stops $X/h". No session: the app's
worker is the one that sets the header's cost (app.refresh_cost); here it is set as it would."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from textual.widgets import Input, Static

from rltui.widgets.chrome import CostInfo, HeaderInfo, WizardHeader
from tests.tui.conftest import HEADER
from tests.tui.samples_teardown import inventory_after, inventory_before

AT = 1_764_590_400.0  # a fixed "now" for the running total
# The codelab's plan at the sandbox catalog's prices: 317.07 $/h for 64 Spot slices and the rest.
RUNNING = CostInfo(per_hour=325.02, since=650.04, at=AT - 3600, plan_per_hour=332.42)
NOTHING = CostInfo(per_hour=0.0, since=0.0, at=AT, plan_per_hour=332.42)


def header_text(app) -> str:
    return app.screen.query_one(WizardHeader).render().plain


@pytest.mark.parametrize("width", [80, 120, 140])
async def test_the_header_keeps_cluster_job_and_the_running_total_whole(wizard_app, width):
    from dataclasses import replace

    app = wizard_app(replace(HEADER, cost=RUNNING, now=AT))
    async with app.run_test(size=(width, 24)) as pilot:
        await pilot.pause()
        text = header_text(app)
        assert len(text) <= width
        # 650.04 since creation at `at`, plus one hour at 325.02 $/h: 975.06
        assert "$975.06 est" in text, text
        assert "ray-a4-gpu-spot" in text and "RUNNING 7/20" in text and "12:04" in text
        if width >= 120:   # labels go first, then the project, then the rate
            assert "$975.06 est ($325.02/h)" in text and "team-rl-sandbox-42" in text
        if width >= 140:
            assert "cluster ray-a4-gpu-spot" in text and "cost $975.06 est ($325.02/h)" in text


async def test_nothing_priced_exists_no_cost_in_the_header(wizard_app):
    from dataclasses import replace

    app = wizard_app(replace(HEADER, cost=NOTHING, now=AT))
    async with app.run_test(size=(120, 24)) as pilot:
        await pilot.pause()
        assert "est" not in header_text(app) and "$" not in header_text(app)


def plain(widget: Static) -> str:
    console = Console(width=118, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def test_start_says_what_the_plan_costs_per_hour_before_up(wizard_app):
    app = wizard_app(HeaderInfo(mode="Google Cloud", project="team-rl-prod-7", clock="12:04"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        where = app.screen.query_one("#start-where", Static)
        assert "$" not in plain(where)   # no estimate yet: nothing said
        app.set_header(cost=NOTHING)
        await pilot.pause()
        assert "This plan: about $332.42/h while it runs (estimate)." in plain(where).replace("\n", " ")


async def test_teardown_says_what_deleting_stops_and_not_once_it_is_gone(wizard_app):
    app = wizard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.switch_mode("teardown")
        await pilot.pause()
        app.screen.query_one("#confirm", Input).cursor_blink = False
        app.bus.inventory.publish(inventory_before())
        await pilot.pause()
        summary = app.screen.query_one("#inventory-summary", Static)
        assert "deleting stops" not in str(summary.content)
        # The worker: the header's cost first, then the `cost` topic, after the inventory.
        app.set_header(cost=RUNNING)
        app.bus.cost.publish(None)
        await pilot.pause()
        assert "deleting stops about $325.02/h (estimate)" in str(summary.content)
        app.bus.inventory.publish(inventory_after())
        app.set_header(cost=NOTHING)
        app.bus.cost.publish(None)
        await pilot.pause()
        assert "deleting stops" not in str(summary.content)
