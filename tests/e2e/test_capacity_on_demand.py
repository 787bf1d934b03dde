"""CAPACITY="on-demand" in the sandbox, as a user runs it: `up` brings the RayCluster up on an
on-demand GPU pool, the xpk command line in the state folder's record carries `--on-demand` (and
no `--spot`), `status --json` prices the GPU nodes at the on-demand slice (above what Spot's
would cost). (That such a node is never preempted: tests/kuberay/test_preemption_capacity.py.)"""

from __future__ import annotations

import json

import pytest

from tests.headless_user import make_user

pytestmark = pytest.mark.slow

ON_DEMAND_SLICE, SPOT_SLICE = 16.11, 4.9542   # the sandbox catalog's A4 slices (grpc_billing.py)


def test_on_demand_comes_up_priced_as_on_demand(sandbox, sandbox_dir, tmp_path):
    user = make_user(tmp_path / "od", "capacity-on-demand", sandbox_dir, sandbox)
    with user.env_sh.open("a") as f:
        f.write('\nexport CAPACITY="on-demand"\nexport NUM_NODES="2"\n')
    try:
        up = user.run("up", "--yes", timeout=600)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
        (record,) = list((user.home / "state").rglob("rltui-xpk.json"))
        argv = json.loads(record.read_text())["argv"]
        assert "--on-demand" in argv and "--spot" not in argv, argv
        status = user.run("status", "--json")
        assert status.returncode == 0, status.stderr
        cost = json.loads(status.stdout)["cost"]
        gpus = 2 * 8
        # the two GPU nodes alone, at the on-demand rate: more than the Spot plan would cost in all
        assert cost["per_hour"] > gpus * ON_DEMAND_SLICE > gpus * SPOT_SLICE + 50, cost
    finally:
        down = user.run("down", "--yes", "--no-export", timeout=600)
        assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-2000:]
