"""The codelab's real steps against a sandbox that is as strict as Google (FACTS, "Real Google
Cloud behaviour"): each test pins a real-path defect that the old code had.

One daemon for the module (speed 600, a regional Spot B200 quota of 16 GPUs), a project per
scenario, the steps driven through the Runner exactly as `rltui up/down` drive them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import pytest_asyncio

from rltui.cloud.endpoints import Endpoints
from rltui.config import parse_config
from rltui.envfile import EnvFile
from rltui.names import blueprint_names
from rltui.plan import RetryPolicy, Runner, StepState, xpkstate
from rltui.plan.context import Context
from rltui.plan.steps import build_plan

S = StepState
ENV_SH = Path(__file__).resolve().parents[1] / "data" / "env" / "devrel-demos.env.sh"
# One event loop for the module: the built project's clients live across its tests.
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module")
def sandbox_info(tmp_path_factory):
    from rltui_sandbox import manage

    root = Path(tmp_path_factory.mktemp("sbxq"))
    status = manage.start(speed=600.0, root=root,
                          quotas={"PREEMPTIBLE_NVIDIA_B200_GPUS": 16})
    try:
        yield status.info
    finally:
        manage.stop(root)


def context(sandbox_info, tmp_path, project: str, nodes: int) -> Context:
    values = EnvFile.read(ENV_SH).values()
    values.update(PROJECT_ID=project, NUM_NODES=str(nodes))
    return Context(parse_config(values), Endpoints.sandbox(sandbox_info), root=tmp_path / "state")


def runner(ctx: Context, lines: list[str] | None = None) -> Runner:
    def listen(ev) -> None:
        if lines is not None and getattr(ev, "kind", "") in ("line", "note"):
            lines.append(str(getattr(ev, "line", "") or getattr(ev, "message", "")))

    return Runner(build_plan(ctx), ctx, listener=listen,
                  retry=RetryPolicy(attempts=6, base_s=0.05, cap_s=0.5))


async def test_a_quota_failure_is_final_after_one_xpk_run(sandbox_info, tmp_path):
    """8 nodes x 8 Spot B200 GPUs over a quota of 16: GKE records the failure in the node pool's
    operation, so rltui stops after one xpk run and quotes it (it used to retry xpk 6 times)."""
    ctx = context(sandbox_info, tmp_path, "quota-proj", nodes=8)
    run = runner(ctx)
    try:
        result = await run.up({"xpk_cluster"})
    finally:
        await ctx.close()
    assert result.states["xpk_cluster"] is S.FAILED
    message = result.messages["xpk_cluster"]
    assert "Quota" in message and "PREEMPTIBLE_NVIDIA_B200_GPUS" in message, message
    [view] = [v for v in run.snapshot() if v.name == "xpk_cluster"]
    assert view.attempts == 1


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def built(sandbox_info, tmp_path_factory):
    """A fresh project taken up to the PV/PVC: the APIs enabled from nothing, xpk, the Lustre
    chain, credentials."""
    ctx = context(sandbox_info, tmp_path_factory.mktemp("built"), "strict-proj", nodes=2)
    result = await runner(ctx).up({"pv_pvc", "addons"})
    assert result.ok, result.messages
    yield ctx
    await ctx.close()


async def test_a_fresh_project_goes_up_and_the_cluster_is_labelled_rltuis(built):
    ctx = built
    cluster = await ctx.gke.get()
    assert cluster.resource_labels["managed-by"] == "rltui"
    assert xpkstate.has_state(ctx.xpk_dir, ctx.cfg.project_id, ctx.cfg.region, ctx.cfg.cluster_name)
    # rltui's own xpk made it: recorded by GKE's unique id (red-team review, item 4)
    rec = xpkstate.read_owned(ctx.xpk_dir, ctx.cfg.project_id, ctx.cfg.region, ctx.cfg.cluster_name)
    assert rec is not None and rec.cluster_id == cluster.id != ""
    assert rec.create_time == cluster.create_time
    # the IP range is marked in its insert, the description kept by compute (item 8)
    address = await ctx.network.address(ctx.cfg.address_name)
    assert address.description.startswith("managed-by=rltui")
    assert await ctx.network.address("no-such-range") is None  # NotFound, not an error
    assert (await ctx.network.subnetwork(ctx.cfg.region, f"{ctx.cfg.cluster_name}-sub-0")) is not None
    assert await ctx.network.subnetwork(ctx.cfg.region, "no-such-subnet") is None


async def test_the_kubernetes_client_is_built_as_for_gke(built):
    """Context.kube() in sandbox mode runs real mode's code: https to the GKE cluster's
    endpoint, its CA, a bearer token refreshed from the sandbox's ADC file."""
    import base64

    ctx = built
    cluster = await ctx.gke.get()
    cfg = (await ctx.kube()).configuration
    assert cluster.endpoint.startswith("127.0.0.1:") and cfg.host == f"https://{cluster.endpoint}"
    ca = base64.b64decode(cluster.master_auth.cluster_ca_certificate).decode()
    assert cfg.ca_cert_data == ca and ca.startswith("-----BEGIN CERTIFICATE-----")
    value = (await cfg.auth_settings())["BearerToken"]["value"]
    assert value.startswith("Bearer sbx1."), "a token the sandbox's token endpoint issued"


