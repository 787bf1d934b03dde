"""A sandbox for the fake xpk: a World on a background loop thread behind what xpk 1.16.0 reaches
- the control routes (gcluster), the REST APIs the REAL gcloud it runs talks to (rest_apps, compute
on the plain-http site) and the Kubernetes API over HTTPS with the sandbox CA and token check
(the real kubectl, through the kubeconfig gcloud's get-credentials writes). The fake xpk is
installed into tmp_path/bin and runs as a real subprocess with the tool environment the daemon
gives rltui (manage.tool_env): HOME, CLOUDSDK_CONFIG and KUBECONFIG inside tmp_path."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Coroutine, Iterator

import pytest
from aiohttp import web

from rltui.atomic import write_private
from rltui.sandbox.control import add_control_routes
from rltui.sandbox.faults import Faults
from rltui.sandbox.kube import KubeStore, make_app
from rltui.sandbox.kube.auth import TokenIssuer
from rltui.sandbox.kube.kubeconfig import SANDBOX_TOKEN
from rltui.sandbox.kube.tls import ensure_tls
from rltui.sandbox.manage import tool_env
from rltui.sandbox.profile import Clock, LatencyProfile
from rltui.sandbox.rest_apps import rest_apps
from rltui.sandbox.rest_compute import add_compute_routes
from rltui.sandbox.rest_util import serve_on_loopback
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
        self.runners: list[web.AppRunner] = []
        self.url = ""
        self.rest: dict[str, str] = {}
        self.run(self._start())
        self.bin = root / "bin"
        install_tools(self.bin, self.url)
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        gcloud_config = root / "gcloud"
        gcloud_config.mkdir(exist_ok=True)  # a gcloud that has logged in (xpk checks the folder)
        write_private(root / "access_token", SANDBOX_TOKEN + "\n")
        self.kubeconfig = root / "kube" / "config"
        self.tool_env = tool_env({"rest": self.rest, "gcloud_config": str(gcloud_config),
                                  "access_token_file": str(root / "access_token"),
                                  "gcloud_kubeconfig": str(self.kubeconfig)})

    async def _start(self) -> None:
        self.world = World(self.root / "state", Clock(LatencyProfile.load(), speed=self.speed, seed=1), self.faults,
                           enabled_services=self.enabled_services)
        tls = ensure_tls(self.root / "tls")
        app = make_app(KubeStore(None), issuer=TokenIssuer.load(self.root / "tls"))
        add_control_routes(app, self.world, self.faults)
        add_compute_routes(app, self.world)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self.runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.server_context()).start()
        self.world.kube_endpoint = f"127.0.0.1:{runner.addresses[1][1]}"
        self.world.kube_ca_b64 = tls.ca_b64
        self.rest["compute"] = f"{self.url}/compute/v1/"
        for key, make in rest_apps().items():
            # Faults hit the fake xpk (gcluster) only: these tests draw them for that channel.
            rest_runner, rest_url = await serve_on_loopback(make(self.world))
            self.runners.append(rest_runner)
            self.rest[key] = rest_url + "/"

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A World method, on the World's loop."""
        async def call() -> Any:
            return fn(*args, **kwargs)
        return self.run(call())

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "RLTUI_", "KUBECONFIG"))}
        env.update(PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}", HOME=str(self.home), **self.tool_env)
        env.update(extra)
        return env

    def tool(self, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None,
             timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run `xpk` (the installed fake) or the real `gcloud`/`kubectl` found on PATH, as a user would."""
        return subprocess.run(list(argv), cwd=cwd or self.root, env=env or self.env(), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def popen(self, *argv: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(list(argv), cwd=cwd or self.root, env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        async def stop() -> None:
            for runner in self.runners:
                await runner.cleanup()
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
