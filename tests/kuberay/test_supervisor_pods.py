"""The on-cluster job supervisor's manifests run for real in the sandbox: a Deployment on xpk's
CPU pool whose pod is a LOCAL PROCESS (a stand-in script from a ConfigMap, run with the
sandbox's Python), talking to the HTTPS Kubernetes API with its ServiceAccount token under
least RBAC and to a Service through the address the kubelet rewrote. No Ray head is started:
the "head service" fronts a pretend pod whose port is a local HTTP server.

The module's tests share one sandbox and run in file order.
"""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from rltui.oncluster import supervisor as sup

pytestmark = [pytest.mark.timeout(60, func_only=True)]

RUN = "abc123"
DEPLOY = f"rltui-supervisor-{RUN}"
HEAD_SVC = "ray-a4-gpu-spot-head-svc"
# xpk's only CPU pool is the Toolkit's `system` pool, tainted; the pretend pods tolerate it.
SYSTEM = [{"key": "components.gke.io/gke-managed-components", "operator": "Equal", "value": "true",
           "effect": "NoSchedule"}]
SA_USER = "system:serviceaccount:default:rltui-supervisor"

# Only the standard library, as the real supervisor (the ray image has no kubernetes client).
STAND_IN = r'''
import json, os, ssl, sys, time, urllib.error, urllib.request
sa = os.environ.get("RLTUI_SERVICE_ACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount")
token = open(os.path.join(sa, "token")).read()
ns = open(os.path.join(sa, "namespace")).read()
ctx = ssl.create_default_context(cafile=os.path.join(sa, "ca.crt"))
base = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])

def call(method, path, body=None, ctype="application/json"):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())

def report(what, code, obj):
    print(json.dumps({"what": what, "code": code, "obj": obj}), flush=True)

cm = os.environ["RLTUI_RUN_CONFIGMAP"]
code, obj = call("GET", "/api/v1/namespaces/%s/configmaps/%s" % (ns, cm))
report("get-run", code, obj.get("data", {}).get("state.json"))
code, obj = call("PATCH", "/api/v1/namespaces/%s/configmaps/%s" % (ns, cm),
                 {"data": {"marker": os.environ["HOSTNAME"]}}, "application/merge-patch+json")
report("patch-run", code, obj.get("data", {}).get("marker"))
report("get-code", *call("GET", "/api/v1/namespaces/%s/configmaps/rltui-supervisor-code" % ns))
report("list-secrets", *call("GET", "/api/v1/namespaces/%s/secrets" % ns))
code, obj = call("GET", "/api/v1/namespaces/%s/pods" % ns)
report("list-pods", code, [p["metadata"]["name"] for p in obj.get("items", [])])
with urllib.request.urlopen(os.environ["RAY_ADDRESS"] + "/api/version", timeout=10) as resp:
    report("ray-address", resp.status, {"address": os.environ["RAY_ADDRESS"], "body": resp.read().decode()})
report("env", 0, {"POD_NAMESPACE": os.environ["POD_NAMESPACE"], "argv0": sys.argv[0]})
while True:
    time.sleep(1)
'''


