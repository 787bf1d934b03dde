"""The REAL Google Cloud SDK (/usr/bin/gcloud) driving the sandbox through `rltui sandbox env`
(manage.gcloud_env): the codelab's gcloud commands against the REST surfaces (rest_*.py).

Each gcloud call costs ~0.5 s of CPU: one module-scoped daemon, a few dozen calls in all.
The env also sends gcloud through the daemon's loopback proxy (proxy.py), so every call here
travels through it to the overridden ports. SDK 528 has no api_endpoint_overrides/servicenetworking
property (test_gcloud_has_no_servicenetworking_override pins that finding): `gcloud services
vpc-peerings` reaches the sandbox only through that proxy's CONNECT, tested in
test_vpc_peerings.py; here Service Networking is driven over HTTP directly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

GCLOUD = "/usr/bin/gcloud"
if not Path(GCLOUD).exists() or shutil.which("gcloud") is None:
    pytest.skip("the real Google Cloud SDK is not installed (/usr/bin/gcloud)", allow_module_level=True)

PROJECT = "gcloud-proj"
ZONE, REGION = "us-east1-b", "us-east1"
SPEED = 600.0


@pytest.fixture(scope="module")
def sbx(tmp_path_factory: pytest.TempPathFactory):
    from rltui_sandbox import manage

    root = Path(tmp_path_factory.mktemp("gc"))
    status = manage.start(root=root, speed=SPEED)
    env = {**os.environ, **manage.gcloud_env(status), "CLOUDSDK_CORE_PROJECT": PROJECT}
    try:
        yield status, env
    finally:
        manage.stop(root=root)


def gcloud(env: dict[str, str], *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([GCLOUD, *args], env=env, capture_output=True, text=True, timeout=60)
    if ok:
        assert out.returncode == 0, out.stderr
    return out


def rest(url: str, method: str = "GET", body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json",
                                                                         "Authorization": "Bearer anything"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_env_is_private_and_complete(sbx) -> None:
    status, env = sbx
    from rltui_sandbox import manage

    lines = manage.env_lines(status)
    names = {line.split("=", 1)[0].removeprefix("export ") for line in lines}
    for api in ("COMPUTE", "LUSTRE", "CONTAINER", "SERVICENETWORKING", "SERVICEUSAGE", "CLOUDRESOURCEMANAGER"):
        assert f"CLOUDSDK_API_ENDPOINT_OVERRIDES_{api}" in names
    assert {"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", "CLOUDSDK_CONFIG", "KUBECONFIG", "CLOUDSDK_CORE_DISABLE_PROMPTS"} <= names
    token = Path(env["CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"])
    assert token.stat().st_mode & 0o777 == 0o600
    assert env["CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"].endswith("/compute/v1/")
    root = Path(status.info["gcloud_config"]).parent
    assert Path(env["KUBECONFIG"]).parent == root and Path(env["CLOUDSDK_CONFIG"]).parent == root


def test_disabled_api_is_refused(sbx) -> None:
    _, env = sbx
    out = gcloud(env, "lustre", "instances", "list", f"--location={ZONE}", ok=False)
    assert out.returncode == 1
    assert "Google Cloud Managed Lustre API has not been used in project" in out.stderr
    assert "SERVICE_DISABLED" in out.stderr


def test_services_enable_then_list_enabled(sbx) -> None:
    _, env = sbx
    out = gcloud(env, "services", "enable", "lustre.googleapis.com", "compute.googleapis.com",
                 "container.googleapis.com", "servicenetworking.googleapis.com")
    assert "finished successfully" in out.stderr
    listed = gcloud(env, "services", "list", "--enabled", "--format=value(config.name)").stdout.split()
    assert {"lustre.googleapis.com", "compute.googleapis.com", "container.googleapis.com"} <= set(listed)


def test_missing_address_prints_the_two_real_lines(sbx) -> None:
    _, env = sbx
    out = gcloud(env, "compute", "addresses", "describe", "nope", "--global", ok=False)
    assert out.returncode == 1
    assert out.stderr.splitlines()[:2] == [
        "ERROR: (gcloud.compute.addresses.describe) Could not fetch resource:",
        f" - The resource 'projects/{PROJECT}/global/addresses/nope' was not found",
    ]


def test_gcloud_has_no_servicenetworking_override(sbx) -> None:
    """SDK 528: api_endpoint_overrides has no servicenetworking property (so the env var is
    ignored and `vpc-peerings` goes to servicenetworking.googleapis.com)."""
    _, env = sbx
    out = gcloud(env, "config", "get", "api_endpoint_overrides/servicenetworking", ok=False)
    assert out.returncode != 0


def test_peering_then_lustre_create_async_goes_active(sbx) -> None:
    status, env = sbx
    gcloud(env, "compute", "addresses", "create", "google-managed-services-default", "--global",
           "--purpose=VPC_PEERING", "--prefix-length=16", "--network=default")
    sn = status.info["rest"]["servicenetworking"].rstrip("/")
    svc = f"{sn}/v1/services/servicenetworking.googleapis.com/connections"
    number = rest(status.info["rest"]["cloudresourcemanager"] + f"v1/projects/{PROJECT}")["projectNumber"]
    network = f"projects/{number}/global/networks/default"
    op = rest(svc, "POST", {"network": network, "reservedPeeringRanges": ["google-managed-services-default"]})
    assert op["name"].startswith(f"operations/pssn.p24-{number}-") and not op["done"]
    deadline = time.monotonic() + 20
    while not op.get("done") and time.monotonic() < deadline:
        time.sleep(0.2)
        op = rest(f"{sn}/v1/{op['name']}")
    assert op["response"]["peering"] == "servicenetworking-googleapis-com", op
    conns = rest(f"{svc}?network={network}")["connections"]
    assert conns == [{"network": network, "peering": "servicenetworking-googleapis-com",
                      "reservedPeeringRanges": ["google-managed-services-default"],
                      "service": "services/servicenetworking.googleapis.com"}]

    out = gcloud(env, "lustre", "instances", "create", "lfs1", f"--location={ZONE}", "--capacity-gib=18000",
                 "--per-unit-storage-throughput=1000", "--filesystem=lfs", "--gke-support-enabled",
                 f"--network=projects/{PROJECT}/global/networks/default", "--async")
    assert "Create request issued for: [lfs1]" in out.stderr
    state = ""
    deadline = time.monotonic() + 30
    while state != "ACTIVE" and time.monotonic() < deadline:
        time.sleep(2)
        state = gcloud(env, "lustre", "instances", "describe", "lfs1", f"--location={ZONE}",
                       "--format=value(state)").stdout.strip()
    assert state == "ACTIVE"
    # Deleting the peering is refused while Lustre uses it (the World's rule, over REST).
    op = rest(f"{svc}/servicenetworking-googleapis-com:deleteConnection", "POST", {"consumerNetwork": network})
    for _ in range(50):
        if op.get("done"):
            break
        time.sleep(0.1)
        op = rest(f"{sn}/v1/{op['name']}")
    assert op["error"]["code"] == 9 and "still using this connection" in op["error"]["message"]


def _make_cluster(status: Any) -> None:
    import grpc
    from google.cloud import container_v1
    from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport

    channel = grpc.insecure_channel(status.info["grpc"])
    client = container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(channel=channel))
    client.create_cluster(parent=f"projects/{PROJECT}/locations/{REGION}",
                          cluster=container_v1.Cluster(name="c1", initial_node_count=1))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = client.get_cluster(name=f"projects/{PROJECT}/locations/{REGION}/clusters/c1")
        if got.status == container_v1.Cluster.Status.RUNNING:
            break
        time.sleep(0.2)
    channel.close()


def test_container_describe_update_credentials(sbx) -> None:
    status, env = sbx
    _make_cluster(status)
    desc = json.loads(gcloud(env, "container", "clusters", "describe", "c1", f"--location={REGION}",
                             "--format=json").stdout)
    assert desc["status"] == "RUNNING" and desc["currentNodeVersion"]
    out = gcloud(env, "container", "clusters", "update", "c1", f"--location={REGION}",
                 "--update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED")
    assert "Updated [" in out.stderr
    addons = gcloud(env, "container", "clusters", "describe", "c1", f"--location={REGION}",
                    "--format=value(addonsConfig.rayOperatorConfig.enabled,"
                    "addonsConfig.lustreCsiDriverConfig.enabled)").stdout.split()
    assert addons == ["True", "True"]

    gcloud(env, "container", "clusters", "get-credentials", "c1", f"--location={REGION}")
    config = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == f"gke_{PROJECT}_{REGION}_c1")
    assert cluster["server"] == f"https://{desc['endpoint']}"
    ca = desc.get("masterAuth", {}).get("clusterCaCertificate")
    if ca:  # the World's CA (made real in the kube API work); absent, gcloud skips TLS verification
        assert cluster["certificate-authority-data"] == ca
    assert config["current-context"] == f"gke_{PROJECT}_{REGION}_c1"
    user = config["users"][0]["user"]
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin"
    # The real kubectl, through gke-gcloud-auth-plugin (which asks gcloud for the token), over
    # HTTPS to the cluster's endpoint with its CA, as on GKE.
    pods = subprocess.run(["kubectl", "get", "pods"], env=env, capture_output=True, text=True, timeout=60)
    assert pods.returncode == 0 and "No resources found in default namespace." in pods.stderr, pods.stderr

    record = rest(status.info["kube_api"] + "/_sandbox/record")
    calls = json.dumps(record)
    for name in ("container:locations.clusters.update", "lustre:instances.create", "serviceusage:services.batchEnable"):
        assert name in calls


# ---- Cloud Routers, Cloud NAT and regional addresses (xpk's blueprint makes them) -----------------
# create, list (aggregated and --regions), describe, `routers nats create` (a routers.patch), the
# refusal while a NAT uses an address, and gcloud's user agent on the recorded operations.

ROUTERS_PROJECT = "gcloud-routers"


def test_gcloud_makes_a_router_with_a_nat_over_a_regional_address(sbx) -> None:
    status, env = sbx
    env = {**env, "CLOUDSDK_CORE_PROJECT": ROUTERS_PROJECT}   # a project of its own
    gcloud(env, "services", "enable", "compute.googleapis.com")
    gcloud(env, "compute", "networks", "create", "c1-net-0", "--subnet-mode=custom", "--mtu=8896")
    gcloud(env, "compute", "addresses", "create", "c1-net-0-nat-ips-0", f"--region={REGION}")
    gcloud(env, "compute", "routers", "create", "c1-net-0-router", "--network=c1-net-0", f"--region={REGION}")
    gcloud(env, "compute", "routers", "nats", "create", f"cloud-nat-{REGION}", "--router=c1-net-0-router",
           f"--region={REGION}", "--nat-external-ip-pool=c1-net-0-nat-ips-0", "--nat-all-subnet-ip-ranges")

    listed = json.loads(gcloud(env, "compute", "addresses", "list", "--format=json").stdout)
    assert [(a["name"], a["status"], a["addressType"]) for a in listed] == \
        [("c1-net-0-nat-ips-0", "IN_USE", "EXTERNAL")]
    assert listed[0]["users"] == [f"https://www.googleapis.com/compute/v1/projects/{ROUTERS_PROJECT}/regions/{REGION}"
                                  "/routers/c1-net-0-router"]
    regional = gcloud(env, "compute", "routers", "list", f"--regions={REGION}", "--format=value(name)")
    assert regional.stdout.split() == ["c1-net-0-router"]
    router = json.loads(gcloud(env, "compute", "routers", "describe", "c1-net-0-router", f"--region={REGION}",
                               "--format=json").stdout)
    assert [n["name"] for n in router["nats"]] == [f"cloud-nat-{REGION}"]
    assert router["nats"][0]["natIps"][0].endswith(f"/regions/{REGION}/addresses/c1-net-0-nat-ips-0")

    refused = gcloud(env, "compute", "addresses", "delete", "c1-net-0-nat-ips-0", f"--region={REGION}", "--quiet",
                     ok=False)
    assert refused.returncode == 1 and "is already being used by" in refused.stderr

    record = json.loads(urllib.request.urlopen(status.info["kube_api"] + "/_sandbox/record", timeout=10).read())
    ops = {o["kind"]: o for o in record["operations"]}
    assert "command/gcloud.compute.addresses.create" in ops["compute.addresses.insert"]["agent"]
    assert ops["compute.routers.patch"]["agent"].startswith("google-cloud-sdk gcloud/")
