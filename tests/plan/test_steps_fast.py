"""The codelab's real steps (rltui/plan/steps*.py) against fake adapters (tests/plan/fakes.py):
no sandbox, no Ray, no network; the fake `xpk` is the only subprocess.

- every Step type: probe on an empty project, apply, probe again, destroy; its command();
  no secret value in any command, output line, note or probe detail;
- the graph from build_plan: the Lustre chain needs xpk's network, not xpk; the RayCluster
  needs the PV/PVC, the Secret and the addons;
- the Runner over the real plan: up from nothing (the Lustre chain and the Kubernetes objects
  done while xpk still runs, nothing on the GKE cluster until it exits), a rerun creates
  nothing twice; transient failures are retried and permanent ones fail the step. Down's
  order and ownership: tests/plan/test_down_xpk.py.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from rltui.cloud.errors import CloudError
from rltui.config import RLConfig, parse_config
from rltui.plan import PermanentError, Probe, RetryPolicy, Runner, StepOutput, StepState, \
    TransientError
from rltui.plan.ownership import lustre_rule_name
from rltui.plan.steps import STEP_TYPES, build_plan
from tests.plan.fakes import (CODELAB_APIS, LUSTRE_DRIVER, LUSTRE_MOUNT_POINT, SEEDS, FakeCloud,
                              FakeContext, fake_context, plan_xpk, seed)

S = StepState
HF = "hf_FAKEtokenDoNotShow0123456789"
WANDB = "wandbFAKEkeyDoNotShow9876543210"
SECRETS = (HF, WANDB)


def codelab_config() -> RLConfig:
    return parse_config({
        "PROJECT_ID": "fast-engine-proj", "ZONE": "us-east1-b", "REGION": "us-east1",
        "CLUSTER_NAME": "ray-a4-gpu-spot", "NETWORK_NAME": "ray-a4-gpu-spot-net-0",
        "LUSTRE_INSTANCE_ID": "rl-demo-gpu-lustre", "LUSTRE_CAPACITY": "9000",
        "HF_TOKEN": HF, "WANDB_API_KEY": WANDB,
        "NUM_NODES": "2", "GPUS_PER_NODE": "8", "DEVICE_TYPE": "b200-8"})


@pytest.fixture
def ctx(tmp_path) -> FakeContext:
    return fake_context(codelab_config(), tmp_path)


def needs_closure(step_name: str, steps: dict[str, Any]) -> list[str]:
    """Every step `step_name` needs, directly or not, in the plan's order."""
    seen: set[str] = set()
    stack = list(steps[step_name].needs)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(steps[n].needs)
    return [n for n in steps if n in seen]