def manifests() -> list[dict]:
    """The manifests rltui submit sends (the brief's exact shape), with the stand-in script."""
    labels = {"app.kubernetes.io/managed-by": "rltui"}
    run_labels = {**labels, "rltui/run": RUN}
    selector = {"app.kubernetes.io/name": "rltui-supervisor", "rltui/run": RUN}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "rltui-supervisor", "namespace": "default", "labels": labels}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "rltui-supervisor", "namespace": "default", "labels": labels},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update", "patch"],
                    "resourceNames": [f"rltui-run-{RUN}"]},
                   {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "rltui-supervisor", "namespace": "default"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rltui-supervisor"},
         "subjects": [{"kind": "ServiceAccount", "name": "rltui-supervisor", "namespace": "default"}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rltui-supervisor-code", "namespace": "default"},
         "data": {"supervisor.py": STAND_IN}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": f"rltui-run-{RUN}", "namespace": "default", "labels": run_labels},
         "data": {"state.json": '{"attempts": 0}', "job.run_nemo_rl.sh": "echo hi\n"}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": DEPLOY, "namespace": "default", "labels": run_labels},
         "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": selector},
                  "template": {"metadata": {"labels": selector}, "spec": {
                      "serviceAccountName": "rltui-supervisor", "terminationGracePeriodSeconds": 10,
                      "tolerations": SYSTEM,
                      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                          "nodeSelectorTerms": [{"matchExpressions": [
                              {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]},
                              {"key": "cloud.google.com/gke-accelerator", "operator": "DoesNotExist"}]}]}}},
                      "containers": [{
                          "name": "supervisor", "image": "rayproject/ray:2.46.0",
                          "command": ["python", "/opt/rltui/supervisor.py"],
                          "env": [{"name": "RLTUI_RUN_CONFIGMAP", "value": f"rltui-run-{RUN}"},
                                  {"name": "RAY_ADDRESS",
                                   "value": f"http://{HEAD_SVC}.default.svc.cluster.local:8265"},
                                  {"name": "POD_NAMESPACE",
                                   "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                          "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
                          "volumeMounts": [{"name": "code", "mountPath": "/opt/rltui", "readOnly": True}]}],
                      "volumes": [{"name": "code", "configMap": {"name": "rltui-supervisor-code"}}]}}}},
    ]


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"server": self.server.tag, "path": self.path}).encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def http_server(tag: str) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    server.tag = tag  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box()
    box.xpk_cluster(tools.config())
    return box


@pytest.fixture(scope="module")
def core(box) -> client.CoreV1Api:
    return client.CoreV1Api(box.api())


@pytest.fixture(scope="module")
def head(box, core, tools):
    """A Service named like KubeRay's head service, in front of a pretend pod whose port 8265
    is a local HTTP server (as the head pod's is the local Ray dashboard)."""
    servers = [http_server("first"), http_server("second")]
    core.create_namespaced_pod("default", {"metadata": {"name": "fake-head", "labels": {"app": "fake-head"}},
                                           "spec": {"tolerations": SYSTEM,
                                                    "containers": [{"name": "c", "image": "busybox:1.36",
                                                                    "ports": [{"containerPort": 8265}]}]}})
    core.create_namespaced_service("default", {"metadata": {"name": HEAD_SVC}, "spec": {
        "selector": {"app": "fake-head"}, "ports": [{"name": "dashboard", "port": 8265}]}})
    tools.wait_for(lambda: core.read_namespaced_pod("fake-head", "default").status.phase == "Running", 10,
                   "the pretend head pod to run")
    box.call(box.store.set_port_target("default", "fake-head", 8265, "127.0.0.1", servers[0].server_port))
    yield servers
    for server in servers:
        server.shutdown()


def kubectl(box, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["kubectl", "--kubeconfig", str(box.kubeconfig), *args], input=stdin,
                          capture_output=True, text=True, timeout=30)


def supervisor_pods(core) -> list:
    return [p for p in core.list_namespaced_pod("default", label_selector=f"rltui/run={RUN}").items
            if p.metadata.deletion_timestamp is None]


def running_pod(core, tools, not_named: str = ""):
    return tools.wait_for(lambda: next((p for p in supervisor_pods(core) if p.metadata.name != not_named
                                        and p.status.phase == "Running"
                                        and (p.status.container_statuses or [None])[0]
                                        and p.status.container_statuses[0].ready), None),
                          15, "a Running, Ready supervisor pod")


def reports(box, pod: str, tools) -> dict:
    """The stand-in's JSON lines from `kubectl logs`, by what it reported."""
    def read() -> dict | None:
        out = kubectl(box, "logs", pod)
        lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        found = {r["what"]: r for r in lines}
        return found if "env" in found else None
    return tools.wait_for(read, 15, f"the stand-in's report in kubectl logs {pod}")


