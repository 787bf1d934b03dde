"""The pods table gives way in the right order: NAME (what enter, d and ctrl+d act on) stays
whole at 120x40 and NODE shortens first, read from the rendered screen."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rltui.widgets.pods import PodsTable, layout
from tests.tui import samples_monitor as S
from tests.tui.screentext import region_text
from tests.tui.test_monitor import open_monitor, publish_all, settle

# Before env.sh names the cluster the header has none: no "<cluster>-" comes off the names.
NO_PREFIX = replace(S.HEADER, cluster="")


def test_node_gives_way_before_name():
    name, node = len(S.PREEMPTED), len(S.node(3))
    cols = layout(118, 1, node, name)
    assert cols["NAME"] >= name and 5 < cols["NODE"] < node, cols
    assert layout(200, 1, node, name)["NODE"] == node   # room for both: both whole


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_pod_names_are_whole_at_120x40_and_node_shortens_first(wizard_app, size):
    app = wizard_app(NO_PREFIX)
    async with app.run_test(size=size) as pilot:
        await open_monitor(app, pilot)
        app.bus.raycluster.publish(S.raycluster())
        publish_all(app)
        await settle(pilot)
        table = app.screen.query_one(PodsTable)
        shown = region_text(app, table)
        names = [row.name for row in table.pod_rows()]
        if size == (120, 40):
            assert all(name in shown for name in names), shown
            assert S.node(3) not in shown and S.node(3)[-8:] in shown, shown  # its end
        else:   # 80 columns: each row keeps the suffix that tells pods and nodes apart
            assert all(name[-5:] in shown for name in names), shown
            assert "d3k3" in shown, shown
