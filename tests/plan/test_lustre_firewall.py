"""The Managed Lustre firewall rule (issue 24, item 7): tcp 988 (and 6988 with the legacy port)
from the peering range's CIDR, on the plan's network, marked rltui's in its description; a name
within 63 characters; what it does with a rule of the same name that is not rltui's. And `up`
without xpk on PATH (item 4): refused at once, before anything is created."""

from __future__ import annotations

import re

import pytest

from rltui.config import RLConfig, parse_config
from rltui.plan import PermanentError, StepOutput
from rltui.plan.ownership import lustre_rule_name
from rltui.plan.steps import build_plan
from tests.plan.fakes import FakeContext, fake_context, seed

C = "ray-a4-gpu-spot"


def codelab_config(**extra: str) -> RLConfig:
    return parse_config({
        "PROJECT_ID": "fw-proj", "ZONE": "us-east1-b", "REGION": "us-east1", "CLUSTER_NAME": C,
        "LUSTRE_INSTANCE_ID": "rl-demo-gpu-lustre", "LUSTRE_CAPACITY": "9000",
        "HF_TOKEN": "hf_FAKEtokenDoNotShow0123456789", "NUM_NODES": "2", "GPUS_PER_NODE": "8",
        "DEVICE_TYPE": "b200-8", **extra})


@pytest.fixture
def ctx(tmp_path) -> FakeContext:
    return fake_context(codelab_config(), tmp_path)


def rule_step(ctx: FakeContext):
    return {s.name: s for s in build_plan(ctx)}["lustre_firewall"]


@pytest.mark.parametrize("network", ["n", "a" * 40, "b" * 63, "net-" + "c" * 55 + "-x"])
def test_the_rules_name_is_a_valid_gce_name_of_at_most_63_characters(network):
    name = lustre_rule_name(network)
    assert len(name) <= 63 and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name), name
    assert name != lustre_rule_name(network + "z")
    if len(network) <= 40:
        assert name == f"{network}-allow-lustre-traffic"   # the Toolkit example's name


async def test_the_legacy_port_opens_6988_too(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster", "network_ready", "ip_range"])
    ctx.cloud.seed_lustre(gke_support_enabled=True)
    await rule_step(ctx).apply(ctx, StepOutput())
    rule = ctx.cloud.firewall_rules[lustre_rule_name(ctx.cfg.network)]
    assert [(a.I_p_protocol, a.ports) for a in rule.allowed] == [("tcp", ("988", "6988"))]


async def test_a_foreign_rule_that_allows_lustre_is_used_as_it_is(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster", "network_ready", "ip_range"])
    ctx.cloud.seed_lustre_rule(description="made by the network team")
    step = rule_step(ctx)
    probe = await step.probe(ctx)
    assert (probe.exists, probe.ready) == (True, True) and probe.detail.endswith("(not rltui's)")


async def test_a_foreign_rule_that_does_not_allow_lustre_stops_up_with_advice(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster", "network_ready", "ip_range"])
    ctx.cloud.seed_lustre_rule(description="made by the network team", ports=("22",))
    with pytest.raises(PermanentError, match="is not rltui's and does not allow tcp:988 from"
                                             " 10.90.0.0/24"):
        await rule_step(ctx).apply(ctx, StepOutput())
    assert ctx.cloud.count("network.delete_firewall") == 0


async def test_rltuis_rule_for_an_old_range_is_made_again(ctx):
    seed(ctx, ["enable_apis", "xpk_cluster", "network_ready", "ip_range", "lustre_firewall"])
    name = lustre_rule_name(ctx.cfg.network)
    old = ctx.cloud.firewall_rules[name]
    ctx.cloud.firewall_rules[name] = type(old)(old.name, old.network, old.description,
                                               old.direction, ("10.1.0.0/24",), old.allowed)
    step = rule_step(ctx)
    assert not (await step.probe(ctx)).ready
    await step.apply(ctx, StepOutput())
    assert ctx.cloud.firewall_rules[name].source_ranges == ("10.90.0.0/24",)
    assert (await step.probe(ctx)).ready


def test_the_raycluster_waits_for_the_rule(ctx):
    steps = {s.name: s for s in build_plan(ctx)}
    assert "lustre_firewall" in steps["raycluster"].needs
    assert set(steps["lustre_firewall"].needs) == {"ip_range", "xpk_cluster"}


# ---- item 4: xpk on PATH ---------------------------------------------------------------------

def _no_xpk_path(tmp_path, monkeypatch) -> None:
    """A PATH with no xpk in it (only an empty folder)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_xpk_missing_names_xpk_the_folders_and_how_to_install_it(tmp_path, monkeypatch):
    from rltui.cloud.endpoints import Endpoints
    from rltui.plan.preflight import xpk_missing

    _no_xpk_path(tmp_path, monkeypatch)
    sandbox_bin = tmp_path / "sbx-bin"
    sandbox_bin.mkdir()
    line = xpk_missing(Endpoints(label="SANDBOX", tool_dirs=(sandbox_bin,)))
    assert line is not None and "\n" not in line
    assert line.startswith(f"xpk is not on PATH (looked in {sandbox_bin} first, then PATH)")
    assert "pip install xpk==1.16.0" in line
    (sandbox_bin / "xpk").write_text("#!/bin/sh\n")
    (sandbox_bin / "xpk").chmod(0o755)
    assert xpk_missing(Endpoints(label="SANDBOX", tool_dirs=(sandbox_bin,))) is None


async def test_headless_up_without_xpk_refuses_before_asking_the_cloud(tmp_path, monkeypatch):
    from rltui import headless
    from rltui.cloud.endpoints import Endpoints

    _no_xpk_path(tmp_path, monkeypatch)
    made: list = []
    monkeypatch.setattr(headless, "Context", lambda *a, **k: made.append(a) or pytest.fail(
        "a Context was made: the plan would run"))
    lines: list[str] = []
    code = await headless.up(codelab_config(), Endpoints(label="Google Cloud"), yes=True,
                             verbose=False, out=lines.append)
    assert code == 1 and made == []
    assert len(lines) == 1 and lines[0].startswith("error: xpk is not on PATH"), lines


async def test_the_wizards_up_refuses_without_xpk(tmp_path, monkeypatch):
    from rltui.cloud.endpoints import Endpoints
    from rltui.session import Session

    _no_xpk_path(tmp_path, monkeypatch)
    env = tmp_path / "env.sh"
    env.write_text("".join(f'export {k}="{v}"\n' for k, v in {
        "PROJECT_ID": "fw-proj", "ZONE": "us-east1-b", "REGION": "us-east1",
        "CLUSTER_NAME": C, "LUSTRE_INSTANCE_ID": "rl-demo-gpu-lustre"}.items()))
    session = Session(env, lambda: Endpoints(label="Google Cloud"))
    with pytest.raises(PermanentError, match="^xpk is not on PATH"):
        await session.up(lambda ev: None)
    assert session._runner is None, "the plan's Runner was built"