def test_the_manifests_apply_with_kubectl(box, core, head, tools) -> None:
    out = kubectl(box, "apply", "-f", "-", stdin=yaml.safe_dump_all(manifests()))
    assert out.returncode == 0, out.stderr
    assert "deployment.apps/rltui-supervisor-abc123 created" in out.stdout
    assert "role.rbac.authorization.k8s.io/rltui-supervisor created" in out.stdout
    again = kubectl(box, "apply", "-f", "-", stdin=yaml.safe_dump_all(manifests()))  # a strategic-merge no-op
    assert again.returncode == 0 and "deployment.apps/rltui-supervisor-abc123 unchanged" in again.stdout, again
    deploy = client.AppsV1Api(box.api()).read_namespaced_deployment(DEPLOY, "default")
    assert deploy.spec.strategy.type == "Recreate" and deploy.spec.revision_history_limit == 10
    assert deploy.spec.template.spec.containers[0].image_pull_policy == "IfNotPresent"
    assert deploy.spec.template.spec.volumes[0].config_map.default_mode == 420


def test_the_supervisor_runs_as_a_process_on_the_cpu_pool(box, core, head, tools) -> None:
    pod = running_pod(core, tools)
    rs_name = pod.metadata.owner_references[0].name
    assert re.fullmatch(rf"{DEPLOY}-[bcdfghjklmnpqrstvwxz2456789]+", rs_name), rs_name
    assert pod.metadata.name.startswith(rs_name + "-") and len(pod.metadata.name) == len(rs_name) + 6
    assert pod.metadata.labels["pod-template-hash"] == rs_name.rsplit("-", 1)[1]
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels["cloud.google.com/gke-nodepool"] == "system"
    pid = tools.wait_for(lambda: box.controller.process_pids.get(pod.metadata.uid), 5, "the process's PID")
    assert tools.proc_alive(pid) and pid in box.children[-1]

    got = reports(box, pod.metadata.name, tools)
    assert got["get-run"]["code"] == 200 and got["get-run"]["obj"] == '{"attempts": 0}'
    assert got["patch-run"] == {"what": "patch-run", "code": 200, "obj": pod.metadata.name}
    assert core.read_namespaced_config_map(f"rltui-run-{RUN}", "default").data["marker"] == pod.metadata.name
    secrets = got["list-secrets"]
    assert secrets["code"] == 403 and secrets["obj"]["reason"] == "Forbidden"
    assert secrets["obj"]["message"] == (f'secrets is forbidden: User "{SA_USER}" cannot list resource "secrets" '
                                         'in API group "" in the namespace "default"')
    code = got["get-code"]  # resourceNames: the Role names only the run's ConfigMap
    assert code["code"] == 403 and code["obj"]["message"].startswith(
        f'configmaps "rltui-supervisor-code" is forbidden: User "{SA_USER}" cannot get resource "configmaps"')
    assert got["list-pods"]["code"] == 200 and pod.metadata.name in got["list-pods"]["obj"]
    ray = got["ray-address"]
    assert ray["code"] == 200 and json.loads(ray["obj"]["body"]) == {"server": "first", "path": "/api/version"}
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", ray["obj"]["address"])
    assert got["env"]["obj"]["POD_NAMESPACE"] == "default"
    assert got["env"]["obj"]["argv0"].endswith("/volumes/code/supervisor.py")

    # The forwarder resolves the Service per connection: a new endpoint behind the same address.
    box.call(box.store.set_port_target("default", "fake-head", 8265, "127.0.0.1", head[1].server_port))
    with urllib.request.urlopen(ray["obj"]["address"] + "/x", timeout=10) as resp:
        assert json.loads(resp.read())["server"] == "second"


