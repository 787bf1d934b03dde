"""Issue 11's recovery: `rltui submit`, a Spot preemption at step 5 or later, and then no rltui
command but `status`: the supervisor on the cluster resubmits from the newest checkpoint and
the run ends SUCCEEDED at Step 20/20 with two attempts. Also the case `make test` keeps from
the chaos matrix (tests/chaos): a preemption with no rltui process running."""

from __future__ import annotations

import pytest

from tests.headless_user import make_user, preempted_run_recovers

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def user(sandbox, sandbox_dir, tmp_path_factory):
    u = make_user(tmp_path_factory.mktemp("recovery"), "recovery-e2e", sandbox_dir, sandbox)
    yield u
    u.run("down", "--yes")  # the sandbox's one Kubernetes API is shared: leave it empty


def test_a_preempted_run_recovers_with_no_rltui_running(user):
    up = user.run("up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    preempted_run_recovers(user)


def test_down_removes_the_supervisor_first(user):
    out = user.run("down", "--yes")
    assert out.returncode == 0, out.stdout[-3000:]
    lines = out.stdout.splitlines()
    removing = next(i for i, line in enumerate(lines) if "removing the job supervisor" in line)
    assert all("destroying" not in line for line in lines[:removing])
