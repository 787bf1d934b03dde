"""A Kubernetes client built as one is built for GKE, outside rltui: official libraries only.

Usage: python outside_kube.py STATUS_JSON_FILE PROJECT LOCATION CLUSTER
The GKE cluster's `endpoint` and `master_auth.cluster_ca_certificate` from the ClusterManager,
a token refreshed from the status' `adc` file (google.auth.load_credentials_from_file, as any
ADC user would), then: list pods over HTTPS; no token, a bad token, an untrusted CA are refused.
Prints one line per check; exits non-zero at the first surprise.
"""

import base64
import json
import ssl
import sys
import tempfile
import warnings

import google.auth
import grpc
import kubernetes
import urllib3
from google.auth.transport.requests import Request
from google.cloud import container_v1
from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport

status = json.load(open(sys.argv[1]))
project, location, name = sys.argv[2:5]


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


gke = container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(
    channel=grpc.insecure_channel(status["grpc"])))
cluster = gke.get_cluster(name=f"projects/{project}/locations/{location}/clusters/{name}")
ca_pem = base64.b64decode(cluster.master_auth.cluster_ca_certificate)
check(f"cluster endpoint {cluster.endpoint}, CA {len(ca_pem)} bytes of PEM",
      cluster.endpoint.startswith("127.0.0.1:") and ca_pem.startswith(b"-----BEGIN CERTIFICATE-----"))
check("the CA is the status' kube_ca", ca_pem == open(status["kube_ca"], "rb").read())

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # google-auth 2.63 deprecates the generic loader
    creds, _ = google.auth.load_credentials_from_file(
        status["adc"], scopes=["https://www.googleapis.com/auth/cloud-platform"])
creds.refresh(Request())
check(f"ADC refreshed: token expires {creds.expiry:%H:%M} UTC", bool(creds.token) and creds.valid)

ca_file = tempfile.NamedTemporaryFile(suffix=".pem", delete=False)
ca_file.write(ca_pem)
ca_file.close()


def client(token=None, ca=ca_file.name):
    cfg = kubernetes.client.Configuration()
    cfg.host = f"https://{cluster.endpoint}"
    cfg.ssl_ca_cert = ca
    if token is not None:
        cfg.api_key = {"BearerToken": token}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(cfg))


pods = client(creds.token).list_namespaced_pod("default")
check(f"pods listed over https with the ADC token: {len(pods.items)}", pods.kind == "PodList")

for label, token in (("no token", None), ("a made-up token", "ya29.not-a-sandbox-token")):
    try:
        client(token).list_namespaced_pod("default")
        check(f"{label} accepted", False)
    except kubernetes.client.ApiException as exc:
        body = json.loads(exc.body)
        check(f"{label} -> {exc.status} {body.get('reason')}", exc.status == 401
              and body.get("kind") == "Status" and body.get("reason") == "Unauthorized")

try:
    client(creds.token, ca=None).list_namespaced_pod("default")  # the system roots only
    check("the sandbox CA is not needed", False)
except urllib3.exceptions.MaxRetryError as exc:
    check(f"without the cluster CA: {type(exc.reason).__name__}",
          isinstance(exc.reason, urllib3.exceptions.SSLError) or isinstance(exc.reason, ssl.SSLError))
print("all checks passed")