def test_rbac_answers_can_i_for_the_service_account(box) -> None:
    def can_i(*args: str) -> str:
        out = kubectl(box, "auth", "can-i", f"--as={SA_USER}", *args)
        assert out.stdout.strip() in ("yes", "no"), out
        return out.stdout.strip()
    assert can_i("list", "secrets") == "no"
    assert can_i("watch", "pods") == "yes"
    assert can_i("patch", f"configmaps/rltui-run-{RUN}") == "yes"
    assert can_i("list", "configmaps") == "no"  # resourceNames cannot allow a list without a name
    assert can_i("get", "rayclusters.ray.io") == "yes"
    assert kubectl(box, "auth", "can-i", "list", "secrets").stdout.strip() == "yes"  # the owner


class CountingKube(sup.Kube):
    """The supervisor's own in-cluster client, noting each request it sends (method, path, query)."""

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env)
        self.sent: list[tuple[str, str, dict[str, str]]] = []

    def _request(self, method: str, path: str, body: object = None,
                 content_type: str = "application/json") -> urllib.request.Request:
        url = urllib.parse.urlsplit(path)
        self.sent.append((method, url.path, dict(urllib.parse.parse_qsl(url.query))))
        return super()._request(method, path, body, content_type)

    def pod_calls(self) -> list[dict[str, str]]:
        return [q for m, path, q in self.sent if m == "GET" and path == "/api/v1/namespaces/default/pods"]


def _ray_pod(core, name: str, cluster: str = "watched") -> None:
    core.create_namespaced_pod("default", {"metadata": {"name": name, "labels": {"ray.io/cluster": cluster}},
                                           "spec": {"tolerations": SYSTEM,
                                                    "containers": [{"name": "c", "image": "busybox:1.36"}]}})


