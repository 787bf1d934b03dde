"""Issue 14's done-when: in the sandbox, `rltui up --check` exits 0 on a fresh project and exits 1
naming the quota when the sandbox was started with the Spot B200 GPU quota at 0, with no resource
created either way (the sandbox's own record says so, not rltui).

One private sandbox (rltui_sandbox.manage, started with the quota at 0, stopped at the end), one
project per case: a fresh one (every codelab API off: the quota is unknown, not failed, and
nothing is enabled), and one where the user has turned Compute Engine on (then regions.get
reports the quota and the check fails naming PREEMPTIBLE_NVIDIA_B200_GPUS).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests import headless_user
from tests.headless_user import writes, User, make_user, record

pytestmark = pytest.mark.slow
GPU_METRIC = "PREEMPTIBLE_NVIDIA_B200_GPUS"

@pytest.fixture(scope="module")
def quota_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("sandbox-quota0")
    with headless_user.private_sandbox(root, speed=300.0, quotas={GPU_METRIC: 0.0}) as status:
        yield root, status


def _check(user: User) -> tuple[int, str, dict[str, Any], dict[str, Any]]:
    before = record(user.status)
    out = user.run("up", "--check", timeout=120)
    after = record(user.status)
    return out.returncode, out.stdout + out.stderr, before, after


def test_fresh_project_can_run_and_nothing_is_created(quota_sandbox, tmp_path):
    root, status = quota_sandbox
    user = make_user(tmp_path / "fresh", "check-fresh", root, status)
    code, text, before, after = _check(user)
    assert code == 0, text
    assert "nothing was created" in text and "can run:" in text
    # The APIs are off, so the quota cannot be read: unknown (??), never a failure, never enabled.
    assert "??   Spot GPU quota (NVIDIA_B200)" in text, text
    assert "compute API is off" in text
    assert after["operations"] == before["operations"], "up --check ran an operation"
    assert writes(after) == writes(before), "up --check called a method that writes"
    # It did ask the cloud: the permissions, and the APIs' state.
    assert after["calls"].get("cloudresourcemanager:projects.testIamPermissions", 0) > \
        before["calls"].get("cloudresourcemanager:projects.testIamPermissions", 0)


def test_gpu_quota_at_zero_exits_1_naming_it(quota_sandbox, tmp_path):
    from rltui.cloud.endpoints import Endpoints
    from rltui.cloud.network import NetworkAdapter

    root, status = quota_sandbox
    user = make_user(tmp_path / "quota0", "check-quota0", root, status)

    async def enable_compute() -> None:   # the user's own `gcloud services enable compute...`
        await NetworkAdapter(Endpoints.sandbox(status), user.project).enable_apis(
            ["compute.googleapis.com", "cloudquotas.googleapis.com"])

    asyncio.run(enable_compute())
    code, text, before, after = _check(user)
    assert code == 1, text
    # Read where Google publishes it: Cloud Quotas' QuotaInfo for the GPU family (cloud/quotas.py).
    assert "FAIL Spot GPU quota (NVIDIA_B200)" in text, text
    # None granted as preemptible quota: Spot VMs use the standard one, 0 too (checks.py)
    assert "64 needed; no preemptible quota granted in us-east1, so Spot VMs use the standard" in text
    assert "fix: request Spot (preemptible) or standard NVIDIA_B200 GPUs in us-east1" in text
    assert "cannot run: 1 failed" in text
    # The zone offers the machine once compute can say so, and the names are free.
    assert "ok   a4-highgpu-8g in us-east1-b" in text
    assert after["operations"] == before["operations"], "up --check ran an operation"
    assert writes(after) == writes(before), "up --check called a method that writes"
    assert "Traceback" not in text