async def test_concurrent_first_callers_share_one_kubernetes_connection(built, monkeypatch):
    """up's credentials, Secret and PV/PVC steps ask for the client together: one connection,
    closed with the context (each used to build its own, and all but the last were never
    closed: "Unclosed client session" after every headless up)."""
    import asyncio

    from rltui.cloud.kube import KubeAdapter

    ctx = Context(built.cfg, built.endpoints, root=built.root)
    made: list[KubeAdapter] = []
    connect = KubeAdapter.connect

    async def counted(self, creds=None):
        made.append(self)
        await connect(self, creds)

    monkeypatch.setattr(KubeAdapter, "connect", counted)
    got = await asyncio.gather(*(ctx.kube() for _ in range(3)))
    await ctx.close()
    assert len(made) == 1 and all(kube is made[0] for kube in got)
    assert made[0].api is None, "closed with the context"


async def test_a_pv_pointing_at_an_old_ip_is_recreated_not_patched(built):
    """A PV's source is immutable (422 on a patch): rltui deletes and recreates it."""
    ctx = built
    from rltui import manifests

    kube = await ctx.kube()
    await kube.delete("persistentvolumeclaims", ctx.cfg.pvc_name, wait=True, timeout_s=30)
    await kube.delete("persistentvolumes", ctx.cfg.pv_name, wait=True, timeout_s=30)
    await kube.apply(manifests.persistent_volume(ctx.cfg, "10.1.2.3"))
    await kube.apply(manifests.persistent_volume_claim(ctx.cfg))
    old_uid = (await kube.get("persistentvolumes", ctx.cfg.pv_name))["metadata"]["uid"]
    result = await runner(ctx).up({"pv_pvc"})
    assert result.ok, result.messages
    pv = await kube.get("persistentvolumes", ctx.cfg.pv_name)
    inst = await ctx.lustre.get(ctx.cfg.lustre_instance_id)
    assert pv["spec"]["csi"]["volumeAttributes"]["ip"] == manifests.lustre_ip(inst.mount_point)
    assert pv["metadata"]["uid"] != old_uid


async def test_the_inventory_sees_lustre_deleting_while_its_delete_runs(built):
    """What Teardown's poll shows: the sandbox reports Instance.State DELETING while the delete
    operation runs ("The instance is being deleted": google-cloud-lustre 0.4.3,
    lustre_v1/types/instance.py), then the instance is gone; never ACTIVE once deleting."""
    import asyncio

    from rltui.plan.inventory import collect

    ctx = built

    async def lustre_state() -> str:
        return next(r.state for r in await collect(ctx)
                    if r.kind == "Lustre instance" and r.name == ctx.cfg.lustre_instance_id)

    seen = [await lustre_state()]
    task = asyncio.create_task(runner(ctx).down({"lustre_instance"}))
    while not task.done():
        seen.append(await lustre_state())
        await asyncio.sleep(0.02)
    result = await task
    assert result.ok, result.messages
    seen.append(await lustre_state())
    changes = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert changes == ["active", "deleting", "absent"], seen


async def test_down_deletes_an_owned_cluster_whose_xpk_state_is_lost(built):
    """The label proves ownership: the cluster goes through the GKE API, then xpk's routers
    (with their NAT), NAT IPs, firewall rules, subnets and networks by the blueprint's names
    (it used to refuse and leave the 8 x B200 cluster billed)."""
    ctx = built
    shutil.rmtree(ctx.xpk_dir)
    lines: list[str] = []
    run = runner(ctx, lines)
    titles: dict[str, str] = {}
    listen = run.listener
    run.listener = lambda ev: (titles.__setitem__(ev.step, ev.title), listen(ev))
    result = await run.down()
    assert result.ok, result.messages
    # the rows say which path was taken, and who deleted xpk's networks
    assert titles["xpk_cluster"] == f"GKE cluster {ctx.cfg.cluster_name} (GKE API)"
    assert result.messages["xpk_cluster"] == "deleted through the GKE API (xpk's state was lost)"
    assert result.messages["network_ready"] == "deleted by rltui, by the blueprint's names"
    assert await ctx.gke.get() is None
    names = blueprint_names(ctx.cfg.cluster_name, ctx.cfg.region)
    assert not {n.name for n in await ctx.network.networks()} & set(names.networks)
    assert not {f.name for f in await ctx.network.firewalls()} & set(names.firewalls)
    assert not [s for s in await ctx.network.subnetworks(ctx.cfg.region)
                if s.name in names.subnets]
    assert not {r.name for r in await ctx.network.routers(ctx.cfg.region)} & set(names.routers)
    assert not {a.name for a in await ctx.network.regional_addresses(ctx.cfg.region)} & \
        set(names.nat_ips)
    assert any("state folder is missing" in line for line in lines), lines


async def test_the_peering_goes_through_service_networkings_rest_api(built, sandbox_info):
    """gcloud 528 cannot be pointed at another Service Networking host, so rltui speaks its REST
    API (through the Endpoints value, as against Google): the sandbox's record shows it."""
    import json

    calls = json.loads(Path(sandbox_info["record"]).read_text())["calls"]
    assert calls.get("servicenetworking:services.connections.create", 0) >= 1, calls
    assert calls.get("servicenetworking:services.connections.list", 0) >= 1
    assert calls.get("cloudresourcemanager:projects.get", 0) >= 1
