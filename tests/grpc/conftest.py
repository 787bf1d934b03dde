"""A World and a grpc.aio server on 127.0.0.1:0, run in a background thread's event loop, so the
real sync clients (main thread) and async clients (pytest's loop) both talk to it over TCP."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Callable, Coroutine, Iterator

import grpc
import pytest

from rltui.sandbox.faults import Faults
from rltui.sandbox.grpc_container import add_container_service
from rltui.sandbox.grpc_lustre import add_lustre_services
from rltui.sandbox.grpc_serviceusage import add_service_usage_service
from rltui.sandbox.grpc_util import guard
from rltui.sandbox.profile import Clock, LatencyProfile
from rltui.sandbox.services import CODELAB_APIS
from rltui.sandbox.world import World


class Sandbox:
    """enabled_services: what each new project starts with (the codelab's four by default, so the
    service tests need not enable them; () is Google's fresh project)."""

    def __init__(self, state_dir: Path, speed: float = 6000.0, faults: Faults | None = None,
                 enabled_services: tuple[str, ...] = CODELAB_APIS) -> None:
        self.state_dir = state_dir
        self.speed = speed
        self.faults = faults
        self.enabled_services = enabled_services
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.world: World
        self.server: grpc.aio.Server
        self.port = 0

    def start(self) -> "Sandbox":
        self.thread.start()
        self.run(self._start())
        return self

    async def _start(self) -> None:
        self.world = World(self.state_dir, Clock(LatencyProfile.load(), speed=self.speed, seed=1), self.faults,
                           enabled_services=self.enabled_services)
        self.server = grpc.aio.server()
        guard(self.server, gate=self.world.gate_grpc, record=self.world.record)
        add_lustre_services(self.server, self.world)
        add_container_service(self.server, self.world)
        add_service_usage_service(self.server, self.world)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 20) -> Any:
        """Run a coroutine on the sandbox loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a World method on the sandbox loop (the World is single-threaded)."""
        async def call() -> Any:
            return fn(*args, **kwargs)
        return self.run(call())

    def stop(self) -> None:
        async def stop() -> None:
            await self.server.stop(None)
            self.world.close()
        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path / "state").start()
    yield box
    box.stop()


@pytest.fixture
def make_sandbox(tmp_path: Path) -> Iterator[Callable[..., Sandbox]]:
    """Start sandboxes with other speeds/faults; all are stopped at the end."""
    boxes: list[Sandbox] = []

    def make(speed: float = 6000.0, faults: Faults | None = None, state: str = "state",
             enabled_services: tuple[str, ...] = CODELAB_APIS) -> Sandbox:
        boxes.append(Sandbox(tmp_path / state, speed, faults, enabled_services).start())
        return boxes[-1]

    yield make
    for box in boxes:
        box.stop()



class Clients:
    """Real clients on plain insecure channels, as FACTS.md says they connect to a local server."""

    @staticmethod
    def lustre(box: Sandbox) -> Any:
        from google.cloud import lustre_v1
        from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcTransport

        return lustre_v1.LustreClient(transport=LustreGrpcTransport(channel=grpc.insecure_channel(box.address)))

    @staticmethod
    def lustre_async(box: Sandbox) -> Any:
        from google.cloud import lustre_v1
        from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcAsyncIOTransport

        return lustre_v1.LustreAsyncClient(
            transport=LustreGrpcAsyncIOTransport(channel=grpc.aio.insecure_channel(box.address)))

    @staticmethod
    def gke(box: Sandbox) -> Any:
        from google.cloud import container_v1
        from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport

        return container_v1.ClusterManagerClient(
            transport=ClusterManagerGrpcTransport(channel=grpc.insecure_channel(box.address)))


@pytest.fixture
def clients() -> type[Clients]:
    return Clients
