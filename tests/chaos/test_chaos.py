"""The chaos matrix (`make chaos`, outside `make test`): SIGKILL of `rltui up` at 10 seeded random
moments and of `rltui down` at 5, each followed by a rerun, against a sandbox that fails 20% of
the calls it may fail (`--faults 0.2`); then exactly one of each resource after `up`, nothing of
rltui's after `down`, and a Lustre instance and a network rltui did not create left as they were.
And a Spot preemption during training with no rltui process running: SUCCEEDED, at most one save
period of steps lost (tests/e2e/test_recovery.py runs that case in `make test`).

RLTUI_CHAOS_SEED picks the moments (default below); each case prints its moment, so a failure is
rerun with the same seed. A rerun that the injected faults make fail is run again, up to
RERUNS times: what must hold is the end state, never a duplicate.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.headless_user import CLUSTER, ZONE, User, make_user, operations, preempted_run_recovers

pytestmark = [pytest.mark.slow, pytest.mark.chaos]

SEED = int(os.environ.get("RLTUI_CHAOS_SEED") or 20261201)
SPEED, FAULTS = 300.0, 0.2
UP_S, DOWN_S = 30.0, 12.0  # how long a whole `up` / `down` takes here at that speed (measured)
_rng = random.Random(SEED)
UP_KILLS = [round(_rng.uniform(0.5, UP_S), 2) for _ in range(10)]
DOWN_KILLS = [round(_rng.uniform(0.5, DOWN_S), 2) for _ in range(5)]
RERUNS = 3
KEEP_LUSTRE, KEEP_NETWORK = "not-rltuis-lustre", "not-rltuis-net"


@pytest.fixture(scope="module")
def chaos_sandbox(tmp_path_factory):
    from rltui.sandbox import manage

    root = Path(tmp_path_factory.mktemp("chaos-sbx"))
    status = manage.start(speed=SPEED, faults=FAULTS, seed=SEED, root=root)
    try:
        yield root, status.info
    finally:
        manage.stop(root)


def _clients(status):
    import grpc
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1, container_v1, lustre_v1
    from google.cloud.container_v1.services.cluster_manager.transports import ClusterManagerGrpcTransport
    from google.cloud.lustre_v1.services.lustre.transports import LustreGrpcTransport

    channel = grpc.insecure_channel(status["grpc"])
    rest = {"credentials": AnonymousCredentials(), "client_options": {"api_endpoint": status["compute"]}}
    return (container_v1.ClusterManagerClient(transport=ClusterManagerGrpcTransport(channel=channel)),
            lustre_v1.LustreClient(transport=LustreGrpcTransport(channel=channel)),
            compute_v1.NetworksClient(**rest), compute_v1.GlobalAddressesClient(**rest))


def _retrying(call, what: str, attempts: int = 8):
    """The test's own calls meet the injected faults too: try again, as any client would."""
    for n in range(attempts):
        try:
            return call()
        except Exception:  # noqa: BLE001 - an injected UNAVAILABLE / 503
            if n == attempts - 1:
                raise
            time.sleep(0.3 * (n + 1))
    raise AssertionError(what)


def _keep_resources(user: User, status) -> None:
    """A network and a Lustre instance in the project that rltui did not create."""
    from google.cloud import compute_v1, lustre_v1

    _, lustre, networks, _ = _clients(status)
    net = compute_v1.Network(name=KEEP_NETWORK, auto_create_subnetworks=False)
    _retrying(lambda: networks.insert(project=user.project, network_resource=net).result(), "network")
    inst = lustre_v1.Instance(capacity_gib=18000, network=f"projects/{user.project}/global/networks/{KEEP_NETWORK}",
                              filesystem="keep", per_unit_storage_throughput=125)
    _retrying(lambda: lustre.create_instance(parent=f"projects/{user.project}/locations/{ZONE}",
                                             instance_id=KEEP_LUSTRE, instance=inst).result(timeout=120), "lustre")


