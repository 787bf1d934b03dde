"""The World on its own: persistence across restarts, teardown order, events, and fault injection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import container_v1, lustre_v1

from rltui_sandbox.faults import Faults
from rltui_sandbox.profile import Clock, LatencyProfile
from rltui_sandbox.services import CODELAB_APIS, DEFAULT_ENABLED
from rltui_sandbox.world import FailedPrecondition, InvalidArgument, NotFound, World

PROJECT = "any-project-id-works"
ZONE = "us-east1-b"
State = lustre_v1.Instance.State


def world_at(state_dir: Path, speed: float = 6000.0) -> World:
    return World(state_dir, Clock(LatencyProfile.load(), speed=speed, seed=2), enabled_services=CODELAB_APIS)


def codelab_instance(network: str = "default") -> lustre_v1.Instance:
    return lustre_v1.Instance(capacity_gib=9000, per_unit_storage_throughput=1000, filesystem="lustre",
                              network=f"projects/{PROJECT}/global/networks/{network}", labels={"team": "rl"})


async def test_a_new_world_on_the_same_state_dir_sees_everything(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    op = world.create_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre", codelab_instance())
    await world.wait_operation(op.name, timeout=5)
    world.create_cluster(PROJECT, "us-east1", container_v1.Cluster(name="ray-a4-gpu-spot"), seconds=0.0)
    await world.enable_services(PROJECT, ["lustre.googleapis.com", "container.googleapis.com"])
    before = world.get_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre")
    world.close()

    again = world_at(tmp_path)
    inst = again.get_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre")
    assert inst == before and inst.state == State.ACTIVE and dict(inst.labels) == {"team": "rl"}
    assert again.get_operation(op.name).done
    assert again.get_cluster(PROJECT, "us-east1", "ray-a4-gpu-spot").status == container_v1.Cluster.Status.RUNNING
    assert again.list_services(PROJECT) == sorted(DEFAULT_ENABLED | set(CODELAB_APIS))
    assert again.lustre_dir(PROJECT, ZONE, "rl-demo-gpu-lustre").is_dir()
    assert json.loads((tmp_path / "world.json").read_text())["version"] == 1
    again.close()


async def test_an_operation_in_flight_when_the_daemon_died_completes_after_restart(tmp_path: Path) -> None:
    world = world_at(tmp_path, speed=3000.0)  # 12 minutes = 0.24 s
    op = world.create_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre", codelab_instance())
    assert world.get_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre").state == State.CREATING
    world.close()  # the daemon dies with the create in flight

    again = world_at(tmp_path, speed=3000.0)
    events = []
    again.subscribe(events.append)
    done = await again.wait_operation(op.name, timeout=5)
    assert done.done and not done.error.message
    assert again.get_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre").state == State.ACTIVE
    assert [(e.kind, e.name) for e in events] == [("lustre_active", "rl-demo-gpu-lustre")]
    assert events[0].data["mount_point"].endswith("@tcp:/lustre")
    again.close()


async def test_a_deadline_passed_while_down_is_applied_on_load(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    world.create_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre", codelab_instance())
    world.close()
    await asyncio.sleep(0.2)  # longer than 12 minutes at speed 6000
    again = world_at(tmp_path)
    assert again.get_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre").state == State.ACTIVE
    again.close()


async def test_peering_then_lustre_then_teardown_in_order(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    net, rng = "ray-a4-gpu-spot-net-0", "google-managed-services-ray-a4-gpu-spot-net-0"
    world.create_network(PROJECT, net)
    addr = await world.create_address(PROJECT, rng, network=net, prefix_length=24)
    assert (addr.address, addr.status, addr.purpose, addr.prefix_length) == ("10.90.0.0", "RESERVED", "VPC_PEERING", 24)
    peering = await world.connect_peering(PROJECT, net, [rng])
    assert (peering.status, peering.ranges, peering.name) == ("ACTIVE", [rng], "servicenetworking-googleapis-com")
    with pytest.raises(FailedPrecondition, match="UpdateConnection"):
        await world.connect_peering(PROJECT, net, [rng])
    assert (await world.update_peering(PROJECT, net, [rng], force=True)).ranges == [rng]  # codelab's fallback
    op = world.create_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre", codelab_instance(net))
    await world.wait_operation(op.name, timeout=5)

    # Each piece is refused while the next one down still uses it.
    with pytest.raises(FailedPrecondition, match="Producer services"):
        await world.delete_peering(PROJECT, net)
    with pytest.raises(FailedPrecondition, match="already being used"):
        await world.delete_address(PROJECT, rng)
    with pytest.raises(FailedPrecondition, match="already being used"):
        world.delete_network(PROJECT, net)

    await world.wait_operation(world.delete_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre").name, timeout=5)
    # Service Networking holds the connection a while after the instance is gone (FACTS).
    with pytest.raises(FailedPrecondition, match="Producer services"):
        await world.delete_peering(PROJECT, net)
    await asyncio.sleep(world.clock.seconds("peering_release_lag"))
    await world.delete_peering(PROJECT, net)
    await world.delete_address(PROJECT, rng)
    world.delete_network(PROJECT, net)
    assert [n.name for n in world.list_networks(PROJECT)] == ["default"]
    with pytest.raises(NotFound):
        world.get_peering(PROJECT, net)
    world.close()


async def test_subscribers_may_be_coroutines_and_can_unsubscribe(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    heard, quiet = [], []

    async def controller(event) -> None:
        await asyncio.sleep(0)
        heard.append((event.kind, event.name))

    world.subscribe(controller)
    world.subscribe(quiet.append)()  # unsubscribed at once
    op = world.create_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre", codelab_instance())
    await world.wait_operation(op.name, timeout=5)
    await world.wait_operation(world.delete_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre").name, timeout=5)
    await asyncio.sleep(0.01)
    assert heard == [("lustre_active", "rl-demo-gpu-lustre"), ("lustre_deleted", "rl-demo-gpu-lustre")]
    assert quiet == []
    world.close()


async def test_every_project_starts_with_private_services_access_on_default(tmp_path: Path) -> None:
    world = world_at(tmp_path)
    for project in ("p1", "some-other-project-123"):
        peering = world.get_peering(project, "default")
        assert peering.status == "ACTIVE"
        assert world.get_address(project, peering.ranges[0]).purpose == "VPC_PEERING"
    with pytest.raises(InvalidArgument):
        world.list_networks("")
    world.close()


async def test_a_create_in_flight_blocks_delete_and_peering_removal(tmp_path: Path) -> None:
    world = world_at(tmp_path, speed=60.0)
    world.create_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre", codelab_instance())
    with pytest.raises(FailedPrecondition, match="CREATING"):
        world.delete_lustre_instance(PROJECT, ZONE, "rl-demo-gpu-lustre")
    with pytest.raises(FailedPrecondition):
        await world.delete_peering(PROJECT, "default")
    world.close()


def _fault_pattern(make_grpc_box, clients, seed: int, state: str) -> list[str]:
    box = make_grpc_box(faults=Faults(0.3, seed=seed), state=state)
    client = clients.lustre(box)
    outcome = []
    for _ in range(30):
        try:
            client.get_instance(name=f"projects/{PROJECT}/locations/{ZONE}/instances/none", retry=None, timeout=5)
        except exceptions.GoogleAPICallError as exc:
            outcome.append(exc.grpc_status_code.name)
    return outcome


def test_faults_are_reproducible_per_seed(make_grpc_box, clients) -> None:
    first = _fault_pattern(make_grpc_box, clients, seed=7, state="a")
    again = _fault_pattern(make_grpc_box, clients, seed=7, state="b")
    other = _fault_pattern(make_grpc_box, clients, seed=8, state="c")
    assert first == again
    assert first != other
    assert {"UNAVAILABLE", "RESOURCE_EXHAUSTED"} <= set(first)  # both transient kinds occur
    assert "NOT_FOUND" in first  # the calls that got through answered normally
    assert 0.1 < sum(code != "NOT_FOUND" for code in first) / len(first) < 0.6


def test_fault_message_says_it_is_transient(make_grpc_box, clients) -> None:
    box = make_grpc_box(faults=Faults(1.0, seed=0))
    with pytest.raises(exceptions.GoogleAPICallError) as err:
        clients.gke(box).list_clusters(parent=f"projects/{PROJECT}/locations/-", retry=None)
    assert err.value.grpc_status_code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert "grpc:ClusterManager/ListClusters" in err.value.message
