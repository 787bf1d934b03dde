"""The REAL Google Cloud SDK (/usr/bin/gcloud) against the sandbox daemon's Compute routes for
Cloud Routers, Cloud NAT and regional addresses (as tests/gcloud/test_real_gcloud.py runs it):
create, list (aggregated and --regions), describe, `routers nats create` (a routers.patch), the
refusals while a NAT uses an address, and gcloud's user agent on the recorded operations.
A few gcloud calls (~0.5 s of CPU each) on one daemon."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

GCLOUD = "/usr/bin/gcloud"
if not Path(GCLOUD).exists() or shutil.which("gcloud") is None:
    pytest.skip("the real Google Cloud SDK is not installed (/usr/bin/gcloud)", allow_module_level=True)

PROJECT = "gcloud-routers"
REGION = "us-east1"


@pytest.fixture(scope="module")
def sbx(tmp_path_factory: pytest.TempPathFactory):
    from rltui.sandbox import manage

    root = Path(tmp_path_factory.mktemp("gcr"))
    status = manage.start(root=root, speed=600.0)
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


def test_gcloud_makes_a_router_with_a_nat_over_a_regional_address(sbx) -> None:
    status, env = sbx
    gcloud(env, "services", "enable", "compute.googleapis.com")
    gcloud(env, "compute", "networks", "create", "c1-net-0", "--subnet-mode=custom", "--mtu=8896")
    gcloud(env, "compute", "addresses", "create", "c1-net-0-nat-ips-0", f"--region={REGION}")
    gcloud(env, "compute", "routers", "create", "c1-net-0-router", "--network=c1-net-0", f"--region={REGION}")
    gcloud(env, "compute", "routers", "nats", "create", f"cloud-nat-{REGION}", "--router=c1-net-0-router",
           f"--region={REGION}", "--nat-external-ip-pool=c1-net-0-nat-ips-0", "--nat-all-subnet-ip-ranges")

    listed = json.loads(gcloud(env, "compute", "addresses", "list", "--format=json").stdout)
    assert [(a["name"], a["status"], a["addressType"]) for a in listed] == \
        [("c1-net-0-nat-ips-0", "IN_USE", "EXTERNAL")]
    assert listed[0]["users"] == [f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/regions/{REGION}"
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
