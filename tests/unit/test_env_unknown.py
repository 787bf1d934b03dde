"""env.sh variables rltui does not read: a misspelling of one it reads (a small edit away) is an
error naming both, on `rltui check` and on the field in the wizard; any other is the user's own,
one warning line, and stays in the file as written when the form saves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rltui.cloud.endpoints import Endpoints
from rltui.config import ConfigError, check_field, parse_config, unknown_variables
from rltui.envfile import EnvFile
from rltui.session import Session

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "env"


def rltui(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rltui.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def test_a_misspelt_variable_fails_check_naming_both(env_file: Path) -> None:
    env_file.write_text(env_file.read_text() + 'export LUSTRE_CAPACTY="18000"\n')
    out = rltui("check", "--env", env_file)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == ["LUSTRE_CAPACTY: unknown; did you mean LUSTRE_CAPACITY?"]
    assert "Traceback" not in out.stderr


def test_a_misspelling_is_listed_with_every_other_problem_at_once(env_file: Path) -> None:
    text = env_file.read_text().replace('REGION="us-east1"', 'REGION="us-west1"')
    env_file.write_text(text + 'export NUM_NODE="4"\nexport LUSTRE_CAPACITY="10000"\n')
    out = rltui("check", "--env", env_file)
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert lines[0] == "NUM_NODE: unknown; did you mean NUM_NODES?"
    assert [line.split(":")[0] for line in lines[1:]] == ["REGION", "LUSTRE_CAPACITY"]


def test_any_other_unknown_variable_is_one_warning_and_check_passes(env_file: Path) -> None:
    env_file.write_text(env_file.read_text() + 'export FOO_BAR="x"\n')
    out = rltui("check", "--env", env_file)
    assert out.returncode == 0, out.stderr
    warnings = out.stderr.splitlines()
    assert len(warnings) == 1 and "FOO_BAR" in warnings[0] and warnings[0].startswith("warning:")
    assert "OK" in out.stdout


@pytest.mark.parametrize("name", ["HOME", "PATH", "USER", "SHELL", "LANG", "TERM", "PWD", "TMPDIR",
                                  "KUBECONFIG", "CLOUDSDK_CORE_PROJECT", "LC_ALL"])
def test_a_variable_the_shell_sets_is_never_an_error(name: str) -> None:
    # HOME is two edits from ZONE: a shell's variable is never taken for a misspelling.
    misspelt, others = unknown_variables(["PROJECT_ID", name])
    assert misspelt == [] and others == [name]
    parse_config({"PROJECT_ID": "team-rl-1", name: "/x"})


@pytest.mark.parametrize("name, meant", [
    ("LUSTRE_CAPACTY", "LUSTRE_CAPACITY"), ("LUSTER_CAPACITY", "LUSTRE_CAPACITY"),  # swap
    ("CLUSTERNAME", "CLUSTER_NAME"), ("PROJECTID", "PROJECT_ID"), ("ZOEN", "ZONE"),
    ("HF_TOKN", "HF_TOKEN"), ("MAX_STEP", "MAX_STEPS"), ("NUM_NODE", "NUM_NODES"),
])
def test_a_small_edit_from_a_known_name_is_a_misspelling(name: str, meant: str) -> None:
    misspelt, others = unknown_variables([name])
    assert [(p.field, p.message, p.meant) for p in misspelt] == [
        (name, f"unknown; did you mean {meant}?", meant)] and others == []


@pytest.mark.parametrize("name", ["FOO_BAR", "MY_OWN", "DONE_X", "ZONES_LIST", "LUSTRE_CAP"])
def test_a_name_further_away_is_the_users_own(name: str) -> None:
    assert unknown_variables([name]) == ([], [name])


@pytest.mark.parametrize("path", sorted(REPO.glob("assets/*.env.sh*")) + sorted(DATA.glob("*.env.sh")),
                         ids=lambda p: p.name)
def test_every_variable_of_the_codelabs_files_is_known(path: Path) -> None:
    names = [a.name for a in EnvFile.read(path).assignments()]
    assert names and unknown_variables(names) == ([], [])


def test_the_form_shows_a_misspelling_on_the_field_it_is_close_to() -> None:
    values = {**EnvFile.read(DATA / "devrel-demos.env.sh").values(), "LUSTRE_CAPACTY": "18000"}
    shown = check_field("LUSTRE_CAPACITY", "9000", values)
    assert shown is not None and "LUSTRE_CAPACTY" in shown and "did you mean LUSTRE_CAPACITY?" in shown
    assert check_field("ZONE", "us-east1-b", values) is None
    with pytest.raises(ConfigError) as exc:
        parse_config(values)
    assert [str(p) for p in exc.value.problems] == ["LUSTRE_CAPACTY: unknown; did you mean LUSTRE_CAPACITY?"]


UNKNOWN_LINES = ["export   FOO_BAR='x y'   # the user's own, spacing and quotes as typed",
                 "export PATH_EXTRA=\"a:b\""]


def test_the_writer_keeps_unknown_variables_byte_for_byte(tmp_path: Path) -> None:
    text = (DATA / "devrel-demos.env.sh").read_text()
    text = text.replace("# Topology defaults\n", "# Topology defaults\n" + UNKNOWN_LINES[0] + "\n")
    text += UNKNOWN_LINES[1] + "\n"
    env = EnvFile.parse(text)
    env.update({"LUSTRE_CAPACITY": "18000", "MAX_STEPS": "40"})
    out = env.render().splitlines()
    assert UNKNOWN_LINES[0] in out and UNKNOWN_LINES[1] in out
    assert out.index(UNKNOWN_LINES[0]) == text.splitlines().index(UNKNOWN_LINES[0])
    assert 'export LUSTRE_CAPACITY="18000"' in out


def test_configure_save_keeps_unknown_variables_in_env_sh(tmp_path: Path) -> None:
    """What Configure's Save does (Session.save_env): the user's own lines stay as they were."""
    env = tmp_path / "env.sh"
    env.write_text((DATA / "devrel-demos.env.sh").read_text() + UNKNOWN_LINES[0] + "\n"
                   + UNKNOWN_LINES[1] + "\n")
    session = Session(env, lambda: Endpoints(label="SANDBOX"))
    session.save_env({"LUSTRE_CAPACITY": "18000"})
    lines = env.read_text().splitlines()
    assert lines[-2:] == [UNKNOWN_LINES[0], UNKNOWN_LINES[1]]
    assert 'export LUSTRE_CAPACITY="18000"' in lines and session.cfg is not None
