"""The codelab's peering step by hand with the REAL gcloud: `gcloud services vpc-peerings
connect|list`, which SDK 528 cannot point at the sandbox by override, reaches the sandbox's
Service Networking through the daemon's loopback proxy (sandbox/rltui_sandbox/proxy.py; gcloud_env sets
CLOUDSDK_PROXY_* and the sandbox CA). And the proxy refuses whatever is not the sandbox's.

Few gcloud calls (~0.5-1 s of CPU each): one module-scoped daemon, five calls in all.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

GCLOUD = "/usr/bin/gcloud"
if not Path(GCLOUD).exists() or shutil.which("gcloud") is None:
    pytest.skip("the real Google Cloud SDK is not installed (/usr/bin/gcloud)", allow_module_level=True)

PROJECT = "peer-proj"
RANGE = "google-managed-services-default"


@pytest.fixture(scope="module")
def sbx(tmp_path_factory: pytest.TempPathFactory):
    from rltui_sandbox import manage

    root = Path(tmp_path_factory.mktemp("peer"))
    status = manage.start(root=root, speed=600)
    env = {**os.environ, **manage.gcloud_env(status), "CLOUDSDK_CORE_PROJECT": PROJECT}
    try:
        yield status, env, root
    finally:
        manage.stop(root=root)


def gcloud(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([GCLOUD, *args], env=env, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    return out


def raw(status, request: bytes) -> bytes:
    """One request to the proxy on a plain socket; everything it answers until it closes."""
    host, _, port = status.info["proxy"].rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def test_env_sends_gcloud_through_the_proxy(sbx) -> None:
    status, env, _ = sbx
    assert env["CLOUDSDK_PROXY_TYPE"] == "http"
    assert f"{env['CLOUDSDK_PROXY_ADDRESS']}:{env['CLOUDSDK_PROXY_PORT']}" == status.info["proxy"]
    assert env["CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE"] == status.info["kube_ca"]


def test_connect_then_list_with_the_real_gcloud(sbx) -> None:
    status, env, _ = sbx
    gcloud(env, "services", "enable", "compute.googleapis.com", "servicenetworking.googleapis.com")
    gcloud(env, "compute", "addresses", "create", RANGE, "--global", "--purpose=VPC_PEERING",
           "--prefix-length=16", "--network=default")
    out = gcloud(env, "services", "vpc-peerings", "connect", "--service=servicenetworking.googleapis.com",
                 f"--ranges={RANGE}", "--network=default")
    assert "operations/pssn.p24-" in out.stderr and "finished successfully" in out.stderr
    # As the codelab lists it: no --service, so gcloud asks for `services/-` (every service).
    conns = json.loads(gcloud(env, "services", "vpc-peerings", "list", "--network=default",
                              "--format=json").stdout)
    assert [(c["peering"], c["reservedPeeringRanges"], c["service"]) for c in conns] == [
        ("servicenetworking-googleapis-com", [RANGE], "services/servicenetworking.googleapis.com")]

    with urllib.request.urlopen(status.info["kube_api"] + "/_sandbox/record", timeout=10) as resp:
        calls = json.dumps(json.loads(resp.read()))
    for name in ("servicenetworking:services.connections.create", "servicenetworking:operations.get",
                 "servicenetworking:services.connections.list"):
        assert name in calls


@pytest.mark.parametrize("target", ["example.com:443", "bigquery.googleapis.com:443",
                                    "servicenetworking.googleapis.com:80"])
def test_connect_elsewhere_is_refused(sbx, target: str) -> None:
    status, _, _ = sbx
    answer = raw(status, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert b"reaches only the sandbox's own APIs" in answer


def test_absolute_form_elsewhere_is_refused(sbx) -> None:
    status, _, _ = sbx
    # A loopback port that is not the sandbox's: the proxy must not even connect to it.
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        other.settimeout(0.2)
        port = other.getsockname()[1]
        for url in (f"http://127.0.0.1:{port}/", "http://example.com/", "https://127.0.0.1:443/"):
            answer = raw(status, f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert answer.startswith(b"HTTP/1.1 403 "), (url, answer[:80])
        with pytest.raises(socket.timeout):
            other.accept()


def test_forward_and_malformed(sbx) -> None:
    status, _, root = sbx
    kube = status.info["kube_api"]
    answer = raw(status, f"GET {kube}/version HTTP/1.1\r\nHost: {kube[7:]}\r\n"
                         "Connection: keep-alive\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"\r\nConnection: close" in head
    assert b"gitVersion" in body
    # A chunked body is de-chunked and forwarded with its length.
    sn = status.info["rest"]["servicenetworking"]
    answer = raw(status, f"POST {sn}v1/services/servicenetworking.googleapis.com/connections HTTP/1.1\r\n"
                         "Host: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "2\r\n{}\r\n0\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 400 ") and b"network" in answer  # the API's own refusal
    for bad in (b"GET / HTTP/1.1\r\n\r\n", b"nonsense\r\n\r\n", b"GET http://127.0.0.1:1/ HTTP/1.1\r\nbad\r\n\r\n"):
        assert raw(status, bad).startswith(b"HTTP/1.1 400 "), bad
    assert "Traceback" not in (root / "daemon.log").read_text()
