"""The Box's Kubernetes API is reached as GKE's is: HTTPS with the cluster's CA, a bearer token.

The other modules' clients come from Box.api(); this checks what that client is, and that the
API really turns away a caller without a token (so those tests would notice a lost token).
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from rltui_sandbox.kube.kubeconfig import SANDBOX_TOKEN
from rltui_sandbox.world import region_of


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box()
    box.xpk_cluster(tools.config())
    return box


@pytest.fixture(scope="module")
def cluster(box, tools):
    cfg = tools.config()
    return box.fn(box.world.get_cluster, tools.project, region_of(cfg.zone), cfg.cluster_name)


def _get(url: str, ca_pem: bytes, token: str | None = None) -> tuple[int, dict]:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=ctx,
                                    timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_api_refuses_a_request_without_a_valid_token(box, cluster) -> None:
    ca = base64.b64decode(cluster.master_auth.cluster_ca_certificate)
    url = f"https://{cluster.endpoint}/api/v1/nodes"
    for token in (None, "not-a-token"):
        code, body = _get(url, ca, token)
        assert code == 401
        assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401)
    code, body = _get(url, ca, SANDBOX_TOKEN)  # the kubeconfig's token, for contrast
    assert code == 200 and body["items"]

    # The kubernetes client without a token hears the same.
    bare = client.Configuration(host=f"https://{cluster.endpoint}")
    bare.ssl_ca_cert = box.api().configuration.ssl_ca_cert
    with pytest.raises(ApiException) as info:
        client.CoreV1Api(client.ApiClient(bare)).list_node()
    assert info.value.status == 401 and json.loads(info.value.body)["reason"] == "Unauthorized"


def test_the_tests_client_is_built_from_the_gke_cluster_with_an_adc_token(box, cluster) -> None:
    api = box.api()
    conf = api.configuration
    assert conf.host == f"https://{cluster.endpoint}" == box.kube_server
    # TLS is verified against the cluster's CA (and only it: not the system bundle).
    assert conf.verify_ssl
    assert Path(conf.ssl_ca_cert).read_bytes() == base64.b64decode(cluster.master_auth.cluster_ca_certificate)
    assert Path(conf.ssl_ca_cert).read_bytes() == box.tls.ca_pem
    # The Authorization header is a bearer token the sandbox's token endpoint issued to the ADC
    # file's credentials, not the kubeconfig's fixed one.
    header = conf.auth_settings()["BearerToken"]
    assert header["key"] == "authorization"
    scheme, token = header["value"].split(" ")
    assert scheme == "Bearer" and token != SANDBOX_TOKEN and box.issuer.valid(token)
    assert client.CoreV1Api(api).list_node().items
