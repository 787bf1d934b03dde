"""The sandbox test harness: the emulated cloud on an event loop in a background thread, served on
loopback as the daemon serves it (sandbox/rltui_sandbox/daemon.py, serve()), so the REAL clients - sync
ones on the test's thread, async ones on pytest's loop, subprocesses (gcloud, kubectl, xpk) - all
reach it over TCP while the test still drives the World or KubeStore in-process.

- LoopThread: the loop and its thread. run(coro) and call(fn, *args) run on the loop (the World
  and the KubeStore are single-threaded); enter(async context manager) starts a part and keeps it
  until stop(), which ends every part last-started-first, then the loop.
- The parts, async context managers to enter on that loop (`lt.enter(...)` from the test's thread,
  `await lt.stack.enter_async_context(...)` from a coroutine on the loop):
  world(...)        a World with a given profile, speed, faults and enabled services;
  grpc_server(...)  a grpc.aio server with the World's services behind its API gate;
  serve_app(...)    an aiohttp app on loopback Sites (plain http and/or https with the sandbox CA);
  daemon_sites(...) the daemon's two sites of one app (http + the clusters' https endpoint), the
                    World told where its GKE clusters' Kubernetes API answers;
  rest_sites(...)   the REST APIs for the real gcloud (rest_apps), one loopback port each.
- KubeAuth (the sandbox CA and the token issuer from one folder) and kube_app (the Kubernetes API
  behind that token check, with the token endpoint) for the parts above.

Test modules and conftest.py files import it as `tests.harness` (pytest runs with
--import-mode=importlib; `python -m pytest` from the repository root puts it on sys.path).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Coroutine, Iterable, TypeVar

import grpc
from aiohttp import web

from rltui_sandbox.faults import Faults
from rltui_sandbox.grpc_container import add_container_service
from rltui_sandbox.grpc_lustre import add_lustre_services
from rltui_sandbox.grpc_quotas import add_quotas_service
from rltui_sandbox.grpc_serviceusage import add_service_usage_service
from rltui_sandbox.grpc_util import guard
from rltui_sandbox.kube import KubeStore, make_app
from rltui_sandbox.kube.auth import TokenIssuer, add_token_route
from rltui_sandbox.kube.tls import SandboxTLS, ensure_tls
from rltui_sandbox.profile import Clock, LatencyProfile
from rltui_sandbox.record import Record
from rltui_sandbox.rest_apps import rest_apps
from rltui_sandbox.rest_util import loopback_socket, serve_on_loopback
from rltui_sandbox.services import CODELAB_APIS
from rltui_sandbox.world import World

__all__ = [
    "GRPC_SERVICES",
    "KubeAuth",
    "LoopThread",
    "Sites",
    "daemon_sites",
    "grpc_server",
    "kube_app",
    "rest_sites",
    "serve_app",
    "world",
]

T = TypeVar("T")


class LoopThread:
    """An asyncio loop running in a daemon thread, and the parts started on it.

    `timeout` is the default wait of run() and call(). Use start()/stop(), or `with`."""

    def __init__(self, name: str = "sandbox", timeout: float = 30.0) -> None:
        self.name, self.timeout = name, timeout
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.stack = AsyncExitStack()  # the parts, closed on the loop by stop()
        self._stopped = False

    def start(self, setup: Coroutine[Any, Any, Any] | None = None, timeout: float | None = None) -> Any:
        """Start the thread, then run `setup` on the loop (returns self, or what setup returns).
        Should setup fail, whatever it had entered is stopped before the error propagates."""
        self.thread.start()
        if setup is None:
            return self
        try:
            return self.run(setup, timeout)
        except BaseException:
            self.stop()
            raise

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop; its result (or exception) after at most `timeout` s."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout if timeout is None else timeout)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call a sync function (a World or KubeStore method) on the loop and return its result."""
        async def call() -> T:
            return fn(*args, **kwargs)
        return self.run(call())

    def enter(self, part: AbstractAsyncContextManager[T], timeout: float | None = None) -> T:
        """Start `part` on the loop; it stays up until stop(). Returns what it yields."""
        return self.run(self.stack.enter_async_context(part), timeout)

    def defer(self, cleanup: Callable[[], Awaitable[Any]]) -> None:
        """Await `cleanup()` on the loop at stop(), in last-in-first-out order with the parts."""
        self.stack.push_async_callback(cleanup)

    def stop(self, timeout: float | None = None) -> None:
        """Stop every part (last started first) on the loop, then the loop and its thread.
        Idempotent; the loop stops even if a part's cleanup fails (that error is raised)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.thread.is_alive():
                self.run(self.stack.aclose(), timeout)
        finally:
            if self.thread.is_alive():
                self.loop.call_soon_threadsafe(self.loop.stop)
                self.thread.join(10)
            if not self.thread.is_alive():
                self.loop.close()

    def __enter__(self) -> "LoopThread":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# ---- the parts ----------------------------------------------------------------------------------

@asynccontextmanager
async def world(state_dir: Path, *, speed: float = 6000.0, profile: LatencyProfile | None = None,
                faults: Faults | None = None, enabled_services: Iterable[str] = CODELAB_APIS, seed: int = 1,
                record: Record | None = None) -> AsyncIterator[World]:
    """A World in `state_dir` on the reference profile (or `profile`) at `speed` simulated minutes
    per real minute. enabled_services: what each new project starts with - the codelab's four
    by default so tests need not enable them; () is Google's fresh project."""
    w = World(state_dir, Clock(LatencyProfile.load() if profile is None else profile, speed=speed, seed=seed), faults,
              enabled_services=enabled_services, record=record)
    try:
        yield w
    finally:
        w.close()


