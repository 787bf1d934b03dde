"""The fake xpk as 1.16.0 is: its flags (tests/data/xpk_1.16.0_flags.json), its console lines,
Terraform's milestones in the profile's order, the Toolkit state layout under ./xpkclusters
(blueprints/<project>-<region>/<cluster>-<h5>.yaml, gcluster-out/), the real gcloud and kubectl
calls it makes (tools/xpk_gcloud.py: get-credentials falls back from the DNS endpoint a Toolkit
cluster keeps closed; the plain delete path cannot, so without the blueprint it fails), the gcloud
credential directory check, a GPU quota failure left in the GKE operation, faults that kill it
half way, and a killed xpk."""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

import pytest
from google.cloud import container_v1

from rltui_sandbox.faults import Faults
from rltui_sandbox.tools import xpk as fake_xpk

ZONE, REGION = "us-east1-b", "us-east1"
FLAGS = json.loads((Path(__file__).parents[1] / "data" / "xpk_1.16.0_flags.json").read_text())
# hash_string("rl-sandbox-us-east1-<c>", 5), computed with xpk 1.16.0's own utils/objects.py.
H5 = {"c1": "x8oq5", "c2": "sc9ux"}


def gpu_pool(cluster: str) -> str:
    return f"a4-highgpu-8g-{cluster}-a4-pool"


def create_argv(box, cluster: str) -> list[str]:
    return ["xpk", "cluster", "create", "--num-nodes=8", "--device-type=b200-8",
            "--default-pool-cpu-machine-type=e2-standard-4", "--spot", "--enable-lustre-csi-driver",
            f"--project={box.project}", f"--zone={ZONE}", f"--cluster={cluster}"]


def delete_argv(box, cluster: str) -> list[str]:
    return ["xpk", "cluster", "delete", f"--project={box.project}", f"--zone={ZONE}", f"--cluster={cluster}",
            "--force"]


def xpk_networks(box, cluster: str) -> set[str]:
    names = {n.name for n in box.call(box.world.list_networks, box.project)}
    return names & {f"{cluster}-net-0", f"{cluster}-net-1", f"{cluster}-rdma-net"}


def pools(box, cluster: str) -> list[str]:
    clusters = {c.name: c for c in box.call(box.world.list_clusters, box.project, REGION)}
    return [np.name for np in clusters[cluster].node_pools] if cluster in clusters else []


# ---- the parser: xpk 1.16.0's flags, the codelab's argv ---------------------------------------------


def _flags(parser: argparse.ArgumentParser, *path: str) -> dict[str, argparse.Action]:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return {opt: a for a in parser._actions for opt in a.option_strings if opt not in ("-h", "--help")}


@pytest.mark.parametrize("command", ["create", "delete"])
def test_the_fake_parser_takes_exactly_xpk_1_16_flags(command: str) -> None:
    real = FLAGS[command]["flags"]
    expected = {alias for flag, spec in real.items() for alias in spec.get("aliases", [flag])}
    got = _flags(fake_xpk.build_parser(), "cluster", command)
    assert set(got) == expected
    for flag, spec in real.items():
        assert got[flag].required == spec.get("required", False), flag
        if spec["kind"] == "store_true":
            assert isinstance(got[flag], argparse._StoreTrueAction), flag
        if spec["kind"] == "boolean_optional":
            assert isinstance(got[flag], argparse.BooleanOptionalAction), flag
    assert FLAGS["xpk_version"] == fake_xpk.XPK_VERSION == "1.16.0"


def test_the_codelab_argv_parses() -> None:
    parser = fake_xpk.build_parser()
    args = parser.parse_args(["cluster", "create", "--num-nodes=8", "--device-type=b200-8",
                              "--default-pool-cpu-machine-type=e2-standard-4", "--spot", "--enable-lustre-csi-driver",
                              "--project=P", "--zone=us-east1-b", "--cluster=C"])
    assert (args.num_nodes, args.device_type, args.spot, args.enable_lustre_csi_driver, args.dry_run) == \
        (8, "b200-8", True, True, False)
    args = parser.parse_args(["cluster", "delete", "--project=P", "--zone=us-east1-b", "--cluster=C", "--force"])
    assert args.force and args.cluster == "C"
    assert parser.parse_args(["cluster", "delete", "--cluster=C", "--no-dry-run"]).dry_run is False