def test_the_supervisor_follows_its_pods_with_one_list_then_watches(box, core, tmp_path: Path) -> None:
    """The real supervisor's PodWatch, as the ServiceAccount (a token from the TokenRequest API):
    one LIST, then watches resumed from the last resourceVersion, which see what changed while no
    watch was open; a resourceVersion the history no longer holds (410) lists once again."""
    token = core.create_namespaced_service_account_token("rltui-supervisor", "default", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": []}})
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(token.status.token)
    (sa / "ca.crt").write_bytes(box.tls.ca_pem)
    (sa / "namespace").write_text("default")
    host, port = box.kube_endpoint.rsplit(":", 1)
    kube = CountingKube({"RLTUI_SERVICE_ACCOUNT_DIR": str(sa), "KUBERNETES_SERVICE_HOST": host,
                         "KUBERNETES_SERVICE_PORT": port})
    _ray_pod(core, "w-head")
    _ray_pod(core, "w-worker-0")
    _ray_pod(core, "elsewhere", cluster="other")

    def names() -> set[str]:
        return {p["metadata"]["name"] for p in kube.ray_pods("watched")}

    assert names() == {"w-head", "w-worker-0"}
    listed = kube.pod_calls()
    assert [q.get("watch") for q in listed] == [None]  # the one LIST
    list_rv = kube.pod_watch.rv if kube.pod_watch else ""
    assert list_rv

    # Changes while no watch is open: the next one, from the LIST's resourceVersion, brings them.
    core.delete_namespaced_pod("w-worker-0", "default", grace_period_seconds=0)
    _ray_pod(core, "w-worker-1")
    # ... and one during the watch, streamed as it happens.
    timer = threading.Timer(0.3, _ray_pod, (core, "w-worker-2"))
    timer.start()
    t0 = time.monotonic()
    kube.follow(1.0)  # the sandbox's poll (at least a second): one watch of timeoutSeconds=1
    timer.join()
    assert 0.9 < time.monotonic() - t0 < 4
    assert names() == {"w-head", "w-worker-1", "w-worker-2"}
    watches = kube.pod_calls()[1:]
    assert watches and all(q["watch"] == "1" and q["allowWatchBookmarks"] == "true" for q in watches)
    assert watches[0]["resourceVersion"] == list_rv and watches[0]["timeoutSeconds"] == "1"
    assert [q for q in kube.pod_calls() if "watch" not in q] == [listed[0]]  # no LIST since
    # A BOOKMARK (the sandbox sends one every 0.3 s here) carried the store's newest version.
    assert int(kube.pod_watch.rv) >= int(box.fn(lambda: box.store.resource_version)) - 2

    # Past the history (1000 events) while no watch is open: 410, one LIST, then watching again.
    async def churn() -> None:
        await box.store.create("configmaps", {"metadata": {"name": "churn"}, "data": {"n": "0"}}, "default")
        for n in range(1001):
            await box.store.patch("configmaps", "churn", {"data": {"n": str(n)}}, "default")
    box.call(churn(), timeout=30)
    _ray_pod(core, "w-worker-3")
    before = len(kube.pod_calls())
    kube.follow(1.0)
    after = kube.pod_calls()[before:]
    assert [q.get("watch") for q in after][:3] == ["1", None, "1"]  # the 410, the LIST, the watch
    assert names() == {"w-head", "w-worker-1", "w-worker-2", "w-worker-3"}
    assert len(kube.pod_calls()) == before + len(after)  # names() used the cache
    for name in ("w-head", "w-worker-1", "w-worker-2", "w-worker-3", "elsewhere"):
        core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    core.delete_namespaced_config_map("churn", "default")


def test_deployment_status_is_what_the_controller_writes(box, core, tools) -> None:
    apps = client.AppsV1Api(box.api())
    deploy = tools.wait_for(lambda: (d := apps.read_namespaced_deployment(DEPLOY, "default")).status.available_replicas
                            == 1 and d, 10, "the Deployment to be available")
    st = deploy.status
    assert (st.replicas, st.ready_replicas, st.updated_replicas, st.observed_generation) == (1, 1, 1, 1)
    conds = {c.type: (c.status, c.reason) for c in st.conditions}
    assert conds == {"Available": ("True", "MinimumReplicasAvailable"), "Progressing": ("True", "NewReplicaSetAvailable")}
    assert deploy.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    out = kubectl(box, "get", "deploy", DEPLOY, "--no-headers")
    assert out.stdout.split()[:4] == [DEPLOY, "1/1", "1", "1"], out


def test_a_deleted_pod_is_replaced(box, core, tools) -> None:
    old = running_pod(core, tools)
    old_pid = box.controller.process_pids[old.metadata.uid]
    core.delete_namespaced_pod(old.metadata.name, "default")
    new = running_pod(core, tools, not_named=old.metadata.name)
    tools.wait_for(lambda: not tools.proc_alive(old_pid), 15, "the old process to end (SIGTERM)")
    new_pid = tools.wait_for(lambda: box.controller.process_pids.get(new.metadata.uid), 5, "the new PID")
    assert new_pid != old_pid and tools.proc_alive(new_pid)
    rs = new.metadata.owner_references[0].name
    created = [e.message for e in tools.events_for(core, rs) if e.reason == "SuccessfulCreate"]
    assert created == [f"Created pod: {old.metadata.name}", f"Created pod: {new.metadata.name}"]
    assert reports(box, new.metadata.name, tools)["patch-run"]["code"] == 200


def test_a_changed_template_is_recreated(box, core, tools) -> None:
    old = running_pod(core, tools)
    old_pid = box.controller.process_pids[old.metadata.uid]
    old_rs = old.metadata.owner_references[0].name
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "supervisor", "env": [
        {"name": "RLTUI_RUN_CONFIGMAP", "value": f"rltui-run-{RUN}"}, {"name": "EXTRA", "value": "1"}]}]}}}}
    out = kubectl(box, "patch", "deployment", DEPLOY, "--type=strategic", "-p", json.dumps(patch))
    assert out.returncode == 0, out.stderr
    new = running_pod(core, tools, not_named=old.metadata.name)
    new_rs = new.metadata.owner_references[0].name
    assert new_rs != old_rs and not tools.proc_alive(old_pid)
    env = {e.name for e in new.spec.containers[0].env}
    assert env == {"RLTUI_RUN_CONFIGMAP", "RAY_ADDRESS", "POD_NAMESPACE", "EXTRA"}  # merged by name
    scaling = [e.message for e in tools.events_for(core, DEPLOY) if e.reason == "ScalingReplicaSet"]
    # Recreate: the old ReplicaSet is down (its pod gone) before the new one is scaled up.
    assert scaling[-2:] == [f"Scaled down replica set {old_rs} from 1 to 0", f"Scaled up replica set {new_rs} from 0 to 1"]
    deploy = client.AppsV1Api(box.api()).read_namespaced_deployment(DEPLOY, "default")
    assert deploy.metadata.annotations["deployment.kubernetes.io/revision"] == "2"


