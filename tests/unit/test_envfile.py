"""env.sh is read without a shell and written so that `source env.sh` gives back the values."""

import os
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from rltui.envfile import EnvFile, EnvFileError, mode_problem, quote

DATA = Path(__file__).parent.parent / "data" / "env"


def bash_values(path: Path, names: list[str]) -> dict[str, str]:
    """What bash itself makes of the file (the oracle)."""
    script = 'source "$1"; shift; for n in "$@"; do printf "%s\\0" "${!n}"; done'
    out = subprocess.run(["bash", "-c", script, "bash", str(path), *names],
                         capture_output=True, check=True, env={"PATH": os.environ["PATH"]}).stdout
    return dict(zip(names, out.decode().split("\0")[:-1]))


@pytest.mark.parametrize("name", ["codelab.env.sh", "devrel-demos.env.sh"])
def test_the_codelab_files_round_trip_byte_for_byte(name, tmp_path):
    text = (DATA / name).read_text()
    env = EnvFile.parse(text)
    assert env.render() == text
    assert env.values()["NETWORK_NAME"] == "ray-a4-gpu-spot-net-0"
    assert env.values() == bash_values(DATA / name, list(env.values()))


def test_a_change_keeps_comments_order_export_and_references(tmp_path):
    env = EnvFile.read(DATA / "codelab.env.sh")
    env.update({"CLUSTER_NAME": "rl-b200", "PROJECT_ID": "team-rl-1", "LUSTRE_CAPACITY": "18000",
                "MAX_STEPS": "40"})
    out = env.write(tmp_path / "env.sh")
    text = out.read_text()
    assert 'export NETWORK_NAME="${CLUSTER_NAME}-net-0" # Implicitly targets the VPC created by XPK' in text
    assert 'export LUSTRE_CAPACITY="18000" # Capacity in GiB' in text
    assert text.splitlines()[0] == "# Environment Variables for the RL Demo execution"
    assert text.rstrip().endswith('MAX_STEPS="40"')
    assert bash_values(out, ["NETWORK_NAME", "PROJECT_ID", "MAX_STEPS"]) == {
        "NETWORK_NAME": "rl-b200-net-0", "PROJECT_ID": "team-rl-1", "MAX_STEPS": "40"}


def test_written_files_are_private_and_atomic(tmp_path):
    target = tmp_path / "env.sh"
    target.write_text("export A=1\n")
    target.chmod(0o644)
    assert "chmod 600" in mode_problem(target)
    env = EnvFile.read(target)
    env.set("HF_TOKEN", "hf_x")
    env.write(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert mode_problem(target) is None
    assert [p.name for p in tmp_path.iterdir()] == ["env.sh"]  # no temp file left


def test_unknown_variables_are_kept():
    env = EnvFile.parse('export MY_BUCKET="gs://x"\nexport PROJECT_ID="p-123456"\n')
    env.set("PROJECT_ID", "p-654321")
    assert env.render() == 'export MY_BUCKET="gs://x"\nexport PROJECT_ID="p-654321"\n'


@pytest.mark.parametrize("text,value", [
    ("A=plain", "plain"),
    ("export A='single $HOME `x`'", "single $HOME `x`"),
    ('A="double \\"q\\" \\$ \\\\ \\`"', 'double "q" $ \\ `'),
    ("A=a'b c'\"d\"", "ab cd"),
    ("A=x # comment", "x"),
    ("A=x#notacomment", "x#notacomment"),
    ("A=", ""),
    ("A=esc\\ aped", "esc aped"),
    ("B=1\nA=${B}-$B", "1-1"),
    ('A="cost $"', "cost $"),
    ("#!/bin/bash\n\n  export A=1  # spaced", "1"),
])
def test_values_are_what_bash_would_make(text, value, tmp_path):
    env = EnvFile.parse(text + "\n")
    assert env.values()["A"] == value
    (tmp_path / "f").write_text(text + "\n")
    assert bash_values(tmp_path / "f", ["A"])["A"] == value


@pytest.mark.parametrize("text,words", [
    ("export PROJECT_ID=$(gcloud config get project)", "command substitution"),
    ('export PROJECT_ID="$(whoami)"', "command substitution"),
    ("export A=`id`", "backticks"),
    ('export A="x`id`"', "backticks"),
    ("export A=$HOME/x", "not set earlier"),
    ("export A=${B:-x}", "only ${NAME}"),
    ("echo hello", "is a command"),
    ("source other.sh", "is a command"),
    ("export A=x; rm -rf /", "shell operator"),
    ("export A=two words", "unexpected text"),
    ('export A="open', "unterminated"),
    ("export A=~/x", "~"),
])
def test_anything_that_would_run_is_refused_naming_the_line(text, words, tmp_path):
    marker = tmp_path / "ran"
    text = text.replace("rm -rf /", f"touch {marker}")
    with pytest.raises(EnvFileError) as info:
        EnvFile.parse("# first\n" + text + "\n", source="env.sh")
    assert words in str(info.value)
    assert str(info.value).startswith("env.sh:2")
    assert not marker.exists()


def test_an_error_names_the_variable():
    with pytest.raises(EnvFileError) as info:
        EnvFile.parse("export PROJECT_ID=$(gcloud config get project)\n")
    assert info.value.name == "PROJECT_ID" and info.value.lineno == 1


def test_reading_a_missing_or_odd_file_says_so(tmp_path):
    for path, words in [(tmp_path / "nope.sh", "no such file"), (tmp_path, "is a directory")]:
        with pytest.raises(EnvFileError, match=words):
            EnvFile.read(path)
    (tmp_path / "bin.sh").write_bytes(b"\xff\xfe")
    with pytest.raises(EnvFileError, match="UTF-8"):
        EnvFile.read(tmp_path / "bin.sh")


def test_values_with_line_breaks_are_refused_before_writing():
    with pytest.raises(ValueError):
        quote("a\nb")


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=200))
def test_no_input_crashes_the_parser(text):
    try:
        env = EnvFile.parse(text)
    except EnvFileError:
        return
    assert env.render() == text or env.render() == text + "\n" or not text
    env.values()


printable = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\0"),
                    max_size=40)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True), printable,
                       min_size=1, max_size=4))
def test_any_value_written_is_what_bash_sources(tmp_path_factory, values):
    env = EnvFile.read(Path(__file__).parent.parent / "data" / "env" / "codelab.env.sh")
    env.update(values)
    path = env.write(tmp_path_factory.mktemp("env") / "env.sh")
    assert bash_values(path, list(values)) == values
    assert EnvFile.read(path).values() == env.values()
