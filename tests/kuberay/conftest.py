"""A whole sandbox on one event loop in a background thread: a World, the KubeStore behind the
fake API server (with the preempt route), and the KubeRay controller. Tests drive it with the
REAL `kubernetes` client, kubectl and Ray's JobSubmissionClient, as the wizard would.

The API is reached as the daemon serves it and as GKE's is: over HTTPS with the sandbox's own CA
and only with a bearer token. The `kubernetes` client is built by rltui's real-mode builder
(the GKE cluster's endpoint and CA, a token from an ADC file refreshed at the sandbox's token
endpoint); kubectl reads a kubeconfig holding the CA and the fixed sandbox token.

The modules share fixtures through `tools` (importlib import mode cannot import a conftest);
the parts come from tests/harness.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Coroutine, Iterator

import pytest
from google.cloud import container_v1, lustre_v1
from kubernetes import client
from kubernetes.stream import portforward

from rltui import manifests
from rltui.atomic import write_private
from rltui.cloud.endpoints import Endpoints
from rltui.cloud.kube import gke_configuration
from rltui.config import RLConfig, parse_config
from rltui_sandbox.kube import KubeStore, write_kubeconfig
from rltui_sandbox.kube.auth import write_adc
from rltui_sandbox.kuberay import KubeRayController, add_preempt_route
from rltui_sandbox.profile import Clock, LatencyProfile, Operation
from rltui_sandbox.world import region_of
from tests import harness

PROJECT = "rl-sandbox-test"
SPEED = 3000.0  # 7 profile minutes of image pull take 0.14 s
HF_TOKEN = "hf_" + "T0ken" * 6  # a test value; it must never show up in any output


def profile(**minutes: float) -> LatencyProfile:
    """The reference profile with some operations' minutes changed (to make a window observable)."""
    ref = LatencyProfile.load()
    ops = dict(ref.operations)
    for key, value in minutes.items():
        ops[key] = Operation(value, "test", ops[key].what)
    return LatencyProfile(ops, ref.path)


def codelab_config(**extra: str) -> RLConfig:
    return parse_config({"PROJECT_ID": PROJECT, "NUM_NODES": "2", "HF_TOKEN": HF_TOKEN, **extra})


