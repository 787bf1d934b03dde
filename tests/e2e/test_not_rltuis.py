"""Issue 24, item 8's done-when: a cluster, an IP range and a peering made by hand are all
still there after `rltui down --yes` with an env.sh naming them, and down says they are not
rltui's, with the command that deletes each by hand; it does not say nothing is left.

Made as a user makes them, not by rltui: the cluster with the sandbox's `xpk cluster create`
run from a folder of the user's (not rltui's state folder), the range and the peering with the
real gcloud (`gcloud compute addresses create ... --global --purpose=VPC_PEERING`, `gcloud
services vpc-peerings connect`). Checked afterwards with the real gcloud. Nothing here depends
on how the sandbox's xpk works inside.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rltui.cloud.endpoints import Endpoints
from tests.headless_user import CLUSTER, REGION, ZONE, make_user

pytestmark = pytest.mark.slow
if shutil.which("gcloud") is None:
    pytest.skip("the real Google Cloud SDK is not installed", allow_module_level=True)

PROJECT = "made-by-hand"
NET = f"{CLUSTER}-net-0"
RANGE = f"google-managed-services-{NET}"
APIS = ("compute.googleapis.com", "container.googleapis.com", "servicenetworking.googleapis.com",
        "lustre.googleapis.com")


def test_what_was_made_by_hand_is_still_there_after_down(sandbox, sandbox_dir, tmp_path):
    user = make_user(tmp_path / "home", PROJECT, sandbox_dir, sandbox)
    env = user.tool_env()

    def gcloud(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["gcloud", *args, f"--project={PROJECT}"], env=env,
                              capture_output=True, text=True, timeout=120)

    enabled = gcloud("services", "enable", *APIS)
    assert enabled.returncode == 0, enabled.stderr
    # The cluster: xpk from a folder of the user's own, as the codelab runs it by hand.
    mine = tmp_path / "my-xpk-folder"
    mine.mkdir()
    xpk_env = Endpoints.sandbox(sandbox).subprocess_env(env)
    made = subprocess.run(["xpk", "cluster", "create", f"--project={PROJECT}", f"--zone={ZONE}",
                           f"--cluster={CLUSTER}", "--num-nodes=2", "--device-type=b200-8",
                           "--spot", "--default-pool-cpu-machine-type=e2-standard-4"],
                          env=xpk_env, cwd=mine, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-2000:]
    made = gcloud("compute", "addresses", "create", RANGE, "--global", "--purpose=VPC_PEERING",
                  "--prefix-length=24", f"--network={NET}")
    assert made.returncode == 0, made.stderr
    made = gcloud("services", "vpc-peerings", "connect",
                  "--service=servicenetworking.googleapis.com", f"--ranges={RANGE}",
                  f"--network={NET}")
    assert made.returncode == 0, made.stderr

    try:
        _down_keeps_them(user, gcloud)
    finally:
        # The sandbox's one Kubernetes API is shared by the tests of this worker: the hand-made
        # cluster's nodes must not stay for the next test's cluster of the same name to see.
        gcloud("services", "vpc-peerings", "delete", "--service=servicenetworking.googleapis.com",
               f"--network={NET}", "--quiet")
        gcloud("compute", "addresses", "delete", RANGE, "--global", "--quiet")
        gone = subprocess.run(["xpk", "cluster", "delete", f"--project={PROJECT}", f"--zone={ZONE}",
                               f"--cluster={CLUSTER}", "--force"], env=xpk_env, cwd=mine,
                              capture_output=True, text=True, timeout=300)
        assert gone.returncode == 0, gone.stdout[-3000:] + gone.stderr[-2000:]


def _down_keeps_them(user, gcloud) -> None:
    down = user.run("down", "--yes", timeout=600)
    text = down.stdout + down.stderr
    assert down.returncode == 0, text
    assert "Traceback" not in text
    assert "nothing of rltui's left" not in text
    kept = text[text.index("not rltui's, left alone (still there), in the order they can be"
                           " deleted:"):]
    assert f"GKE cluster {CLUSTER}: running" in kept, text
    assert (f"IP range {RANGE}: present; to delete it by hand: gcloud compute addresses delete"
            f" {RANGE} --global --project={PROJECT} --quiet") in kept, text
    assert (f"VPC peering servicenetworking on {NET}: present; to delete it by hand: gcloud"
            " services vpc-peerings delete --service=servicenetworking.googleapis.com"
            f" --network={NET} --project={PROJECT} --quiet") in kept, text
    assert "leak scan: rltui's own are gone" in text and "not rltui's still there" in text
    assert kept.index("VPC peering") < kept.index("IP range") < kept.index("GKE cluster") < \
        kept.index("VPC network")

    # Still there, as the real gcloud sees it.
    cluster = gcloud("container", "clusters", "describe", CLUSTER, f"--region={REGION}",
                     "--format=value(status)")
    assert cluster.returncode == 0 and cluster.stdout.strip() == "RUNNING", cluster.stderr
    address = gcloud("compute", "addresses", "describe", RANGE, "--global", "--format=value(name)")
    assert address.returncode == 0 and address.stdout.strip() == RANGE, address.stderr
    peerings = gcloud("services", "vpc-peerings", "list", f"--network={NET}", "--format=json")
    assert peerings.returncode == 0, peerings.stderr
    assert [c["reservedPeeringRanges"] for c in json.loads(peerings.stdout)] == [[RANGE]]
    # rltui ran no xpk of its own, and made no state folder of xpk's for this cluster.
    assert not list((Path(user.home) / "state").rglob("xpkclusters"))
