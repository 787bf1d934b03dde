"""A line the Cloud Billing Catalog has no price for is named where the cost shows, never dropped
silently: Start's "about $X/h while it runs (estimate; no price for: ...)", Teardown's "deleting
stops about $X/h (estimate; no price for: ...)", and the header's total marked "+?" with the count.
(tests/tui/test_cost_meter.py covers the figures when every line is priced.)"""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Input, Static

from rltui.widgets.chrome import CostInfo, HeaderInfo, WizardHeader
from tests.tui.conftest import HEADER
from tests.tui.samples_teardown import inventory_before
from tests.tui.test_cost_meter import AT, plain

LUSTRE = "Lustre 9000 GiB at 1000 MB/s/TiB"
RUNNING = CostInfo(per_hour=325.02, since=650.04, at=AT - 3600, plan_per_hour=325.02,
                   unpriced=(LUSTRE,), plan_unpriced=(LUSTRE,))


async def test_the_header_marks_a_total_that_leaves_a_line_out(wizard_app) -> None:
    app = wizard_app(replace(HEADER, cost=RUNNING, now=AT))
    async with app.run_test(size=(140, 24)) as pilot:
        await pilot.pause()
        text = app.screen.query_one(WizardHeader).render().plain
        assert "$975.06+? est ($325.02/h, 1 unpriced)" in text, text


async def test_only_unpriced_things_exist_the_header_still_shows_a_cost(wizard_app) -> None:
    lustre_only = CostInfo(per_hour=0.0, since=0.0, at=AT, plan_per_hour=325.02, unpriced=(LUSTRE,),
                           plan_unpriced=(LUSTRE,))
    app = wizard_app(replace(HEADER, cost=lustre_only, now=AT))
    async with app.run_test(size=(140, 24)) as pilot:
        await pilot.pause()
        assert "$0.00+? est" in app.screen.query_one(WizardHeader).render().plain


async def test_start_names_the_plans_lines_without_a_price(wizard_app) -> None:
    app = wizard_app(HeaderInfo(mode="Google Cloud", project="team-rl-prod-7", clock="12:04"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.set_header(cost=replace(RUNNING, per_hour=0.0, since=0.0))
        await pilot.pause()
        where = plain(app.screen.query_one("#start-where", Static)).replace("\n", " ")
        assert f"about $325.02/h while it runs (estimate; no price for: {LUSTRE})." in " ".join(where.split())


async def test_teardown_names_what_exists_without_a_price(wizard_app) -> None:
    app = wizard_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.switch_mode("teardown")
        await pilot.pause()
        app.screen.query_one("#confirm", Input).cursor_blink = False
        app.bus.inventory.publish(inventory_before())
        app.set_header(cost=RUNNING)
        app.bus.cost.publish(None)
        await pilot.pause()
        summary = str(app.screen.query_one("#inventory-summary", Static).content)
        assert f"deleting stops about $325.02/h (estimate; no price for: {LUSTRE})" in summary
