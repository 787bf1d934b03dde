"""The real google-cloud-lustre clients (sync and async) against the sandbox's Lustre service."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions
from google.api_core import retry as retries
from google.cloud import lustre_v1
from google.protobuf import empty_pb2

from rltui_sandbox.world import LUSTRE_CAPACITY_TIERS, Subnet

PROJECT = "rl-demo-project"
ZONE = "us-east1-b"
PARENT = f"projects/{PROJECT}/locations/{ZONE}"
NAME = f"{PARENT}/instances/rl-demo-gpu-lustre"
# At speed 6000 a 12-minute create lasts ~0.12 s: poll often instead of the default 1 s.
FAST_POLL = retries.Retry(predicate=retries.if_exception_type(Exception), initial=0.02, maximum=0.1,
                          multiplier=1.5, timeout=20)
Instance = lustre_v1.Instance


def codelab_instance(**overrides) -> lustre_v1.Instance:
    """The instance the codelab creates: 9000 GiB, 1000 MB/s/TiB, filesystem `lustre`."""
    fields = dict(capacity_gib=9000, per_unit_storage_throughput=1000, filesystem="lustre",
                  network=f"projects/{PROJECT}/global/networks/default", gke_support_enabled=True,
                  labels={"app": "rl-demo"})
    fields.update(overrides)
    return Instance(**fields)


def create(client, instance_id: str = "rl-demo-gpu-lustre", **overrides):
    return client.create_instance(parent=PARENT, instance_id=instance_id, instance=codelab_instance(**overrides))


def test_create_reaches_active_with_a_mount_point(grpc_box, clients) -> None:
    client = clients.lustre(grpc_box)
    op = create(client)
    assert not op.done()
    assert op.metadata.verb == "create" and op.metadata.target == NAME
    assert client.get_instance(name=NAME).state == Instance.State.CREATING

    inst = op.result(timeout=30)  # the plain call the wizard makes, default polling

    assert inst.state == Instance.State.ACTIVE
    ip, fs = inst.mount_point.split("@tcp:/")
    assert fs == "lustre" and ip.startswith("10.80.")  # the default network's allocated range
    assert inst.capacity_gib == 9000 and inst.per_unit_storage_throughput == 1000
    assert dict(inst.labels) == {"app": "rl-demo"}
    assert client.get_instance(name=NAME) == inst
    assert grpc_box.call(grpc_box.world.lustre_dir, PROJECT, ZONE, "rl-demo-gpu-lustre").is_dir()


def test_list_shows_instances_per_zone_and_across_zones(grpc_box, clients) -> None:
    client = clients.lustre(grpc_box)
    create(client, "first").result(timeout=20, polling=FAST_POLL)
    client.create_instance(parent=f"projects/{PROJECT}/locations/us-central1-a", instance_id="second",
                           instance=codelab_instance()).result(timeout=20, polling=FAST_POLL)
    in_zone = [i.name for i in client.list_instances(parent=PARENT)]
    everywhere = [i.name.rsplit("/", 1)[1] for i in client.list_instances(parent=f"projects/{PROJECT}/locations/-")]
    assert in_zone == [f"{PARENT}/instances/first"]
    assert sorted(everywhere) == ["first", "second"]
    # Paging follows next_page_token through the real pager.
    pages = client.list_instances(request={"parent": f"projects/{PROJECT}/locations/-", "page_size": 1})
    assert sorted(i.name.rsplit("/", 1)[1] for i in pages) == ["first", "second"]


def test_a_second_instance_with_the_same_id_already_exists(grpc_box, clients) -> None:
    client = clients.lustre(grpc_box)
    create(client)
    with pytest.raises(exceptions.AlreadyExists, match="rl-demo-gpu-lustre"):
        create(client)


@pytest.mark.parametrize("instance_id, overrides, field", [
    ("Bad_ID", {}, "instance_id"),
    ("-starts-with-hyphen", {}, "instance_id"),
    ("ok-id", {"capacity_gib": 9001}, "capacity_gib"),
    ("ok-id", {"capacity_gib": 9000, "per_unit_storage_throughput": 500}, "capacity_gib"),
    ("ok-id", {"capacity_gib": 1_539_000}, "capacity_gib"),  # above 1,530,000 the step is 72,000
    ("ok-id", {"per_unit_storage_throughput": 300}, "per_unit_storage_throughput"),
    ("ok-id", {"filesystem": "lustre-fs"}, "filesystem"),
    ("ok-id", {"filesystem": "ninechars"}, "filesystem"),
    ("ok-id", {"network": "default"}, "network"),
])
def test_invalid_requests_name_the_field(grpc_box, clients, instance_id, overrides, field) -> None:
    client = clients.lustre(grpc_box)
    with pytest.raises(exceptions.InvalidArgument) as err:
        create(client, instance_id, **overrides)
    assert field in err.value.message
    with pytest.raises(exceptions.NotFound):
        client.get_instance(name=f"{PARENT}/instances/{instance_id}")


def test_capacity_table_allows_the_documented_sizes() -> None:
    tier = LUSTRE_CAPACITY_TIERS
    assert tier[1000].allows(9_000) and tier[1000].allows(1_530_000) and tier[1000].allows(1_584_000)
    assert not tier[1000].allows(10_080_000)  # above the maximum
    assert tier[500].allows(18_000) and not tier[500].allows(9_000)
    assert tier[250].allows(36_000) and not tier[250].allows(18_000)
    assert tier[125].allows(72_000) and not tier[125].allows(144_000 + 9_000)


def test_network_without_private_services_access_is_refused_until_peered(grpc_box, clients) -> None:
    client = clients.lustre(grpc_box)
    world = grpc_box.world
    net = "ray-a4-gpu-spot-net-0"
    grpc_box.call(world.create_network, PROJECT, net, subnets=[Subnet(f"{net}-sub", "us-east1", "192.168.0.0/18")])
    network = f"projects/{PROJECT}/global/networks/{net}"

    with pytest.raises(exceptions.FailedPrecondition) as err:
        create(client, network=network)
    assert "private services access" in err.value.message and net in err.value.message

    # The codelab's fix: allocate a /24 and connect it to servicenetworking.
    grpc_box.run(world.create_address(PROJECT, f"google-managed-services-{net}", network=net, prefix_length=24))
    grpc_box.run(world.connect_peering(PROJECT, net, [f"google-managed-services-{net}"]))
    inst = create(client, network=network).result(timeout=20, polling=FAST_POLL)
    assert inst.mount_point == "10.90.0.2@tcp:/lustre"


def test_unknown_network_is_invalid(grpc_box, clients) -> None:
    with pytest.raises(exceptions.InvalidArgument, match="does not exist"):
        create(clients.lustre(grpc_box), network=f"projects/{PROJECT}/global/networks/nope")


def test_delete_goes_deleting_then_gone_with_its_data(grpc_box, clients) -> None:
    client = clients.lustre(grpc_box)
    create(client).result(timeout=20, polling=FAST_POLL)
    folder = grpc_box.call(grpc_box.world.lustre_dir, PROJECT, ZONE, "rl-demo-gpu-lustre")
    (folder / "step_1").mkdir()

    op = client.delete_instance(name=NAME)
    assert client.get_instance(name=NAME).state == Instance.State.DELETING
    with pytest.raises(exceptions.FailedPrecondition):
        client.delete_instance(name=NAME)
    assert op.result(timeout=20, polling=FAST_POLL) == empty_pb2.Empty()

    with pytest.raises(exceptions.NotFound, match="rl-demo-gpu-lustre"):
        client.get_instance(name=NAME)
    with pytest.raises(exceptions.NotFound):
        client.delete_instance(name=NAME)
    assert not folder.exists()


def test_operations_are_listed_and_a_create_can_be_cancelled(make_grpc_box, clients) -> None:
    box = make_grpc_box(speed=60.0)  # 12 minutes = 12 s: the create is surely still running
    client = clients.lustre(box)
    op = create(client)
    listed = client.list_operations(request={"name": PARENT})
    assert [o.name for o in listed.operations] == [op.operation.name]
    assert not client.get_operation(request={"name": op.operation.name}).done

    client.cancel_operation(request={"name": op.operation.name})

    with pytest.raises(exceptions.Cancelled):
        op.result(timeout=5, polling=FAST_POLL)
    with pytest.raises(exceptions.NotFound):
        client.get_instance(name=NAME)
    client.delete_operation(request={"name": op.operation.name})
    with pytest.raises(exceptions.NotFound):
        client.get_operation(request={"name": op.operation.name})


def test_repeated_request_id_returns_the_first_operation(grpc_box, clients) -> None:
    client = clients.lustre(grpc_box)
    request = {"parent": PARENT, "instance_id": "rl-demo-gpu-lustre", "instance": codelab_instance(),
               "request_id": "3f1c2f0e-5a8d-4d7e-9a51-0c1f9a7b2e11"}
    first = client.create_instance(request=request)
    second = client.create_instance(request=request)
    assert first.operation.name == second.operation.name


async def test_async_client_create_get_list_delete(grpc_box, clients) -> None:
    client = clients.lustre_async(grpc_box)
    start = time.monotonic()
    op = await client.create_instance(parent=PARENT, instance_id="rl-demo-gpu-lustre", instance=codelab_instance())
    inst = await op.result(timeout=20)
    assert inst.state == Instance.State.ACTIVE and inst.mount_point.endswith("@tcp:/lustre")
    assert time.monotonic() - start >= 0.1  # 12 profile minutes at speed 6000, -10 % jitter

    got = await client.get_instance(name=NAME)
    assert got.mount_point == inst.mount_point
    names = [i.name async for i in await client.list_instances(parent=PARENT)]
    assert names == [NAME]

    op = await client.delete_instance(name=NAME)
    await op.result(timeout=20)
    with pytest.raises(exceptions.NotFound):
        await client.get_instance(name=NAME)


def test_a_create_over_quota_fails_late_and_keeps_its_error(grpc_box, clients) -> None:
    from google.rpc import error_details_pb2

    client = clients.lustre(grpc_box)
    grpc_box.call(setattr, grpc_box.world, "lustre_quota_gib", 18_000)
    create(client, "first").result(timeout=20, polling=FAST_POLL)  # 9,000 of 18,000 GiB
    op = create(client, "second", capacity_gib=18_000)  # accepted now, refused later
    assert client.get_instance(name=f"{PARENT}/instances/second").state == Instance.State.CREATING

    err = op.exception(timeout=20)

    assert isinstance(err, exceptions.ResourceExhausted)
    assert err.message.startswith("Quota exceeded for quota metric 'Lustre storage capacity (GiB) per zone "
                                  "and network'")
    assert "for consumer 'project_number:" in err.message
    raw = client.get_operation(request={"name": op.operation.name})
    assert raw.done and raw.error.code == 8  # google.rpc.Code.RESOURCE_EXHAUSTED
    [detail] = raw.error.details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    assert info.reason == "RESOURCE_QUOTA_EXCEEDED" and info.metadata["service"] == "lustre.googleapis.com"
    assert info.metadata["quota_metric"] == "lustre.googleapis.com/capacity"
    with pytest.raises(exceptions.NotFound):  # no failed state: the instance is gone
        client.get_instance(name=f"{PARENT}/instances/second")
    # The quota is per zone (and network): another zone still has room.
    other = client.create_instance(parent=f"projects/{PROJECT}/locations/us-central1-a", instance_id="second",
                                   instance=codelab_instance(capacity_gib=18_000))
    assert other.result(timeout=20, polling=FAST_POLL).state == Instance.State.ACTIVE
    ops = [o for o in grpc_box.world.record.snapshot()["operations"] if o["kind"] == "lustre.create"]
    assert [o["error"] for o in ops] == [None, "RESOURCE_EXHAUSTED", None]


def test_a_stockout_fault_ends_the_create_with_internal(make_grpc_box, clients) -> None:
    from rltui_sandbox.faults import Faults

    faults = Faults(0.0, seed=3)
    box = make_grpc_box(faults=faults)
    faults.force("lustre:create-late")
    client = clients.lustre(box)
    op = create(client)
    assert not op.done()
    err = op.exception(timeout=20)
    assert isinstance(err, exceptions.InternalServerError)
    assert err.message == "an internal error has occurred"
    with pytest.raises(exceptions.NotFound):
        client.get_instance(name=NAME)
    # The next create is not affected.
    assert create(client).result(timeout=20, polling=FAST_POLL).state == Instance.State.ACTIVE


def test_an_active_instance_can_be_repairing_for_a_while(make_grpc_box, clients) -> None:
    box = make_grpc_box()
    client = clients.lustre(box)
    create(client).result(timeout=20, polling=FAST_POLL)
    box.call(box.world.set_lustre_state, PROJECT, ZONE, "rl-demo-gpu-lustre", "REPAIRING", seconds=0.3)
    assert client.get_instance(name=NAME).state == Instance.State.REPAIRING
    time.sleep(0.5)
    assert client.get_instance(name=NAME).state == Instance.State.ACTIVE
