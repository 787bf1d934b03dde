"""rltui reads Lustre throughput and usage the way Cloud Monitoring serves them: one series per
storage target, summed (REDUCE_SUM); used = capacity - free over the OSTs (no "used" metric)."""

from __future__ import annotations

import asyncio
import os

import grpc
import pytest

from rltui.cloud.endpoints import Endpoints
from rltui.cloud.monitoring import MonitoringAdapter
from rltui_sandbox.grpc_monitoring import add_monitoring_service
from rltui_sandbox.lustre_meter import LustreMeter

PROJECT, ZONE, INSTANCE = "rl-demo-project", "us-east1-b", "rl-demo-gpu-lustre"
MB = 1024 * 1024


@pytest.fixture
async def monitored(tmp_path):
    meter = LustreMeter(interval_s=3600)
    folder = tmp_path / INSTANCE
    meter.track((PROJECT, ZONE, INSTANCE), folder, 9000)
    server = grpc.aio.server()
    add_monitoring_service(server, meter, visibility_delay_s=0)  # Google's 60 s periods
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    adapter = MonitoringAdapter(Endpoints(label="SANDBOX", grpc_target=f"127.0.0.1:{port}"),
                                PROJECT)
    yield meter, folder, adapter
    await server.stop(None)
    meter.close()


def write(path, n):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(os.urandom(n))


async def test_write_throughput_is_one_series_summed_over_the_osts(monitored):
    meter, folder, adapter = monitored
    await asyncio.to_thread(meter.sample)
    for i in range(8):  # files land on different OSTs
        write(folder / f"step_1/shard{i}.pt", 2 * MB)
    await asyncio.to_thread(meter.sample)
    rates = await adapter.throughput(INSTANCE, minutes=10, period_s=60)
    times = [p.t for p in rates["write"]]
    assert times and len(times) == len(set(times)), "one point per period, not one per target"
    assert sum(p.value for p in rates["write"]) * 60 == pytest.approx(16 * MB, rel=0.01)


async def test_used_is_capacity_minus_free_over_the_osts(monitored, tmp_path):
    meter, _folder, adapter = monitored
    folder = tmp_path / "second"
    write(folder / "model/weights.bin", 12 * MB)
    meter.track((PROJECT, ZONE, "second"), folder, 9000)  # every sample of it sees 12 MB
    await asyncio.to_thread(meter.sample)
    used = await adapter.used_bytes("second", minutes=10, period_s=60)
    assert used and used[-1].value == pytest.approx(12 * MB, rel=0.01)


async def test_no_io_means_no_points_not_an_error(monitored):
    meter, _folder, adapter = monitored
    await asyncio.to_thread(meter.sample)
    assert (await adapter.throughput(INSTANCE, minutes=10, period_s=60))["read"] == []


async def test_used_pairs_capacity_and_free_even_when_a_second_passes_between_the_two_queries(
        monitored, monkeypatch, tmp_path):
    """Cloud Monitoring counts periods back from the interval's end: asked with two ends a second
    apart, capacity and free would share no timestamp and `used` would come back empty."""
    import time as real_time
    from types import SimpleNamespace

    from rltui.cloud import monitoring

    meter, _folder, adapter = monitored
    folder = tmp_path / "third"
    write(folder / "model/weights.bin", 4 * MB)
    meter.track((PROJECT, ZONE, "third"), folder, 9000)  # every sample of it sees 4 MB
    await asyncio.to_thread(meter.sample)
    base, ticks = real_time.time(), iter(range(100))
    # The adapter's clock (only its own) moves a second every time it is read.
    monkeypatch.setattr(monitoring, "time", SimpleNamespace(time=lambda: base + next(ticks)))
    used = await adapter.used_bytes("third", minutes=10, period_s=60)
    assert used and used[-1].value == pytest.approx(4 * MB, rel=0.01)


@pytest.mark.parametrize(("speed", "period_s"), [(1.0, 60), (45.0, 2), (60.0, 1), (300.0, 1)])
async def test_one_metrics_poll_asks_each_metric_once_for_whole_reference_minutes(tmp_path, speed, period_s):
    """The Metrics screen's poll (plan/metrics.lustre_metrics): each Lustre metric type once
    (the sandbox's counter per type), on periods no shorter than a reference minute - Lustre is
    sampled every 60 s, so a period rounded down (60/45 s -> 1 s) would ask more often."""
    from rltui.config import parse_config
    from rltui.plan.context import Context
    from rltui.plan.metrics import lustre_metrics
    from rltui_sandbox.record import Record

    meter = LustreMeter(interval_s=3600)
    meter.track((PROJECT, ZONE, INSTANCE), tmp_path / INSTANCE, 9000)
    record = Record(None, speed=speed)
    server = grpc.aio.server()
    add_monitoring_service(server, meter, speed=speed, visibility_delay_s=0, record=record)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        endpoints = Endpoints(label="SANDBOX", grpc_target=f"127.0.0.1:{port}", time_scale=1 / speed)
        cfg = parse_config({"PROJECT_ID": PROJECT, "LUSTRE_INSTANCE_ID": INSTANCE})
        out = await lustre_metrics(Context(cfg, endpoints, root=tmp_path / "state"), minutes=10)
    finally:
        await server.stop(None)
        meter.close()
    assert out.period_s == period_s and period_s * speed >= 60
    calls = {k: v for k, v in record.snapshot()["calls"].items() if k.startswith("monitoring:")}
    assert calls == {f"monitoring:ListTimeSeries:lustre.googleapis.com/instance/{m}": 1
                     for m in ("read_bytes_total", "write_bytes_total", "capacity_bytes", "free_bytes")}
