"""A real grpc.aio server with the sandbox's MetricService, on its own loop in a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from rltui.sandbox.grpc_monitoring import add_monitoring_service
from rltui.sandbox.lustre_meter import LustreMeter

PROJECT = "rl-demo-project"
ZONE = "us-east1-b"
INSTANCE = "rl-demo-gpu-lustre"
KEY = (PROJECT, ZONE, INSTANCE)
CAPACITY_GIB = 9000


@pytest.fixture
def meter() -> Iterator[LustreMeter]:
    m = LustreMeter(interval_s=1.0)
    yield m
    m.close()


@pytest.fixture
def key() -> tuple[str, str, str]:
    """(project, location, instance_id) of the codelab's Lustre instance."""
    return KEY


@pytest.fixture
def lustre_dir(tmp_path: Path, meter: LustreMeter) -> Path:
    """The codelab's instance, tracked, with an empty folder as its filesystem."""
    folder = tmp_path / INSTANCE
    meter.track(KEY, folder, CAPACITY_GIB)
    return folder


@pytest.fixture
def serve(meter: LustreMeter) -> Iterator[Callable[..., int]]:
    """serve(**add_monitoring_service kwargs) -> port of a started server on 127.0.0.1."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="monitoring-server", daemon=True)
    thread.start()
    servers: list[grpc.aio.Server] = []

    def start(**kwargs) -> int:
        async def up() -> int:
            server = grpc.aio.server()
            add_monitoring_service(server, meter, **kwargs)
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            servers.append(server)
            return port

        return asyncio.run_coroutine_threadsafe(up(), loop).result(10)

    yield start
    for server in servers:
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


@pytest.fixture
def port(serve: Callable[..., int]) -> int:
    """Google's rules (speed 1: 60 s minimum alignment) but no visibility delay, so points the
    tests pin an hour in the past and samples taken just now are both visible."""
    return serve(visibility_delay_s=0)
