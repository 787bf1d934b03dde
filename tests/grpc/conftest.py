"""A World and a grpc.aio server on 127.0.0.1:0, run in a background thread's event loop, so the
real sync clients (main thread) and async clients (pytest's loop) both talk to it over TCP. The
parts come from tests/harness.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import grpc
import pytest

from rltui_sandbox.faults import Faults
from rltui_sandbox.services import CODELAB_APIS
from rltui_sandbox.world import World
from tests import harness


class GrpcBox(harness.LoopThread):
    """A World and its gRPC services (Lustre + Operations, ClusterManager, ServiceUsage) on a loop
    thread. enabled_services: what each new project starts with (the codelab's four by default, so
    the service tests need not enable them; () is Google's fresh project)."""

    def __init__(self, state_dir: Path, speed: float = 6000.0, faults: Faults | None = None,
                 enabled_services: tuple[str, ...] = CODELAB_APIS) -> None:
        super().__init__("grpc-sandbox", timeout=20)
        self.state_dir = state_dir
        self.speed = speed
        self.faults = faults
        self.enabled_services = enabled_services
        self.world: World
        self.address = ""  # 127.0.0.1:PORT, once started

    def start(self) -> "GrpcBox":  # type: ignore[override]
        super().start(self._start())
        return self

    async def _start(self) -> None:
        enter = self.stack.enter_async_context
        self.world = await enter(harness.world(self.state_dir, speed=self.speed, faults=self.faults,
                                               enabled_services=self.enabled_services))
        self.address = await enter(harness.grpc_server(self.world))

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])


@pytest.fixture
def grpc_box(tmp_path: Path) -> Iterator[GrpcBox]:
    box = GrpcBox(tmp_path / "state").start()
    yield box
    box.stop()


@pytest.fixture
def make_grpc_box(tmp_path: Path) -> Iterator[Callable[..., GrpcBox]]:
    """Start boxes with other speeds/faults; all are stopped at the end."""
    boxes: list[GrpcBox] = []

    def make(speed: float = 6000.0, faults: Faults | None = None, state: str = "state",
             enabled_services: tuple[str, ...] = CODELAB_APIS) -> GrpcBox:
        boxes.append(GrpcBox(tmp_path / state, speed, faults, enabled_services).start())
        return boxes[-1]

    yield make
    for box in boxes:
        box.stop()


class Clients:
    """Real clients on plain insecure channels, as FACTS.md says they connect to a local server."""

    @staticmethod
    def lustre(box: GrpcBox) -> Any:
        from google.cloud import lustre_v1
        from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcTransport

        return lustre_v1.LustreClient(transport=LustreGrpcTransport(channel=grpc.insecure_channel(box.address)))

    @staticmethod
    def lustre_async(box: GrpcBox) -> Any:
        from google.cloud import lustre_v1
        from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcAsyncIOTransport

        return lustre_v1.LustreAsyncClient(
            transport=LustreGrpcAsyncIOTransport(channel=grpc.aio.insecure_channel(box.address)))

    @staticmethod
    def gke(box: GrpcBox) -> Any:
        from google.cloud import container_v1
        from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport

        return container_v1.ClusterManagerClient(
            transport=ClusterManagerGrpcTransport(channel=grpc.insecure_channel(box.address)))


@pytest.fixture
def clients() -> type[Clients]:
    return Clients
