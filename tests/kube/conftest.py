"""A fake API server on 127.0.0.1:0, run on its own event loop in a thread.

The SYNC `kubernetes` client and kubectl then talk to it as to GKE's: over HTTPS (a test CA
from the sandbox's tls module) with a bearer token (a kubeconfig with certificate-authority-data
and the fixed sandbox token), while the test thread can still drive the store in-process
(`server.call(store.create(...))`), like the toy KubeRay controller does. The loop thread is
tests/harness.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Coroutine, Iterator

import pytest
from kubernetes import client, config

from rltui_sandbox.faults import Faults
from rltui_sandbox.kube import KubeStore, write_kubeconfig
from rltui_sandbox.kube.api import start
from rltui_sandbox.kube.auth import TokenIssuer
from rltui_sandbox.kube.tls import SandboxTLS, ensure_tls
from tests import harness


class Server:
    """The fake API server, https only, on its loop thread. `call(coro)` runs a coroutine (a
    KubeStore method) on that loop; `url` is https://127.0.0.1:PORT."""

    def __init__(self, root: Path | None, kubeconfig: Path, tls: SandboxTLS,
                 faults: Faults | None = None) -> None:
        self.lt = harness.LoopThread("fake-kube", timeout=10)
        self.loop = self.lt.loop
        self.store = KubeStore(root, faults)
        self.lt.start(self._start(tls, TokenIssuer.load(tls.folder)))
        self.kubeconfig = write_kubeconfig(kubeconfig, self.url, ca_pem=tls.ca_pem)

    async def _start(self, tls: SandboxTLS, issuer: TokenIssuer) -> None:
        # api.start, the module's own entry point, rather than the harness's serve_app.
        self.runner, self.url = await start(self.store, bookmark_interval=0.3, tick=0.1, tls=tls, issuer=issuer)
        self.lt.defer(self.runner.cleanup)

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 10) -> Any:
        return self.lt.run(coro, timeout)

    def api_client(self) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def stop(self) -> None:
        self.lt.stop(timeout=15)


@pytest.fixture(scope="session")
def kube_tls(tmp_path_factory: pytest.TempPathFactory) -> SandboxTLS:
    return ensure_tls(tmp_path_factory.mktemp("kube-tls"))


@pytest.fixture
def make_server(tmp_path: Path, kube_tls: SandboxTLS) -> Iterator:
    servers: list[Server] = []

    def make(root: Path | None = None, faults: Faults | None = None) -> Server:
        server = Server(root, tmp_path / f"kubeconfig-{len(servers)}", kube_tls, faults)
        servers.append(server)
        return server
    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def server(make_server, tmp_path: Path) -> Server:
    return make_server(tmp_path / "state")


@pytest.fixture
def core(server: Server) -> client.CoreV1Api:
    return client.CoreV1Api(server.api_client())


@pytest.fixture
def custom(server: Server) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(server.api_client())


def _pod_manifest(name: str, labels: dict[str, str] | None = None, owner: dict | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "ray-head", "image": "nvcr.io/nvidia/nemo-rl:v0.4.0",
                                     "ports": [{"containerPort": 8265, "name": "dashboard"}]}]}}


_RUNNING = {"phase": "Running", "podIP": "10.8.0.2",
           "containerStatuses": [{"name": "ray-head", "ready": True, "restartCount": 0, "image": "x",
                                  "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}


@pytest.fixture
def pod_manifest():
    """make(name, labels=None, owner=None): a one-container pod like KubeRay's head."""
    return _pod_manifest


@pytest.fixture
def running() -> dict:
    """A Running status with one ready container, as the toy controller will set it."""
    return _RUNNING


DATA = Path(__file__).parent / "data"
