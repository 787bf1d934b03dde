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

import json
import os
import random
import signal
import subprocess
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
KEEP_LUSTRE, KEEP_NETWORK, KEEP_RANGE = "not-rltuis-lustre", "not-rltuis-net", "not-rltuis-range"
KEEP_APIS = ["compute.googleapis.com", "servicenetworking.googleapis.com", "lustre.googleapis.com"]


@pytest.fixture
def chaos_sandbox(tmp_path_factory, request):
    """A daemon per case: its record and its one Kubernetes API hold that case alone, so a
    failed case cannot leave anything for the next (seeded per case: the same faults each run)."""
    from rltui_sandbox import manage

    root = Path(tmp_path_factory.mktemp("chaos-sbx"))
    status = manage.start(speed=SPEED, faults=FAULTS, seed=SEED + sum(map(ord, request.node.name)), root=root)
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


def _gcloud_once(user: User, done: list[str], make: list[str]) -> None:
    """Run `make` until `done` (a describe or list) shows it there: the injected faults hit the
    test's own calls too, and a retried create must not trip on its own first success."""
    for _ in range(8):
        seen = subprocess.run(["gcloud", *done, f"--project={user.project}", "--format=json"],
                              env=user.tool_env(), capture_output=True, text=True, timeout=120)
        if seen.returncode == 0 and json.loads(seen.stdout or "null"):
            return
        subprocess.run(["gcloud", *make, f"--project={user.project}", "--quiet"], env=user.tool_env(),
                       capture_output=True, text=True, timeout=300)
        time.sleep(0.5)
    raise AssertionError(f"gcloud {' '.join(make)} never took")


def _keep_resources(user: User, status) -> None:
    """A network with private services access and a Lustre instance in the project that rltui
    did not create (the Lustre API refuses a network without that access)."""
    from google.cloud import lustre_v1

    _gcloud_once(user, ["services", "list", "--enabled", f"--filter=config.name={KEEP_APIS[-1]}"],
                 ["services", "enable", *KEEP_APIS])
    _gcloud_once(user, ["compute", "networks", "describe", KEEP_NETWORK],
                 ["compute", "networks", "create", KEEP_NETWORK, "--subnet-mode=custom"])
    _gcloud_once(user, ["compute", "addresses", "describe", KEEP_RANGE, "--global"],
                 ["compute", "addresses", "create", KEEP_RANGE, "--global", "--purpose=VPC_PEERING",
                  "--prefix-length=24", f"--network={KEEP_NETWORK}"])
    _gcloud_once(user, ["services", "vpc-peerings", "list", f"--network={KEEP_NETWORK}"],
                 ["services", "vpc-peerings", "connect", "--service=servicenetworking.googleapis.com",
                  f"--ranges={KEEP_RANGE}", f"--network={KEEP_NETWORK}"])
    _, lustre, _, _ = _clients(status)
    inst = lustre_v1.Instance(capacity_gib=9000, network=f"projects/{user.project}/global/networks/{KEEP_NETWORK}",
                              filesystem="keep", per_unit_storage_throughput=1000)
    parent = f"projects/{user.project}/locations/{ZONE}"

    def create() -> None:
        from google.api_core.exceptions import NotFound

        try:  # a lost answer may have made it; a create that fails late takes it away again
            got = lustre.get_instance(name=f"{parent}/instances/{KEEP_LUSTRE}")
        except NotFound:
            lustre.create_instance(parent=parent, instance_id=KEEP_LUSTRE, instance=inst).result(timeout=120)
            got = lustre.get_instance(name=f"{parent}/instances/{KEEP_LUSTRE}")
        if got.state != lustre_v1.Instance.State.ACTIVE:
            time.sleep(1.0)
            raise RuntimeError(f"{KEEP_LUSTRE} is {got.state.name}")

    _retrying(create, "lustre", attempts=20)


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
            def listed(kind: str = kind) -> list[str]:
                out = user.kubectl("get", kind, "-l", "app.kubernetes.io/managed-by=rltui", "-o", "name")
                if out.returncode != 0:  # the sandbox's Kubernetes API fails some calls too
                    raise RuntimeError(out.stderr)
                return out.stdout.split()

            found[kind] = _retrying(listed, kind)
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
    assert KEEP_RANGE in found["addresses"] and len(found["addresses"]) == 2, found  # ours and the kept one
    for kind in ("rayclusters", "persistentvolumes", "persistentvolumeclaims", "secrets"):
        assert len(found[kind]) == 1, (kind, found)
    # Creations that succeeded (an injected failure ends an operation with an error: retried).
    assert len([op for op in operations(status, "gke.create_cluster", user.project) if not op["error"]]) == 1
    assert len([op for op in operations(status, "lustre.create", user.project) if not op["error"]]) == 2


def _assert_nothing_left(user: User, status) -> None:
    found = _inventory(user, status)
    assert found["clusters"] == [] and found["addresses"] == [KEEP_RANGE], found
    assert found["lustre"] == [KEEP_LUSTRE], found
    # `default` is Google's own, made when the Compute Engine API is enabled in a new project.
    assert sorted(found["networks"]) == sorted(["default", KEEP_NETWORK]), found
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
