"""Issue 3's acceptance: the sandbox as a user meets it, through the CLI and outside tools."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rltui_sandbox.manage import pid_alive, session_members

HERE = Path(__file__).parent
ENV_SH = HERE.parent / "data" / "env" / "devrel-demos.env.sh"
pytestmark = pytest.mark.slow


def run(argv, env, cwd=None, timeout=120, check=True):
    out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise AssertionError(f"{argv[:4]} -> {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out


def recreate_gpu_nodes(status, project, region, cluster):
    """What xpk does after enabling the Lustre CSI driver (existing nodes get it only when
    recreated): each GPU pool "upgraded" to its own version, one operation at a time."""
    import grpc
    from google.cloud import container_v1
    from google.cloud.container_v1.services.cluster_manager.transports import (
        ClusterManagerGrpcTransport)

    gke = container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(
        channel=grpc.insecure_channel(status["grpc"])))
    name = f"projects/{project}/locations/{region}/clusters/{cluster}"
    for pool in gke.get_cluster(name=name).node_pools:
        if not pool.config.accelerators:
            continue
        op = gke.update_node_pool(request={"name": f"{name}/nodePools/{pool.name}",
                                           "node_version": "-", "image_type": ""})
        while gke.get_operation(name=f"projects/{project}/locations/{region}/operations/"
                                f"{op.name}").status != container_v1.Operation.Status.DONE:
            time.sleep(0.05)


@pytest.fixture
def user(tmp_path):
    """A user's shell: its own sandbox folder, HOME, KUBECONFIG."""
    env = {**os.environ, "RLTUI_SANDBOX_DIR": str(tmp_path / "sbx"), "HOME": str(tmp_path),
           "KUBECONFIG": str(tmp_path / "kubeconfig")}
    rltui = [sys.executable, "-m", "rltui.cli"]
    yield env, rltui
    run([*rltui, "sandbox", "stop"], env, check=False)


