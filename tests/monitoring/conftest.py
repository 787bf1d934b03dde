"""A real grpc.aio server with the sandbox's MetricService, on its own loop in a thread
(tests/harness.py's LoopThread)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from rltui_sandbox.grpc_monitoring import add_monitoring_service
from rltui_sandbox.lustre_meter import LustreMeter
from tests import harness

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
    with harness.LoopThread("monitoring-server", timeout=10) as lt:
        def start(**kwargs) -> int:
            def add(server: grpc.aio.Server) -> None:
                add_monitoring_service(server, meter, **kwargs)
            address = lt.enter(harness.grpc_server(extra=[add]))
            return int(address.rpartition(":")[2])

        yield start


@pytest.fixture
def port(serve: Callable[..., int]) -> int:
    """Google's rules (speed 1: 60 s minimum alignment) but no visibility delay, so points the
    tests pin an hour in the past and samples taken just now are both visible."""
    return serve(visibility_delay_s=0)