class Said:
    """Everything a step told the user: output lines and notes (and probe details)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.notes: list[str] = []

    def out(self) -> StepOutput:
        def sink(kind: str, value: Any) -> None:
            if kind == "line":
                self.lines.append(value)
            elif kind == "note":
                self.notes.append(value)
        return StepOutput(sink)

    def text(self) -> str:
        return "\n".join(self.lines + self.notes)


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for value in SECRETS:
            assert value not in text, f"a secret value shows in: {text[:200]!r}"


# ---- what each step does to the project, as the user would check it -----------------------

def _xpk_made(cloud: FakeCloud, ctx: FakeContext) -> None:
    (run,) = cloud.xpk_runs
    assert run.argv[:2] == ["cluster", "create"] and run.code == 0
    assert run.cwd == str(ctx.xpk_dir)          # xpk's state folder: its delete finds it here
    assert {"--num-nodes=2", "--device-type=b200-8", "--spot", "--project=fast-engine-proj",
            "--zone=us-east1-b", "--cluster=ray-a4-gpu-spot"} <= set(run.argv)
    assert run.env_hf == ""                      # the token is not handed to xpk
    assert cloud.cluster.resource_labels["managed-by"] == "rltui"


def _xpk_gone(cloud: FakeCloud, ctx: FakeContext) -> None:
    """`xpk cluster delete` from its state folder while the cluster exists: it takes the
    cluster and its blueprint; the GKE API is not used."""
    assert cloud.cluster is None and cloud.count("gke.delete") == 0
    assert [r.argv[:2] for r in cloud.xpk_runs] == [["cluster", "create"], ["cluster", "delete"]]
    assert cloud.xpk_runs[-1].cwd == str(ctx.xpk_dir)
    assert (cloud.networks, cloud.routers, cloud.regional_addresses) == ({}, {}, {})


def _xpk_cluster_owned_networks(ctx: FakeContext) -> None:
    ctx.owned_networks = True   # what XpkClusterStep.destroy of a labelled cluster leaves


def _networks_gone(cloud: FakeCloud, ctx: FakeContext) -> None:
    assert (cloud.networks, cloud.subnets, cloud.firewall_rules, cloud.routers,
            cloud.regional_addresses) == ({}, {}, {}, {}, {})


def _addons_made(cloud: FakeCloud, ctx: FakeContext) -> None:
    addons = cloud.cluster.addons_config
    assert addons.ray_operator_config.enabled and addons.lustre_csi_driver_config.enabled
    assert not addons.lustre_csi_driver_config.enable_legacy_lustre_port
    gpu_nodes = [o for (p, _), o in cloud.objects.items() if p == "nodes"
                 and "cloud.google.com/gke-accelerator" in o["metadata"]["labels"]]
    assert len(gpu_nodes) == 2
    for node in gpu_nodes:   # recreated: the kubelet registered the Lustre driver
        assert LUSTRE_DRIVER in node["metadata"]["annotations"]["csi.volume.kubernetes.io/nodeid"]
    assert cloud.count("gke.enable_addons") == 1 and cloud.count("gke.recreate_node_pool") == 1
    # Both nodes at once (nothing runs there yet), then the blueprint's settings back.
    pool = "a4-highgpu-8g-ray-a4-gpu-spot-a4-pool"
    assert cloud.recreated == [(pool, 0, 2)]
    assert cloud.upgrades == [(pool, 0, 2), (pool, 0, 1)]


def _rule_made(cloud: FakeCloud, ctx: FakeContext) -> None:
    """tcp:988 from the range's CIDR, on the plan's network, marked rltui's."""
    rule = cloud.firewall_rules[lustre_rule_name(ctx.cfg.network)]
    assert rule.name == "ray-a4-gpu-spot-net-0-allow-lustre-traffic"
    assert rule.network.endswith("/global/networks/ray-a4-gpu-spot-net-0")
    assert (rule.direction, rule.source_ranges) == ("INGRESS", ("10.90.0.0/24",))
    assert [(a.I_p_protocol, a.ports) for a in rule.allowed] == [("tcp", ("988",))]
    assert rule.description.startswith("managed-by=rltui")


def _secret_made(cloud: FakeCloud, ctx: FakeContext) -> None:
    import base64

    secret = cloud.objects[("secrets", "ray-a4-gpu-spot-job-secrets")]
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    # The pods get the real values, as files: the HF token, and the W&B key as wandb's netrc.
    assert data == {"HF_TOKEN": HF, "netrc": "machine api.wandb.ai\n  login user\n  password " + WANDB + "\n"}


def _pv_made(cloud: FakeCloud, ctx: FakeContext) -> None:
    pv = cloud.objects[("persistentvolumes", "rl-demo-gpu-lustre-pv")]
    assert pv["spec"]["csi"]["volumeAttributes"]["ip"] == LUSTRE_MOUNT_POINT.split("@")[0]
    assert pv["spec"]["csi"]["volumeHandle"] == "fast-engine-proj/us-east1-b/rl-demo-gpu-lustre"
    pvc = cloud.objects[("persistentvolumeclaims", "rl-demo-gpu-lustre-pvc")]
    assert pvc["status"]["phase"] == "Bound"


def _raycluster_made(cloud: FakeCloud, ctx: FakeContext) -> None:
    rc = cloud.objects[("rayclusters", "ray-a4-gpu-spot")]
    assert rc["status"]["readyWorkerReplicas"] == 2
    assert cloud.kube_objects("pods") == ["ray-a4-gpu-spot-head", "ray-a4-gpu-spot-worker-1",
                                          "ray-a4-gpu-spot-worker-2"]


