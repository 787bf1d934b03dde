"""The fake xpk: milestones in the profile's order, Toolkit state in ./xpkclusters, delete that
strands the networks outside that folder, faults that kill it half way, and a killed xpk."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from rltui.sandbox.faults import Faults

ZONE, REGION = "us-east1-b", "us-east1"


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


def test_create_streams_networks_first_and_node_pool_last(make_box, tmp_path: Path) -> None:
    box = make_box(speed=1000)  # networks 0.12 s, control plane 0.6 s, node pool 1.32 s, exit 1.5 s
    work = tmp_path / "work"
    work.mkdir()
    start = time.monotonic()
    proc = box.popen(*create_argv(box, "c1"), cwd=work)
    seen: dict[str, float] = {}
    state_at_networks = None
    for line in proc.stdout:
        seen[line.strip()] = time.monotonic() - start
        if line.startswith("[XPK] Networks c1-net-0"):
            state_at_networks = (xpk_networks(box, "c1"), pools(box, "c1"))
    assert proc.wait(10) == 0, proc.stderr.read()
    lines = list(seen)
    assert lines[-1] == "[XPK] Exiting XPK cleanly" and lines.count("[XPK] Exiting XPK cleanly") == 1
    net_line = next(l for l in lines if l.startswith("[XPK] Networks c1-net-0, c1-net-1, c1-rdma-net are ready"))
    pool_line = next(l for l in lines if l.startswith("[XPK] Node pool c1-np-0 is ready"))
    # Lines arrive as the milestones happen, not all at the end.
    assert seen[pool_line] - seen[net_line] > 0.6
    assert state_at_networks == ({"c1-net-0", "c1-net-1", "c1-rdma-net"}, ["default-pool"])  # no GPU pool yet
    assert pools(box, "c1") == ["default-pool", "c1-np-0"]
    pool = box.call(box.world.get_node_pool, box.project, REGION, "c1", "c1-np-0")
    assert pool.config.machine_type == "a4-highgpu-8g" and pool.config.spot and pool.initial_node_count == 8
    cluster = box.call(box.world.get_cluster, box.project, REGION, "c1")
    assert not cluster.addons_config.lustre_csi_driver_config.enabled  # ignored for b200-8, as by the real xpk
    assert (work / "xpkclusters" / "c1").is_dir()
    listed = box.tool("xpk", "cluster", "list", f"--project={box.project}", f"--zone={ZONE}")
    assert listed.returncode == 0 and "c1" in listed.stdout and "RUNNING" in listed.stdout


def test_delete_strands_networks_outside_the_state_dir(box, tmp_path: Path) -> None:
    made_in, elsewhere = tmp_path / "made-in", tmp_path / "elsewhere"
    made_in.mkdir()
    elsewhere.mkdir()
    assert box.tool(*create_argv(box, "c2"), cwd=made_in).returncode == 0

    stray = box.tool(*delete_argv(box, "c2"), cwd=elsewhere)
    assert stray.returncode == 0, stray.stdout
    assert "NOT deleted" in stray.stdout and "c2-rdma-net" in stray.stdout
    assert pools(box, "c2") == [] and not box.call(box.world.list_clusters, box.project, REGION)
    assert xpk_networks(box, "c2") == {"c2-net-0", "c2-net-1", "c2-rdma-net"}

    home = box.tool(*delete_argv(box, "c2"), cwd=made_in)
    assert home.returncode == 0, home.stdout
    assert "[XPK] Deleted network c2-net-0" in home.stdout
    assert xpk_networks(box, "c2") == set()
    assert not (made_in / "xpkclusters" / "c2").exists()


def test_delete_fails_while_a_peering_holds_the_network(box, tmp_path: Path) -> None:
    assert box.tool(*create_argv(box, "c3"), cwd=tmp_path).returncode == 0
    p = f"--project={box.project}"
    assert box.tool("gcloud", "compute", "addresses", "create", "r3", "--global", "--purpose=VPC_PEERING",
                    "--prefix-length=24", "--network=c3-net-0", p).returncode == 0
    assert box.tool("gcloud", "services", "vpc-peerings", "connect", "--service=servicenetworking.googleapis.com",
                    "--ranges=r3", "--network=c3-net-0", p).returncode == 0
    result = box.tool(*delete_argv(box, "c3"), cwd=tmp_path)
    assert result.returncode == 1
    assert "c3-net-0" in result.stdout and "XPK failed, error code 1" in result.stdout
    assert xpk_networks(box, "c3") == {"c3-net-0"}  # the other two went
    assert (tmp_path / "xpkclusters" / "c3").is_dir()  # kept, so a re-run can finish the job


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
    assert "c4-np-0" in pools(box, "c4")


def _second_hits(seed: int) -> bool:
    faults = Faults(0.5, seed)
    faults.hit("xpk")
    return faults.hit("xpk")


def test_killed_xpk_leaves_partial_state(make_box, tmp_path: Path) -> None:
    box = make_box(speed=1000)
    start = time.monotonic()
    proc = box.popen(*create_argv(box, "c5"), cwd=tmp_path)
    for line in proc.stdout:
        if line.startswith("[XPK] Networks c5-net-0"):
            break
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == -signal.SIGTERM
    proc.stdout.close()
    proc.stderr.close()
    # Past the node pool's milestone (1.32 s, jitter 10%): the cancelled xpk never asked for it.
    time.sleep(max(0.0, 2.0 - (time.monotonic() - start)))
    assert xpk_networks(box, "c5") == {"c5-net-0", "c5-net-1", "c5-rdma-net"}
    assert pools(box, "c5") == ["default-pool"]  # the control plane GKE was already building stays
    assert (tmp_path / "xpkclusters" / "c5").is_dir()


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
    assert result.returncode == 0 and result.stdout.startswith("[XPK] xpk version: ")
