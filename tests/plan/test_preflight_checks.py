"""plan/checks.py against the sandbox's parts in-process (tests/harness.py): a World, its Compute
routes, its REST APIs (Resource Manager's testIamPermissions) and its gRPC services (GKE, Lustre,
Service Usage), reached by rltui's own adapters and the official clients, with an ADC file whose
token the sandbox's token endpoint issues. What a user would see on `up --check`: a permission
they lack names its step and the permission; a zone without the machine type fails with the fix;
a name taken by something rltui did not make fails, rltui's own passes; a quota with room passes;
the Spot GPU quota is read from Cloud Quotas (its API off: unknown, with where to look); the
address quotas count the blueprint's NAT IPs; xpk's Terraform needs its router and address
permissions.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from aiohttp import web

from rltui.cloud.endpoints import Endpoints
from rltui.config import parse_config
from rltui.envfile import EnvFile
from rltui.plan.checks import cloud_checks
from rltui.plan.context import Context
from rltui.plan.preflight import Check
from rltui_sandbox.kube.auth import TokenIssuer, add_token_route, write_adc
from rltui_sandbox.kube.tls import ensure_tls
from rltui_sandbox.rest_compute import add_compute_routes
from rltui_sandbox.services import CODELAB_APIS
from tests import harness

DATA = Path(__file__).parent.parent / "data"
PROJECT = "checks-project"


@pytest.fixture(scope="module")
def tls_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_tls(tmp_path_factory.mktemp("tls")).folder


CLOUD_QUOTAS = "cloudquotas.googleapis.com"


@asynccontextmanager
async def sandbox(tmp_path: Path, tls_folder: Path, apis: tuple[str, ...]) -> AsyncIterator[dict[str, Any]]:
    async with AsyncExitStack() as stack:
        enter = stack.enter_async_context
        world = await enter(harness.world(tmp_path / "state", enabled_services=apis))
        issuer = TokenIssuer.load(tls_folder)
        app = web.Application()
        add_compute_routes(app, world)
        add_token_route(app, issuer)
        url = (await enter(harness.serve_app(app))).url
        adc = write_adc(tmp_path / "adc.json", f"{url}/token", issuer)
        rest = await enter(harness.rest_sites(world))
        grpc_target = await enter(harness.grpc_server(world, ("lustre", "container", "serviceusage", "quotas")))
        endpoints = Endpoints(label="SANDBOX", grpc_target=grpc_target, compute_url=url, adc_file=adc, rest=rest)
        env = (DATA / "env" / "devrel-demos.env.sh").read_text().replace(
            'PROJECT_ID="', f'PROJECT_ID="{PROJECT}" # was: "', 1)
        (tmp_path / "env.sh").write_text(env)
        cfg = parse_config(EnvFile.read(tmp_path / "env.sh").values())
        ctx = Context(cfg, endpoints, root=tmp_path / "rltui-state")
        try:
            yield {"world": world, "ctx": ctx}
        finally:
            await ctx.close()


@pytest.fixture
async def box(tmp_path: Path, tls_folder: Path) -> AsyncIterator[dict[str, Any]]:
    """The codelab's four APIs and Cloud Quotas on."""
    async with sandbox(tmp_path, tls_folder, (*CODELAB_APIS, CLOUD_QUOTAS)) as b:
        yield b


@pytest.fixture
async def fresh_box(tmp_path: Path, tls_folder: Path) -> AsyncIterator[dict[str, Any]]:
    """The codelab's four APIs on, Cloud Quotas off (as in a new project)."""
    async with sandbox(tmp_path, tls_folder, CODELAB_APIS) as b:
        yield b


async def checks(box: dict[str, Any]) -> dict[str, Check]:
    return {c.name: c for c in await cloud_checks(box["ctx"], set(CODELAB_APIS))}


async def test_everything_passes_with_room_in_the_quota(box) -> None:
    box["world"].quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = 100.0
    got = await checks(box)
    gpu = got["Spot GPU quota (NVIDIA_B200)"]
    assert gpu.ok is True, gpu
    assert gpu.detail == ("64 needed, 100 granted in us-east1 (PREEMPTIBLE-GPUS-PER-GPU-FAMILY-per-project-region;"
                          " what is in use is not read)")
    assert got["CPU quota (CPUS)"].ok is True
    assert got["a4-highgpu-8g in us-east1-b"].ok is True
    assert "Lustre capacity quota" not in got           # never read: not listed as unknown
    assert not [c for c in got.values() if c.ok is False], got


