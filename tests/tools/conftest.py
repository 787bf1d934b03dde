"""A sandbox for the fake tools: a World and the fake Kubernetes API app with the control routes
mounted on it, served on 127.0.0.1:0 from a background loop thread; the tools are installed into
tmp_path/bin and run as real subprocesses with HOME and KUBECONFIG inside tmp_path."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Coroutine, Iterator

import pytest
from aiohttp import web

from rltui.sandbox.control import add_control_routes
from rltui.sandbox.faults import Faults
from rltui.sandbox.kube import KubeStore, make_app
from rltui.sandbox.kube.kubeconfig import SANDBOX_TOKEN
from rltui.sandbox.profile import Clock, LatencyProfile
from rltui.sandbox.services import CODELAB_APIS
from rltui.sandbox.tools.install import install_tools
from rltui.sandbox.world import World

PROJECT = "rl-sandbox"


class Box:
    """One sandbox: its World on a loop thread, its HTTP app, and the installed tools."""

    project = PROJECT

    def __init__(self, root: Path, speed: float, faults: Faults | None,
                 enabled_services: tuple[str, ...] = CODELAB_APIS) -> None:
        self.root = root
        self.speed = speed
        self.faults = faults
        self.enabled_services = enabled_services  # () for a fresh project, as Google makes it
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.world: World
        self.runner: web.AppRunner
        self.url = ""
        self.run(self._start())
        self.bin = root / "bin"
        install_tools(self.bin, self.url)
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / ".config" / "gcloud").mkdir(parents=True, exist_ok=True)  # a gcloud that has logged in
        self.kubeconfig = root / "kube" / "config"

    async def _start(self) -> None:
        self.world = World(self.root / "state", Clock(LatencyProfile.load(), speed=self.speed, seed=1), self.faults,
                           enabled_services=self.enabled_services)
        app = make_app(KubeStore(None))
        add_control_routes(app, self.world, self.faults, "", SANDBOX_TOKEN)  # "": this app is the kube API
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A World method, on the World's loop."""
        async def call() -> Any:
            return fn(*args, **kwargs)
        return self.run(call())

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "RLTUI_", "KUBECONFIG"))}
        env.update(PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}", HOME=str(self.home),
                   KUBECONFIG=str(self.kubeconfig))
        env.update(extra)
        return env

    def tool(self, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None,
             timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run the installed `gcloud` or `xpk` (argv[0]) found on PATH, as a user would."""
        return subprocess.run(list(argv), cwd=cwd or self.root, env=env or self.env(), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def popen(self, *argv: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(list(argv), cwd=cwd or self.root, env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        async def stop() -> None:
            await self.runner.cleanup()
            self.world.close()
        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def make_box(tmp_path: Path) -> Iterator[Callable[..., Box]]:
    boxes: list[Box] = []

    def make(speed: float = 6000.0, faults: Faults | None = None,
             enabled_services: tuple[str, ...] = CODELAB_APIS) -> Box:
        boxes.append(Box(tmp_path / f"box{len(boxes)}", speed, faults, enabled_services))
        return boxes[-1]

    yield make
    for box in boxes:
        box.stop()


@pytest.fixture
def box(make_box: Callable[..., Box]) -> Box:
    return make_box()