def _guard_account_made(cloud: FakeCloud, ctx: FakeContext) -> None:
    """Marked rltui's, and given one role on the project."""
    iam = ctx._adapters["iam"]
    (email,) = iam.accounts
    assert email.startswith("rltui-guard-") and iam.accounts[email]["description"].startswith("managed-by=rltui")
    assert iam.policies["project"]["bindings"] == [{"role": "roles/container.clusterAdmin",
                                                     "members": [f"serviceAccount:{email}"]}]


def _guard_account_gone(cloud: FakeCloud, ctx: FakeContext) -> None:
    iam = ctx._adapters["iam"]
    assert iam.accounts == {} and iam.policies["project"]["bindings"] == []


@dataclass(frozen=True)
class Case:
    tool: str                         # the codelab's tool its command() runs
    creates: bool                     # apply leaves something probe() then finds
    destroyable: bool
    made: Callable[[FakeCloud, FakeContext], None] | None = None   # the cloud after apply
    gone: Callable[[FakeCloud, FakeContext], None] | None = None   # the cloud after destroy
    ready_after_apply: bool = True
    reapply: bool = False        # there and ready, yet every run applies it again
    note: str = ""                    # the apply's last note (for local steps), a regex
    meanwhile: Callable[[FakeContext], Any] | None = None   # runs while apply runs
    before_destroy: Callable[[FakeContext], None] | None = None   # what earlier down steps did


async def _xpk_makes_its_network(ctx: FakeContext) -> None:
    await asyncio.sleep(0.05)
    ctx.cloud.seed_networks()


async def _xpk_makes_the_cluster(ctx: FakeContext) -> None:
    """The addons and the credentials wait for xpk's control plane, not for xpk's exit."""
    await asyncio.sleep(0.05)
    seed(ctx, ["xpk_cluster"])


# One case per Step type in STEP_TYPES (test_every_step_type_has_a_case keeps them in step).
CASES: dict[str, Case] = {
    "enable_apis": Case("gcloud", creates=True, destroyable=False,
                        made=lambda c, _: c.apis >= set(CODELAB_APIS)
                        or pytest.fail(f"APIs enabled: {c.apis}")),
    "xpk_cluster": Case("xpk", creates=True, destroyable=True, made=_xpk_made, gone=_xpk_gone),
    "network_ready": Case("gcloud", creates=True, destroyable=True, gone=_networks_gone,
                          meanwhile=_xpk_makes_its_network,
                          before_destroy=_xpk_cluster_owned_networks),
    "ip_range": Case("gcloud", creates=True, destroyable=True,
                     made=lambda c, x: (c.addresses[x.cfg.address_name].prefix_length,
                                        c.addresses[x.cfg.address_name].network,
                                        c.addresses[x.cfg.address_name].labels) == (
                         24, "projects/fast-engine-proj/global/networks/ray-a4-gpu-spot-net-0",
                         {"managed-by": "rltui"})
                     or pytest.fail(str(c.addresses)),
                     gone=lambda c, _: not c.addresses or pytest.fail(str(c.addresses))),
    "peering": Case("gcloud", creates=True, destroyable=True,
                    made=lambda c, x: c.peerings[x.cfg.network]["reservedPeeringRanges"] == [
                        x.cfg.address_name] or pytest.fail(str(c.peerings)),
                    gone=lambda c, _: not c.peerings or pytest.fail(str(c.peerings))),
    "lustre_instance": Case(
        "gcloud", creates=True, destroyable=True,
        made=lambda c, x: (c.instances[x.cfg.lustre_instance_id].state.name,
                           c.instances[x.cfg.lustre_instance_id].capacity_gib,
                           dict(c.instances[x.cfg.lustre_instance_id].labels)) == (
            "ACTIVE", 9000, {"managed-by": "rltui"}) or pytest.fail(str(c.instances)),
        gone=lambda c, _: not c.instances or pytest.fail(str(c.instances)),
        note="state ACTIVE"),
    "lustre_firewall": Case("gcloud", creates=True, destroyable=True, made=_rule_made,
                            gone=lambda c, x: lustre_rule_name(x.cfg.network) not in
                            c.firewall_rules or pytest.fail(str(c.firewall_rules))),
    # After xpk_cluster (its needs): xpk has exited, the cluster is there.
    "addons": Case("gcloud", creates=True, destroyable=False, made=_addons_made),
    "credentials": Case("gcloud", creates=False, destroyable=False, note=r"^3 nodes$",
                        meanwhile=_xpk_makes_the_cluster),
    "secret": Case("kubectl", creates=True, destroyable=True, made=_secret_made,
                   reapply=True,   # re-applied every run: values are never read back
                   gone=lambda c, _: not c.kube_objects("secrets") or pytest.fail("secret left")),
    "pv_pvc": Case("kubectl", creates=True, destroyable=True, made=_pv_made,
                   gone=lambda c, _: not (c.kube_objects("persistentvolumes")
                                          or c.kube_objects("persistentvolumeclaims"))
                   or pytest.fail("PV/PVC left")),
    "raycluster": Case("kubectl", creates=True, destroyable=True, made=_raycluster_made,
                       note=r"^2/2 workers ready, head ready$",
                       gone=lambda c, _: not (c.kube_objects("rayclusters")
                                              or c.kube_objects("pods"))
                       or pytest.fail("RayCluster or its pods left")),
    # Made by `rltui submit --down-after/--max-cost`, never by up (Step.made_by_up).
    "guard_account": Case("gcloud", creates=True, destroyable=True, made=_guard_account_made,
                          gone=_guard_account_gone, note=r"roles/container.clusterAdmin on project"),
    "dashboard": Case("kubectl", creates=False, destroyable=False,
                      note=r"^the dashboard answers; to open it by hand: kubectl port-forward"
                           r" service/\S+-head-svc 8265:8265$"),
}


