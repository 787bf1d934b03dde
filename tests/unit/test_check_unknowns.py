"""`rltui up --check` lists as unknown only what it asks for and cannot read yet: with every API on
and every quota it reads answered, nothing is unknown and the last line says so, not "unknown
until `up` enables what they need" about a quota rltui never reads (Lustre capacity)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rltui import headless
from rltui.cloud.quotas import FamilyQuota, GpuFamilyQuotas, Quota
from rltui.config import parse_config
from rltui.envfile import EnvFile
from rltui.plan import checks as checks_mod
from rltui.plan.codelab import APIS
from rltui.plan.preflight import Check

DATA = Path(__file__).parent.parent / "data" / "env"


class FakeQuotas:
    """The two reads the quota checks make, answered with room to spare."""

    async def region_quotas(self, region: str) -> dict[str, Quota]:
        return {m: Quota(m, 1000.0, 0.0) for m in ("CPUS", "IN_USE_ADDRESSES", "STATIC_ADDRESSES")}

    async def gpu_family_quotas(self, region: str, family: str) -> GpuFamilyQuotas:
        return GpuFamilyQuotas(FamilyQuota(128.0, "PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region"),
                               FamilyQuota(0.0, "GPUS-PER-GPU-FAMILY-per-project-region"))

    async def aclose(self) -> None:
        pass


class FakeContext:
    def __init__(self) -> None:
        self.cfg = parse_config(EnvFile.read(DATA / "devrel-demos.env.sh").values())

    async def close(self) -> None:
        pass


@pytest.fixture
def quotas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks_mod, "quota_adapter", lambda ctx: FakeQuotas())


def test_every_quota_check_reads_what_it_names(quotas: None) -> None:
    got = asyncio.run(checks_mod._quota_checks(FakeContext(), set(APIS)))  # type: ignore[arg-type]
    assert [c for c in got if c.ok is None] == []
    assert {c.name for c in got} == {"Spot GPU quota (NVIDIA_B200)", "CPU quota (CPUS)",
                                     "address quota (IN_USE_ADDRESSES)",
                                     "static address quota (STATIC_ADDRESSES)"}


def test_up_check_says_nothing_is_unknown_when_everything_was_read(
        quotas: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from rltui.plan import preflight as preflight_mod

    async def preflight(env_path: Path, cfg: Any, problems: Any, endpoints: Any, ctx: Any) -> list[Check]:
        return [Check("env.sh", True, str(env_path)), Check("APIs enabled", True, "all four"),
                *await checks_mod._quota_checks(FakeContext(), set(APIS))]  # type: ignore[arg-type]

    monkeypatch.setattr(preflight_mod, "preflight", preflight)
    monkeypatch.setattr(headless, "Context", lambda cfg, ep: FakeContext())
    lines: list[str] = []

    class Endpoints:
        label = "SANDBOX"

    cfg = FakeContext().cfg
    code = asyncio.run(headless.check(cfg, Endpoints(), "env.sh", out=lines.append))  # type: ignore[arg-type]
    assert code == 0
    assert lines[-1] == "can run: 6 passed", lines
    assert not [line for line in lines if "unknown" in line or "Lustre capacity" in line], lines
