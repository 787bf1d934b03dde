"""A World, the Compute REST routes and the gRPC services (Lustre + Operations, ServiceUsage) on a
background loop thread, reached by the OFFICIAL clients over TCP (compute_v1 over REST with
AnonymousCredentials, the others over insecure gRPC channels), as tests/grpc/conftest.py does."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Callable, Coroutine, Iterator

import grpc
import pytest
from aiohttp import web

from rltui.sandbox.control import add_control_routes
from rltui.sandbox.grpc_lustre import add_lustre_services
from rltui.sandbox.grpc_serviceusage import add_service_usage_service
from rltui.sandbox.grpc_util import guard
from rltui.sandbox.profile import Clock, LatencyProfile
from rltui.sandbox.rest_compute import add_compute_routes, sandbox_compute_clients
from rltui.sandbox.services import CODELAB_APIS
from rltui.sandbox.world import World


class Cloud:
    def __init__(self, root: Path, speed: float, enabled_services: tuple[str, ...]) -> None:
        self.root, self.speed, self.enabled_services = root, speed, enabled_services
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.world: World
        self.run(self._start())

    async def _start(self) -> None:
        self.world = World(self.root / "state", Clock(LatencyProfile.load(), speed=self.speed, seed=1),
                           enabled_services=self.enabled_services)
        app = web.Application()
        add_compute_routes(app, self.world)
        add_control_routes(app, self.world, None)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.endpoint = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        self.server = grpc.aio.server()
        guard(self.server, gate=self.world.gate_grpc, record=self.world.record)
        add_lustre_services(self.server, self.world)
        add_service_usage_service(self.server, self.world)
        self.grpc = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        await self.server.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async def call() -> Any:
            return fn(*args, **kwargs)
        return self.run(call())

    def compute(self) -> dict[str, Any]:
        return sandbox_compute_clients(self.endpoint)

    def usage(self) -> Any:
        from google.cloud import service_usage_v1
        from google.cloud.service_usage_v1.services.service_usage.transports import ServiceUsageGrpcTransport

        return service_usage_v1.ServiceUsageClient(
            transport=ServiceUsageGrpcTransport(channel=grpc.insecure_channel(self.grpc)))

    def lustre(self) -> Any:
        from google.cloud import lustre_v1
        from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcTransport

        return lustre_v1.LustreClient(transport=LustreGrpcTransport(channel=grpc.insecure_channel(self.grpc)))

    def stop(self) -> None:
        async def stop() -> None:
            await self.server.stop(None)
            await self.runner.cleanup()
            self.world.close()
        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def make_cloud(tmp_path: Path) -> Iterator[Callable[..., Cloud]]:
    clouds: list[Cloud] = []

    def make(speed: float = 6000.0, enabled_services: tuple[str, ...] = CODELAB_APIS) -> Cloud:
        clouds.append(Cloud(tmp_path / f"cloud{len(clouds)}", speed, enabled_services))
        return clouds[-1]

    yield make
    for cloud in clouds:
        cloud.stop()


@pytest.fixture
def cloud(make_cloud: Callable[..., Cloud]) -> Cloud:
    return make_cloud()