def test_deleting_the_deployment_stops_the_process(box, core, tools) -> None:
    pod = running_pod(core, tools)
    pid = box.controller.process_pids[pod.metadata.uid]
    client.AppsV1Api(box.api()).delete_namespaced_deployment(DEPLOY, "default")
    tools.wait_for(lambda: not tools.proc_alive(pid), 15, "the supervisor process to be stopped")
    apps = client.AppsV1Api(box.api())
    tools.wait_for(lambda: not core.list_namespaced_pod("default", label_selector=f"rltui/run={RUN}").items, 15,
                   "the supervisor pod to go")
    assert apps.list_namespaced_replica_set("default").items == []
    tools.wait_for(lambda: pid not in box.children[-1], 5, "the PID to leave on_children")


def test_a_crashing_script_restarts_with_back_off(box, core, tools) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "crash"}, "data": {
        "crash.py": "import sys\nprint('crashing', flush=True)\nsys.exit(3)\n"}})
    core.create_namespaced_pod("default", {"metadata": {"name": "crasher"}, "spec": {
        "tolerations": SYSTEM, "containers": [{"name": "c", "image": "rayproject/ray:2.46.0", "command": ["python3", "-u", "/code/crash.py"],
                        "volumeMounts": [{"name": "code", "mountPath": "/code"}]}],
        "volumes": [{"name": "code", "configMap": {"name": "crash"}}]}})

    def backing_off():
        st = (core.read_namespaced_pod("crasher", "default").status.container_statuses or [None])[0]
        return st and st.state.waiting and st.state.waiting.reason == "CrashLoopBackOff" and st
    st = tools.wait_for(backing_off, 10, "CrashLoopBackOff")
    assert st.restart_count == 2 and st.last_state.terminated.exit_code == 3
    assert st.state.waiting.message.startswith("back-off 10s restarting failed container=c pod=crasher_default(")
    assert kubectl(box, "logs", "crasher").stdout == "crashing\n" * 2
    core.delete_namespaced_pod("crasher", "default")


def test_required_node_affinity_that_no_node_meets(core, tools) -> None:
    core.create_namespaced_pod("default", {"metadata": {"name": "nowhere"}, "spec": {
        "containers": [{"name": "c", "image": "busybox:1.36"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["nope"]}]}]}}}}})
    pod = tools.wait_for(lambda: (p := core.read_namespaced_pod("nowhere", "default")).status.conditions and p,
                         5, "the scheduler's verdict")
    assert pod.status.conditions[0].message == \
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    core.delete_namespaced_pod("nowhere", "default")


def test_a_pod_naming_a_missing_service_account_is_refused(core) -> None:
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("default", {"metadata": {"generateName": "x-"}, "spec": {
            "serviceAccountName": "ghost", "containers": [{"name": "c", "image": "busybox:1.36"}]}})
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"] == ('pods "x-" is forbidden: error looking up service account '
                                                         'default/ghost: serviceaccount "ghost" not found')


# ---- Secret volumes of a process pod (the supervisor's NOTIFY_WEBHOOK) -----------------------------

READ_SECRET = r'''
import os, sys, time
path = os.environ["NOTIFY_FILE"]
folder = os.path.dirname(path)
print("ls", sorted(n for n in os.listdir(folder) if not n.startswith("..")) if os.path.isdir(folder) else None,
      flush=True)
print("read", open(path).read() if os.path.exists(path) else None, flush=True)
while True:
    time.sleep(1)
'''


