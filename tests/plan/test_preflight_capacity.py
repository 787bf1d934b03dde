"""`up --check` for CAPACITY (plan/checks_capacity.py) against the sandbox's Compute routes in
process: the reservation CAPACITY names must exist in ZONE, be READY, reserve the device's
machine type and hold NUM_NODES free machines; on demand, the standard GPU quota is the one
judged; nothing is created."""

from __future__ import annotations

from typing import Any

from rltui.plan.checks import cloud_checks
from rltui.plan.preflight import Check
from rltui_sandbox.rest_compute_reservations import Reserved
from rltui_sandbox.services import CODELAB_APIS
from tests.plan.test_preflight_checks import PROJECT, box, tls_folder  # noqa: F401 - fixtures

ZONE = "us-east1-b"


async def checks(sbx: dict[str, Any], capacity: str) -> dict[str, Check]:
    ctx = sbx["ctx"]
    ctx.cfg = ctx.cfg.model_copy(update={"capacity": capacity})
    return {c.name: c for c in await cloud_checks(ctx, set(CODELAB_APIS))}


def reserve(sbx: dict[str, Any], name: str, reserved: Reserved) -> None:
    sbx["world"].reservations.setdefault((PROJECT, ZONE), {})[name] = reserved


async def test_a_missing_reservation_fails_naming_it_and_nothing_is_made(box) -> None:  # noqa: F811
    got = await checks(box, "reservation:nope")
    res = got["reservation nope in us-east1-b"]
    assert res.ok is False and res.detail == "no reservation named nope in us-east1-b"
    assert "gcloud compute reservations list --project=checks-project" in res.fix
    calls = box["world"].record.snapshot()["calls"]
    assert "compute:reservations.get" in calls
    assert [k for k in calls if any(w in k for w in (".insert", "Create", ".delete", "Delete", ".enable"))] == []


async def test_a_ready_reservation_with_room_passes(box) -> None:  # noqa: F811
    reserve(box, "a4-res", Reserved("a4-highgpu-8g", count=10, in_use=2))
    res = (await checks(box, "reservation:a4-res"))["reservation a4-res in us-east1-b"]
    assert res.ok is True and res.detail == "8 a4-highgpu-8g needed, 8 free of 10"


async def test_too_few_free_machines_fail_with_the_fix(box) -> None:  # noqa: F811
    reserve(box, "a4-res", Reserved("a4-highgpu-8g", count=8, in_use=3))
    res = (await checks(box, "reservation:a4-res"))["reservation a4-res in us-east1-b"]
    assert res.ok is False and res.detail == "8 a4-highgpu-8g needed, 5 free of 8"
    assert res.fix.startswith("set NUM_NODES to 5 or less")


async def test_another_machine_type_or_a_reservation_not_ready_fails(box) -> None:  # noqa: F811
    reserve(box, "h100-res", Reserved("a3-megagpu-8g", count=16))
    reserve(box, "new-res", Reserved("a4-highgpu-8g", count=16, status="CREATING"))
    got = await checks(box, "reservation:h100-res")
    assert got["reservation h100-res in us-east1-b"].detail == \
        "h100-res reserves a3-megagpu-8g, not a4-highgpu-8g (b200-8)"
    got = await checks(box, "reservation:new-res")
    assert got["reservation new-res in us-east1-b"].detail == "new-res is CREATING, not READY"


async def test_an_automatic_reservation_passes_saying_others_may_take_it(box) -> None:  # noqa: F811
    reserve(box, "a4-any", Reserved("a4-highgpu-8g", count=8, specific_required=False))
    res = (await checks(box, "reservation:a4-any"))["reservation a4-any in us-east1-b"]
    assert res.ok is True and "automatically consumed" in res.detail


async def test_spot_and_on_demand_ask_no_reservation(box) -> None:  # noqa: F811
    for capacity in ("spot", "on-demand"):
        assert not [n for n in await checks(box, capacity) if n.startswith("reservation")]


async def test_on_demand_is_judged_on_the_standard_gpu_quota(box) -> None:  # noqa: F811
    box["world"].quotas.update({"PREEMPTIBLE_NVIDIA_B200_GPUS": 100.0, "NVIDIA_B200_GPUS": 32.0})
    got = await checks(box, "on-demand")
    gpu = got["GPU quota (NVIDIA_B200)"]
    assert "Spot GPU quota (NVIDIA_B200)" not in got
    assert gpu.ok is False and gpu.detail.startswith("64 needed, 32 granted in us-east1")
    box["world"].quotas["NVIDIA_B200_GPUS"] = 64.0
    assert (await checks(box, "on-demand"))["GPU quota (NVIDIA_B200)"].ok is True


async def test_a_reservations_gpu_quota_is_unknown_with_where_to_look(box) -> None:  # noqa: F811
    reserve(box, "a4-res", Reserved("a4-highgpu-8g", count=8))
    gpu = (await checks(box, "reservation:a4-res"))["GPU quota (NVIDIA_B200)"]
    assert gpu.ok is None and "iam-admin/quotas" in gpu.fix
