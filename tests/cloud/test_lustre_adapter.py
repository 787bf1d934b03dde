"""The Lustre adapter against the sandbox's Lustre service (google-cloud-lustre, gRPC): a create
that fails late keeps its operation's error; passing states are waited through."""

from __future__ import annotations

import grpc
import pytest

from rltui.cloud.endpoints import Endpoints
from rltui.cloud.errors import CloudError
from rltui.cloud.lustre import LustreAdapter
from rltui_sandbox.grpc_lustre import add_lustre_services
from rltui_sandbox.profile import Clock, LatencyProfile
from rltui_sandbox.services import CODELAB_APIS
from rltui_sandbox.world import World

PROJECT, ZONE, INSTANCE = "lustre-adapter-test", "us-east1-b", "rl-demo-gpu-lustre"
SPEED = 6000.0  # a 12-minute create takes 0.12 s


@pytest.fixture
async def cloud(tmp_path):
    # Fresh projects have the APIs off; this harness starts with the codelab's four on (and
    # the `default` network's private services access, which the instance needs).
    world = World(tmp_path / "cloud", Clock(LatencyProfile.load(), speed=SPEED, seed=1),
                  enabled_services=CODELAB_APIS)
    server = grpc.aio.server()
    add_lustre_services(server, world)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    adapter = LustreAdapter(Endpoints(label="SANDBOX", grpc_target=f"127.0.0.1:{port}",
                                      time_scale=1 / SPEED), PROJECT, ZONE)
    yield world, adapter
    await server.stop(None)
    world.close()


async def create(adapter: LustreAdapter) -> str | None:
    return await adapter.create(INSTANCE, capacity_gib=9000, throughput=1000, network="default")


async def test_the_instance_is_made_without_the_deprecated_gke_support(cloud):
    _world, adapter = cloud
    await create(adapter)
    inst = await adapter.wait_active(INSTANCE, expected_s=0.12)
    assert inst.gke_support_enabled is False and inst.labels["managed-by"] == "rltui"


async def test_a_create_over_quota_fails_late_with_the_operations_error(cloud):
    world, adapter = cloud
    world.lustre_quota_gib = 4500
    op_name = await create(adapter)
    assert op_name
    with pytest.raises(CloudError) as caught:
        await adapter.wait_active(INSTANCE, expected_s=0.12)  # by target, as after a crash
    assert not caught.value.transient
    assert "Quota exceeded" in caught.value.message and "lustre.googleapis.com" in caught.value.message


async def test_passing_states_are_waited_through(cloud):
    world, adapter = cloud
    await create(adapter)
    await adapter.wait_active(INSTANCE, expected_s=0.12)
    world.set_lustre_state(PROJECT, ZONE, INSTANCE, "UPGRADING", seconds=0.3)
    seen = []
    inst = await adapter.wait_active(INSTANCE, expected_s=0.12, on_state=seen.append)
    assert seen[0] == "UPGRADING" and inst.state.name == "ACTIVE"


async def test_a_suspended_instance_is_reported_not_waited_for(cloud):
    world, adapter = cloud
    await create(adapter)
    await adapter.wait_active(INSTANCE, expected_s=0.12)
    world.set_lustre_state(PROJECT, ZONE, INSTANCE, "SUSPENDED", reason="billing disabled")
    with pytest.raises(CloudError, match="SUSPENDED"):
        await adapter.wait_active(INSTANCE, expected_s=0.12)
