"""A Spot VM gone without a graceful shutdown (`rltui sandbox preempt --hard`): Ray fails the
driver at once while Kubernetes still shows the node and its pods Ready until the node-monitor
grace period ends. The supervisor looks again after that period instead of calling the failure
final, and the run ends SUCCEEDED with no rltui process running. A sandbox of its own, so it
runs beside the shared sandbox's tests."""

from __future__ import annotations

import pytest

from tests.headless_user import make_user, preempted_run_recovers, private_sandbox

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # a whole run, preempted and recovered


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    root = tmp_path_factory.mktemp("hardsbx")
    with private_sandbox(root, speed=300.0, kuberay_version="1.6.0", timeout=60.0) as status:
        yield make_user(tmp_path_factory.mktemp("hard"), "recovery-hard-e2e", root, status)


def test_a_node_lost_without_a_shutdown_is_a_preemption_not_a_failure(user):
    up = user.run("up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    preempted_run_recovers(user, hard=True)
