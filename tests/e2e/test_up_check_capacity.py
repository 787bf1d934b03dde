"""In the sandbox, `CAPACITY="reservation:nope"` makes `rltui up --check` exit 1 naming the
reservation (Compute Engine reservations.get in ZONE answers 404), with nothing created: the
sandbox's own record says so, not rltui."""

from __future__ import annotations

import asyncio

import pytest

from tests.headless_user import make_user, record, writes

pytestmark = pytest.mark.slow


def test_a_missing_reservation_fails_the_check_naming_it(sandbox, sandbox_dir, tmp_path):
    from rltui.cloud.endpoints import Endpoints
    from rltui.cloud.network import NetworkAdapter

    user = make_user(tmp_path / "res", "check-reservation", sandbox_dir, sandbox)
    with user.env_sh.open("a") as f:
        f.write('\nexport CAPACITY="reservation:nope"\n')

    async def enable_compute() -> None:   # the user's own `gcloud services enable compute...`
        await NetworkAdapter(Endpoints.sandbox(sandbox), user.project).enable_apis(["compute.googleapis.com"])

    asyncio.run(enable_compute())
    before = record(sandbox)
    out = user.run("up", "--check", timeout=120)
    after = record(sandbox)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "FAIL reservation nope in us-east1-b" in text, text
    assert "no reservation named nope in us-east1-b" in text
    assert "Traceback" not in text
    assert after["calls"].get("compute:reservations.get", 0) > before["calls"].get("compute:reservations.get", 0)
    assert after["operations"] == before["operations"], "up --check ran an operation"
    assert writes(after) == writes(before), "up --check called a method that writes"