def test_every_step_type_has_a_case_and_a_seed():
    names = [t.name for t in STEP_TYPES]
    assert len(set(names)) == len(names)
    assert set(CASES) == set(names), "add a Case for each new Step type (and drop gone ones)"
    assert set(SEEDS) == set(names), "add a seed to tests/plan/fakes.py SEEDS for it"


@pytest.mark.parametrize("step_type", STEP_TYPES, ids=lambda t: t.name)
async def test_step_probe_apply_probe_destroy(step_type, ctx):
    case = CASES[step_type.name]
    steps = {s.name: s for s in build_plan(ctx)}
    step = steps[step_type.name]
    assert type(step) is step_type
    seed(ctx, needs_closure(step.name, steps))    # what its needs leave, nothing of its own
    said = Said()

    before = await step.probe(ctx)
    assert before.exists is False, f"{step.name} on a project without it: {before}"

    meanwhile = asyncio.ensure_future(case.meanwhile(ctx)) if case.meanwhile else None
    out = said.out()
    out.probe = before
    await step.apply(ctx, out)
    if meanwhile is not None:   # apply waited for what someone else makes
        assert meanwhile.done(), f"{step.name}.apply returned before what it waits for appeared"
    if case.note:
        assert re.search(case.note, out.last_note), out.last_note

    after = await step.probe(ctx)
    if case.creates:
        assert after.exists and after.ready is case.ready_after_apply, after
        assert after.reapply is case.reapply, after
    else:  # local (credentials, a port-forward): nothing in the cloud, done again every run
        assert after == Probe(exists=False)
    if case.made is not None:
        case.made(ctx.cloud, ctx)
    again = await step.probe(ctx)
    assert again == after, "a second probe after apply changed its answer"

    assert step.destroyable is case.destroyable
    if case.destroyable:
        if case.before_destroy is not None:
            case.before_destroy(ctx)
        await step.destroy(ctx, said.out())
        gone = await step.down_probe(ctx)
        assert gone.exists is False, gone
        if case.gone is not None:
            case.gone(ctx.cloud, ctx)
    assert ctx.cloud.violations == []
    assert_no_secret(said.text(), before.detail, after.detail, again.detail)


@pytest.mark.parametrize("step_type", STEP_TYPES, ids=lambda t: t.name)
def test_command_runs_the_codelab_tool_and_holds_no_secret(step_type, tmp_path):
    ctx = fake_context(codelab_config(), tmp_path)
    command = step_type(ctx).command()
    assert command.strip(), f"{step_type.name} shows no command"
    tool = CASES[step_type.name].tool
    assert re.search(rf"(^|&& ){tool} ", command), f"{step_type.name}: {command!r}"
    assert_no_secret(command)


def test_secret_command_reads_the_token_from_the_environment(ctx):
    steps = {s.name: s for s in build_plan(ctx)}
    assert '"$HF_TOKEN"' in steps["secret"].command()