def test_a_client_outside_the_project_and_a_clean_stop(user, tmp_path):
    env, rltui = user
    t0 = time.monotonic()
    run([*rltui, "sandbox", "start", "--speed", "2000"], env)
    assert time.monotonic() - t0 < 10, "start must return once every endpoint answers, within 10 s"
    status = json.loads(run([*rltui, "sandbox", "status", "--json"], env).stdout)
    for key in ("pid", "grpc", "kube_api", "kubeconfig", "ray_dashboard", "lustre_root", "speed",
                "faults", "compute", "record", "kube_server", "kube_ca", "adc"):
        assert key in status, key
    assert status["grpc"].startswith("127.0.0.1:") and status["kube_api"].startswith("http://127.0.0.1:")
    assert status["kube_server"].startswith("https://127.0.0.1:")
    for key in ("adc", "kubeconfig"):
        assert Path(status[key]).stat().st_mode & 0o077 == 0, key
    adc = json.loads(Path(status["adc"]).read_text())
    assert adc["type"] == "service_account" and adc["token_uri"] == f"{status['kube_api']}/token"
    (tmp_path / "status.json").write_text(json.dumps(status))

    # `eval "$(rltui sandbox env)"`: the real gcloud and kubectl, pointed at the sandbox.
    exports = run([*rltui, "sandbox", "env"], env).stdout
    tools = {**env, "PATH": f"{status['bin_dir']}{os.pathsep}{env['PATH']}"}
    for line in exports.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        tools[name] = shlex.split(value)[0]
    assert tools["KUBECONFIG"] != env.get("KUBECONFIG") and tools["CLOUDSDK_CONFIG"] == status["gcloud_config"]
    out = run([sys.executable, str(HERE / "outside_client.py"), str(tmp_path / "status.json")], tools)
    assert out.stdout.rstrip().endswith("all checks passed"), out.stdout

    # A cluster (the sandbox's xpk), Lustre and a RayCluster through the real gcloud and kubectl.
    p = ["--project=team-rl-sandbox-42"]
    run(["gcloud", "services", "enable", "container.googleapis.com", "lustre.googleapis.com",
         "compute.googleapis.com", "servicenetworking.googleapis.com", *p], tools)
    work = tmp_path / "work"
    work.mkdir()
    env_sh = work / "env.sh"
    env_sh.write_text(ENV_SH.read_text().replace('NUM_NODES="8"', 'NUM_NODES="2"'))
    run(["xpk", "cluster", "create", "--num-nodes=2", "--device-type=b200-8", "--spot",
         "--default-pool-cpu-machine-type=e2-standard-4", "--enable-lustre-csi-driver",
         "--zone=us-east1-b", "--cluster=ray-a4-gpu-spot", *p], tools, cwd=work)
    # GKE runs its own upgrade right after the create: a user retries until it is accepted.
    update = ["gcloud", "container", "clusters", "update", "ray-a4-gpu-spot", "--region=us-east1",
              "--update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED", *p]
    deadline = time.monotonic() + 60
    while run(update, tools, check=False).returncode != 0:
        assert time.monotonic() < deadline, "the cluster stayed busy"
        time.sleep(0.2)
    recreate_gpu_nodes(status, "team-rl-sandbox-42", "us-east1", "ray-a4-gpu-spot")
    net = "ray-a4-gpu-spot-net-0"
    run(["gcloud", "compute", "addresses", "create", f"google-managed-services-{net}", "--global",
         "--purpose=VPC_PEERING", "--prefix-length=24", f"--network={net}", *p], tools)
    run(["gcloud", "services", "vpc-peerings", "connect", "--service=servicenetworking.googleapis.com",
         f"--ranges=google-managed-services-{net}", f"--network={net}", *p], tools)
    run(["gcloud", "lustre", "instances", "create", "rl-demo-gpu-lustre", "--location=us-east1-b",
         "--capacity-gib=9000", "--per-unit-storage-throughput=1000", "--filesystem=lustre",
         f"--network=projects/team-rl-sandbox-42/global/networks/{net}", *p], tools)
    mount = run(["gcloud", "lustre", "instances", "describe", "rl-demo-gpu-lustre",
                 "--location=us-east1-b", "--format=value(mountPoint)", *p], tools).stdout.strip()
    run([*rltui, "manifests", "--env", str(env_sh), "--out", str(work),
         "--lustre-ip", mount.split("@")[0]], tools)
    run(["gcloud", "container", "clusters", "get-credentials", "ray-a4-gpu-spot",
         "--region=us-east1", *p], tools)
    run(["kubectl", "apply", "-f", str(work / "rl-lustre-volume.yaml")], tools)
    run(["kubectl", "apply", "-f", str(work / "ray-cluster.yaml")], tools)
    run(["kubectl", "wait", "raycluster/ray-a4-gpu-spot", "--for=condition=HeadPodReady",
         "--timeout=90s"], tools, timeout=120)
    pods = run(["kubectl", "get", "pods", "-l", "ray.io/cluster=ray-a4-gpu-spot"], tools).stdout
    assert pods.count("Running") == 3, pods
    # Kubernetes as GKE serves it: the cluster's endpoint and CA, an ADC token, 401 without one.
    out = run([sys.executable, str(HERE / "outside_kube.py"), str(tmp_path / "status.json"),
               "team-rl-sandbox-42", "us-east1", "ray-a4-gpu-spot"], tools)
    assert out.stdout.rstrip().endswith("all checks passed"), out.stdout
    assert "pods listed over https with the ADC token: 3" in out.stdout, out.stdout
    # The status' own kubeconfig (https, the CA, the fixed sandbox token) works for kubectl too.
    run(["kubectl", "--kubeconfig", status["kubeconfig"], "get", "raycluster"], tools)

    status = json.loads(run([*rltui, "sandbox", "status", "--json"], env).stdout)
    assert status["ray_dashboard"], "the head pod runs a real Ray head"
    heads = json.loads((tmp_path / "sbx" / "children.json").read_text())["pids"]
    assert heads and all(pid_alive(p) for p in heads)
    ray_procs = [p for h in heads for p in session_members(h)]
    assert len(ray_procs) > 3, "a Ray head is several processes (gcs, raylet, dashboard...)"

    out = run([*rltui, "sandbox", "stop"], env)
    assert "stopped" in out.stdout
    assert not pid_alive(status["pid"])
    assert [p for p in ray_procs if pid_alive(p)] == []
    assert [p for h in heads for p in session_members(h)] == []
    assert run([*rltui, "sandbox", "status"], env, check=False).returncode == 1
    record = json.loads(Path(status["record"]).read_text())
    assert record["calls"].get("grpc:Lustre/CreateInstance", 0) >= 1
    assert record["calls"].get("compute:globalAddresses.insert", 0) >= 1
    assert any(op["kind"] == "serviceusage.batchEnable" and op["end_ref_s"] is not None
               for op in record["operations"])
