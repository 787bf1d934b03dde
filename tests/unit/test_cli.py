"""The headless commands as a user runs them: exit codes, one-line errors, files written."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent.parent / "data"
TOKEN = "hf_" + "Pr1vate" * 5


def rltui(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rltui.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def env_file(tmp_path):
    text = (DATA / "env" / "devrel-demos.env.sh").read_text().replace(
        'HF_TOKEN=""', f'HF_TOKEN="{TOKEN}"')
    path = tmp_path / "env.sh"
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_version():
    out = rltui("--version")
    assert out.returncode == 0 and out.stdout.startswith("rltui 0.")


def test_check_accepts_the_devrel_demos_env_sh(env_file):
    out = rltui("check", "--env", env_file)
    assert out.returncode == 0, out.stderr
    assert "OK" in out.stdout and TOKEN not in out.stdout + out.stderr


def test_check_accepts_the_codelab_env_sh_once_its_placeholders_are_filled(tmp_path):
    text = (DATA / "env" / "codelab.env.sh").read_text()
    raw = rltui("check", "--env", DATA / "env" / "codelab.env.sh")
    assert raw.returncode == 2
    assert raw.stderr.splitlines() == [
        "PROJECT_ID: still the template placeholder <YOUR_PROJECT_ID>: set your Google Cloud project ID"]
    filled = tmp_path / "env.sh"
    filled.write_text(text.replace("<YOUR_PROJECT_ID>", "team-rl-1").replace("<YOUR_HF_TOKEN>", TOKEN))
    filled.chmod(0o600)
    assert rltui("check", "--env", filled).returncode == 0


def test_check_rejects_bad_values_one_line_per_problem(env_file):
    text = env_file.read_text().replace('"us-east1"', '"us-west1"').replace(
        'LUSTRE_CAPACITY="9000"', 'LUSTRE_CAPACITY="9500"')
    env_file.write_text(text)
    out = rltui("check", "--env", env_file)
    assert out.returncode == 2
    assert [line.split(":")[0] for line in out.stderr.splitlines()] == ["REGION", "LUSTRE_CAPACITY"]
    assert "Traceback" not in out.stderr


def test_check_names_every_broken_field_at_once(env_file):
    """Issue 12: a cluster name that breaks its own rule must not hide a Lustre capacity the
    tier does not allow (a rule across fields): one line each, naming the field and the fix."""
    text = env_file.read_text().replace('CLUSTER_NAME="ray-a4-gpu-spot"', 'CLUSTER_NAME="Ray-GPU"')
    text = text.replace('LUSTRE_CAPACITY="9000"', 'LUSTRE_CAPACITY="10000"')
    assert 'CLUSTER_NAME="Ray-GPU"' in text and 'LUSTRE_CAPACITY="10000"' in text
    env_file.write_text(text)
    out = rltui("check", "--env", env_file)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert [line.split(":")[0] for line in lines] == ["CLUSTER_NAME", "LUSTRE_CAPACITY"], lines
    assert "lowercase letters" in lines[0]
    assert "nearest: 9000 or 18000" in lines[1]


def test_check_never_runs_what_is_in_the_file(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "env.sh"
    path.write_text(f'export PROJECT_ID="$(touch {marker})"\n')
    out = rltui("check", "--env", path)
    assert out.returncode == 2 and not marker.exists()
    assert out.stderr.startswith("PROJECT_ID: ") and "line 1" in out.stderr


def test_check_warns_when_a_file_with_tokens_is_world_readable(env_file):
    env_file.chmod(0o644)
    out = rltui("check", "--env", env_file)
    assert out.returncode == 0 and "chmod 600" in out.stderr


@pytest.mark.parametrize("args,words", [
    (["check", "--env", "/no/such/env.sh"], "no such file"),
    (["report", "/no/such.log"], "no such file"),
    (["frobnicate"], "invalid choice"),
    (["check", "--nope"], "unrecognized arguments"),
    (["manifests"], "--out"),
])
def test_bad_input_gets_one_line_and_exit_2(args, words):
    out = rltui(*args)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and words in out.stderr
    assert "Traceback" not in out.stderr


def test_manifests_writes_the_codelab_files_without_secrets(env_file, tmp_path):
    out_dir = tmp_path / "out"
    out = rltui("manifests", "--env", env_file, "--out", out_dir, "--lustre-ip", "10.90.0.2")
    assert out.returncode == 0, out.stderr
    names = sorted(p.name for p in out_dir.iterdir())
    assert names == sorted(["rl-lustre-volume.yaml", "ray-cluster.yaml", "run_nemo_rl.sh",
                            "ray_runtime_env_nemo.json", ".rayignore"])
    for p in out_dir.iterdir():
        assert TOKEN not in p.read_text()
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0
    assert "ip: 10.90.0.2" in (out_dir / "rl-lustre-volume.yaml").read_text()
    assert os.access(out_dir / "run_nemo_rl.sh", os.X_OK)


def test_manifests_refuses_a_bad_ip(env_file, tmp_path):
    out = rltui("manifests", "--env", env_file, "--out", tmp_path, "--lustre-ip", "10.90.0")
    assert out.returncode == 2 and out.stderr.startswith("--lustre-ip:")


def test_script_prints_bash_without_the_token(env_file):
    out = rltui("script", "--env", env_file)
    assert out.returncode == 0 and out.stdout.startswith("#!/bin/bash")
    assert TOKEN not in out.stdout
    subprocess.run(["bash", "-n"], input=out.stdout, text=True, check=True)


def test_global_env_flag_reaches_the_command(env_file, tmp_path):
    assert rltui("--env", env_file, "check", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("argv, wizard_only", [
    ([], True), (["--sandbox", "--env", "my.sh"], True), (["--env=up"], True), (["--env", "up"], True),
    (["--serve", "--port", "9000"], True), (["up"], False), (["--env", "x", "status"], False),
    (["--help"], False), (["-h"], False), (["foo"], False),
])
def test_the_wizards_short_parser_is_used_only_where_argv_cannot_name_a_command(argv, wizard_only):
    from rltui import cli

    assert cli._wizard_only(argv) is wizard_only
    if wizard_only:   # the short parser reads the wizard's options as the full one does
        assert vars(cli.build_parser(wizard_only=True).parse_args(argv)) == \
            vars(cli.build_parser().parse_args(argv))


EXITING = """
import atexit, sys, threading, time
from rltui import cli
atexit.register(lambda: print("atexit ran", flush=True))
if sys.argv[1:2] == ["--thread"]:
    del sys.argv[1]
    def late():
        time.sleep(0.5)
        print("thread ended", flush=True)
    threading.Thread(target=late).start()
cli.run()
"""


@pytest.mark.parametrize("args, code, out", [
    (["--version"], 0, "rltui 0."), (["--help"], 0, "usage: rltui"),
    (["check", "--env", "/nonexistent/env.sh"], 2, ""),
    (["--thread", "--version"], 0, "thread ended"),
])
def test_the_command_exits_with_its_code_after_its_exit_handlers_and_threads(args, code, out):
    """`rltui` leaves without the interpreter's teardown (cli.run: 1.3 s after a headless up),
    but its atexit handlers run, a thread still working is waited for, and nothing printed is
    lost, through a pipe too."""
    done = subprocess.run([sys.executable, "-c", EXITING, *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == code, done.stderr
    assert out in done.stdout and done.stdout.rstrip().endswith("atexit ran")
    if code == 2:
        assert "env.sh" in done.stderr and "Traceback" not in done.stderr
