"""CAPACITY in env.sh: the four modes, the one clear line for a bad value, flex-start refused."""

from __future__ import annotations

import pytest

from rltui.capacity import ON_DEMAND, RESERVATION, SPOT, parse_capacity
from rltui.config import ConfigError, check_field, parse_config


def cfg(**values: str):
    return parse_config({"PROJECT_ID": "team-rl-proj", **values})


def test_spot_is_the_codelabs_default():
    c = cfg().capacity_type
    assert c.mode == SPOT and c.preemptible and c.xpk_flags() == ["--spot"]


@pytest.mark.parametrize(("value", "mode", "name"), [
    ("spot", SPOT, ""), ("on-demand", ON_DEMAND, ""), ("reservation:a4-res-1", RESERVATION, "a4-res-1"),
    (" on-demand ", ON_DEMAND, "")])
def test_each_mode_parses(value, mode, name):
    c = cfg(CAPACITY=value).capacity_type
    assert (c.mode, c.reservation) == (mode, name)
    assert c.preemptible is (mode == SPOT)   # only Spot nodes are preempted


@pytest.mark.parametrize(("value", "says"), [
    ("spott", "is not a capacity; use one of spot, flex-start, reservation:NAME, on-demand"),
    ("reservation:", "is not a reservation name"),
    ("reservation:My_Res", "'My_Res' is not a reservation name"),
    ("flex-start", "flex-start is not supported by rltui yet"),
])
def test_a_bad_value_is_one_line_naming_capacity(value, says):
    with pytest.raises(ConfigError) as err:
        cfg(CAPACITY=value)
    (problem,) = err.value.problems
    assert problem.field == "CAPACITY" and says in problem.message
    assert "\n" not in str(err.value)


def test_the_form_check_names_it_too():
    assert "is not a capacity" in (check_field("CAPACITY", "preemptible") or "")
    assert check_field("CAPACITY", "reservation:a4-res") is None


def test_a_reservation_is_written_back_as_env_sh_has_it():
    assert cfg(CAPACITY="reservation:a4-res").env_values()["CAPACITY"] == "reservation:a4-res"
    assert str(parse_capacity("reservation:a4-res")) == "reservation:a4-res"


@pytest.mark.parametrize(("value", "flag"), [("spot", "--spot"), ("reservation:a4-res", "--reservation=a4-res")])
def test_the_equivalent_script_asks_xpk_for_the_same_capacity(value, flag):
    from rltui.script import equivalent_script

    text = equivalent_script(cfg(CAPACITY=value))
    assert f"    {flag} \\\n    --enable-lustre-csi-driver" in text
    assert text.count("--spot") == (1 if value == "spot" else 0)


@pytest.mark.parametrize("item", ["spot", "spot=gone", "flex-start=unavailable", "=unavailable"])
def test_sandbox_start_refuses_a_bad_capacity_knob_in_one_line(item, tmp_path, monkeypatch, capsys):
    from rltui.cli import main
    from rltui_sandbox import manage

    monkeypatch.setenv("RLTUI_SANDBOX_DIR", str(tmp_path / "sandbox"))
    assert main(["sandbox", "start", "--capacity", item]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"--capacity: {item!r}: use KIND=unavailable"), err
    assert manage.read_status(tmp_path / "sandbox") is None     # nothing was started


def test_the_knob_names_the_kind_of_capacity_that_stocks_out():
    from rltui_sandbox.world_capacity import parse_knob

    assert parse_knob("spot=unavailable") == "spot" and parse_knob("on-demand=unavailable") == "on-demand"
