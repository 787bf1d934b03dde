"""The codelab's gcloud sequence, run through the fake gcloud exactly as a user types it."""

from __future__ import annotations

import ipaddress
import subprocess
import time

import yaml

PROJECT = "rl-sandbox"  # tests/tools/conftest.py's Box.project
ZONE, REGION, CLUSTER = "us-east1-b", "us-east1", "ray-a4-gpu-spot"
NETWORK = f"{CLUSTER}-net-0"
ADDRESS = f"google-managed-services-{NETWORK}"
LUSTRE = "rl-demo-gpu-lustre"
APIS = ["container.googleapis.com", "lustre.googleapis.com", "compute.googleapis.com",
        "servicenetworking.googleapis.com"]
P = f"--project={PROJECT}"


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"{result.args} -> {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def test_codelab_gcloud_sequence(make_box) -> None:
    box = make_box(speed=1000, enabled_services=())  # a fresh project, as Google makes it
    assert box.project == PROJECT
    refused = box.tool("xpk", "cluster", "create", "--num-nodes=8", "--device-type=b200-8", "--spot",
                       P, f"--zone={ZONE}", f"--cluster={CLUSTER}")
    assert refused.returncode != 0 and "Kubernetes Engine API has not been used in project" in refused.stdout
    before = ok(box.tool("gcloud", "services", "list", "--enabled", P, "--format=value(config.name)")).stdout.split()
    assert "monitoring.googleapis.com" in before and not set(APIS) & set(before)  # Google's default set only
    ok(box.tool("gcloud", "services", "enable", *APIS, P))
    enabled = ok(box.tool("gcloud", "services", "list", "--enabled", P, "--format=value(config.name)")).stdout
    assert sorted(set(enabled.split()) - set(before)) == sorted(APIS)

    ok(box.tool("xpk", "cluster", "create", "--num-nodes=8", "--device-type=b200-8",
                "--default-pool-cpu-machine-type=e2-standard-4", "--spot", "--enable-lustre-csi-driver",
                P, f"--zone={ZONE}", f"--cluster={CLUSTER}"))
    describe_csi = ["gcloud", "container", "clusters", "describe", CLUSTER, "--region", REGION, "--project", PROJECT,
                    "--format=value(addonsConfig.lustreCsiDriverConfig.enabled)"]
    assert ok(box.tool(*describe_csi)).stdout.strip() == ""  # xpk ignored --enable-lustre-csi-driver
    update_argv = ["gcloud", "container", "clusters", "update", CLUSTER, "--region", REGION, "--project", PROJECT,
                   "--update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED"]
    # Right after the create GKE runs its own UPGRADE_MASTER (gke_auto_upgrade): the update is
    # refused until it ends. At speed 6000 it lasts 0.08 s, so hold one for 30 s to see it.
    box.run(box.world.wait_cluster_idle(PROJECT, REGION, CLUSTER))
    held = box.call(box.world.start_gke_upgrade, PROJECT, REGION, CLUSTER, seconds=30)
    busy = box.tool(*update_argv)
    assert busy.returncode == 1 and "is currently upgrading cluster" in busy.stderr, busy.stderr
    box.call(box.world._on_gke_upgraded, PROJECT, REGION, CLUSTER, held.name)  # end it now
    box.run(box.world.wait_cluster_idle(PROJECT, REGION, CLUSTER))
    update = ok(box.tool(*update_argv))
    assert update.stderr.startswith(f"Updating {CLUSTER}...done.\nUpdated [")
    assert ok(box.tool(*describe_csi)).stdout == "True\n"
    ray = box.tool("gcloud", "container", "clusters", "describe", CLUSTER, f"--region={REGION}", P,
                   "--format=value(addonsConfig.rayOperatorConfig.enabled,status)")
    assert ok(ray).stdout == "True\tRUNNING\n"

    created = ok(box.tool("gcloud", "compute", "addresses", "create", ADDRESS, "--global", "--purpose=VPC_PEERING",
                          "--prefix-length=24", f"--network={NETWORK}", P))
    assert f"Created [https://www.googleapis.com/compute/v1/projects/{PROJECT}/global/addresses/{ADDRESS}]." \
        in created.stderr
    rng = ok(box.tool("gcloud", "compute", "addresses", "describe", ADDRESS, "--global", P,
                      "--format=value(address,prefixLength,purpose,network.basename())")).stdout.split()
    assert rng[1:] == ["24", "VPC_PEERING", NETWORK]

    peering = ["--service=servicenetworking.googleapis.com", f"--ranges={ADDRESS}", f"--network={NETWORK}", P]
    # The codelab's `connect || update --force`, run twice: the second connect fails, update mends it.
    for attempt in (1, 2):
        connect = box.tool("gcloud", "services", "vpc-peerings", "connect", *peering)
        assert connect.returncode == (0 if attempt == 1 else 1), connect.stderr
        if attempt == 2:
            assert connect.stderr.startswith("ERROR: (gcloud.services.vpc-peerings.connect) FAILED_PRECONDITION:")
            ok(box.tool("gcloud", "services", "vpc-peerings", "update", *peering, "--force"))
    listed = yaml.safe_load(ok(box.tool("gcloud", "services", "vpc-peerings", "list", f"--network={NETWORK}",
                                        P)).stdout)
    assert listed["reservedPeeringRanges"] == [ADDRESS] and listed["peering"] == "servicenetworking-googleapis-com"

    start = time.monotonic()
    create = ok(box.tool("gcloud", "lustre", "instances", "create", LUSTRE, P, f"--location={ZONE}",
                         "--capacity-gib=9000", "--per-unit-storage-throughput=1000", "--filesystem=lustre",
                         f"--network=projects/{PROJECT}/global/networks/{NETWORK}", "--gke-support-enabled",
                         "--labels=managed-by=rltui", "--async"))
    assert time.monotonic() - start < 0.6  # --async does not wait for the 12 profile minutes (0.72 s here)
    assert f"Create request issued for: [{LUSTRE}]" in create.stderr
    states = []
    while not states or states[-1] != "ACTIVE":
        assert time.monotonic() - start < 15, states
        states.append(ok(box.tool("gcloud", "lustre", "instances", "describe", LUSTRE, "--project", PROJECT,
                                  "--location", ZONE, "--format=value(state)")).stdout.strip())
    assert states[0] == "CREATING" and set(states) == {"CREATING", "ACTIVE"}

    # LUSTRE_IP=$(gcloud ... --format="value(mountPoint)" | cut -d'@' -f1), as two real processes
    describe = box.popen("gcloud", "lustre", "instances", "describe", LUSTRE, P, f"--location={ZONE}",
                         "--format=value(mountPoint)")
    cut = subprocess.run(["cut", "-d@", "-f1"], stdin=describe.stdout, capture_output=True, text=True, timeout=10)
    describe.stdout.close()
    assert describe.wait(10) == 0
    ip = ipaddress.ip_address(cut.stdout.strip())
    assert ip in ipaddress.ip_network(f"{rng[0]}/24")

    creds = ok(box.tool("gcloud", "container", "clusters", "get-credentials", CLUSTER, f"--region={REGION}", P))
    assert creds.stderr == f"Fetching cluster endpoint and auth data.\nkubeconfig entry generated for {CLUSTER}.\n"
    context = f"gke_{PROJECT}_{REGION}_{CLUSTER}"
    assert ok(box.tool("kubectl", "config", "current-context")).stdout.strip() == context
    assert "default" in ok(box.tool("kubectl", "get", "namespaces", "-o", "name")).stdout

    delete = ok(box.tool("gcloud", "lustre", "instances", "delete", LUSTRE, P, f"--location={ZONE}", "--quiet"))
    assert delete.stderr.endswith(f"done.\nDeleted instance [{LUSTRE}].\n")
    gone = box.tool("gcloud", "lustre", "instances", "describe", LUSTRE, P, f"--location={ZONE}")
    assert gone.returncode == 1 and gone.stdout == ""
    assert gone.stderr.startswith("ERROR: (gcloud.lustre.instances.describe) NOT_FOUND: ")

    # The address is held by the peering until that goes (the codelab's optional cleanup fails here).
    held = box.tool("gcloud", "compute", "addresses", "delete", ADDRESS, "--global", P, "--quiet")
    assert held.returncode == 1 and "Could not fetch resource:\n - The address resource" in held.stderr
    assert "is already being used by" in held.stderr
    ok(box.tool("gcloud", "services", "vpc-peerings", "delete", "--service=servicenetworking.googleapis.com",
                f"--network={NETWORK}", P, "--quiet"))
    ok(box.tool("gcloud", "compute", "addresses", "delete", ADDRESS, "--global", P, "--quiet"))
    missing = box.tool("gcloud", "compute", "addresses", "describe", ADDRESS, "--global", P)
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == (f"ERROR: (gcloud.compute.addresses.describe) Could not fetch resource:\n"
                              f" - The resource 'projects/{PROJECT}/global/addresses/{ADDRESS}' was not found\n")
