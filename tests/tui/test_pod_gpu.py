"""Monitor's pods table shows each worker pod's GPU use from Cloud Monitoring: GPU% (the duty
cycle, mean over the pod's GPUs) and GMEM (memory in use, summed), once GPU points arrive; the
head and a pod with no point read "-". Snapshots at 80x24 and 120x40."""

from __future__ import annotations

import pytest

from rltui.widgets.pods import PodsTable
from tests.tui import samples_monitor as S
from tests.tui.test_monitor import SIZES, open_monitor, publish_all, settle


def columns(table: PodsTable) -> list[str]:
    return [str(c.label) for c in table.columns.values()]


async def test_gpu_columns_appear_with_the_first_points_and_show_each_worker(wizard_app):
    app = wizard_app(S.HEADER)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_monitor(app, pilot)
        app.bus.raycluster.publish(S.raycluster())
        publish_all(app)
        await settle(pilot)
        table = app.screen.query_one(PodsTable)
        assert "GPU%" not in columns(table), "no column before Cloud Monitoring has answered"

        app.bus.gpu.publish(S.gpu_metrics())
        await settle(pilot)
        assert {"GPU%", "GMEM"} <= set(columns(table))
        at = columns(table).index("GPU%")
        mem = columns(table).index("GMEM")
        rows = {row.name: [str(c) for c in table.get_row(row.name)] for row in table.pod_rows()}
        worker = f"{S.CLUSTER}-gpu-worker-group-worker-{S.WORKER_SUFFIXES[0]}"
        assert rows[worker][at] == "12"       # the newest point: the save's dip
        assert rows[worker][mem] == "805G"    # 8 x 60% of 180 GB, in GiB
        assert rows[S.head()["metadata"]["name"]][at] == "-"
        assert all(cells[at] not in ("", "-") for name, cells in rows.items()
                   if "worker" in name and name != S.PREEMPTED)
        # The full view (ctrl+o) has used / total.
        _title, lines = table.pane_text() or ("", [])
        assert any("805G/1341G" in line for line in lines), lines


@pytest.mark.parametrize("size", SIZES)
def test_monitor_with_gpu_use(snap_compare, wizard_app, size):
    app = wizard_app(S.HEADER)

    async def run_before(pilot):
        await open_monitor(app, pilot)
        app.bus.raycluster.publish(S.raycluster())
        publish_all(app)
        app.bus.gpu.publish(S.gpu_metrics())
        await pilot.pause(0.1)
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=run_before)


def test_a_pod_whose_points_stopped_reads_no_number():
    """A worker that stopped reporting (its node gone) must not show its last busy minute as now."""
    from dataclasses import replace

    from rltui.cloud.monitoring import Point

    gpu = S.gpu_metrics()
    worker = next(iter(gpu.busy))
    old = replace(gpu, busy={**gpu.busy, worker: (Point(S.NOW - 600, 97.0),)})
    assert old.latest(worker) is None
    assert gpu.latest(worker) is not None and gpu.latest(worker).busy_pct == 12.0