class Box:
    """World + fake kube API + controller on one loop thread, on the daemon's two sites:
    `control_url` (plain http: /_sandbox/ control routes and the token endpoint) and
    `kube_server` (https://<the GKE clusters' endpoint>: the Kubernetes API, bearer tokens only).
    `call(coro)` runs a coroutine on the loop, `fn(f, ...)` a sync World/store method."""

    def __init__(self, root: Path, world_profile: LatencyProfile, controller_profile: LatencyProfile) -> None:
        self.root = root
        self.world_profile, self.controller_profile = world_profile, controller_profile
        self.children: list[list[int]] = []  # every on_children call
        self.creds: Any = None  # google-auth credentials from the ADC file, once api() needs them
        self.lt = harness.LoopThread("sandbox", timeout=20)
        self.loop = self.lt.loop
        self.lt.start(self._start(), timeout=30)
        self.kubeconfig = write_kubeconfig(root / "kubeconfig", self.kube_server, ca_pem=self.tls.ca_pem)

    def _controller(self) -> KubeRayController:
        return KubeRayController(self.store, self.world, Clock(self.controller_profile, SPEED, seed=2),
                                 project=PROJECT, state_dir=self.root / "ctl", bin_dir=self.root / "bin",
                                 on_children=self.children.append,
                                 head_env={"RLTUI_DEMO_STEP_SECONDS": "0"})

    async def _start(self) -> None:
        enter = self.lt.stack.enter_async_context
        self.world = await enter(harness.world(self.root / "world", speed=SPEED, profile=self.world_profile))
        self.store = KubeStore(self.root / "kube")
        self.controller = self._controller()
        # The daemon's wiring (daemon.serve): the clusters' endpoint is the https site, whose
        # certificate chains to the CA GKE hands out as master_auth.cluster_ca_certificate. Its
        # sockets are bound first, so the ADC file knows the token endpoint's URL.
        sites = harness.Sites(plain=True, https=True)
        self.control_url = sites.url
        self.kube_endpoint, self.kube_server = sites.endpoint, sites.server
        auth = harness.KubeAuth.load(self.root / "tls")
        self.tls, self.issuer = auth.tls, auth.issuer
        self.adc = write_adc(self.root / "adc.json", f"{self.control_url}/token", self.issuer)
        app = harness.kube_app(self.store, auth, bookmark_interval=0.3, tick=0.1)
        # The route reaches whichever controller runs now (tests restart it).
        add_preempt_route(app, _Current(self))  # type: ignore[arg-type]
        await enter(harness.daemon_sites(app, auth, self.world, sites=sites, shutdown_timeout=2.0))
        await self.controller.start()
        # Stopped first (the parts stop last-started-first): whichever controller runs by then.
        self.lt.defer(lambda: self.controller.stop())

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 20) -> Any:
        return self.lt.run(coro, timeout)

    def fn(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a (sync) World/store method on the loop: they are single-threaded."""
        return self.lt.call(f, *args, **kwargs)

    def restart_controller(self) -> None:
        """What a daemon restart does to the controller: a new one over the same store and World."""
        async def restart() -> None:
            await self.controller.stop()
            self.controller = self._controller()
            await self.controller.start()
        self.call(restart(), timeout=180)  # the old controller's stop: see stop() below

    def api(self, cfg: RLConfig | None = None) -> client.ApiClient:
        """A client for the codelab's cluster as rltui's real mode builds one (KubeAdapter.connect):
        the GKE cluster as the World returns it, ADC credentials from the sandbox's file, and
        rltui.cloud.kube.gke_configuration; carried over to the sync client the tests drive."""
        cfg = cfg or codelab_config()
        cluster = self.fn(self.world.get_cluster, PROJECT, region_of(cfg.zone), cfg.cluster_name)
        # One credentials object per Box, as one wizard session has: loading the key and
        # fetching a token take ~60 ms, and the token lives an hour.
        if self.creds is None:
            self.creds = Endpoints(label="SANDBOX", adc_file=self.adc).credentials()
        return client.ApiClient(sync_configuration(self.call(gke_configuration(cluster, self.creds)),
                                                   self.loop, self.root / "cluster-ca.pem"))

    def post_preempt(self, body: dict | None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else b""
        req = urllib.request.Request(f"{self.control_url}/_sandbox/preempt", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def stop(self) -> None:
        # The controller's stop waits for a Ray head still starting (up to its 30 s readiness
        # wait) so it can end it by PID, then stops it (10 s + sweep): on a loaded 2-core box
        # that exceeds 60 s. Then the sites (the store closes with them) and the World.
        self.lt.stop(timeout=180)

    # ---- the codelab's steps, done on the World directly ------------------------------------

    def xpk_cluster(self, cfg: RLConfig) -> None:
        # One CPU node instead of xpk's default 6 (--default-pool-cpu-num-nodes): fewer nodes to count.
        self.call(self.world.xpk_cluster_create(PROJECT, cfg.zone, cfg.cluster_name, num_nodes=cfg.num_nodes,
                                                default_pool_cpu_machine_type="e2-standard-4",
                                                default_pool_cpu_num_nodes=1), timeout=30)

    def enable_addons(self, cfg: RLConfig, ray: bool = True, lustre: bool = True,
                      recreate: bool = True) -> None:
        addons = container_v1.AddonsConfig()
        if ray:
            addons.ray_operator_config = container_v1.RayOperatorConfig(enabled=True)
        if lustre:
            addons.lustre_csi_driver_config = container_v1.LustreCsiDriverConfig(enabled=True)
        region = region_of(cfg.zone)
        # GKE's own upgrade right after xpk's create holds the cluster: wait, as a client retrying
        # CLUSTER_ALREADY_HAS_OPERATION does.
        self.call(self.world.wait_cluster_idle(PROJECT, region, cfg.cluster_name), timeout=30)
        op = self.fn(self.world.update_addons, PROJECT, region, cfg.cluster_name, addons)
        self.call(self.world.wait_cluster_operation(PROJECT, region, op.name), timeout=30)
        if lustre and recreate:
            self.recreate_nodes(cfg)

    def recreate_nodes(self, cfg: RLConfig) -> None:
        """What xpk does after enabling the Lustre CSI driver: upgrade every node pool to the same
        version, which recreates its nodes (then they have the driver)."""
        region = region_of(cfg.zone)
        for pool in self.fn(self.world.list_node_pools, PROJECT, region, cfg.cluster_name):
            self.call(self.world.wait_cluster_idle(PROJECT, region, cfg.cluster_name), timeout=30)
            op = self.fn(self.world.update_node_pool, PROJECT, region, cfg.cluster_name, pool.name, "-")
            self.call(self.world.wait_cluster_operation(PROJECT, region, op.name), timeout=30)

    def create_lustre(self, cfg: RLConfig) -> str:
        """Start creating the instance (on the project's default network); returns the operation."""
        inst = lustre_v1.Instance(filesystem="lustre", capacity_gib=cfg.lustre_capacity,
                                  per_unit_storage_throughput=1000,
                                  network=f"projects/{PROJECT}/global/networks/default")
        op = self.fn(self.world.create_lustre_instance, PROJECT, cfg.zone, cfg.lustre_instance_id, inst)
        return op.name

    def codelab_raycluster(self, cfg: RLConfig) -> client.CoreV1Api:
        """The codelab's way to a RayCluster on a fresh Box: xpk's cluster, both addons, Lustre
        ACTIVE, then the PV with its IP, the PVC, the job's Secret and the RayCluster. Returns
        the core client (`self.core`, and `self.cfg`, are set to it and `cfg`)."""
        self.xpk_cluster(cfg)
        self.enable_addons(cfg)
        ip = self.lustre_ip(cfg, self.create_lustre(cfg))
        core, custom = client.CoreV1Api(self.api()), client.CustomObjectsApi(self.api())
        core.create_persistent_volume(manifests.persistent_volume(cfg, ip))
        core.create_namespaced_persistent_volume_claim("default", manifests.persistent_volume_claim(cfg))
        core.create_namespaced_secret("default", manifests.job_secret(cfg))
        custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", manifests.ray_cluster(cfg))
        self.core, self.cfg = core, cfg
        return core

    def lustre_ip(self, cfg: RLConfig, operation: str) -> str:
        """Wait for ACTIVE; the instance's IP, as the codelab cuts it from mountPoint."""
        self.call(self.world.wait_operation(operation), timeout=30)
        inst = self.fn(self.world.get_lustre_instance, PROJECT, cfg.zone, cfg.lustre_instance_id)
        return manifests.lustre_ip(inst.mount_point)


def sync_configuration(aio_cfg: Any, loop: asyncio.AbstractEventLoop, ca_file: Path) -> client.Configuration:
    """The sync client's twin of a `kubernetes.aio` Configuration from gke_configuration: same
    host, CA and bearer token, and its token refresh hook (run on `loop`, where it was built)
    before every request, as the aio client runs it."""
    out = client.Configuration(host=aio_cfg.host)
    out.verify_ssl = aio_cfg.verify_ssl
    # kubernetes.stream's websocket (port-forward) reads only ssl_ca_cert (else certifi's
    # bundle), never ca_cert_data: a file serves both it and the REST calls.
    write_private(ca_file, aio_cfg.ca_cert_data)
    out.ssl_ca_cert = str(ca_file)
    out.api_key_prefix = dict(aio_cfg.api_key_prefix)

    def refresh(conf: client.Configuration) -> None:
        asyncio.run_coroutine_threadsafe(aio_cfg.refresh_api_key_hook(aio_cfg), loop).result(30)
        conf.api_key = dict(aio_cfg.api_key)
    out.refresh_api_key_hook = refresh
    refresh(out)
    return out


class _Current:
    """Stands in for the controller in the preempt route, forwarding to the current one."""

    def __init__(self, box: Box) -> None:
        self._box = box

    async def preempt(self, node: str | None, head: bool = False, hard: bool = False) -> dict:
        return await self._box.controller.preempt(node, head=head, hard=hard)


class PortForwardBridge:
    """What `kubectl port-forward pod/P :PORT` does: a local port where each connection is a
    new `kubernetes.stream.portforward` to the pod's port."""

    def __init__(self, core: client.CoreV1Api, pod: str, port: int, namespace: str = "default") -> None:
        self.core, self.pod, self.port, self.namespace = core, pod, port, namespace
        self.server = socket.create_server(("127.0.0.1", 0))
        self.local_port = self.server.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        pf = portforward(self.core.connect_get_namespaced_pod_portforward, self.pod, self.namespace,
                         ports=str(self.port))
        remote = pf.socket(self.port)

        def pump(src: Any, dst: Any) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
        back = threading.Thread(target=pump, args=(remote, conn), daemon=True)
        back.start()
        pump(conn, remote)
        back.join(5)
        conn.close()
        pf.close()

    def close(self) -> None:
        self._closed = True
        self.server.close()


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # noqa: BLE001 - a transient API error is just "not yet"
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


def events_for(core: client.CoreV1Api, name: str, namespace: str = "default") -> list[Any]:
    return core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items


def proc_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@dataclass(frozen=True)
class Tools:
    project: str = PROJECT
    hf_token: str = HF_TOKEN
    profile: Callable[..., LatencyProfile] = staticmethod(profile)
    config: Callable[..., RLConfig] = staticmethod(codelab_config)
    wait_for: Callable[..., Any] = staticmethod(wait_for)
    events_for: Callable[..., list] = staticmethod(events_for)
    proc_alive: Callable[[int], bool] = staticmethod(proc_alive)
    bridge: type = PortForwardBridge


@pytest.fixture(scope="session")
def tools() -> Tools:
    return Tools()


@pytest.fixture(scope="module")
def make_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Box]]:
    """make(world_profile, controller_profile) -> a started Box, stopped at the module's end.
    The modules' timeouts are `func_only`: this stop bounds itself (Box.stop, 180 s, over a minute
    on a loaded 2-core machine) and would otherwise be charged to the module's last test."""
    boxes: list[Box] = []

    def make(world_profile: LatencyProfile | None = None, controller_profile: LatencyProfile | None = None) -> Box:
        root = tmp_path_factory.mktemp("box")
        boxes.append(Box(root, world_profile or profile(), controller_profile or profile()))
        return boxes[-1]
    yield make
    for box in boxes:
        box.stop()
        for pids in box.children[-1:]:
            assert pids == [], f"Ray heads left running: {pids}"
        assert not any(proc_alive(pid) for pids in box.children for pid in pids)

