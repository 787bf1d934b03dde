"""Workload Identity in the sandbox, as rltui's budget guard meets it: the Cluster Toolkit cluster
xpk makes has a workload pool and its pools run the GKE metadata server; a process pod on the
system pool runs google-auth's own `compute_engine.Credentials().refresh(Request())` (in the
Ray image's Python, the env the kubelet gives it) and gets what GKE's docs say: GKE's error until
the Google service account's policy lets the Kubernetes ServiceAccount act as it, then that
account's token and email; GKE then refuses nodePools.delete with that token (403
IAM_PERMISSION_DENIED) until a role granting it is bound on the project. The account and both
policies are made over the IAM and Resource Manager REST APIs with rltui's transport
(AuthorizedSession over the sandbox's ADC).

The module's tests share one sandbox and run in file order.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from google.api_core import exceptions as gexc
from google.auth.transport.requests import AuthorizedSession
from google.cloud import container_v1
from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport
import grpc
from kubernetes import client

from rltui.cloud.endpoints import Endpoints
from rltui_sandbox.world import region_of
from tests import harness

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120, func_only=True)]

KSA = "rltui-supervisor"
GSA_ID = "rltui-guard-test"
SYSTEM = [{"key": "components.gke.io/gke-managed-components", "operator": "Equal", "value": "true",
           "effect": "NoSchedule"}]

# What the guard does, in the Ray image's Python: google-auth unmodified, the metadata server from
# the environment the kubelet gave the process.
PROBE = r'''
import json, os
from google.auth import compute_engine, exceptions
from google.auth.transport.requests import AuthorizedSession, Request
out = {"host": os.environ.get("GCE_METADATA_HOST"), "ip": os.environ.get("GCE_METADATA_IP")}
creds = compute_engine.Credentials()
try:
    creds.refresh(Request())
except exceptions.RefreshError as exc:
    out["refresh_error"] = str(exc)
else:
    out["email"] = creds.service_account_email
    answer = AuthorizedSession(creds).request(os.environ["PROBE_METHOD"], os.environ["PROBE_URL"], timeout=20)
    out["answer"] = [answer.status_code, answer.json()]
print("PROBE " + json.dumps(out), flush=True)
'''


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box()
    box.xpk_cluster(tools.config())
    return box


@pytest.fixture(scope="module")
def urls(box) -> dict[str, str]:
    """The REST APIs (container, iam, cloudresourcemanager, ...) over the box's World."""
    return box.lt.enter(harness.rest_sites(box.world))


@pytest.fixture(scope="module")
def grpc_target(box) -> str:
    return box.lt.enter(harness.grpc_server(box.world, ["container"]))


@pytest.fixture(scope="module")
def owner(box) -> AuthorizedSession:
    """rltui's own session: the sandbox's ADC (the project's owner)."""
    return AuthorizedSession(Endpoints(label="SANDBOX", adc_file=box.adc).credentials())


@pytest.fixture(scope="module")
def where(box, tools) -> dict[str, str]:
    cfg = tools.config()
    region = region_of(cfg.zone)
    pools = box.fn(box.world.list_node_pools, tools.project, region, cfg.cluster_name)
    gpu = next(p.name for p in pools if p.config.accelerators)
    return {"project": tools.project, "region": region, "cluster": cfg.cluster_name, "gpu_pool": gpu,
            "gsa": f"{GSA_ID}@{tools.project}.iam.gserviceaccount.com"}


@pytest.fixture(scope="module")
def core(box) -> client.CoreV1Api:
    return client.CoreV1Api(box.api())


def cluster_url(urls, where, tail: str = "") -> str:
    return (f"{urls['container']}v1/projects/{where['project']}/locations/{where['region']}/clusters/"
            f"{where['cluster']}{tail}")