# ---- the graph --------------------------------------------------------------------------

def test_the_lustre_chain_needs_the_network_not_xpk(ctx):
    steps = {s.name: s for s in build_plan(ctx)}
    assert steps["lustre_instance"].needs == ("peering",)
    assert steps["peering"].needs == ("ip_range",)
    assert steps["ip_range"].needs == ("network_ready",)
    assert steps["network_ready"].needs == ("enable_apis",)
    assert "xpk_cluster" not in needs_closure("lustre_instance", steps)


def test_the_raycluster_needs_its_volume_secret_and_addons(ctx):
    steps = {s.name: s for s in build_plan(ctx)}
    assert {"pv_pvc", "secret", "addons"} <= set(steps["raycluster"].needs)
    assert "lustre_instance" in steps["pv_pvc"].needs
    assert steps["dashboard"].needs == ("raycluster",)


def test_build_plan_makes_one_step_of_each_type(ctx):
    plan = build_plan(ctx)
    assert [type(s) for s in plan] == list(STEP_TYPES)
    Runner(plan, ctx)   # the runner accepts the graph (no unknown names, no cycle)


# ---- the Runner over the real plan --------------------------------------------------------

def listen(events: list) -> Callable[[Any], None]:
    return events.append


def said_in(events: list) -> str:
    return "\n".join(f"{e.message}\n{e.line or ''}" for e in events)


async def test_up_from_an_empty_project_runs_the_lustre_chain_while_xpk_runs(ctx, fast_retry):
    # xpk makes its networks, takes a while, makes the control plane, then goes on (its node
    # pool, its kubectl-apply modules) before it exits.
    plan_xpk(ctx, {"pause_s": 0.4, "pause_after_s": 0.4})
    events: list = []
    result = await Runner(build_plan(ctx), ctx, retry=fast_retry, listener=listen(events)).up()
    assert result.ok, result.messages
    # xpk may make its network before network_ready's first look: then it "existed".
    assert result.states.pop("network_ready") in (S.DONE, S.EXISTED)
    assert set(result.states.values()) == {S.DONE}
    cloud = ctx.cloud

    def at(step: str, state: S) -> float:
        return next(e.at for e in events if e.step == step and e.state is state)

    xpk_end = cloud.spans["xpk"][1]
    assert at("lustre_instance", S.DONE) < xpk_end, "the Lustre chain waited for xpk to finish"
    # Kubernetes objects while xpk still runs; nothing on the GKE cluster until it exits.
    assert at("secret", S.DONE) < xpk_end, "the Secret waited for xpk to finish"
    assert at("addons", S.RUNNING) >= xpk_end, "the addons changed the cluster under xpk"
    assert [r.argv[:2] for r in cloud.xpk_runs] == [["cluster", "create"]]
    assert any(e.step == "dashboard" and e.message.startswith("the dashboard answers")
               for e in events)
    assert cloud.violations == []
    assert_no_secret(said_in(events))


async def test_a_rerun_finds_everything_and_creates_nothing_twice(ctx, fast_retry):
    runner = Runner(build_plan(ctx), ctx, retry=fast_retry)
    assert (await runner.up()).ok
    calls = {c: ctx.cloud.count(c) for c in ("lustre.create", "network.create_address",
                                              "network.connect_peering", "gke.enable_addons")}
    second = await runner.up()
    assert second.ok
    assert {n: s for n, s in second.states.items() if s is not S.EXISTED} == {
        "credentials": S.DONE, "secret": S.DONE, "dashboard": S.DONE}
    assert len(ctx.cloud.xpk_runs) == 1
    assert calls == {c: ctx.cloud.count(c) for c in calls} == dict.fromkeys(calls, 1)


def policy(*, classify: bool = False) -> RetryPolicy:
    """Fast backoff; `classify` as the headless CLI's: a CloudError is retried when transient."""
    return RetryPolicy(attempts=4, base_s=0.002, cap_s=0.01, rng=random.Random(7),
                       classify=(lambda exc: isinstance(exc, CloudError) and exc.transient)
                       if classify else None)