def _inventory(user: User, status) -> dict[str, list[str]]:
    gke, lustre, networks, addresses = _clients(status)
    found = {
        "clusters": [c.name for c in _retrying(lambda: gke.list_clusters(
            parent=f"projects/{user.project}/locations/-").clusters, "clusters")],
        "lustre": [i.name.rsplit("/", 1)[-1] for i in _retrying(lambda: list(lustre.list_instances(
            parent=f"projects/{user.project}/locations/-")), "instances")],
        "networks": [n.name for n in _retrying(lambda: list(networks.list(project=user.project)), "networks")],
        "addresses": [a.name for a in _retrying(lambda: list(addresses.list(project=user.project)), "addresses")],
    }
    if found["clusters"]:
        for kind in ("rayclusters", "persistentvolumes", "persistentvolumeclaims", "secrets"):
            out = user.kubectl("get", kind, "-l", "app.kubernetes.io/managed-by=rltui", "-o", "name")
            found[kind] = out.stdout.split()
    return found


def _until_ok(user: User, *args: str) -> str:
    outputs = []
    for _ in range(RERUNS):
        out = user.run(*args, timeout=600)
        outputs.append(out.stdout[-2500:] + out.stderr[-1500:])
        if out.returncode == 0:
            return out.stdout
    raise AssertionError(f"`rltui {' '.join(args)}` failed {RERUNS} times:\n" + "\n----\n".join(outputs))


def _kill_at(user: User, moment: float, *args: str) -> None:
    proc = user.start(*args)
    try:
        proc.wait(timeout=moment)
    except Exception:  # noqa: BLE001 - still running: that is the point
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _assert_one_of_each(user: User, status) -> None:
    found = _inventory(user, status)
    assert found["clusters"] == [CLUSTER], found
    assert sorted(found["lustre"]) == sorted(["rl-demo-gpu-lustre", KEEP_LUSTRE]), found
    assert len(found["addresses"]) == 1, found
    for kind in ("rayclusters", "persistentvolumes", "persistentvolumeclaims", "secrets"):
        assert len(found[kind]) == 1, (kind, found)
    assert len(operations(status, "gke.create_cluster", user.project)) == 1
    assert len(operations(status, "lustre.create", user.project)) == 2  # ours and the one we keep


def _assert_nothing_left(user: User, status) -> None:
    found = _inventory(user, status)
    assert found["clusters"] == [] and found["addresses"] == [], found
    assert found["lustre"] == [KEEP_LUSTRE], found
    assert found["networks"] == [KEEP_NETWORK], found
    left = [r for r in user.status_json()["resources"] if r["state"] != "absent" and (r["owned"] or r.get("leak"))]
    assert left == [], left


@pytest.mark.parametrize("case,moment", list(enumerate(UP_KILLS)), ids=[f"up-{i}@{m}s" for i, m in enumerate(UP_KILLS)])
def test_sigkill_of_up_then_a_rerun_makes_one_of_each(chaos_sandbox, tmp_path, case, moment):
    root, status = chaos_sandbox
    user = make_user(tmp_path / "home", f"chaos-up-{case}", root, status)
    _keep_resources(user, status)
    _kill_at(user, moment, "up", "--yes")
    _until_ok(user, "up", "--yes")
    _assert_one_of_each(user, status)
    _until_ok(user, "down", "--yes")
    _assert_nothing_left(user, status)


@pytest.mark.parametrize("case,moment", list(enumerate(DOWN_KILLS)),
                         ids=[f"down-{i}@{m}s" for i, m in enumerate(DOWN_KILLS)])
def test_sigkill_of_down_then_a_rerun_leaves_nothing(chaos_sandbox, tmp_path, case, moment):
    root, status = chaos_sandbox
    user = make_user(tmp_path / "home", f"chaos-down-{case}", root, status)
    _keep_resources(user, status)
    _until_ok(user, "up", "--yes")
    _kill_at(user, moment, "down", "--yes")
    _until_ok(user, "down", "--yes")
    _assert_nothing_left(user, status)


def test_a_preemption_with_no_rltui_running_ends_succeeded(chaos_sandbox, tmp_path):
    root, status = chaos_sandbox
    user = make_user(tmp_path / "home", "chaos-preempt", root, status)
    _until_ok(user, "up", "--yes")
    try:
        preempted_run_recovers(user)
    finally:
        _until_ok(user, "down", "--yes")
