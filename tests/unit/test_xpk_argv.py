"""The xpk command lines rltui runs use only flags xpk 1.16.0 has, each the way its parser takes
it (tests/data/xpk_1.16.0_flags.json, extracted from xpk 1.16.0's own argparse parser); and
rltui finds xpk's state where 1.16.0 writes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rltui.config import parse_config
from rltui.envfile import EnvFile
from rltui import names
from rltui.plan import xpkstate

DATA = Path(__file__).resolve().parents[1] / "data"
FLAGS = json.loads((DATA / "xpk_1.16.0_flags.json").read_text())


def xpk_step(capacity: str = ""):
    from rltui.plan.context import Context
    from rltui.plan.steps import XpkClusterStep

    values = dict(EnvFile.read(DATA / "env" / "devrel-demos.env.sh").values())
    if capacity:
        values["CAPACITY"] = capacity
    return XpkClusterStep(Context(parse_config(values), endpoints=_Endpoints()))


class _Endpoints:
    time_scale = 1.0


CAPACITIES = ["", "spot", "on-demand", "reservation:a4-res"]


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("verb", ["create", "delete"])
def test_rltuis_xpk_argv_parses_under_xpk_1_16_0(verb, capacity):
    argv = xpk_step(capacity)._argv(verb)
    assert argv[:3] == ["xpk", "cluster", verb]
    known = FLAGS[verb]["flags"]
    for arg in argv[3:]:
        flag, eq, value = arg.partition("=")
        assert flag in known, f"{flag} is not an xpk 1.16.0 `cluster {verb}` flag"
        takes_value = known[flag]["kind"] not in ("store_true", "boolean_optional")
        assert bool(eq) == takes_value, f"{flag}: 1.16.0 takes it {'with' if takes_value else 'without'} a value"
    given = {a.partition("=")[0] for a in argv[3:]}
    assert {f for f, spec in known.items() if spec.get("required")} <= given
    for group in FLAGS[verb].get("mutually_exclusive", []):
        assert len(given & set(group["flags"])) == (1 if group.get("required") else len(
            given & set(group["flags"]))) <= 1, group


@pytest.mark.parametrize(("capacity", "flag"), [("", "--spot"), ("spot", "--spot"),
                                               ("on-demand", "--on-demand"),
                                               ("reservation:a4-res", "--reservation=a4-res")])
def test_capacity_gives_xpk_exactly_its_one_flag(capacity, flag):
    # xpk 1.16.0 refuses more than one of them (core/capacity.py get_capacity_type).
    argv = xpk_step(capacity)._argv("create")
    modes = [a for a in argv if a.partition("=")[0] in ("--spot", "--flex", "--on-demand", "--reservation")]
    assert modes == [flag]
    assert flag in xpk_step(capacity).command()


def test_the_state_path_is_xpks_own_hash():
    # 5 base-36 characters of sha256("<project>-<region>-<cluster>"), as xpk's hash_string.
    path = xpkstate.blueprint_file(Path("/s"), "team-rl-sandbox-42", "us-east1", "ray-a4-gpu-spot")
    assert path.parent == Path("/s/xpkclusters/blueprints/team-rl-sandbox-42-us-east1")
    name = path.name.removesuffix(".yaml")
    assert name.startswith("ray-a4-gpu-spot-") and len(name.rsplit("-", 1)[1]) == 5
    assert names.hash_string("my-proj-us-east1-ray-a4-gpu-spot", 5) == "w4ej6"  # xpk's own output