@pytest.mark.parametrize("error, classify, state, calls", [
    (TransientError("quota hiccup"), False, S.DONE, 2),
    (CloudError("connection reset", transient=True, code="ConnectionError"), True, S.DONE, 2),
    (PermanentError("The range overlaps 10.0.0.0/24: pick another."), False, S.FAILED, 1),
    (CloudError("permission denied: check `gcloud auth list`", transient=False), True,
     S.FAILED, 1),
], ids=["transient", "transient-cloud-error", "permanent", "permanent-cloud-error"])
async def test_an_adapter_failure_is_retried_or_fails_the_step(ctx, error, classify, state, calls):
    seed(ctx, ["enable_apis", "network_ready"])
    ctx.cloud.fail("network.create_address", error)
    runner = Runner(build_plan(ctx), ctx, retry=policy(classify=classify))
    result = await runner.up({"lustre_instance"})
    assert result.states["ip_range"] is state
    assert ctx.cloud.count("network.create_address") == calls
    attempts = {v.name: v.attempts for v in runner.snapshot()}
    assert attempts["ip_range"] == calls
    if state is S.FAILED:
        assert str(error) in result.messages["ip_range"]
        assert result.states["peering"] is result.states["lustre_instance"] is S.BLOCKED
        assert not ctx.cloud.addresses
    else:
        assert result.ok and ctx.cloud.instances


@pytest.mark.parametrize("exhausted, state, calls", [(False, S.DONE, 2), (True, S.FAILED, 1)],
                         ids=["retried", "budget-spent"])
async def test_a_call_whose_own_retries_ran_out_is_not_retried_by_the_step(ctx, exhausted, state, calls):
    """One retry budget per call (plan/wiring.retry_policy): a transient CloudError is retried by
    the runner, unless cloud/errors.retry already spent the call's attempts on it."""
    from rltui.plan.wiring import retry_policy

    error = CloudError("connection reset", transient=True, code="ConnectionError")
    error.exhausted = exhausted
    seed(ctx, ["enable_apis", "network_ready"])
    ctx.cloud.fail("network.create_address", error)
    result = await Runner(build_plan(ctx), ctx, retry=retry_policy(ctx.endpoints)).up({"ip_range"})
    assert result.states["ip_range"] is state
    assert ctx.cloud.count("network.create_address") == calls


async def test_cloud_retry_marks_a_transient_failure_that_used_every_attempt():
    import random as _random

    from rltui.cloud.errors import retry

    calls = []

    async def flaky() -> None:
        calls.append(1)
        raise ConnectionResetError("reset by peer")

    with pytest.raises(CloudError) as caught:
        await retry(flaky, what="list things", attempts=3, base_s=0.001, cap_s=0.002, rng=_random.Random(1))
    assert len(calls) == 3 and caught.value.transient and caught.value.exhausted
    calls.clear()
    with pytest.raises(CloudError):  # an inner retry's spent error is not retried again outside
        await retry(lambda: retry(flaky, what="inner", attempts=2, base_s=0.001), what="outer", attempts=3,
                    base_s=0.001)
    assert len(calls) == 2


async def test_xpk_that_stops_without_a_cloud_failure_is_run_again(ctx, fast_retry):
    seed(ctx, ["enable_apis"])
    plan_xpk(ctx, {"exit": 1, "stderr": "ERROR: Connection reset by peer"})
    runner = Runner(build_plan(ctx), ctx, retry=fast_retry)
    result = await runner.up({"xpk_cluster"})
    assert result.states["xpk_cluster"] is S.DONE
    assert [r.code for r in ctx.cloud.xpk_runs] == [1, 0]
    assert ctx.cloud.cluster.resource_labels["managed-by"] == "rltui"


async def test_xpk_whose_node_pool_failed_in_gke_is_not_run_again(ctx, fast_retry):
    seed(ctx, ["enable_apis"])
    quota = "Insufficient regional quota to satisfy request: PREEMPTIBLE_NVIDIA_B200_GPUS"
    plan_xpk(ctx, {"fail_op": quota, "exit": 1, "stderr": "ERROR: gcluster deploy failed"})
    result = await Runner(build_plan(ctx), ctx, retry=fast_retry).up({"addons"})
    # The addons need xpk's exit: its failure blocks them.
    assert result.states == {"enable_apis": S.EXISTED, "xpk_cluster": S.FAILED,
                             "addons": S.BLOCKED}
    assert len(ctx.cloud.xpk_runs) == 1
    message = result.messages["xpk_cluster"]
    assert quota in message and "gcluster deploy failed" in message


