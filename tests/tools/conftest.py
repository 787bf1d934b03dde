"""A sandbox for the fake xpk: a World on a background loop thread behind what xpk 1.16.0 reaches
- the control routes (gcluster), the REST APIs the REAL gcloud it runs talks to (rest_apps, compute
on the plain-http site) and the Kubernetes API over HTTPS with the sandbox CA and token check
(the real kubectl, through the kubeconfig gcloud's get-credentials writes). The fake xpk is
installed into tmp_path/bin and runs as a real subprocess with the tool environment the daemon
gives rltui (manage.tool_env): HOME, CLOUDSDK_CONFIG and KUBECONFIG inside tmp_path. The parts
come from tests/harness.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest

from rltui.atomic import write_private
from rltui_sandbox.control import add_control_routes
from rltui_sandbox.faults import Faults
from rltui_sandbox.kube import KubeStore
from rltui_sandbox.kube.kubeconfig import SANDBOX_TOKEN
from rltui_sandbox.manage import tool_env
from rltui_sandbox.rest_compute import add_compute_routes
from rltui_sandbox.services import CODELAB_APIS
from rltui_sandbox.tools.install import install_tools
from rltui_sandbox.world import World
from tests import harness

PROJECT = "rl-sandbox"


class Box(harness.LoopThread):
    """One sandbox: its World on a loop thread, its HTTP app, and the installed tools."""

    project = PROJECT

    def __init__(self, root: Path, speed: float, faults: Faults | None,
                 enabled_services: tuple[str, ...] = CODELAB_APIS) -> None:
        super().__init__("xpk-sandbox", timeout=30)
        self.root = root
        self.speed = speed
        self.faults = faults
        self.enabled_services = enabled_services  # () for a fresh project, as Google makes it
        self.world: World
        self.url = ""
        self.rest: dict[str, str] = {}
        self.start(self._start())
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
        enter = self.stack.enter_async_context
        self.world = await enter(harness.world(self.root / "state", speed=self.speed, faults=self.faults,
                                               enabled_services=self.enabled_services))
        auth = harness.KubeAuth.load(self.root / "tls")
        app = harness.kube_app(KubeStore(None), auth)
        add_control_routes(app, self.world, self.faults)
        add_compute_routes(app, self.world)
        self.url = (await enter(harness.daemon_sites(app, auth, self.world))).url
        self.rest["compute"] = f"{self.url}/compute/v1/"
        # Faults hit the fake xpk (gcluster) only: these tests draw them for that channel.
        self.rest.update(await enter(harness.rest_sites(self.world)))

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