async def test_the_spot_gpu_quota_comes_from_cloud_quotas_and_a_short_one_fails(box) -> None:
    box["world"].quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = 32.0
    gpu = (await checks(box))["Spot GPU quota (NVIDIA_B200)"]
    assert gpu.ok is False and gpu.detail.startswith("64 needed, 32 granted in us-east1")
    assert "console.cloud.google.com/iam-admin/quotas?project=checks-project" in gpu.fix
    assert "likely none granted" not in gpu.detail


async def test_with_cloud_quotas_off_the_gpu_quota_is_unknown_with_where_to_look(fresh_box) -> None:
    gpu = (await checks(fresh_box))["Spot GPU quota (NVIDIA_B200)"]
    assert gpu.ok is None and "Cloud Quotas API" in gpu.detail and "is off" in gpu.detail
    assert gpu.fix.startswith("gcloud services enable cloudquotas.googleapis.com --project=checks-project")
    assert "console.cloud.google.com/iam-admin/quotas?project=checks-project" in gpu.fix


async def test_a_device_whose_gpu_family_is_unknown_says_where_to_look(box) -> None:
    ctx = box["ctx"]
    ctx.cfg = ctx.cfg.model_copy(update={"device_type": "h200-141gb-8"})
    got = {c.name: c for c in await cloud_checks(ctx, set(CODELAB_APIS))}
    gpu = got["Spot GPU quota (nvidia-h200-141gb)"]
    assert gpu.ok is None and "not known" in gpu.detail
    assert "iam-admin/quotas" in gpu.fix
    assert "gcloud quotas info list --service=compute.googleapis.com --project=checks-project" in gpu.fix


async def test_the_address_quotas_count_the_blueprints_nat_ips(box) -> None:
    box["world"].quotas.update({"IN_USE_ADDRESSES": 17.0, "STATIC_ADDRESSES": 3.0})
    got = await checks(box)
    in_use = got["address quota (IN_USE_ADDRESSES)"]
    assert in_use.ok is False
    assert in_use.detail.startswith("18 needed (14 nodes' external IPs and the blueprint's 4 NAT IPs), 17 free")
    static = got["static address quota (STATIC_ADDRESSES)"]
    assert static.ok is False and static.detail.startswith("4 needed (the blueprint's 4 NAT IPs), 3 free")
    box["world"].quotas.update({"IN_USE_ADDRESSES": 18.0, "STATIC_ADDRESSES": 4.0})
    got = await checks(box)
    assert got["address quota (IN_USE_ADDRESSES)"].ok is True
    assert got["static address quota (STATIC_ADDRESSES)"].ok is True


async def test_xpks_terraform_needs_router_address_and_firewall_permissions(box) -> None:
    box["world"].denied_permissions = {"compute.routers.create", "compute.addresses.use",
                                       "compute.firewalls.delete"}
    got = await checks(box)
    net = got["permissions: xpk's networks (Terraform)"]
    assert net.ok is False and net.detail == "missing compute.routers.create, compute.addresses.use"
    assert got["permissions: teardown"].detail == "missing compute.firewalls.delete"


async def test_with_no_preemptible_quota_spot_gpus_use_the_standard_quota(box) -> None:
    """Spot VMs use the standard quota where no preemptible quota is granted
    (compute/docs/instances/create-use-preemptible): preemptible 0, standard 64 passes, saying so."""
    box["world"].quotas.update({"PREEMPTIBLE_NVIDIA_B200_GPUS": 0.0, "NVIDIA_B200_GPUS": 64.0})
    gpu = (await checks(box))["Spot GPU quota (NVIDIA_B200)"]
    assert gpu.ok is True, gpu
    assert gpu.detail == ("64 needed; no preemptible quota granted in us-east1, so Spot VMs use the"
                          " standard quota: 64 granted (GPUS-PER-GPU-FAMILY-per-project-region;"
                          " what is in use is not read)")


