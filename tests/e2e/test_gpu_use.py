"""The wizard's Monitor shows each worker pod's GPU use while the demo job trains: on a sandbox
of its own, `up` then `submit` as a user runs them; the wizard over a real Session opens Monitor,
whose pods table gains GPU% with a number for every worker pod (GKE's accelerator metrics, which
the sandbox's GPU nodes report from the job's phases), and "-" for the head, which has no GPU."""

from __future__ import annotations

import asyncio

import pytest

from rltui.app import RLTuiApp
from rltui.cloud.endpoints import Endpoints
from rltui.session import Session
from rltui.widgets.chrome import HeaderInfo
from rltui.widgets.pods import PodsTable
from tests.headless_user import make_user, private_sandbox

pytestmark = pytest.mark.slow

PROJECT = "gpu-use-e2e"


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpusbx")
    with private_sandbox(root, speed=300.0, timeout=60.0) as status:
        u = make_user(tmp_path_factory.mktemp("gpudir"), PROJECT, root, status)
        # Long enough to be training when Monitor looks.
        u.env_sh.write_text(u.env_sh.read_text() + 'export MAX_STEPS="200"\n')
        yield u


def gpu_cells(table: PodsTable) -> dict[str, str]:
    labels = [str(c.label) for c in table.columns.values()]
    if "GPU%" not in labels:
        return {}
    at = labels.index("GPU%")
    return {row.name: str(table.get_row(row.name)[at]) for row in table.pod_rows()}


async def test_monitor_shows_a_gpu_percent_for_each_worker_while_the_job_trains(user, monkeypatch):
    up = user.run("up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    sub = user.run("submit")
    assert sub.returncode == 0, sub.stderr[-2000:]
    for key, value in user.env.items():
        monkeypatch.setenv(key, value)
    session = Session(user.env_sh, lambda: Endpoints.sandbox(user.status))
    app = RLTuiApp(session, header=HeaderInfo(mode="SANDBOX"))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.switch_mode("monitor")
        app.watch_pods()   # what Start does once the cluster exists: pods, and the GPU poll
        cells: dict[str, str] = {}
        for _ in range(1200):   # a poll a reference minute (1 s here); points show 2 periods late
            table = app.screen.query_one(PodsTable)
            cells = gpu_cells(table)
            workers = {n: v for n, v in cells.items() if "-worker-" in n}
            if len(workers) == 8 and all(v.isdigit() and int(v) > 0 for v in workers.values()):
                break
            await asyncio.sleep(0.1)
        await pilot.pause()
        workers = {n: v for n, v in cells.items() if "-worker-" in n}
        assert len(workers) == 8 and all(v.isdigit() and int(v) > 0 for v in workers.values()), cells
        assert all(v == "-" for n, v in cells.items() if "-head-" in n), cells
