"""The fake xpk's capacity flags as xpk 1.16.0 takes them (tools/xpk_capacity.py): exactly one of
--spot, --on-demand, --reservation, --flex; a reservation looked up with the REAL gcloud
(`gcloud beta compute reservations describe`) before anything is made, a missing one failing
xpk with its own lines; the blueprint's GPU pool Spot only for --spot, targeting the reservation
by name for --reservation; the GPU pool GKE makes Spot only for --spot."""

from __future__ import annotations

import json
from pathlib import Path

from rltui_sandbox.rest_compute_reservations import Reserved
from tests.tools.test_xpk import REGION, ZONE, H5, create_argv, gpu_pool


def argv(box, capacity: list[str]) -> list[str]:
    return [a for a in create_argv(box, "c1") if a != "--spot"] + capacity


def blueprint(box, tmp_path: Path) -> dict:
    path = tmp_path / "xpkclusters" / "blueprints" / f"{box.project}-{REGION}" / f"c1-{H5['c1']}.yaml"
    text = path.read_text()
    doc = json.loads(text[text.index("{"):])
    (pool,) = [m for m in doc["deployment_groups"][0]["modules"] if m["id"] == "c1-a4-pool"]
    return pool["settings"]


def test_two_capacity_flags_fail_as_xpk_does_and_make_nothing(box, tmp_path: Path) -> None:
    result = box.tool(*argv(box, ["--spot", "--on-demand"]), "--dry-run", cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert ("[XPK] ERROR: User specified more than one of the following arguments. Please specify only one of"
            " `--reservation=$RESERVATION_NAME`, `--on-demand`, `--flex` or `--spot`.") in result.stdout
    assert "[XPK] Capacity type is invalid." in result.stdout
    assert box.call(box.world.list_clusters, box.project) == []


def test_a_missing_reservation_fails_xpk_before_anything_is_made(box, tmp_path: Path) -> None:
    result = box.tool(*argv(box, ["--reservation=nope"]), cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert ("[XPK] Task: `Get reservation nope` is implemented by `gcloud beta compute reservations describe"
            f" nope --project={box.project} --zone={ZONE}") in result.stdout
    assert "[XPK] Describe reservation nope failed" in result.stdout
    assert "[XPK] Please confirm that your reservation name nope is correct." in result.stdout
    assert box.call(box.world.list_clusters, box.project) == []
    assert all(n.name == "default" for n in box.call(box.world.list_networks, box.project))


def test_a_ready_reservation_is_targeted_by_name(box, tmp_path: Path) -> None:
    box.world.reservations[(box.project, ZONE)] = {"a4-res": Reserved("a4-highgpu-8g", count=8)}
    result = box.tool(*argv(box, ["--reservation=a4-res"]), "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    settings = blueprint(box, tmp_path)
    assert settings["spot"] is False
    assert settings["reservation_affinity"] == {"consume_reservation_type": "SPECIFIC_RESERVATION",
                                                "specific_reservations": [{"name": "a4-res"}]}


def test_on_demand_makes_a_gpu_pool_that_is_not_spot(box, tmp_path: Path) -> None:
    result = box.tool(*argv(box, ["--on-demand"]), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout
    assert blueprint(box, tmp_path)["reservation_affinity"]["consume_reservation_type"] == "NO_RESERVATION"
    clusters = {c.name: c for c in box.call(box.world.list_clusters, box.project, REGION)}
    (pool,) = [np for np in clusters["c1"].node_pools if np.name == gpu_pool("c1")]
    assert pool.config.spot is False and "cloud.google.com/gke-spot" not in pool.config.labels


def test_flex_start_is_refused_by_the_sandbox_in_one_line(box, tmp_path: Path) -> None:
    result = box.tool(*argv(box, ["--flex"]), "--dry-run", cwd=tmp_path)
    assert result.returncode != 0
    assert "does not emulate xpk's flex-start pool" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_with_spot_unavailable_the_gpu_pool_fails_as_a_gke_stockout(box, tmp_path: Path) -> None:
    from google.cloud import container_v1

    box.world.unavailable_capacity.add("spot")
    result = box.tool(*create_argv(box, "c1"), cwd=tmp_path, timeout=120)
    assert result.returncode == 1, result.stdout
    assert f'NodePool {gpu_pool("c1")} was created in the error state "ERROR"' in result.stdout
    ops = box.call(box.world.list_cluster_operations, box.project, REGION)
    (failed,) = [o for o in ops if o.operation_type == container_v1.Operation.Type.CREATE_NODE_POOL and o.error.code]
    assert "Current errors: [GCE_STOCKOUT]: Instance 'gke-c1-" in failed.error.message
    assert f"The zone 'projects/{box.project}/zones/{ZONE}' does not have enough resources available" \
        in failed.error.message
    assert failed.nodepool_conditions[0].code == container_v1.StatusCondition.Code.GCE_STOCKOUT


def test_on_demand_still_comes_up_while_spot_is_out(box, tmp_path: Path) -> None:
    box.world.unavailable_capacity.add("spot")
    result = box.tool(*argv(box, ["--on-demand"]), cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout
