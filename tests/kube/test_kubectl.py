"""kubectl 1.32 against the fake API server: the codelab's own commands, unchanged."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
import yaml

DATA = Path(__file__).parent / "data"
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

Run = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def kubectl(server, tmp_path: Path) -> Run:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    base = [KUBECTL, "--kubeconfig", str(server.kubeconfig), "--cache-dir", str(tmp_path / "cache")]

    def run(*args: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
        done = subprocess.run([*base, *args], env=env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done
    run.base = base  # type: ignore[attr-defined]
    run.env = env  # type: ignore[attr-defined]
    return run


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines() if line.strip()]


def test_apply_volume_twice_binds_and_then_reports_unchanged(kubectl: Run) -> None:
    volume = str(DATA / "rl-lustre-volume.yaml")
    assert kubectl("apply", "-f", volume).stdout.splitlines() == [
        "persistentvolume/rl-demo-gpu-lustre-pv created",
        "persistentvolumeclaim/rl-demo-gpu-lustre-pvc created"]
    assert kubectl("apply", "-f", volume).stdout.splitlines() == [
        "persistentvolume/rl-demo-gpu-lustre-pv unchanged",
        "persistentvolumeclaim/rl-demo-gpu-lustre-pvc unchanged"]
    rows = _rows(kubectl("get", "pv,pvc").stdout)
    pv_row = next(r for r in rows if r[0] == "persistentvolume/rl-demo-gpu-lustre-pv")
    pvc_row = next(r for r in rows if r[0] == "persistentvolumeclaim/rl-demo-gpu-lustre-pvc")
    assert pv_row[1:6] == ["9000Gi", "RWX", "Retain", "Bound", "default/rl-demo-gpu-lustre-pvc"]
    assert pvc_row[1:5] == ["Bound", "rl-demo-gpu-lustre-pv", "9000Gi", "RWX"]
    assert kubectl("delete", "-f", volume).stdout.splitlines() == [
        'persistentvolume "rl-demo-gpu-lustre-pv" deleted',
        'persistentvolumeclaim "rl-demo-gpu-lustre-pvc" deleted']
    assert "No resources found" in kubectl("get", "pv").stderr


def test_apply_raycluster_get_yaml_and_reapply_a_change(kubectl: Run, tmp_path: Path) -> None:
    manifest = DATA / "ray-cluster.yaml"
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "raycluster.ray.io/ray-a4-gpu-spot created"
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "raycluster.ray.io/ray-a4-gpu-spot unchanged"
    assert _rows(kubectl("get", "rayclusters").stdout)[1][0] == "ray-a4-gpu-spot"
    live = yaml.safe_load(kubectl("get", "raycluster", "ray-a4-gpu-spot", "-o", "yaml").stdout)
    assert live["spec"]["rayVersion"] == "2.54.0"
    assert live["spec"]["workerGroupSpecs"][0]["replicas"] == 8
    assert "kubectl.kubernetes.io/last-applied-configuration" in live["metadata"]["annotations"]
    changed = tmp_path / "ray-cluster.yaml"
    changed.write_text(manifest.read_text().replace("replicas: 8", "replicas: 4"))
    assert kubectl("apply", "-f", str(changed)).stdout.strip() == "raycluster.ray.io/ray-a4-gpu-spot configured"
    live = yaml.safe_load(kubectl("get", "raycluster", "ray-a4-gpu-spot", "-o", "yaml").stdout)
    assert (live["spec"]["workerGroupSpecs"][0]["replicas"], live["metadata"]["generation"]) == (4, 2)
    assert kubectl("delete", "-f", str(changed)).stdout.strip() == 'raycluster.ray.io "ray-a4-gpu-spot" deleted'


def test_get_pods_describe_and_errors(server, kubectl: Run, pod_manifest, running) -> None:
    assert "No resources found in default namespace." in kubectl("get", "pods").stderr
    pod = server.call(server.store.create("pods", pod_manifest("ray-a4-gpu-spot-head-7xk2p")))
    server.call(server.store.patch_status("pods", "ray-a4-gpu-spot-head-7xk2p", running))
    server.call(server.store.create("events", {
        "metadata": {"name": "ray-a4-gpu-spot-head-7xk2p.1"}, "type": "Normal", "reason": "Pulled",
        "message": "Container image already present on machine", "count": 1,
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "ray-a4-gpu-spot-head-7xk2p",
                           "uid": pod["metadata"]["uid"]}, "source": {"component": "kubelet"}}))
    header, row = _rows(kubectl("get", "pods").stdout)
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row[:4] == ["ray-a4-gpu-spot-head-7xk2p", "1/1", "Running", "0"]
    described = kubectl("describe", "pod", "ray-a4-gpu-spot-head-7xk2p").stdout
    assert re.search(r"^Status:\s+Running$", described, re.M)
    assert re.search(r"Normal\s+Pulled\s+\d+s\s+kubelet\s+Container image already present on machine", described)
    missing = kubectl("get", "pod", "nope", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'Error from server (NotFound): pods "nope" not found'


def test_get_pods_watch_prints_a_change(server, kubectl: Run, pod_manifest, running) -> None:
    server.call(server.store.create("pods", pod_manifest("ray-a4-gpu-spot-head")))
    proc = subprocess.Popen([*kubectl.base, "get", "pods", "-w"], env=kubectl.env,  # type: ignore[attr-defined]
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 10
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.call(server.store.patch_status("pods", "ray-a4-gpu-spot-head", running))
        while len(lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(5)
    assert [line.split()[:3] for line in lines] == [
        ["NAME", "READY", "STATUS"], ["ray-a4-gpu-spot-head", "0/1", "Pending"],
        ["ray-a4-gpu-spot-head", "1/1", "Running"]]


def test_logs_tail_and_follow(server, kubectl: Run, pod_manifest, running) -> None:
    server.call(server.store.create("pods", pod_manifest("ray-a4-gpu-spot-head")))
    waiting = kubectl("logs", "ray-a4-gpu-spot-head", check=False)
    assert waiting.returncode == 1 and "is waiting to start: ContainerCreating" in waiting.stderr
    server.call(server.store.patch_status("pods", "ray-a4-gpu-spot-head", running))
    server.call(server.store.append_log("default", "ray-a4-gpu-spot-head", "2026-01-01 Started a local Ray instance.\n"
                                        "Dashboard at http://10.8.0.2:8265\n"))
    assert kubectl("logs", "ray-a4-gpu-spot-head").stdout == (
        "2026-01-01 Started a local Ray instance.\nDashboard at http://10.8.0.2:8265\n")
    assert kubectl("logs", "ray-a4-gpu-spot-head", "--tail=1").stdout == "Dashboard at http://10.8.0.2:8265\n"

    def finish() -> None:
        time.sleep(0.5)
        server.call(server.store.append_log("default", "ray-a4-gpu-spot-head", "job done\n"))
        server.call(server.store.patch_status("pods", "ray-a4-gpu-spot-head", {"phase": "Succeeded"}))
    threading.Thread(target=finish).start()
    followed = kubectl("logs", "-f", "ray-a4-gpu-spot-head", "--tail=1", timeout=10)
    assert followed.stdout == "Dashboard at http://10.8.0.2:8265\njob done\n"


def test_every_resource_prints_as_a_table(server, kubectl: Run) -> None:
    store = server.store
    server.call(store.create("nodes", {"metadata": {"name": "gke-ray-a4-gpu-spot-np-0", "labels": {
        "cloud.google.com/gke-accelerator": "nvidia-b200"}}}))
    server.call(store.patch_status("nodes", "gke-ray-a4-gpu-spot-np-0", {
        "conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.32.4-gke.1000"}}))
    server.call(store.create("services", {"metadata": {"name": "ray-a4-gpu-spot-head-svc"}, "spec": {
        "selector": {"ray.io/node-type": "head"}, "ports": [{"name": "dashboard", "port": 8265}]}}))
    server.call(store.create("secrets", {"metadata": {"name": "hf-token"}, "stringData": {"HF_TOKEN": "x"}}))
    server.call(store.create("daemonsets", {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                            "metadata": {"name": "lustre-csi-node", "namespace": "kube-system"},
                                            "spec": {"selector": {"matchLabels": {"app": "lustre"}},
                                                     "template": {"spec": {"containers": [{"name": "csi"}]}}}}))
    out = kubectl("get", "nodes,ns,svc,secrets,ds,ev", "-A").stdout
    assert re.search(r"node/gke-ray-a4-gpu-spot-np-0\s+Ready\s+<none>\s+\d+s\s+v1.32.4-gke.1000", out)
    assert re.search(r"service/ray-a4-gpu-spot-head-svc\s+ClusterIP\s+10\.96\.\S+\s+<none>\s+8265/TCP", out)
    assert re.search(r"secret/hf-token\s+Opaque\s+1", out)
    assert re.search(r"kube-system\s+daemonset.apps/lustre-csi-node\s+0\s+0\s+0\s+0\s+0\s+<none>", out)
    assert re.search(r"namespace/kube-system\s+Active", out)