def _secret_pod(core, name: str, volume: dict) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": f"{name}-code"},
                                                  "data": {"read.py": READ_SECRET}})
    core.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {
        "tolerations": SYSTEM, "containers": [{
            "name": "c", "image": "rayproject/ray:2.46.0", "command": ["python", "-u", "/code/read.py"],
            "env": [{"name": "NOTIFY_FILE", "value": "/var/run/secrets/rltui-notify/NOTIFY_WEBHOOK"}],
            "volumeMounts": [{"name": "code", "mountPath": "/code"},
                             {"name": "notify", "mountPath": "/var/run/secrets/rltui-notify", "readOnly": True}]}],
        "volumes": [{"name": "code", "configMap": {"name": f"{name}-code"}}, {"name": "notify", "secret": volume}]}})


def _pod_lines(box, name: str, tools) -> list[str]:
    return tools.wait_for(lambda: (out := kubectl(box, "logs", name).stdout).count("\n") >= 2
                          and out.splitlines(), 15, f"{name}'s two lines")


def test_a_process_pod_gets_its_secret_volume_with_only_the_items_named(box, core, tools) -> None:
    """The supervisor reads NOTIFY_WEBHOOK from a Secret file: projected for a process pod as the
    kubelet projects it (`items`: that key alone), the env's path rewritten to the pod's folder."""
    core.create_namespaced_secret("default", {"metadata": {"name": "notify"}, "stringData": {
        "NOTIFY_WEBHOOK": "https://hooks.example.com/x", "OTHER": "not mounted"}})
    _secret_pod(core, "reads-secret", {"secretName": "notify", "optional": True,
                                       "items": [{"key": "NOTIFY_WEBHOOK", "path": "NOTIFY_WEBHOOK"}]})
    assert _pod_lines(box, "reads-secret", tools) == ["ls ['NOTIFY_WEBHOOK']", "read https://hooks.example.com/x"]
    # optional, and no such Secret: the pod runs with an empty folder (no NOTIFY_WEBHOOK: no posts).
    _secret_pod(core, "no-secret", {"secretName": "absent", "optional": True,
                                    "items": [{"key": "NOTIFY_WEBHOOK", "path": "NOTIFY_WEBHOOK"}]})
    assert _pod_lines(box, "no-secret", tools)[1] == "read None"
    for name in ("reads-secret", "no-secret"):
        core.delete_namespaced_pod(name, "default")


def test_a_secret_volume_that_cannot_be_set_up_keeps_the_pod_creating(box, core, tools) -> None:
    """Not optional: a missing Secret, or a key `items` names that it lacks, is the kubelet's
    FailedMount, and the container never starts."""
    _secret_pod(core, "needs-secret", {"secretName": "nowhere"})
    _secret_pod(core, "needs-key", {"secretName": "notify", "items": [{"key": "MISSING", "path": "x"}]})
    for name, says in (("needs-secret", 'MountVolume.SetUp failed for volume "notify" : secret "nowhere" not found'),
                       ("needs-key", 'MountVolume.SetUp failed for volume "notify" : references non-existent '
                                     "secret key: MISSING")):
        tools.wait_for(lambda n=name, s=says: any(e.reason == "FailedMount" and e.message == s
                                                  for e in tools.events_for(core, n)), 10, f"{name}'s FailedMount")
        pod = core.read_namespaced_pod(name, "default")
        assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
        assert kubectl(box, "logs", name).stdout == ""
    core.create_namespaced_secret("default", {"metadata": {"name": "nowhere"}, "stringData": {"k": "v"}})
    tools.wait_for(lambda: core.read_namespaced_pod("needs-secret", "default").status.phase == "Running", 15,
                   "the pod to start once its Secret exists")
    for name in ("needs-secret", "needs-key"):
        core.delete_namespaced_pod(name, "default")