def probe(box, core, tools, name: str, method: str, url: str, ksa: str = KSA) -> dict:
    """Run PROBE in a process pod of `ksa` on the system pool; what it printed."""
    core.create_namespaced_config_map("default", {"metadata": {"name": name}, "data": {"probe.py": PROBE}})
    core.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {
        "serviceAccountName": ksa, "restartPolicy": "Never", "tolerations": SYSTEM,
        "containers": [{"name": "probe", "image": "rayproject/ray:2.46.0", "command": ["python", "/opt/probe/probe.py"],
                        "env": [{"name": "PROBE_METHOD", "value": method}, {"name": "PROBE_URL", "value": url}],
                        "volumeMounts": [{"name": "code", "mountPath": "/opt/probe"}]}],
        "volumes": [{"name": "code", "configMap": {"name": name}}]}})

    def printed() -> dict | None:
        if core.read_namespaced_pod(name, "default").status.phase not in ("Succeeded", "Failed"):
            return None
        log = core.read_namespaced_pod_log(name, "default")
        line = next((ln for ln in log.splitlines() if ln.startswith("PROBE ")), None)
        assert line is not None, log
        return json.loads(line.removeprefix("PROBE "))
    return tools.wait_for(printed, 60, f"pod {name}'s probe")


def metadata(host: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(f"http://{host}/computeMetadata/v1/{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def set_member(session: AuthorizedSession, base: str, role: str, member: str, body_for_get: dict | None = None) -> dict:
    """getIamPolicy, add `member` to `role`, setIamPolicy with the etag read."""
    policy = session.post(f"{base}:getIamPolicy", json=body_for_get or {}, timeout=20).json()
    policy.setdefault("bindings", []).append({"role": role, "members": [member]})
    answer = session.post(f"{base}:setIamPolicy", json={"policy": policy}, timeout=20)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_toolkit_cluster_has_workload_identity(owner, urls, where) -> None:
    cluster = owner.get(cluster_url(urls, where), timeout=20).json()
    assert cluster["workloadIdentityConfig"] == {"workloadPool": f"{where['project']}.svc.id.goog"}
    modes = {p["name"]: p["config"]["workloadMetadataConfig"]["mode"] for p in cluster["nodePools"]}
    assert modes == {"system": "GKE_METADATA", where["gpu_pool"]: "GKE_METADATA"}


def test_without_the_binding_the_token_is_refused_as_gke_does(box, core, tools, owner, urls, where) -> None:
    made = owner.post(f"{urls['iam']}v1/projects/{where['project']}/serviceAccounts", timeout=20,
                      json={"accountId": GSA_ID, "serviceAccount": {"displayName": "budget guard"}})
    assert made.status_code == 200 and made.json()["email"] == where["gsa"], made.text
    core.create_namespaced_service_account("default", {"metadata": {
        "name": KSA, "annotations": {"iam.gke.io/gcp-service-account": where["gsa"]}}})

    got = probe(box, core, tools, "probe-unbound", "GET", cluster_url(urls, where))
    assert got["host"] == got["ip"] and got["host"].startswith("127.0.0.1:")
    assert "Status: 403" in got["refresh_error"], got
    assert "This error could be caused by a missing IAM policy binding on the target IAM service account" \
        in got["refresh_error"]
    # GKE's server names the linked account before it can get its token.
    assert metadata(got["host"], "instance/service-accounts/default/email", {"Metadata-Flavor": "Google"}) == \
        (200, where["gsa"])


def test_the_metadata_server_wants_the_flavor_header(box, core, tools, urls, where) -> None:
    host = probe(box, core, tools, "probe-header", "GET", cluster_url(urls, where))["host"]
    status, body = metadata(host, "instance/service-accounts/default/token")
    assert (status, body) == (403, 'GKE Metadata Server encountered an error: Missing required header '
                                   '"Metadata-Flavor": "Google"')
    assert metadata(host, "project/project-id", {"Metadata-Flavor": "Google"}) == (200, where["project"])


def test_bound_the_pod_gets_the_accounts_token_and_gke_refuses_it_without_a_role(
        box, core, tools, owner, urls, grpc_target, where) -> None:
    account = f"{urls['iam']}v1/projects/{where['project']}/serviceAccounts/{where['gsa']}"
    set_member(owner, account, "roles/iam.workloadIdentityUser",
               f"serviceAccount:{where['project']}.svc.id.goog[default/{KSA}]")

    delete = cluster_url(urls, where, f"/nodePools/{where['gpu_pool']}")
    got = probe(box, core, tools, "probe-bound", "DELETE", delete)
    assert got["email"] == where["gsa"], got
    status, body = got["answer"]
    assert status == 403 and body["error"]["status"] == "PERMISSION_DENIED", body
    info = body["error"]["details"][0]
    assert (info["reason"], info["domain"]) == ("IAM_PERMISSION_DENIED", "container.googleapis.com")
    assert body["error"]["message"] == (f'Required "container.clusters.update" permission(s) for '
                                        f'"projects/{where["project"]}/locations/{where["region"]}/clusters/'
                                        f'{where["cluster"]}".')
    assert body["error"]["errors"][0]["reason"] == "forbidden"

    # The same token over gRPC, as google-cloud-container sends it.
    _, token = metadata(got["host"], "instance/service-accounts/default/token", {"Metadata-Flavor": "Google"})
    gke = container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(
        channel=grpc.insecure_channel(grpc_target)))
    name = f"projects/{where['project']}/locations/{where['region']}/clusters/{where['cluster']}"
    with pytest.raises(gexc.PermissionDenied) as refused:
        gke.delete_node_pool(name=f"{name}/nodePools/{where['gpu_pool']}",
                             metadata=[("authorization", f"Bearer {json.loads(token)['access_token']}")])
    assert refused.value.reason == "IAM_PERMISSION_DENIED"
    assert box.fn(box.world.get_node_pool, where["project"], where["region"], where["cluster"], where["gpu_pool"])


def test_with_cluster_admin_on_the_project_the_pod_deletes_the_gpu_pool(box, core, tools, owner, urls, where) -> None:
    set_member(owner, f"{urls['cloudresourcemanager']}v1/projects/{where['project']}", "roles/container.clusterAdmin",
               f"serviceAccount:{where['gsa']}", {"options": {"requestedPolicyVersion": 3}})
    # GKE's own upgrade right after xpk's create holds the cluster for a while (world_gke).
    box.call(box.world.wait_cluster_idle(where["project"], where["region"], where["cluster"]), timeout=30)
    got = probe(box, core, tools, "probe-admin", "DELETE", cluster_url(urls, where, f"/nodePools/{where['gpu_pool']}"))
    status, body = got["answer"]
    assert status == 200 and body["operationType"] == "DELETE_NODE_POOL", body
    box.call(box.world.wait_cluster_idle(where["project"], where["region"], where["cluster"]), timeout=30)
    names = [p.name for p in box.fn(box.world.list_node_pools, where["project"], where["region"], where["cluster"])]
    assert names == ["system"]


def test_an_unlinked_service_account_is_its_own_principal(box, core, tools, owner, urls, where) -> None:
    core.create_namespaced_service_account("default", {"metadata": {"name": "plain"}})
    got = probe(box, core, tools, "probe-plain", "GET", cluster_url(urls, where), ksa="plain")
    assert got["email"] == f"{where['project']}.svc.id.goog"
    assert got["answer"][0] == 403, got
    number = owner.get(f"{urls['cloudresourcemanager']}v1/projects/{where['project']}", timeout=20).json()["projectNumber"]
    principal = (f"principal://iam.googleapis.com/projects/{number}/locations/global/workloadIdentityPools/"
                 f"{where['project']}.svc.id.goog/subject/ns/default/sa/plain")
    set_member(owner, f"{urls['cloudresourcemanager']}v1/projects/{where['project']}",
               "roles/container.clusterViewer", principal)
    again = probe(box, core, tools, "probe-plain-viewer", "GET", cluster_url(urls, where), ksa="plain")
    assert again["answer"][0] == 200 and again["answer"][1]["name"] == where["cluster"], again


def test_no_metadata_server_for_a_pod_that_ends(box, core, tools, urls, where) -> None:
    host = probe(box, core, tools, "probe-gone", "GET", cluster_url(urls, where))["host"]
    core.delete_namespaced_pod("probe-gone", "default", grace_period_seconds=0)
    tools.wait_for(lambda: _refused(host), 15, "the deleted pod's metadata address to stop answering")


def _refused(host: str) -> bool:
    try:
        metadata(host, "project/project-id", {"Metadata-Flavor": "Google"})
    except (urllib.error.URLError, ConnectionError, OSError):
        return True
    return False

