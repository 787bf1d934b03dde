"""The sandbox's record names the phases it models without an API call of their own (xpk's
networks and workloads, Terraform's poll lag, the peering), with their profile key, so that a
benchmark's critical path (bench/time_to_training.py) counts only real time as unexplained."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rltui_sandbox.profile import Clock, LatencyProfile
from rltui_sandbox.record import Record
from rltui_sandbox.services import CODELAB_APIS
from rltui_sandbox.world import World

PROJECT, ZONE, REGION, CLUSTER = "any-project-id-works", "us-east1-b", "us-east1", "ray-a4-gpu-spot"


def world_at(state_dir: Path, speed: float = 6000.0) -> World:
    return World(state_dir, Clock(LatencyProfile.load(), speed=speed, seed=2), enabled_services=CODELAB_APIS)


def ops_of(world: World, kind: str) -> list[dict[str, Any]]:
    return [op for op in world.record.snapshot()["operations"] if op["kind"] == kind]


async def test_xpk_create_records_its_networks_poll_lag_and_workloads_with_profile_keys(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    await world.xpk_cluster_create(PROJECT, ZONE, CLUSTER, num_nodes=2)
    [nets] = ops_of(world, "xpk.networks")
    [create] = ops_of(world, "gke.create_cluster")
    [delete_default, *_] = ops_of(world, "gke.delete_node_pool")
    *_, pool = ops_of(world, "gke.create_node_pool")
    [work] = ops_of(world, "xpk.workloads")
    polls = ops_of(world, "xpk.terraform_poll")
    assert (nets["key"], work["key"]) == ("xpk_networks", "xpk_done")
    assert nets["error"] is None and nets["end_ref_s"] <= create["start_ref_s"]
    # Terraform's poll that saw the create DONE: from that DONE, exactly, to its next call.
    assert polls and polls[0]["key"] == "terraform_poll"
    assert polls[0]["start_ref_s"] == create["end_ref_s"] <= polls[0]["end_ref_s"] <= delete_default["start_ref_s"]
    assert pool["end_ref_s"] <= work["start_ref_s"] and work["end_ref_s"] is not None
    world.close()


async def test_the_peering_is_an_operation_with_its_profile_key(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    net, rng = "ray-a4-gpu-spot-net-0", "google-managed-services-ray-a4-gpu-spot-net-0"
    world.create_network(PROJECT, net)
    await world.create_address(PROJECT, rng, network=net, prefix_length=24)
    before = world.record.ref_now()
    await world.connect_peering(PROJECT, net, [rng])
    [op] = ops_of(world, "servicenetworking.connect")
    assert op["key"] == "peering_connect" and op["target"] == f"projects/{PROJECT}/global/networks/{net}"
    assert before <= op["start_ref_s"] < op["end_ref_s"] <= world.record.ref_now() and op["error"] is None
    world.close()


def test_a_span_ends_now_and_last_end_finds_the_latest_finished_operation() -> None:
    rec = Record(None, speed=60.0, started_at=0.0)
    target = "projects/p/locations/r/clusters/c"
    first = rec.start("gke.create_cluster", target)
    rec.end(first)
    rec.start("gke.create_node_pool", target + "/nodePools/np")   # still open: not an end
    rec.start("lustre.create", "projects/p/locations/z/instances/i")
    done = rec.snapshot()["operations"][0]["end_ref_s"]
    assert rec.last_end(target) == done
    assert rec.last_end("projects/other") is None
    rec.span("xpk.terraform_poll", target, done, key="terraform_poll")
    span = rec.snapshot()["operations"][-1]
    assert span["start_ref_s"] == done <= span["end_ref_s"] and span["key"] == "terraform_poll"