# ---- create ------------------------------------------------------------------------------------------


def test_create_streams_networks_first_and_node_pool_last(make_box, tmp_path: Path) -> None:
    box = make_box(speed=1000)  # networks 0.12 s, control plane 0.6 s, node pool 1.32 s, exit 1.5 s
    box.world.gke_auto_upgrade = False
    work = tmp_path / "work"
    work.mkdir()
    start = time.monotonic()
    proc = box.popen(*create_argv(box, "c1"), cwd=work)
    seen: dict[str, float] = {}
    state_at_networks = None
    for line in proc.stdout:
        seen[line.rstrip("\n")] = time.monotonic() - start
        if line.startswith("module.c1-rdma-net.") and "Creation complete" in line:
            state_at_networks = (xpk_networks(box, "c1"), pools(box, "c1"))
    assert proc.wait(10) == 0, proc.stderr.read()
    lines = list(seen)
    assert lines[0] == "[XPK] Starting xpk v1.16.0"
    assert "[XPK] Creating the cluster using Cluster Toolkit. Machine Type: a4-highgpu-8g ..." in lines
    assert lines[-1] == "[XPK] Exiting XPK cleanly" and lines.count("[XPK] Exiting XPK cleanly") == 1
    net_line = next(l for l in lines if l.startswith("module.c1-net-0.") and "Creation complete" in l)
    pool_line = next(l for l in lines if l.startswith("module.c1-a4-pool.") and "Creation complete" in l)
    # Lines arrive as the milestones happen, not all at the end.
    assert seen[pool_line] - seen[net_line] > 0.6
    nets, pools_then = state_at_networks
    assert nets == {"c1-net-0", "c1-net-1", "c1-rdma-net"} and pools_then in ([], ["default-pool"])  # no GPU pool yet
    assert pools(box, "c1") == ["system", gpu_pool("c1")]   # default-pool made and removed by Terraform
    pool = box.call(box.world.get_node_pool, box.project, REGION, "c1", gpu_pool("c1"))
    assert pool.config.machine_type == "a4-highgpu-8g" and pool.config.spot and pool.initial_node_count == 8
    cluster = box.call(box.world.get_cluster, box.project, REGION, "c1")
    assert not cluster.addons_config.lustre_csi_driver_config.enabled  # ignored for b200-8, as by the real xpk
    assert cluster.resource_labels["gke_product_type"] == "xpk"
    assert cluster.resource_labels["ghpc_deployment"] == f"c1-{H5['c1']}"

    # The state layout of xpk 1.16.0 (commands/cluster_gcluster.py).
    state = work / "xpkclusters"
    prefix = f"{box.project}-{REGION}"
    assert (state / "blueprints" / prefix / f"c1-{H5['c1']}.yaml").is_file()
    assert sorted(p.name for p in (state / "blueprints" / prefix / f"c1-{H5['c1']}").iterdir()) == \
        ["config-map.yaml.tftpl", "nccl-rdma-installer-a4.yaml", "storage_crd.yaml"]
    assert (state / "gcluster-out" / "uploads" / prefix / f"c1-{H5['c1']}.yaml").is_file()
    assert (state / "gcluster-out" / prefix / f"c1-{H5['c1']}" / "primary").is_dir()
    assert sorted(p.name for p in state.iterdir()) == ["blueprints", "gcluster-out"]  # no xpkclusters/c1
    listed = box.tool("xpk", "cluster", "list", f"--project={box.project}", f"--zone={ZONE}")
    assert listed.returncode == 0 and "c1" in listed.stdout and "RUNNING" in listed.stdout


