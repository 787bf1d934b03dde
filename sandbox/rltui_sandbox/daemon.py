"""The sandbox daemon: one process, one event loop, every emulated endpoint.

- gRPC (insecure, loopback): google.cloud.lustre.v1.Lustre, google.longrunning.Operations,
  google.container.v1.ClusterManager, google.monitoring.v3.MetricService,
  google.api.serviceusage.v1.ServiceUsage - each refusing a call to an API the request's project
  has not enabled (World.gate_grpc), and counted in the record.
- One aiohttp app on two loopback sites:
  - plain HTTP (status keys `kube_api`, `compute`): the Compute Engine REST API under
    /compute/v1/, the OAuth2 token endpoint POST /token (the `adc` file's token_uri), and under
    /_sandbox/ the control routes behind the fake xpk, `rltui sandbox preempt` and GET
    /_sandbox/record (status key `record` is its file); of the Kubernetes paths only /version
    (the readiness probe);
  - HTTPS with the sandbox's own CA (status keys `kube_server`, `kube_ca`; the address every GKE
    cluster's `endpoint` names): the Kubernetes API (+ port-forward), only with a bearer token
    the token endpoint issued or SANDBOX_TOKEN (else 401), as GKE's is.
  Two sites of one app rather than two apps: the routes share the store, World and faults, and
  the Google-API surfaces stay where their clients already find them.
- HTTP for the real gcloud (aiohttp, loopback, one port per API): the REST APIs of Lustre,
  Kubernetes Engine, Service Usage, Service Networking, Cloud Resource Manager and IAM (rest_*.py);
  status key `rest` maps gcloud's API names (compute, lustre, container, serviceusage,
  servicenetworking, cloudresourcemanager, iam) to the CLOUDSDK_API_ENDPOINT_OVERRIDES_<API> URL
  (rltui's Endpoints.api_url reads it too).
- A loopback HTTP proxy (proxy.py, status key `proxy`, gcloud's CLOUDSDK_PROXY_ADDRESS:PORT): it
  forwards absolute-form requests to the sandbox's own HTTP ports and terminates
  `CONNECT <api>.googleapis.com:443` for the APIs of `rest` with a certificate of the sandbox CA
  (so `gcloud services vpc-peerings`, which has no endpoint override, reaches Service
  Networking); any other target is refused 403, nothing leaves the machine.

Projects start strict, as Google makes them: only the default-enabled APIs are on.
- The private gcloud config (status key `gcloud_config`) has the sandbox's service account
  signed in, by the real `gcloud auth activate-service-account --key-file=<adc>` (which fetches a
  token from the token endpoint, so it runs once the sites answer): `gcloud auth list` shows an
  ACTIVE account, as in Cloud Shell. API calls use the access-token file instead.
- A toy KubeRay controller that starts a real Ray head when the head pod runs; it behaves as the
  KubeRay release `--kuberay-version` names (kuberay/versions.py; status key `kuberay_version`).
  Its kubelet also serves GKE's metadata server to process pods on Workload Identity node pools,
  one loopback port per pod (gke_metadata.py; no status key: each pod gets its address).

It writes `daemon.json` (the endpoints) only once all of them answer; `rltui sandbox stop`
sends SIGTERM, and the daemon stops its Ray heads by PID before it exits.

Run by `rltui sandbox start` as `python -m rltui_sandbox.daemon --dir D ...`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from rltui.atomic import write_private
from .manage import ACCESS_TOKEN_FILE, CHILDREN_FILE, GCLOUD_CONFIG_DIR, GCLOUD_KUBECONFIG, STATUS_FILE, tool_env
from .contract import CONTRACT_VERSION

log = logging.getLogger("rltui_sandbox")


def _write_json(path: Path, data: Any) -> None:
    write_private(path, json.dumps(data, indent=2))


async def _sign_in_gcloud(config_dir: Path, key_file: Path) -> None:
    """`gcloud auth activate-service-account` into the sandbox's own gcloud config, if gcloud is
    installed (without it xpk and rltui's preflight say so themselves)."""
    import shutil

    gcloud = shutil.which("gcloud")
    if gcloud is None:
        log.warning("no gcloud on PATH: the sandbox's gcloud config has no account signed in")
        return
    env = {**os.environ, "CLOUDSDK_CONFIG": str(config_dir), "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
           "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "1", "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "1"}
    for name in [n for n in env if n.startswith(("CLOUDSDK_API_ENDPOINT_OVERRIDES_", "CLOUDSDK_AUTH_",
                                                 "CLOUDSDK_PROXY_"))]:
        del env[name]
    proc = await asyncio.create_subprocess_exec(
        gcloud, "auth", "activate-service-account", f"--key-file={key_file}", env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        log.warning("gcloud auth activate-service-account failed (%s): %s", proc.returncode,
                    out.decode(errors="replace").strip().splitlines()[-1:])


def _loopback_socket() -> socket.socket:
    # Bound before the app starts, so the control routes and kubeconfig know the URL.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


async def serve(root: Path, speed: float, fault_p: float, seed: int, profile_path: Path | None,
                lustre_quota_gib: int | None = None, quotas: dict[str, float] | None = None,
                denied: list[str] | None = None, kuberay_version: str | None = None,
                unavailable_capacity: list[str] | None = None) -> None:
    import grpc
    from aiohttp import web

    from .faults import Faults
    from .grpc_billing import add_billing_service
    from .grpc_container import add_container_service
    from .grpc_quotas import add_quotas_service
    from .grpc_serviceusage import add_service_usage_service
    from .grpc_util import guard
    from .record import FILE as RECORD_FILE, Record
    from .rest_compute import add_compute_routes
    from .rest_apps import rest_apps
    from .rest_util import serve_on_loopback
    from .grpc_lustre import add_lustre_services
    from .grpc_monitoring import add_monitoring_service
    from .kube.api import make_app
    from .kube.auth import TokenIssuer, add_token_route, write_adc
    from .kube.kubeconfig import SANDBOX_TOKEN, write_kubeconfig
    from .kube.tls import ensure_tls, googleapis_context
    from .proxy import host_table, start_proxy
    from .kube.store import KubeStore
    from .kuberay import KubeRayController, add_preempt_route
    from .kuberay.versions import KubeRay
    from .control import add_control_routes
    from .gpu_meter import GpuMeter
    from .lustre_meter import LustreMeter
    from .nemo_rl_tree import write_uv_shim
    from .profile import Clock, LatencyProfile
    from .tools.install import install_tools
    from .world import World

    started = time.time()
    profile = LatencyProfile.load(profile_path)
    clock = Clock(profile, speed=speed, seed=seed)
    faults = Faults(fault_p, seed)
    record = Record(root / RECORD_FILE, speed)
    world = World(root / "cloud", clock, faults, record=record)
    world.lustre_quota_gib = lustre_quota_gib  # per zone and network; None: unlimited
    world.quotas.update(quotas or {})  # regional Compute Engine quota limits, e.g. GPUs
    world.denied_permissions.update(denied or ())  # permissions the caller lacks (testIamPermissions)
    world.unavailable_capacity.update(unavailable_capacity or ())  # GPU pools of that kind stock out
    store = KubeStore(root / "kube", faults)

    # Lustre throughput is measured on each ACTIVE instance's folder, sampled every 60 reference
    # seconds as Cloud Monitoring samples Lustre (not more often than 4 times a real second).
    meter = LustreMeter(interval_s=max(60.0 / speed, 0.25))

    def track_lustre(event: Any) -> None:
        key = (event.project, event.location, event.name)
        if event.kind == "lustre_active":
            inst = world.get_lustre_instance(*key)
            meter.track(key, world.lustre_dir(*key), int(inst.capacity_gib), inst.filesystem)
        elif event.kind == "lustre_deleted":
            meter.untrack(key)

    for project in world.projects():
        for inst in world.list_lustre_instances(project):
            if inst.state.name == "ACTIVE":
                key = (project, *inst.name.split("/")[3::2])
                meter.track(key, world.lustre_dir(*key), int(inst.capacity_gib), inst.filesystem)
    unsubscribe = world.subscribe(track_lustre)

    async def forget_cluster_objects(event: Any) -> None:
        # A deleted GKE cluster takes its Kubernetes objects with it (the kube API is its API).
        if event.kind != "cluster_deleted":
            return
        for plural in ("deployments.apps", "replicasets.apps", "rayclusters.ray.io", "pods", "services",
                       "persistentvolumeclaims", "persistentvolumes", "secrets", "configmaps",
                       "serviceaccounts", "rolebindings.rbac.authorization.k8s.io",
                       "roles.rbac.authorization.k8s.io", "daemonsets.apps", "events"):
            for obj in store.list_sync(plural):
                meta = obj.get("metadata", {})
                try:
                    await store.delete(plural, meta["name"], meta.get("namespace"),
                                       propagation="Background")
                except Exception:  # noqa: BLE001 - already gone via its owner
                    pass
        log.info("cluster %s deleted: its Kubernetes objects are gone", event.name)

    unsubscribe_kube = world.subscribe(forget_cluster_objects)
    meter_task = asyncio.create_task(meter.run(), name="lustre-meter")
    # The GPU nodes' accelerator metrics, from the demo job's phases (gpu_meter.py), sampled
    # every 60 reference seconds as GKE's container metrics are; labelled with each GKE cluster
    # of the project (the kube API is every cluster's).
    gpu_meter = GpuMeter(root / "rayclusters", lambda: [
        (project, c.location, c.name) for project in world.projects() for c in world.list_clusters(project)],
        interval_s=max(60.0 / speed, 0.25))
    gpu_task = asyncio.create_task(gpu_meter.run(), name="gpu-meter")

    server = grpc.aio.server()
    guard(server, gate=world.gate_grpc, record=record)
    add_lustre_services(server, world)
    add_container_service(server, world)
    add_service_usage_service(server, world)
    add_billing_service(server, world)
    add_quotas_service(server, world)
    # Time runs `speed` times faster here: the 60 s minimum alignment period and the 120 s
    # visibility delay are reference seconds (60/speed and 120/speed real seconds).
    add_monitoring_service(server, meter, speed=speed, record=record, gpu_meter=gpu_meter)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()

    sock = _loopback_socket()
    kube_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    tls_sock = _loopback_socket()
    kube_endpoint = f"127.0.0.1:{tls_sock.getsockname()[1]}"
    kube_server = f"https://{kube_endpoint}"
    tls = ensure_tls(root / "tls")
    issuer = TokenIssuer.load(root / "tls")
    world.kube_endpoint, world.kube_ca_b64 = kube_endpoint, tls.ca_b64
    adc = write_adc(root / "adc.json", f"{kube_url}/token", issuer)
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    install_tools(bin_dir, kube_url)
    write_uv_shim(bin_dir)
    kubeconfig = write_kubeconfig(root / "kubeconfig", kube_server, ca_pem=tls.ca_pem)
    # The token the real gcloud sends (CLOUDSDK_AUTH_ACCESS_TOKEN_FILE): the fixed sandbox token
    # the HTTPS Kubernetes API accepts too.
    write_private(root / ACCESS_TOKEN_FILE, SANDBOX_TOKEN + "\n")

    status: dict[str, Any] = {}

    def write_status() -> None:
        if status:
            status["ray_dashboard"] = controller.dashboard_url()
            _write_json(root / STATUS_FILE, status)

    def on_children(pids: list[int]) -> None:
        _write_json(root / CHILDREN_FILE, {"pids": sorted(pids)})
        write_status()

    kuberay = KubeRay.parse(kuberay_version)  # the RayOperator add-on's KubeRay release
    controller = KubeRayController(store, world, clock, project=None, state_dir=root,
                                   bin_dir=bin_dir, on_children=on_children, kuberay=kuberay)
    app = make_app(store, issuer=issuer, record=record)
    add_token_route(app, issuer)
    add_control_routes(app, world, faults)
    add_preempt_route(app, controller)
    add_compute_routes(app, world, record=record, faults=faults)
    record.add_route(app)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    await web.SockSite(runner, tls_sock, ssl_context=tls.server_context()).start()
    # The REST APIs the real gcloud talks to: one loopback port each (rest_util says why).
    rest_runners, rest_urls = [], {"compute": f"{kube_url}/compute/v1/"}
    for key, make in rest_apps().items():
        rest_runner, rest_url = await serve_on_loopback(make(world, record=record, faults=faults))
        rest_runners.append(rest_runner)
        rest_urls[key] = rest_url + "/"
    # For the APIs gcloud cannot be pointed at (proxy.py says why): only the sandbox's own ports.
    hosts = host_table(rest_urls)
    proxy = await start_proxy({sock.getsockname()[1], *hosts.values()}, hosts,
                              googleapis_context(root / "tls", hosts))
    await controller.start()
    (root / GCLOUD_CONFIG_DIR).mkdir(exist_ok=True)
    await _sign_in_gcloud(root / GCLOUD_CONFIG_DIR, adc)

    status.update({
        "contract": CONTRACT_VERSION,  # contract.py: what rltui may rely on here
        "pid": os.getpid(),
        "grpc": f"127.0.0.1:{grpc_port}",
        "kube_api": kube_url,
        "compute": kube_url,  # the Compute REST API shares the HTTP app: <compute>/compute/v1/...
        # gcloud's CLOUDSDK_API_ENDPOINT_OVERRIDES_<API> values (`rltui sandbox env` prints them).
        "rest": rest_urls,
        # gcloud's CLOUDSDK_PROXY_ADDRESS:PORT: Service Networking goes through it (proxy.py).
        "proxy": f"127.0.0.1:{proxy.port}",
        "record": str(root / RECORD_FILE),
        "kubeconfig": str(kubeconfig),  # https + CA + SANDBOX_TOKEN, for kubectl users
        "kube_server": kube_server,      # the GKE clusters' endpoint, as https://
        "kube_ca": str(tls.ca_file),     # the CA their master_auth.cluster_ca_certificate holds
        "adc": str(adc),                 # a service_account ADC refreshing at <kube_api>/token
        "ray_dashboard": None,
        "lustre_root": str(root / "cloud" / "lustre"),
        "bin_dir": str(bin_dir),
        # The private gcloud config folder the sandbox's tools get as CLOUDSDK_CONFIG.
        "gcloud_config": str(root / GCLOUD_CONFIG_DIR),
        # What `rltui sandbox env` hands the real gcloud: the token file (0600) and the private
        # kubeconfig `gcloud container clusters get-credentials` writes into.
        "access_token_file": str(root / ACCESS_TOKEN_FILE),
        "gcloud_kubeconfig": str(root / GCLOUD_KUBECONFIG),
        "quotas": {**world.quotas, **({"lustre_capacity_gib_per_zone_network": lustre_quota_gib}
                                      if lustre_quota_gib is not None else {})},
        "kuberay_version": kuberay.version,
        "speed": speed,
        "faults": fault_p,
        "seed": seed,
        "profile": str(profile_path) if profile_path else "reference",
        "started_at": started,
    })
    status["tool_env"] = tool_env(status)
    write_status()
    log.info("sandbox ready: gRPC 127.0.0.1:%s, Kubernetes %s (%.2f s)", grpc_port, kube_server,
             time.time() - started)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()

    log.info("stopping")
    status.clear()
    (root / STATUS_FILE).unlink(missing_ok=True)
    await controller.stop()
    unsubscribe()
    unsubscribe_kube()
    meter_task.cancel()
    gpu_task.cancel()
    await asyncio.gather(meter_task, gpu_task, return_exceptions=True)
    meter.close()
    await proxy.close()
    for rest_runner in rest_runners:
        await rest_runner.cleanup()
    await runner.cleanup()
    await server.stop(grace=1.0)
    world.close()
    record.flush()
    store.close()
    (root / CHILDREN_FILE).unlink(missing_ok=True)
    log.info("stopped")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rltui_sandbox.daemon")
    p.add_argument("--dir", required=True, type=Path)
    p.add_argument("--speed", type=float, default=60.0)
    p.add_argument("--faults", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", type=Path)
    p.add_argument("--lustre-quota-gib", type=int, default=None,
                   help="Lustre capacity quota per zone and network: creates above it fail late")
    p.add_argument("--quota", action="append", default=[], metavar="METRIC=LIMIT",
                   help="a regional Compute Engine quota, e.g. PREEMPTIBLE_NVIDIA_B200_GPUS=16")
    p.add_argument("--deny", action="append", default=[], metavar="PERMISSION",
                   help="a permission the caller lacks, e.g. lustre.instances.create")
    p.add_argument("--kuberay-version", default=None, help="the RayOperator add-on's KubeRay release")
    p.add_argument("--capacity", action="append", default=[], metavar="KIND=unavailable",
                   help="GPU capacity the zones are out of (spot, on-demand): its GPU pools fail as a stockout")
    args = p.parse_args(argv)
    from .world_capacity import parse_knob

    try:
        unavailable = [parse_knob(item) for item in args.capacity]
    except ValueError as exc:
        p.error(str(exc))
    quotas = {}
    for item in args.quota:
        metric, _, limit = item.partition("=")
        quotas[metric.strip()] = float(limit)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(serve(args.dir, args.speed, args.faults, args.seed, args.profile, args.lustre_quota_gib,
                      quotas, args.deny, args.kuberay_version, unavailable))
    return 0


if __name__ == "__main__":
    sys.exit(main())
