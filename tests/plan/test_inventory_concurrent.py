"""The inventory (`rltui status`, `down`'s leak scan) asks its independent calls at once
(issue 13, item 6): against the session's sandbox, the real adapters' calls are recorded as
spans (start, end) and the number in flight at once is counted. No timing is asserted.

A fresh project: every API is off, so nothing exists; the peering's list is asked alongside
the network and Service Networking checks that gate it, and its answer is dropped.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from rltui.cloud.endpoints import Endpoints
from rltui.config import parse_config
from rltui.envfile import EnvFile
from rltui.plan.context import Context
from rltui.plan.inventory import collect, collect_with_job

ENV_SH = Path(__file__).resolve().parents[1] / "data" / "env" / "devrel-demos.env.sh"
pytestmark = pytest.mark.slow


@pytest.fixture
def spans(monkeypatch):
    """(name, start, end) of every call of the adapters the inventory goes through."""
    import asyncio

    from rltui.cloud.gke import GkeAdapter
    from rltui.cloud.lustre import LustreAdapter
    from rltui.cloud.network import NetworkAdapter

    seen: list[tuple[str, float, float]] = []

    def record(name, fn):
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            loop = asyncio.get_running_loop()
            start = loop.time()
            try:
                return await fn(*args, **kwargs)
            finally:
                seen.append((name, start, loop.time()))
        return wrapper

    for cls, names in ((GkeAdapter, ("get", "list")), (LustreAdapter, ("list",)),
                       (NetworkAdapter, ("networks", "network", "address", "enabled_apis",
                                         "peering"))):
        for name in names:
            monkeypatch.setattr(cls, name, record(f"{cls.__name__}.{name}", getattr(cls, name)))
    return seen


def peak(seen: list[tuple[str, float, float]]) -> int:
    """The most calls in flight at one moment."""
    return max(sum(1 for _, a, b in seen if a <= start < b) for _, start, _ in seen)


def overlapped(seen, one: str, other: str) -> bool:
    (a0, a1), (b0, b1) = (next((s, e) for n, s, e in seen if n == name) for name in (one, other))
    return a0 < b1 and b0 < a1


async def test_the_inventory_asks_every_independent_call_at_once(sandbox, tmp_path, spans):
    values = EnvFile.read(ENV_SH).values()
    values.update(PROJECT_ID="inventory-concurrent")
    ctx = Context(parse_config(values), Endpoints.sandbox(sandbox), root=tmp_path / "state")
    try:
        resources = await collect(ctx)
    finally:
        await ctx.close()
    assert [r for r in resources if r.present] == [], "a fresh project holds nothing"
    names = sorted(n for n, _, _ in spans)
    # The peering's network is read from the networks' list (cloud/computereads.py), no get.
    assert names == sorted(["GkeAdapter.get", "GkeAdapter.list", "LustreAdapter.list",
                            "NetworkAdapter.networks", "NetworkAdapter.address",
                            "NetworkAdapter.enabled_apis", "NetworkAdapter.peering"]), names
    # The old inventory asked the Service Networking check only after the network's get, and the
    # peering after both: never the check beside the network's read.
    assert overlapped(spans, "NetworkAdapter.networks", "NetworkAdapter.enabled_apis")
    assert overlapped(spans, "NetworkAdapter.networks", "NetworkAdapter.peering")
    assert peak(spans) == len(spans), sorted(spans, key=lambda s: s[1])


async def test_a_job_on_record_is_not_shown_without_its_cluster(sandbox, tmp_path, spans):
    """status shows the newest job only while the RayCluster exists, as before the job was
    asked alongside it."""
    from rltui.plan.jobs import JobRecord, job_records, save_job_records

    values = EnvFile.read(ENV_SH).values()
    values.update(PROJECT_ID="inventory-concurrent-job")
    ctx = Context(parse_config(values), Endpoints.sandbox(sandbox), root=tmp_path / "state")
    save_job_records(ctx, [JobRecord("rltui-1", "/data/ckpt", str(tmp_path), 0.0)])
    assert job_records(ctx)
    try:
        resources, job = await collect_with_job(ctx)
    finally:
        await ctx.close()
    assert job is None
    assert {r.kind for r in resources} >= {"GKE cluster", "RayCluster", "Secret"}
    assert not [r for r in resources if r.present]
