"""rltui reads each worker pod's GPUs the way Cloud Monitoring serves GKE's accelerator metrics
(one series per container and GPU on k8s_container, joined by pod_name), from the sandbox's GPU
meter, whose numbers come from the demo driver's record of its phases (busy, idle)."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import pytest

from rltui.cloud.endpoints import Endpoints
from rltui.cloud.monitoring import DUTY_CYCLE, MEMORY_TOTAL, MEMORY_USED, MonitoringAdapter
from rltui_sandbox.gpu_meter import B200_MEMORY_BYTES, GpuMeter
from rltui_sandbox.grpc_monitoring import add_monitoring_service
from rltui_sandbox.grpo_demo.activity import SUFFIX, Activity
from rltui_sandbox.grpo_demo.cluster import FORMAT
from rltui_sandbox.lustre_meter import LustreMeter
from rltui_sandbox.record import Record

PROJECT, ZONE, CLUSTER = "rl-demo-project", "us-east1-b", "ray-a4-gpu-spot"
WORKERS = ("ray-a4-gpu-spot-gpu-worker-group-worker-aaaaa", "ray-a4-gpu-spot-gpu-worker-group-worker-bbbbb")


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def cluster_file(folder, workers=WORKERS):
    """The RayCluster file kuberay/placement.py keeps: a head and 8-GPU workers, all Ready."""
    folder.mkdir(parents=True, exist_ok=True)
    pods = [{"pod": f"{CLUSTER}-head-x", "namespace": "default", "uid": "h", "nodeType": "head", "gpus": 0,
             "ready": True}]
    pods += [{"pod": name, "namespace": "default", "uid": f"u{i}", "nodeType": "worker", "gpus": 8, "ready": True}
             for i, name in enumerate(workers)]
    path = folder / "rc-uid.json"
    path.write_text(json.dumps({"format": FORMAT, "cluster": CLUSTER, "pods": pods}))
    return path


@pytest.fixture
async def gpus(tmp_path):
    """(meter, clock, cluster file, adapter, record): a sandbox Monitoring with the GPU meter."""
    clock = Clock(1_750_000_000.0)
    path = cluster_file(tmp_path / "rayclusters")
    meter = GpuMeter(tmp_path / "rayclusters", lambda: [(PROJECT, ZONE, CLUSTER)], clock=clock)
    lustre = LustreMeter(interval_s=3600)
    record = Record(None, speed=1.0)
    server = grpc.aio.server()
    add_monitoring_service(server, lustre, visibility_delay_s=0, record=record, gpu_meter=meter)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    adapter = MonitoringAdapter(Endpoints(label="SANDBOX", grpc_target=f"127.0.0.1:{port}"), PROJECT)
    yield meter, clock, path, adapter, record
    await server.stop(None)
    lustre.close()


def job(path, clock, pods=WORKERS):
    return Activity(path.with_name(path.name + SUFFIX),
                    [{"pod": name, "uid": f"u{i}", "gpus": 8} for i, name in enumerate(pods)], 0.6, clock)


async def test_busy_half_the_minute_reads_50_percent_per_worker_pod(gpus):
    meter, clock, path, adapter, _ = gpus
    activity = job(path, clock)
    meter.sample()
    clock.t += 30
    activity.enter()  # a step's phase: 30 s of the next minute busy
    clock.t += 30
    meter.sample()
    busy = await adapter.per_pod(DUTY_CYCLE, CLUSTER, "default", minutes=10, end_s=int(clock.t) + 1)
    assert set(busy) == set(WORKERS), "one row per worker pod; the head has no GPU"
    assert all(points[-1].value == pytest.approx(50) for points in busy.values())


async def test_a_save_is_an_idle_dip_and_memory_stays_held(gpus):
    meter, clock, path, adapter, _ = gpus
    activity = job(path, clock)
    activity.enter()
    meter.sample()
    clock.t += 60
    meter.sample()      # a minute of training
    activity.leave()    # the driver saves a checkpoint: no phase runs
    clock.t += 60
    meter.sample()
    end = int(clock.t) + 1
    busy = await adapter.per_pod(DUTY_CYCLE, CLUSTER, "default", minutes=10, end_s=end)
    used = await adapter.per_pod(MEMORY_USED, CLUSTER, "default", minutes=10, end_s=end)
    total = await adapter.per_pod(MEMORY_TOTAL, CLUSTER, "default", minutes=10, end_s=end)
    assert [round(p.value) for p in busy[WORKERS[0]][-2:]] == [100, 0]
    # Summed over the pod's 8 GPUs: the job's share of each, while it runs.
    assert used[WORKERS[0]][-1].value == pytest.approx(8 * 0.6 * B200_MEMORY_BYTES, rel=1e-6)
    assert total[WORKERS[0]][-1].value == 8 * B200_MEMORY_BYTES


async def test_no_job_reads_zero_and_an_ended_job_frees_the_memory(gpus):
    meter, clock, path, adapter, _ = gpus
    meter.sample()
    activity = job(path, clock)
    activity.enter()
    clock.t += 60
    activity.end()
    meter.sample()
    used = await adapter.per_pod(MEMORY_USED, CLUSTER, "default", minutes=10, end_s=int(clock.t) + 1)
    assert all(points[-1].value == 0 for points in used.values())


async def test_other_clusters_and_namespaces_see_nothing(gpus):
    meter, clock, path, adapter, _ = gpus
    job(path, clock).enter()
    meter.sample()
    end = int(clock.t) + 1
    assert await adapter.per_pod(DUTY_CYCLE, "another", "default", minutes=10, end_s=end) == {}
    assert await adapter.per_pod(DUTY_CYCLE, CLUSTER, "kube-system", minutes=10, end_s=end) == {}


@pytest.mark.parametrize(("speed", "period_s"), [(1.0, 60), (45.0, 2)])
async def test_one_poll_asks_each_gpu_metric_once_for_whole_reference_minutes(gpus, tmp_path, speed, period_s):
    """plan/metrics.gpu_metrics: the three metric types once each per poll, on reference minutes."""
    from rltui.config import parse_config
    from rltui.plan.context import Context
    from rltui.plan.metrics import gpu_metrics

    meter, _clock, path, _adapter, _ = gpus
    meter.clock = time.time  # points at the poll's own wall clock
    job(path, meter.clock).enter()
    await asyncio.to_thread(meter.sample)
    record, lustre = Record(None, speed=speed), LustreMeter(interval_s=3600)
    server = grpc.aio.server()
    add_monitoring_service(server, lustre, speed=speed, visibility_delay_s=0, record=record, gpu_meter=meter)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        endpoints = Endpoints(label="SANDBOX", grpc_target=f"127.0.0.1:{port}", time_scale=1 / speed)
        cfg = parse_config({"PROJECT_ID": PROJECT, "CLUSTER_NAME": CLUSTER})
        out = await gpu_metrics(Context(cfg, endpoints, root=tmp_path / "state"), minutes=10)
    finally:
        await server.stop(None)
        lustre.close()
    assert out.period_s == period_s
    assert set(out.busy) == set(WORKERS) and all(out.latest(w) is not None for w in WORKERS)
    calls = {k: v for k, v in record.snapshot()["calls"].items() if k.startswith("monitoring:")}
    assert calls == {f"monitoring:ListTimeSeries:{m}": 1 for m in (DUTY_CYCLE, MEMORY_USED, MEMORY_TOTAL)}
