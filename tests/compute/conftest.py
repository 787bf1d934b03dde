"""A World, the Compute REST routes and the gRPC services (Lustre + Operations, ServiceUsage) on a
background loop thread, reached by the OFFICIAL clients over TCP (compute_v1 over REST with
AnonymousCredentials, the others over insecure gRPC channels), as tests/grpc/conftest.py does; the
parts come from tests/harness.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import grpc
import pytest
from aiohttp import web

from rltui_sandbox.control import add_control_routes
from rltui_sandbox.rest_compute import add_compute_routes, sandbox_compute_clients
from rltui_sandbox.services import CODELAB_APIS
from rltui_sandbox.world import World
from tests import harness


class Cloud(harness.LoopThread):
    def __init__(self, root: Path, speed: float, enabled_services: tuple[str, ...]) -> None:
        super().__init__("compute-cloud", timeout=30)
        self.root, self.speed, self.enabled_services = root, speed, enabled_services
        self.world: World
        self.endpoint = ""  # http://127.0.0.1:PORT: the Compute routes under /compute/v1/
        self.grpc = ""      # 127.0.0.1:PORT: Lustre + Operations, ServiceUsage
        self.start(self._start())

    async def _start(self) -> None:
        enter = self.stack.enter_async_context
        self.world = await enter(harness.world(self.root / "state", speed=self.speed,
                                               enabled_services=self.enabled_services))
        app = web.Application()
        add_compute_routes(app, self.world)
        add_control_routes(app, self.world, None)
        self.endpoint = (await enter(harness.serve_app(app))).url
        self.grpc = await enter(harness.grpc_server(self.world, ("lustre", "serviceusage")))

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
