"""xpk's Terraform in the room, on one private sandbox at speed 300 with the devrel-demos env.sh,
in this order:

1. with the sandbox's `xpk` removed from its bin folder, `rltui up --yes` exits non-zero within
   60 s with a line naming xpk, and nothing was created (the sandbox's own record says so);
2. `up` exits 0: the record holds exactly one `xpk.create` (no error) and one
   `gke.create_cluster`; rltui's own GKE operations (agent `rltui/...`) all start after
   xpk.create ended; both addons are on; the blueprint's routers and NAT IPs exist;
3. `down` exits 0 and google-cloud-compute then lists no network, subnet, firewall rule,
   router or address of the cluster;
4. the same after another `up`, with xpk's state folder removed before `down`.

The bin folder is found as a user finds it: `rltui sandbox status --json`'s bin_dir.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests import headless_user
from tests.headless_user import writes, record

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

@pytest.fixture(scope="module")
def private_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("sandbox-no-xpk")
    # KubeRay 1.2.2: no HeadPodReady condition (its gate is off before 1.3): `up` must still see
    # the RayCluster ready, from its pods.
    with headless_user.private_sandbox(root, speed=300.0, kuberay_version="1.2.2") as status:
        yield root, status


def test_up_without_xpk_exits_at_once_naming_it_and_creates_nothing(private_sandbox, tmp_path):
    root, status = private_sandbox
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "xpk").exists())
    env = {**os.environ, "RLTUI_SANDBOX_DIR": str(root), "XDG_STATE_HOME": str(tmp_path / "state"),
           "HOME": str(tmp_path), "PATH": path}
    shown = subprocess.run([sys.executable, "-m", "rltui.cli", "sandbox", "status", "--json"],
                           env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    bin_dir = Path(json.loads(shown.stdout)["bin_dir"])
    assert (bin_dir / "xpk").exists()
    shutil.move(str(bin_dir / "xpk"), str(tmp_path / "xpk.removed"))
    try:
        before = record(status)
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "rltui.cli", "up", "--sandbox", "--env",
                              str(ROOT / "assets" / "sandbox.env.sh"), "--yes"], env=env,
                             capture_output=True, text=True, timeout=90, cwd=ROOT)
        took = time.monotonic() - t0
        after = record(status)
    finally:
        shutil.move(str(tmp_path / "xpk.removed"), str(bin_dir / "xpk"))
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert took < 60, f"{took:.1f} s"
    lines = [ln for ln in text.splitlines() if "xpk" in ln]
    assert lines and "xpk is not on PATH" in lines[0] and "pip install xpk==1.16.0" in lines[0], text
    assert str(bin_dir) in lines[0]
    assert "Traceback" not in text
    assert after["operations"] == before["operations"], "up ran an operation"
    assert writes(after) == writes(before), "up called a method that writes"


def _user(root: Path, status: dict[str, Any], home: Path) -> Any:
    from tests.headless_user import make_user

    return make_user(home, "terraform-in-the-room", root, status)


def _cluster_things(status: dict[str, Any], project: str, cluster: str) -> dict[str, list[str]]:
    """What google-cloud-compute lists of the cluster's: networks, subnets, rules, routers, addresses."""
    from rltui_sandbox.rest_compute import sandbox_compute_clients

    c = sandbox_compute_clients(status["compute"])
    region = "us-east1"
    found = {
        "networks": [n.name for n in c["networks"].list(project=project)],
        "subnets": [s.name for s in c["subnetworks"].list(project=project, region=region)],
        "firewalls": [f.name for f in c["firewalls"].list(project=project)],
        "routers": [r.name for r in c["routers"].list(project=project, region=region)],
        "addresses": [a.name for a in c["addresses"].list(project=project, region=region)]
        + [a.name for a in c["global_addresses"].list(project=project)],
    }
    return {k: [n for n in v if cluster in n] for k, v in found.items()}


def _up_as_the_issue_wants(user: Any, status: dict[str, Any]) -> None:
    from tests.headless_user import CLUSTER

    up = user.run("up", "--yes", timeout=600)
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    ops = [op for op in record(status)["operations"] if f"projects/{user.project}/" in op["target"]]
    creates = [op for op in ops if op["kind"] == "xpk.create"]
    assert len(creates) == 1 and creates[0]["error"] is None, creates
    assert len([op for op in ops if op["kind"] == "gke.create_cluster"]) == 1
    ours = [op for op in ops if op["kind"].startswith("gke.") and "rltui/" in op.get("agent", "")]
    assert ours, [(op["kind"], op.get("agent")) for op in ops if op["kind"].startswith("gke.")]
    assert all(op["start_ref_s"] >= creates[0]["end_ref_s"] for op in ours), \
        [(op["kind"], op["start_ref_s"], creates[0]["end_ref_s"]) for op in ours]
    shown = user.status_json()
    assert "Traceback" not in user.outputs[-1]
    things = _cluster_things(status, user.project, CLUSTER)
    assert len(things["routers"]) == 2 and len([a for a in things["addresses"] if "-nat-ips-" in a]) == 4, things
    import grpc
    from google.cloud import container_v1
    from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport

    gke = container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(
        channel=grpc.insecure_channel(status["grpc"])))
    got = gke.get_cluster(name=f"projects/{user.project}/locations/us-east1/clusters/{CLUSTER}")
    assert got.addons_config.ray_operator_config.enabled and got.addons_config.lustre_csi_driver_config.enabled
    assert shown
    _ready_without_conditions_and_ray_2_46(user)


def _ready_without_conditions_and_ray_2_46(user: Any) -> None:
    """On KubeRay 1.2.2 the RayCluster has no status.conditions, and the head runs the image's Ray:
    `kubectl port-forward service/<c>-head-svc` then GET /api/version says 2.46.0."""
    import json
    import socket
    import subprocess
    import urllib.request

    from tests.headless_user import CLUSTER

    rc = json.loads(user.kubectl("get", "raycluster", CLUSTER, "-o", "json").stdout)
    assert "conditions" not in rc["status"], rc["status"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pf = subprocess.Popen(["kubectl", "--kubeconfig", user.kubeconfig(), "port-forward", f"service/{CLUSTER}-head-svc",
                           f"{port}:8265"], env=user.tool_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        version: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while not version and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/version", timeout=5) as resp:
                    version = json.loads(resp.read())
            except OSError:
                time.sleep(0.3)
        assert version.get("ray_version") == "2.46.0", version
    finally:
        pf.terminate()
        pf.wait(10)


def _down_leaves_nothing(user: Any, status: dict[str, Any]) -> None:
    from tests.headless_user import CLUSTER

    down = user.run("down", "--yes", timeout=600)
    assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-2000:]
    assert _cluster_things(status, user.project, CLUSTER) == {
        "networks": [], "subnets": [], "firewalls": [], "routers": [], "addresses": []}


def test_up_then_down_respects_terraform_and_leaves_nothing(private_sandbox, tmp_path):
    root, status = private_sandbox
    user = _user(root, status, tmp_path / "home")
    _up_as_the_issue_wants(user, status)
    _down_leaves_nothing(user, status)


def test_down_without_xpks_state_folder_leaves_nothing(private_sandbox, tmp_path):
    root, status = private_sandbox
    user = _user(root, status, tmp_path / "home")
    up = user.run("up", "--yes", timeout=600)
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    folders = [p.parent for p in (user.home / "state").rglob("xpkclusters")]
    assert folders, "no xpk state folder under rltui's state"
    for folder in folders:
        shutil.rmtree(folder)
    _down_leaves_nothing(user, status)
