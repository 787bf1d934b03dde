"""The sandbox's Kubernetes API on the test's own event loop, and a tiny HTTP "dashboard".

The adapters under test talk to the API as they talk to GKE: over HTTPS (a test CA made by the
sandbox's own tls module), from a `container_v1.Cluster` carrying the endpoint and base64 CA,
with a bearer token from an `authorized_user` ADC file refreshed at the sandbox's token
endpoint (served here on a plain-http site of its own). The test drives the same KubeStore
in-process (as the toy KubeRay controller does).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Callable

import pytest
from aiohttp import web

from rltui.cloud.endpoints import Endpoints
from rltui.cloud.kube import KubeAdapter
from google.cloud import container_v1

from rltui_sandbox.kube import KubeStore, start
from rltui_sandbox.kube.auth import TokenIssuer, add_token_route, write_adc
from rltui_sandbox.kube.tls import SandboxTLS, ensure_tls
from rltui_sandbox.record import Record

HEAD_LABELS = {"ray.io/cluster": "ray-a4", "ray.io/node-type": "head"}


@dataclass
class Api:
    store: KubeStore
    url: str                       # https://127.0.0.1:PORT
    endpoints: Endpoints           # adc_file: the ADC file below
    cluster: container_v1.Cluster  # endpoint 127.0.0.1:PORT, master_auth.cluster_ca_certificate
    tls: SandboxTLS
    issuer: TokenIssuer
    record: Record                 # the sandbox's call counters (kube:LIST:pods, ...)

    async def adapter(self) -> KubeAdapter:
        kube = KubeAdapter(self.endpoints, cluster=self.cluster, backoff_s=0.02)
        await kube.connect()
        return kube


def gke_cluster(endpoint: str, tls: SandboxTLS) -> container_v1.Cluster:
    return container_v1.Cluster(name="ray-a4", endpoint=endpoint,
                                master_auth=container_v1.MasterAuth(cluster_ca_certificate=tls.ca_b64))


@pytest.fixture(scope="session")
def test_tls(tmp_path_factory: pytest.TempPathFactory) -> SandboxTLS:
    return ensure_tls(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def token_endpoint(tmp_path: Path, test_tls: SandboxTLS) -> AsyncIterator[tuple[TokenIssuer, Path]]:
    """(issuer, ADC file) with the file's token_uri on a plain-http site of its own."""
    issuer = TokenIssuer.load(test_tls.folder)
    app = web.Application()
    add_token_route(app, issuer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    adc = write_adc(tmp_path / "adc.json", f"http://127.0.0.1:{runner.addresses[0][1]}/token", issuer)
    yield issuer, adc
    await runner.cleanup()


@pytest.fixture
def history() -> int:
    """How many events the fake API keeps for watches to resume from (override per test)."""
    return 1000


@pytest.fixture
async def api(tmp_path: Path, history: int, test_tls: SandboxTLS, token_endpoint) -> AsyncIterator[Api]:
    issuer, adc = token_endpoint
    store = KubeStore(tmp_path / "kube", history=history)
    record = Record(None, speed=1.0)
    runner, url = await start(store, bookmark_interval=0.3, tick=0.05, tls=test_tls, issuer=issuer,
                              record=record)
    yield Api(store, url, Endpoints(label="SANDBOX", adc_file=adc),
              gke_cluster(url.removeprefix("https://"), test_tls), test_tls, issuer, record)
    await runner.cleanup()


@pytest.fixture
async def kube(api: Api) -> AsyncIterator[KubeAdapter]:
    adapter = await api.adapter()
    yield adapter
    await adapter.close()


def pod(name: str, labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": {"containers": [{"name": "ray-head", "image": "nvcr.io/nvidia/nemo-rl:v0.4.0",
                                     "ports": [{"containerPort": 8265, "name": "dashboard"}]}]}}


RUNNING = {"phase": "Running", "podIP": "10.8.0.2",
           "conditions": [{"type": "Ready", "status": "True"}],
           "containerStatuses": [{"name": "ray-head", "ready": True, "restartCount": 0, "image": "x",
                                  "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}


def head_service(cluster: str = "ray-a4") -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{cluster}-head-svc", "namespace": "default"},
            "spec": {"selector": {"ray.io/cluster": cluster, "ray.io/node-type": "head"},
                     "ports": [{"name": "dashboard", "port": 8265, "targetPort": "dashboard"}]}}


@pytest.fixture
def make_pod() -> Callable[..., dict]:
    return pod


@pytest.fixture
async def head(api: Api) -> Callable:
    """start_head(name, target_port): a Running, Ready head pod whose :8265 is `target_port`."""
    if not api.store.list_sync("services", "default", field_selector="metadata.name=ray-a4-head-svc"):
        await api.store.create("services", head_service(), "default")

    async def start_head(name: str, target_port: int) -> dict:
        await api.store.create("pods", pod(name, HEAD_LABELS), "default")
        await api.store.patch_status("pods", name, RUNNING, "default")
        await api.store.set_port_target("default", name, 8265, "127.0.0.1", target_port)
        return await api.store.get("pods", name, "default")
    return start_head


@pytest.fixture
async def dashboard() -> AsyncIterator[Callable]:
    """make(tag) -> port of a tiny HTTP server: /api/version answers with its tag."""
    runners: list[web.AppRunner] = []

    async def make(tag: str) -> int:
        async def version(_: web.Request) -> web.Response:
            return web.json_response({"ray_version": "2.60.0", "served_by": tag})

        async def echo(request: web.Request) -> web.Response:
            return web.Response(body=await request.read())

        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_get("/api/version", version)
        app.router.add_post("/echo", echo)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return runner.addresses[0][1]
    yield make
    for runner in runners:
        await runner.cleanup()


class Relay:
    """A TCP relay to `target` whose live connections a test can cut (a dropped link)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.accepted = 0
        self._live: set[asyncio.StreamWriter] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        self._live.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._live.difference_update((writer, up_writer))

    def cut(self) -> int:
        """Abort every live connection (no FIN, like a dead link); returns how many."""
        live = list(self._live)
        for w in live:
            w.transport.abort()
        return len(live) // 2

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def relay() -> AsyncIterator[Callable]:
    """make(target_port) -> a started Relay."""
    relays: list[Relay] = []

    async def make(target: int) -> Relay:
        r = Relay(target)
        relays.append(r)
        r.port = await r.start()  # type: ignore[attr-defined]
        return r
    yield make
    for r in relays:
        await r.stop()