async def test_a_lustre_create_that_fails_late_fails_the_step_once(ctx, fast_retry):
    seed(ctx, ["enable_apis", "network_ready", "ip_range", "peering"])
    ctx.cloud.lustre_late_failure = "RESOURCE_EXHAUSTED: no capacity in us-east1-b"
    result = await Runner(build_plan(ctx), ctx, retry=fast_retry).up({"lustre_instance"})
    assert result.states["lustre_instance"] is S.FAILED
    assert result.messages["lustre_instance"] == (
        "Lustre create failed: RESOURCE_EXHAUSTED: no capacity in us-east1-b")
    assert ctx.cloud.count("lustre.create") == 1


# ---- half-right objects: the probe says "not ready" and apply repairs them ------------------

async def test_a_peering_without_our_range_is_repaired(ctx):
    seed(ctx, ["enable_apis", "network_ready", "ip_range"])
    ctx.cloud.peerings[ctx.cfg.network] = ctx.cloud._connection(ctx.cfg.network, ["other-range"])
    step = {s.name: s for s in build_plan(ctx)}["peering"]
    probe = await step.probe(ctx)
    assert (probe.exists, probe.ready) == (True, False)
    await step.apply(ctx, StepOutput())
    assert ctx.cloud.peerings[ctx.cfg.network]["reservedPeeringRanges"] == [ctx.cfg.address_name]
    assert (await step.probe(ctx)).ready


async def test_addons_use_the_legacy_lustre_port_for_an_instance_made_with_gke_support(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster", "network_ready", "ip_range", "peering"])
    ctx.cloud.seed_lustre(gke_support_enabled=True)
    step = {s.name: s for s in build_plan(ctx)}["addons"]
    await step.apply(ctx, StepOutput())
    assert ctx.cloud.cluster.addons_config.lustre_csi_driver_config.enable_legacy_lustre_port
    probe = await step.probe(ctx)
    assert (probe.exists, probe.ready) == (True, True)


def _point_pv_elsewhere(ctx: FakeContext) -> None:
    pv = ctx.cloud.objects[("persistentvolumes", ctx.cfg.pv_name)]
    pv["spec"]["csi"]["volumeAttributes"]["ip"] = "10.1.1.1"    # an earlier Lustre instance


async def test_a_pv_pointing_at_an_old_lustre_ip_is_recreated(ctx):
    seed(ctx, [n for n in SEEDS if n not in ("raycluster", "dashboard")])
    _point_pv_elsewhere(ctx)
    step = {s.name: s for s in build_plan(ctx)}["pv_pvc"]
    probe = await step.probe(ctx)
    assert (probe.exists, probe.ready, probe.detail) == (True, False, "ip 10.1.1.1")
    await step.apply(ctx, StepOutput())
    pv = ctx.cloud.objects[("persistentvolumes", ctx.cfg.pv_name)]
    assert pv["spec"]["csi"]["volumeAttributes"]["ip"] == "10.90.0.2"
    assert (await step.probe(ctx)).ready and ctx.cloud.violations == []


async def test_a_pv_pointing_at_an_old_ip_in_use_is_left_with_advice(ctx):
    seed(ctx, [n for n in SEEDS if n != "dashboard"])
    _point_pv_elsewhere(ctx)
    step = {s.name: s for s in build_plan(ctx)}["pv_pvc"]
    with pytest.raises(PermanentError, match=r"delete the RayCluster \(kubectl delete raycluster"
                                             r" ray-a4-gpu-spot\), then run up again"):
        await step.apply(ctx, StepOutput())
    assert ctx.cloud.kube_objects("persistentvolumeclaims") == [ctx.cfg.pvc_name]


def test_skipping_a_step_skips_what_needs_it(ctx):
    runner = Runner(build_plan(ctx), ctx)
    kept = runner.targets_without({"peering"})
    assert {"peering", "lustre_instance", "pv_pvc", "ray_cluster", "dashboard"}.isdisjoint(kept)
    assert {"enable_apis", "xpk_cluster", "addons", "ip_range"} <= kept
