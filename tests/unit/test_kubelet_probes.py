"""The sandbox kubelet's prober (sandbox/rltui_sandbox/kuberay/probes.py) against a stand-in for a Ray
2.46.0 dashboard agent and dashboard (a local HTTP server with their health routes and no
/api/healthz): the probes KubeRay injects, as a kubelet runs them - HTTP status rules, the wget
checks evaluated over HTTP, thresholds, the Unhealthy and Killing events."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from rltui import manifests
from rltui.config import parse_config
from rltui_sandbox.kuberay import probes
from rltui_sandbox.kuberay.probes import Probes, port_map, run_probe
from rltui_sandbox.kuberay.templates import _pod_manifest
from rltui_sandbox.kuberay.versions import KubeRay

CFG = parse_config({"PROJECT_ID": "rl-probes", "NUM_NODES": "2", "HF_TOKEN": "hf_" + "x" * 30})


class Ray246:
    """The health routes of Ray 2.46.0: the agent's /api/local_raylet_healthz, the dashboard's
    /api/gcs_healthz (ray/dashboard/modules/reporter/), no /api/healthz on the agent."""

    def __init__(self) -> None:
        self.gcs_ok = True

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/local_raylet_healthz", self.raylet)
        app.router.add_get("/api/gcs_healthz", self.gcs)
        return app

    async def raylet(self, request: web.Request) -> web.Response:
        return web.Response(text="success")

    async def gcs(self, request: web.Request) -> web.Response:
        if self.gcs_ok:
            return web.Response(text="success")
        raise web.HTTPServiceUnavailable(reason="Health check failed")


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def head_pod(kuberay: str, ray_version: str) -> dict:
    rc = manifests.ray_cluster(CFG)
    rc["spec"]["rayVersion"] = ray_version
    rc["metadata"]["uid"] = "uid-1"
    pod = _pod_manifest(rc, rc["spec"]["headGroupSpec"], True, KubeRay.parse(kuberay))
    pod["metadata"].update(name="ray-head-x", uid="pod-1")
    pod["status"] = {"podIP": "10.8.0.5", "conditions": [{"type": "Ready", "status": "False"}],
                     "containerStatuses": [{"restartCount": 0}]}
    return pod


class FakeKubelet(Probes):
    """Just what _probe_container uses of KubeRayController: the pod, events, status writes."""

    def __init__(self, pod: dict) -> None:
        self.clock = SimpleNamespace(speed=1e6)   # the cloud's seconds go by at once
        self.pod, self.events, self.ready = pod, [], []

    async def _pod(self, uid: str, ns: str, name: str) -> dict:
        return self.pod

    def _pod_view(self, uid: str, ns: str, name: str) -> dict:
        return self.pod

    async def _event(self, obj: dict, kind: str, reason: str, message: str, component: str,
                     host: Any = None) -> None:
        if (reason, message) not in self.events:
            self.events.append((reason, message))

    async def _mark_running(self, uid: str, ns: str, name: str, *, ready: bool, restarts: Any = None,
                            last_state: Any = None) -> dict:
        self.ready.append(ready)
        self.pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        return self.pod


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probes, "MIN_PERIOD_S", 0.001)


def test_ports_map_from_the_generated_ray_start_command() -> None:
    pod = head_pod("1.6.0", "2.46.0")
    local = {"--dashboard-agent-listen-port": 40001, "--dashboard-port": 40002, "--port": 40003}
    assert port_map(pod, local) == {52365: 40001, 8265: 40002, 6379: 40003}


def test_http_and_exec_probes_against_ray_2_46() -> None:
    async def run() -> None:
        ray = Ray246()
        runner, port = await serve(ray.app())
        ports = {52365: port, 8265: port}
        new = head_pod("1.6.0", "2.54.0")["spec"]["containers"][0]
        old = head_pod("1.6.0", "2.46.0")["spec"]["containers"][0]
        try:
            async with aiohttp.ClientSession() as session:
                got = await run_probe(new["readinessProbe"], new, ports, "10.8.0.5", session)
                assert (got.ok, got.output) == (False, "HTTP probe failed with statuscode: 404")
                got = await run_probe(old["readinessProbe"], old, ports, "10.8.0.5", session)
                assert (got.ok, got.output) == (True, "success\nsuccess")
                ray.gcs_ok = False   # wget prints nothing on a 503: grep finds no "success"
                got = await run_probe(old["readinessProbe"], old, ports, "10.8.0.5", session)
                assert (got.ok, got.output) == (False, "success")
                got = await run_probe(new["livenessProbe"], new, {}, "10.8.0.5", session)
                assert got.output == ('Get "http://10.8.0.5:52365/api/healthz": dial tcp 10.8.0.5:52365:'
                                      " connect: connection refused")
                mine = {"exec": {"command": ["cat", "/tmp/healthy"]}}
                got = await run_probe(mine, old, ports, "10.8.0.5", session)
                assert not got.ok and "no container to exec into" in got.output
        finally:
            await runner.cleanup()
    asyncio.run(run())


def test_unified_probe_on_ray_2_46_never_ready_and_liveness_kills() -> None:
    async def run() -> FakeKubelet:
        runner, port = await serve(Ray246().app())
        kubelet = FakeKubelet(head_pod("1.6.0", "2.54.0"))
        try:
            killed = await asyncio.wait_for(kubelet._probe_container(
                "pod-1", "default", "ray-head-x", 0, lambda: {52365: port, 8265: port}, lambda: True), 20)
        finally:
            await runner.cleanup()
        assert killed
        return kubelet
    kubelet = asyncio.run(run())
    assert True not in kubelet.ready
    assert kubelet.events == [("Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 404"),
                              ("Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 404"),
                              ("Killing", "Container ray-head failed liveness probe, will be restarted")]


def test_exec_probes_on_ray_2_46_make_it_ready_and_a_lost_gcs_unready_after_10_failures() -> None:
    async def run() -> tuple[FakeKubelet, int]:
        ray = Ray246()
        runner, port = await serve(ray.app())
        kubelet = FakeKubelet(head_pod("1.6.0", "2.46.0"))
        failures = 0

        def alive() -> bool:
            nonlocal failures
            if kubelet.ready == [True]:
                ray.gcs_ok = False   # Ready once: now the GCS check fails
            failures += not ray.gcs_ok
            return kubelet.ready != [True, False]
        try:
            await asyncio.wait_for(kubelet._probe_container(
                "pod-1", "default", "ray-head-x", 0, lambda: {52365: port, 8265: port}, alive), 20)
        finally:
            await runner.cleanup()
        return kubelet, failures
    kubelet, failures = asyncio.run(run())
    assert kubelet.ready == [True, False]
    # Not Ready after failureThreshold (10) readiness failures; liveness (120) has not fired.
    assert ("Killing", "Container ray-head failed liveness probe, will be restarted") not in kubelet.events
    assert ("Unhealthy", "Readiness probe failed: success") in kubelet.events
    assert failures >= 10


def test_a_crashing_container_is_restarted_at_once_then_after_a_doubling_back_off() -> None:
    """The kubelet's CrashLoopBackOff, for the Ray head and process pods alike: a head that fails
    its liveness probe again and again is started less and less often, up to every 5 minutes."""
    from rltui_sandbox.kuberay.pods import restart_backoff_s

    assert [restart_backoff_s(n) for n in range(1, 8)] == [0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0]
    assert restart_backoff_s(30) == 300.0