async def test_neither_quota_covering_the_need_fails_naming_both(box) -> None:
    box["world"].quotas.update({"PREEMPTIBLE_NVIDIA_B200_GPUS": 0.0, "NVIDIA_B200_GPUS": 32.0})
    gpu = (await checks(box))["Spot GPU quota (NVIDIA_B200)"]
    assert gpu.ok is False
    assert "standard quota: 32 granted (GPUS-PER-GPU-FAMILY-per-project-region" in gpu.detail
    assert gpu.fix.startswith("request Spot (preemptible) or standard NVIDIA_B200 GPUs in us-east1")


async def test_a_granted_but_short_preemptible_quota_is_not_made_up_by_the_standard_one(box) -> None:
    """"After Compute Engine grants you preemptible CPU quota in that region, all preemptible VMs
    count against that quota": the standard quota does not help then."""
    box["world"].quotas.update({"PREEMPTIBLE_NVIDIA_B200_GPUS": 32.0, "NVIDIA_B200_GPUS": 128.0})
    gpu = (await checks(box))["Spot GPU quota (NVIDIA_B200)"]
    assert gpu.ok is False and gpu.detail.startswith("64 needed, 32 granted in us-east1 (PREEMPTIBLE-")
    assert "do not use the standard quota" in gpu.detail


async def test_the_ip_range_peering_and_firewall_permissions_are_asked(box) -> None:
    """Private Services Access's required permissions, the range's setLabels, its INTERNAL
    delete, the peering's compute fallback and the Lustre firewall rule's insert."""
    box["world"].denied_permissions = {
        "compute.globalAddresses.createInternal", "compute.globalAddresses.setLabels",
        "compute.networks.use", "compute.globalAddresses.deleteInternal",
        "compute.networks.removePeering", "compute.firewalls.create"}
    got = await checks(box)
    assert got["permissions: IP range"].detail == ("missing compute.globalAddresses.createInternal,"
                                                   " compute.globalAddresses.setLabels, compute.networks.use")
    assert got["permissions: teardown"].detail == ("missing compute.globalAddresses.deleteInternal,"
                                                   " compute.networks.removePeering")
    assert got["permissions: Lustre firewall rule"].detail == "missing compute.firewalls.create"
    assert got["permissions: Lustre firewall rule"].ok is False


def test_the_sandbox_knows_every_permission_rltui_asks_and_refuses_another() -> None:
    from rltui.plan.checks import STEP_PERMISSIONS
    from rltui_sandbox.rest_resourcemanager import KNOWN_PERMISSIONS

    assert {p for perms in STEP_PERMISSIONS.values() for p in perms} <= KNOWN_PERMISSIONS


async def test_a_permission_the_sandbox_does_not_know_is_refused(box) -> None:
    from google.api_core import exceptions as gexc

    from rltui.plan.checks import quota_adapter

    with pytest.raises(Exception) as err:
        await quota_adapter(box["ctx"]).held_permissions(["compute.globalAddresses.creatInternal"])
    assert isinstance(err.value.__cause__, gexc.BadRequest), err.value


@pytest.mark.parametrize("labels, description, ours", [
    ({}, "", False),
    ({"managed-by": "someone"}, "Managed Lustre VPC Peering", False),
    ({"managed-by": "rltui"}, "", True),
    ({}, "managed-by=rltui: IP range for Lustre", True),
])
async def test_an_ip_range_without_rltuis_mark_fails_with_the_command_that_deletes_it(
        box, labels, description, ours) -> None:
    """The teardown leaves an unmarked range alone (IpRangeStep.destroy): the check says so
    before up, instead of calling it rltui's."""
    world, cfg = box["world"], box["ctx"].cfg
    world.create_network(PROJECT, cfg.network, auto_create_subnetworks=False)
    await world.create_address(PROJECT, cfg.address_name, network=cfg.network, prefix_length=24,
                               labels=labels, description=description)
    check = (await checks(box))[f"name: IP range {cfg.address_name}"]
    if ours:
        assert check.ok is True and "made by rltui" in check.detail
        return
    assert check.ok is False
    assert check.detail.startswith("exists, not rltui's")
    assert "up will refuse to adopt it; delete it by hand or pick another name" in check.detail
    assert check.fix == (f"gcloud compute addresses delete {cfg.address_name} --global"
                         f" --project={PROJECT} --quiet")