# What the daemon serves over gRPC with a World (google.monitoring.v3 takes a LustreMeter instead).
GRPC_SERVICES: dict[str, Callable[[grpc.aio.Server, World], Any]] = {
    "lustre": add_lustre_services,  # google.cloud.lustre.v1.Lustre + google.longrunning.Operations
    "container": add_container_service,
    "serviceusage": add_service_usage_service,
    "quotas": add_quotas_service,  # google.api.cloudquotas.v1.CloudQuotas (QuotaInfo reads)
}


@asynccontextmanager
async def grpc_server(world: World | None = None, services: Iterable[str] | None = None, *,
                      extra: Iterable[Callable[[grpc.aio.Server], Any]] = ()) -> AsyncIterator[str]:
    """An insecure grpc.aio server on 127.0.0.1:0; yields its "127.0.0.1:PORT". With a World: the
    named GRPC_SERVICES (default all), each call refused unless the project enabled its API and
    counted in the World's record (the daemon's guard). `extra`: more `add(server)` calls, which
    need no World (add_monitoring_service with a LustreMeter)."""
    server = grpc.aio.server()
    if world is not None:
        guard(server, gate=world.gate_grpc, record=world.record)
        for name in GRPC_SERVICES if services is None else services:
            GRPC_SERVICES[name](server, world)
    elif services:
        raise ValueError("the World's services need a World")
    for add in extra:
        add(server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


class Sites:
    """Loopback sockets for one aiohttp app, bound when made (as daemon.serve binds them) so the
    URLs are known before the app and what refers to it (an ADC file, the World) are built."""

    def __init__(self, plain: bool = True, https: bool = False) -> None:
        self.plain: socket.socket | None = loopback_socket() if plain else None
        self.secure: socket.socket | None = loopback_socket() if https else None
        self.runner: web.AppRunner | None = None  # once served

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT of the plain site."""
        if self.plain is None:
            raise AttributeError("these sites have no plain http site")
        return f"http://127.0.0.1:{self.plain.getsockname()[1]}"

    @property
    def endpoint(self) -> str:
        """127.0.0.1:PORT of the https site (what a GKE cluster's `endpoint` holds)."""
        if self.secure is None:
            raise AttributeError("these sites have no https site")
        return f"127.0.0.1:{self.secure.getsockname()[1]}"

    @property
    def server(self) -> str:
        """https://127.0.0.1:PORT (a kubeconfig's server)."""
        return f"https://{self.endpoint}"


@asynccontextmanager
async def serve_app(app: web.Application, sites: Sites | None = None, *, tls: SandboxTLS | None = None,
                    shutdown_timeout: float = 60.0) -> AsyncIterator[Sites]:
    """Serve `app` on `sites` (default: one plain site, plus https when `tls` is given), the https
    site with the sandbox CA's server certificate. Yields the Sites; cleans the runner up after."""
    sites = sites or Sites(plain=True, https=tls is not None)
    if sites.secure is not None and tls is None:
        raise ValueError("an https site needs the sandbox's TLS")
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        if sites.plain is not None:
            await web.SockSite(runner, sites.plain).start()
        if sites.secure is not None:
            assert tls is not None
            await web.SockSite(runner, sites.secure, ssl_context=tls.server_context()).start()
        sites.runner = runner
        yield sites
    finally:
        await runner.cleanup()


@dataclass(frozen=True)
class KubeAuth:
    """The sandbox's CA (and the API server's certificate) and its token issuer, kept in one
    folder as the daemon keeps them in <root>/tls."""

    tls: SandboxTLS
    issuer: TokenIssuer

    @classmethod
    def load(cls, folder: Path) -> "KubeAuth":
        """Made on first use, reused after (ensure_tls, TokenIssuer.load)."""
        tls = ensure_tls(folder)
        return cls(tls, TokenIssuer.load(folder))


def kube_app(store: KubeStore, auth: KubeAuth, *, bookmark_interval: float = 60.0, tick: float = 1.0,
             token_route: bool = True) -> web.Application:
    """The daemon's app before its Google-API routes: the Kubernetes API, which over https needs a
    bearer token of auth's issuer (or SANDBOX_TOKEN), and POST /token (the ADC files' token_uri).
    Add control, compute or preempt routes to it before serving."""
    app = make_app(store, bookmark_interval=bookmark_interval, tick=tick, issuer=auth.issuer)
    if token_route:
        add_token_route(app, auth.issuer)
    return app


@asynccontextmanager
async def daemon_sites(app: web.Application, auth: KubeAuth, world: World | None = None, *,
                       sites: Sites | None = None, shutdown_timeout: float = 60.0) -> AsyncIterator[Sites]:
    """The daemon's two sites of one app: plain http (`sites.url`: control routes, /token, Compute)
    and https with the sandbox CA (`sites.endpoint`): every GKE cluster of `world` names it as its
    endpoint, with the CA as master_auth.cluster_ca_certificate."""
    sites = sites or Sites(plain=True, https=True)
    if world is not None:
        world.kube_endpoint, world.kube_ca_b64 = sites.endpoint, auth.tls.ca_b64
    async with serve_app(app, sites, tls=auth.tls, shutdown_timeout=shutdown_timeout):
        yield sites


@asynccontextmanager
async def rest_sites(world: World, *, record: Record | None = None,
                     faults: Faults | None = None) -> AsyncIterator[dict[str, str]]:
    """The REST APIs the real gcloud talks to (rest_apps: lustre, container, serviceusage,
    servicenetworking, cloudresourcemanager), each on a loopback port of its own. Yields gcloud's
    CLOUDSDK_API_ENDPOINT_OVERRIDES_<API> values by API ("http://127.0.0.1:PORT/"); Compute is not
    among them (add_compute_routes mounts it on an app of yours, at <url>/compute/v1/)."""
    async with AsyncExitStack() as stack:
        urls: dict[str, str] = {}
        for key, make in rest_apps().items():
            runner, url = await serve_on_loopback(make(world, record=record, faults=faults))
            stack.push_async_callback(runner.cleanup)
            urls[key] = url + "/"
        yield urls
