"""GKE's GPU metrics from the demo job's phases: the codelab's RayCluster (head + 2 GPU workers)
runs the GRPO demo through Ray's real job API; while it trains, the sandbox's GPU meter (as the
daemon runs it, over the head pod's cluster file and the driver's activity file) gives each
worker pod a duty cycle, and rltui's poll (plan/metrics.gpu_metrics, through the sandbox's
MetricService and the real monitoring_v3 client) reads a GPU% number for each of them."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubernetes import client

from rltui import manifests
from rltui.cloud.endpoints import Endpoints
from rltui.plan.context import Context
from rltui.plan.metrics import gpu_metrics
from rltui.seam import GpuMetrics
from rltui_sandbox.gpu_meter import GpuMeter
from rltui_sandbox.grpc_monitoring import add_monitoring_service
from rltui_sandbox.lustre_meter import LustreMeter

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120, func_only=True)]

NAME = "ray-a4-gpu-spot"
RUN_SCRIPT = Path(__file__).parents[1] / "demo" / "run_nemo_rl.sh"  # the codelab's script
STEP = re.compile(r"=+ Step (\d+)/20 =+")


def _workers(core: client.CoreV1Api) -> list[str]:
    pods = core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={NAME}").items
    return sorted(p.metadata.name for p in pods if p.metadata.labels["ray.io/node-type"] == "worker")


def _ready(core: client.CoreV1Api) -> bool:
    pods = core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={NAME}").items
    return len(pods) == 3 and all(p.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or []) for p in pods)


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box()
    cfg = tools.config()
    core = box.codelab_raycluster(cfg)
    tools.wait_for(lambda: _ready(core) and box.controller.dashboard_url(), 60, "head and 2 workers Ready")
    return box


def _poll(box: Any, meter: GpuMeter, tmp: Path) -> GpuMetrics:
    """rltui's poll against a MetricService serving the meter (Google's 60 s periods)."""
    async def ask() -> GpuMetrics:
        lustre = LustreMeter(interval_s=3600)
        server = grpc.aio.server()
        add_monitoring_service(server, lustre, visibility_delay_s=0, gpu_meter=meter)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            endpoints = Endpoints(label="SANDBOX", grpc_target=f"127.0.0.1:{port}")
            return await gpu_metrics(Context(box.cfg, endpoints, root=tmp), minutes=10)
        finally:
            await server.stop(None)
            lustre.close()
    return asyncio.run(ask())


def test_a_training_job_gives_each_worker_pod_a_gpu_percent(box, tools, tmp_path):
    from ray.job_submission import JobSubmissionClient

    # The daemon's meter: the GKE clusters the World has, the controller's cluster files.
    meter = GpuMeter(box.root / "ctl" / "rayclusters", lambda: box.fn(
        lambda: [(p, c.location, c.name) for p in box.world.projects() for c in box.world.list_clusters(p)]))
    workdir = tmp_path / "job"
    workdir.mkdir()
    # Two GPU workers here; NeMo-RL waits for num_nodes x gpus_per_node GPUs before it starts.
    (workdir / "run_nemo_rl.sh").write_text(RUN_SCRIPT.read_text().replace("cluster.num_nodes=8", "cluster.num_nodes=2"))
    jobs = JobSubmissionClient(box.controller.dashboard_url())
    job = jobs.submit_job(entrypoint="bash run_nemo_rl.sh", runtime_env={
        "working_dir": str(workdir),
        "env_vars": {"RLTUI_DEMO_STEP_SECONDS": "0.5", "RLTUI_DEMO_CHECKPOINT_MB": "0.5"}})
    try:
        tools.wait_for(lambda: any(STEP.fullmatch(line) for line in jobs.get_job_logs(job).splitlines()),
                       60, "the job's first step")
        meter.sample()
        time.sleep(1.0)   # a second of training (each step's phases are busy)
        meter.sample()
        gpu = _poll(box, meter, tmp_path / "state")
    finally:
        jobs.stop_job(job)
    workers = _workers(box.core)
    assert len(workers) == 2 and set(gpu.busy) == set(workers), "a row per worker; the head has no GPU"
    for name in workers:
        use = gpu.latest(name)
        assert use is not None, f"no GPU% for {name}: {sorted(gpu.busy)}"
        assert 0 < use.busy_pct <= 100, use
        assert use.memory_total == 8 * 180e9 and 0 < use.memory_used < use.memory_total