async def test_a_missing_permission_names_its_step_and_the_permission(box) -> None:
    box["world"].denied_permissions = {"lustre.instances.create", "servicenetworking.services.addPeering"}
    got = await checks(box)
    assert got["permissions: Lustre instance"].ok is False
    assert got["permissions: Lustre instance"].detail == "missing lustre.instances.create"
    assert got["permissions: Lustre instance"].fix == "ask a project owner for roles/lustre.admin"
    assert got["permissions: VPC peering"].ok is False
    assert got["permissions: GKE cluster (xpk)"].ok is True


async def test_a_zone_without_the_machine_type_fails_with_the_fix(box) -> None:
    box["world"].machine_type_zones = {"a4-highgpu-8g": {"us-east1-c"}}
    check = (await checks(box))["a4-highgpu-8g in us-east1-b"]
    assert check.ok is False and "us-east1-b does not offer a4-highgpu-8g" in check.detail
    assert "ZONE" in check.fix


async def test_a_name_taken_by_another_fails_and_rltuis_own_passes(box) -> None:
    from google.cloud import lustre_v1

    world, cfg = box["world"], box["ctx"].cfg
    world.create_network(PROJECT, cfg.network, auto_create_subnetworks=False)
    world.create_lustre_instance(PROJECT, cfg.zone, cfg.lustre_instance_id, lustre_v1.Instance(
        capacity_gib=9000, filesystem="lustre", per_unit_storage_throughput=1000,
        network=f"projects/{PROJECT}/global/networks/default", labels={"managed-by": "rltui"}))
    got = await checks(box)
    net = got[f"name: VPC network {cfg.network}"]
    assert net.ok is False and net.detail == "taken by something rltui did not make"
    assert "CLUSTER_NAME" in net.fix   # b200-8: the network is xpk's <CLUSTER_NAME>-net-0
    lustre = got[f"name: Lustre instance {cfg.lustre_instance_id}"]
    assert lustre.ok is True and "made by rltui" in lustre.detail
    assert got[f"name: GKE cluster {cfg.cluster_name}"].ok is True


async def test_nothing_was_created_or_enabled(box) -> None:
    world = box["world"]
    await checks(box)
    await asyncio.sleep(0)
    writes = [k for k in world.record.snapshot()["calls"]
              if any(w in k for w in (".insert", "Create", ".delete", "Delete", "Enable", ".enable"))]
    assert writes == []


@pytest.mark.parametrize("args, field", [
    (["--deny", "not a permission"], "--deny: 'not a permission'"),
    (["--quota", "lustre.googleapis.com/capacity=lots"], "--quota: 'lustre.googleapis.com/capacity=lots'"),
    (["--quota", "PREEMPTIBLE_NVIDIA_B200_GPUS=-1"], "--quota: 'PREEMPTIBLE_NVIDIA_B200_GPUS=-1'"),
])
def test_sandbox_start_refuses_a_bad_quota_or_permission_in_one_line(args, field, tmp_path, monkeypatch,
                                                                     capsys) -> None:
    from rltui.cli import main
    from rltui_sandbox import manage

    monkeypatch.setenv("RLTUI_SANDBOX_DIR", str(tmp_path / "sandbox"))
    assert main(["sandbox", "start", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(field), err
    assert manage.read_status(tmp_path / "sandbox") is None     # nothing was started


def test_the_start_screen_marks_unknown_checks_apart_from_failed_ones() -> None:
    from rich.console import Console

    from rltui.screens.start import checks_table

    console = Console(width=100, record=True, color_system=None)
    console.print(checks_table([
        Check("Spot GPU quota", None, "compute API is off: known once `up` enables it"),
        Check("name: VPC network n", False, "taken by something rltui did not make", "set NETWORK_NAME"),
        Check("permissions: IP range", True, "2 held")]))
    lines = console.export_text().splitlines()
    assert lines[0].lstrip().startswith("? ") and "compute API is off" in lines[0]
    assert lines[1].lstrip().startswith("✗ ") and "fix: set NETWORK_NAME" in lines[2]
    assert lines[3].lstrip().startswith("✓ ")