def test_gke_runs_its_own_upgrade_after_the_create(box, tmp_path: Path) -> None:
    result = box.tool(*create_argv(box, "c1"), cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    ops = box.call(box.world.list_cluster_operations, box.project, REGION)
    last = ops and max(ops, key=lambda o: o.start_time)
    assert last.operation_type == container_v1.Operation.Type.UPGRADE_MASTER


def test_dry_run_writes_the_blueprint_and_runs_nothing(box, tmp_path: Path) -> None:
    result = box.tool(*create_argv(box, "c1"), "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    path = tmp_path / "xpkclusters" / "blueprints" / f"{box.project}-{REGION}" / f"c1-{H5['c1']}.yaml"
    assert f"[XPK] Blueprint file: {path}" in result.stdout
    assert "not running since it is a dry run" in result.stdout
    assert box.call(box.world.list_clusters, box.project) == [] and xpk_networks(box, "c1") == set()


def test_without_a_gcloud_config_directory_xpk_refuses_unless_gcloud_made_one(box, tmp_path: Path) -> None:
    home = tmp_path / "fresh-home"
    home.mkdir()
    env = box.env(HOME=str(home))
    del env["CLOUDSDK_CONFIG"]  # real xpk checks ~/.config/gcloud
    # A dry run: any real gcloud call (validation, get-server-config) would make the folder first.
    result = box.tool(*create_argv(box, "c1"), "--dry-run", cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert f"[XPK] Failed to find gcloud credential directory. {home}/.config/gcloud " in result.stdout
    assert result.stdout.endswith("[XPK] XPK failed, error code 1\n")
    assert box.call(box.world.list_clusters, box.project) == []
    # The real `gcloud version` (xpk's validation) makes ~/.config/gcloud: then the check passes.
    listed = box.tool("xpk", "cluster", "list", f"--project={box.project}", f"--zone={ZONE}", cwd=tmp_path, env=env)
    assert "[XPK] Task: `Validate GCLOUD installation.` is implemented by `gcloud version`" in listed.stdout
    assert (home / ".config" / "gcloud").is_dir()
    ok = box.tool(*create_argv(box, "c1"), "--dry-run", cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stdout


def test_a_node_pool_over_gpu_quota_fails_xpk_and_stays_in_the_operation(box, tmp_path: Path) -> None:
    box.world.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = 16.0  # 8 Spot nodes x 8 GPUs = 64
    result = box.tool(*create_argv(box, "c1"), cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    # Terraform reads the pool back after its operation failed and reports its ERROR state, not
    # the operation's error (resource_container_node_pool.go resourceContainerNodePoolCreate);
    # the quota's words stay in the GKE operation below.
    assert f'NodePool {gpu_pool("c1")} was created in the error state "ERROR"' in result.stdout
    assert "[XPK] Running gcluster command: gcluster deploy " in result.stdout
    assert result.stdout.endswith("[XPK] XPK failed, error code 1\n")
    ops = box.call(box.world.list_cluster_operations, box.project, REGION)
    (failed,) = [o for o in ops if o.operation_type == container_v1.Operation.Type.CREATE_NODE_POOL and o.error.code]
    assert failed.status == container_v1.Operation.Status.DONE and failed.error.code == 8
    assert "Quota 'PREEMPTIBLE_NVIDIA_B200_GPUS' exceeded" in failed.error.message


# ---- delete ------------------------------------------------------------------------------------------


def test_delete_without_the_blueprint_fails_at_credentials_on_a_toolkit_cluster(box, tmp_path: Path) -> None:
    """The plain path asks gcloud for the DNS endpoint only (commands/common.py), which a Toolkit
    cluster keeps closed to user traffic: five tries, then xpk gives up and nothing is deleted."""
    made_in, elsewhere = tmp_path / "made-in", tmp_path / "elsewhere"
    made_in.mkdir()
    elsewhere.mkdir()
    created = box.tool(*create_argv(box, "c2"), cwd=made_in)
    assert created.returncode == 0, created.stdout
    # Create fell back from the DNS endpoint to the IP one (core/cluster.py get_cluster_credentials).
    assert "[XPK] Detected error. Retrying without --dns-endpoint flag..." in created.stdout
    assert "[XPK] Finished get-credentials and kubectl setup." in created.stdout

    stray = box.tool(*delete_argv(box, "c2"), cwd=elsewhere)
    assert stray.returncode == 1, stray.stdout
    assert "controlPlaneEndpointsConfig.dnsEndpointConfig.allowExternalTraffic is disabled for cluster c2" \
        in stray.stdout
    assert "[XPK] Try 5: get-credentials to cluster c2" in stray.stdout
    assert "[XPK] get-credentials to cluster c2 returned ERROR 1" in stray.stdout
    assert pools(box, "c2") == ["system", gpu_pool("c2")]
    assert xpk_networks(box, "c2") == {"c2-net-0", "c2-net-1", "c2-rdma-net"}

    home = box.tool(*delete_argv(box, "c2"), cwd=made_in)
    assert home.returncode == 0, home.stdout
    assert "[XPK] Deleting c2 cluster using Cluster Toolkit..." in home.stdout
    assert f"[XPK] Destroying c2-{H5['c2']} completed!" in home.stdout
    assert xpk_networks(box, "c2") == set() and not box.call(box.world.list_clusters, box.project, REGION)
    assert [f for f in box.call(box.world.list_firewalls, box.project) if f.created_by == "xpk"] == []
    # xpk never removes its blueprint.
    assert (made_in / "xpkclusters" / "blueprints" / f"{box.project}-{REGION}" / f"c2-{H5['c2']}.yaml").is_file()


def test_plain_path_deletes_a_cluster_whose_dns_endpoint_is_open(box, tmp_path: Path) -> None:
    """A cluster made with --enable-dns-access (xpk's own GKE path): the real `gcloud beta container
    clusters delete`, refused while GKE upgrades the master (no retry there), then done."""
    spec = container_v1.Cluster(name="g1", initial_node_count=1, network="default")
    spec.control_plane_endpoints_config.dns_endpoint_config.allow_external_traffic = True
    box.call(box.world.create_cluster, box.project, REGION, spec)
    box.run(box.world.wait_cluster_idle(box.project, REGION, "g1"))
    # Held for 30 s: at speed 6000 a real one is over before a loaded machine starts xpk.
    upgrade = box.call(box.world.start_gke_upgrade, box.project, REGION, "g1", seconds=30)
    busy = box.tool(*delete_argv(box, "g1"), cwd=tmp_path)
    assert busy.returncode == 1, busy.stdout
    # gcloud's own error, on the terminal's stderr (xpk streams the command live).
    assert "is currently upgrading cluster g1. Please wait and try again once it is done." in busy.stderr
    assert "[XPK] Cluster delete request returned ERROR 1" in busy.stdout
    box.call(box.world._on_gke_upgraded, box.project, REGION, "g1", upgrade.name)  # end it now
    box.run(box.world.wait_cluster_idle(box.project, REGION, "g1"))

    done = box.tool(*delete_argv(box, "g1"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert f"gcloud beta container clusters delete g1 --project={box.project} --location={REGION} --quiet" \
        in done.stdout
    assert "[XPK] GKE commands done! Cluster g1 deleted." in done.stdout
    assert not box.call(box.world.list_clusters, box.project, REGION)


def test_plain_path_delete_of_a_missing_cluster_fails(box, tmp_path: Path) -> None:
    result = box.tool(*delete_argv(box, "nope"), cwd=tmp_path)
    assert result.returncode == 1
    assert "[XPK] get-credentials to cluster nope returned ERROR 1" in result.stdout


def test_delete_fails_while_a_peering_holds_the_network(box, tmp_path: Path) -> None:
    assert box.tool(*create_argv(box, "c3"), cwd=tmp_path).returncode == 0
    box.run(box.world.create_address(box.project, "r3", network="c3-net-0", prefix_length=24))
    box.run(box.world.connect_peering(box.project, "c3-net-0", ["r3"]))
    result = box.tool(*delete_argv(box, "c3"), cwd=tmp_path)
    assert result.returncode == 1
    assert "c3-net-0" in result.stdout and "XPK failed, error code 1" in result.stdout
    assert xpk_networks(box, "c3") == {"c3-net-0"}  # the other two went
    blueprint = tmp_path / "xpkclusters" / "blueprints" / f"{box.project}-{REGION}"
    assert any(blueprint.glob("c3-*.yaml"))  # kept, so a re-run can finish the job


# ---- faults and kills --------------------------------------------------------------------------------


def _first_draw(hit: bool) -> int:
    return next(s for s in range(1000) if Faults(0.5, s).hit("xpk") is hit)


def test_fault_kills_xpk_half_way_reproducibly(make_box, tmp_path: Path) -> None:
    dying, healthy = _first_draw(True), _first_draw(False)
    for run in (1, 2):  # the same seed fails the same way in a fresh sandbox
        box = make_box(faults=Faults(0.5, dying))
        result = box.tool(*create_argv(box, "c4"), cwd=tmp_path)
        assert result.returncode == 1, result.stdout
        assert "sandbox fault injection" in result.stdout and result.stdout.endswith(
            "[XPK] XPK failed, error code 1\n")
        assert xpk_networks(box, "c4") == {"c4-net-0", "c4-net-1", "c4-rdma-net"}
        assert pools(box, "c4") == []
        # Re-running resumes from what exists (the fault is a transient one: the next draw decides).
        rerun = box.tool(*create_argv(box, "c4"), cwd=tmp_path)
        assert rerun.returncode == (1 if _second_hits(dying) else 0), rerun.stdout
    box = make_box(faults=Faults(0.5, healthy))
    assert box.tool(*create_argv(box, "c4"), cwd=tmp_path).returncode == 0
    assert gpu_pool("c4") in pools(box, "c4")


def _second_hits(seed: int) -> bool:
    faults = Faults(0.5, seed)
    faults.hit("xpk")
    return faults.hit("xpk")


def test_killed_xpk_leaves_partial_state(make_box, tmp_path: Path) -> None:
    box = make_box(speed=1000)
    start = time.monotonic()
    proc = box.popen(*create_argv(box, "c5"), cwd=tmp_path)
    for line in proc.stdout:
        if line.startswith("module.c5-a4-cluster.") and "Creating..." in line:
            break
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == -signal.SIGTERM
    proc.stdout.close()
    proc.stderr.close()
    # Past the node pool's milestone (1.32 s, jitter 10%): the cancelled xpk never asked for it.
    time.sleep(max(0.0, 2.0 - (time.monotonic() - start)))
    assert xpk_networks(box, "c5") == {"c5-net-0", "c5-net-1", "c5-rdma-net"}
    assert pools(box, "c5") == ["default-pool"]  # GKE finishes the create; nobody removes its default pool
    assert any((tmp_path / "xpkclusters" / "blueprints").rglob("c5-*.yaml"))


@pytest.mark.parametrize("argv, message", [
    (["xpk", "frobnicate"], "invalid choice: 'frobnicate'"),
    (["xpk", "cluster", "resize"], "invalid choice: 'resize'"),
    (["xpk", "cluster", "create", "--device-type=b200-8"], "the following arguments are required: --cluster"),
    (["xpk", "cluster", "delete", "--cluster=c", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_unknown_xpk_commands_fail_with_usage(box, argv: list[str], message: str) -> None:
    result = box.tool(*argv)
    assert result.returncode == 2
    assert message in result.stderr and result.stderr.startswith("usage: xpk")


def test_xpk_version(box) -> None:
    result = box.tool("xpk", "version")
    assert result.returncode == 0
    assert result.stdout == "[XPK] Starting xpk v1.16.0\n[XPK] xpk_version: 1.16.0\n[XPK] XPK Done.\n"
