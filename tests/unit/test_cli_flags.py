"""A flag given to a command it does not apply to is a usage error (exit 2, one line naming the
flag and the command), never silently ignored; `report` refuses a binary file; an id that names
nothing (`logs --job`, `runs compare`) is exit 2 with the ids that exist. Never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rltui import cli
from rltui.cloud.errors import CloudError

DATA = Path(__file__).parent.parent / "data" / "env"


def rltui(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rltui.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=60, cwd=cwd)


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


# A missing env.sh: were the flag ignored, the command would stop there (exit 2, "no such file"),
# having asked no cloud; the line must name the flag instead.
@pytest.mark.parametrize("argv, flag, command", [
    (["--serve", "status"], "--serve", "status"),
    (["--serve", "up"], "--serve", "up"),
    (["--port", "9000", "check"], "--port", "check"),
    (["--public-url", "https://x", "down", "--yes"], "--public-url", "down"),
    (["--sandbox", "check"], "--sandbox", "check"),
    (["--sandbox", "script"], "--sandbox", "script"),
    (["up", "--yes", "--check"], "--yes", "up --check"),
    (["up", "--check", "-v"], "--verbose", "up --check"),
    (["up", "--check", "--verbose"], "--verbose", "up --check"),
])
def test_a_flag_that_does_not_apply_is_a_usage_error(tmp_path: Path, argv: list[str], flag: str,
                                                      command: str) -> None:
    out = rltui(*argv, "--env", tmp_path / "nope.sh", cwd=tmp_path)
    assert out.returncode == 2
    line = one_line(out)
    assert flag in line and f"rltui {command}" in line, line


@pytest.mark.parametrize("argv, flag, command", [
    (["--env", "env.sh", "report", "x.log"], "--env", "report"),
    (["--env", "env.sh", "runs"], "--env", "runs"),
    (["--sandbox", "runs"], "--sandbox", "runs"),
    (["--sandbox", "sandbox", "status"], "--sandbox", "sandbox"),
    (["runs", "--json", "compare", "a", "b"], "--json", "runs compare"),
])
def test_a_flag_that_does_not_apply_to_a_command_without_env_sh(tmp_path: Path, argv: list[str],
                                                                 flag: str, command: str) -> None:
    out = rltui(*argv, cwd=tmp_path)
    assert out.returncode == 2
    line = one_line(out)
    assert flag in line and f"rltui {command}" in line, line


def test_a_flag_that_does_not_apply_to_check_with_a_good_env_sh(env_file: Path) -> None:
    assert rltui("check", "--env", env_file).returncode == 0
    out = rltui("--port", "9000", "check", "--env", env_file)
    assert out.returncode == 2 and out.stdout == ""
    assert "--port" in one_line(out)


def test_the_flags_that_still_apply_are_accepted(env_file: Path) -> None:
    args = cli.build_parser().parse_args(["--sandbox", "--env", str(env_file), "status", "--json"])
    assert cli.misapplied(args) is None
    for argv in (["up", "--check", "--sandbox"], ["up", "--yes", "-v"], ["--sandbox", "down", "--yes"],
                 ["runs", "--json"], ["runs", "compare", "a", "b"], ["--serve", "--port", "9000"],
                 ["--env", "x.sh", "check"], ["report", "x.log", "--json"]):
        assert cli.misapplied(cli.build_parser().parse_args(argv)) is None, argv


def test_help_says_which_flags_go_with_which(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["up", "--help"], ["--help"]):
        with pytest.raises(SystemExit):
            cli.build_parser().parse_args(argv)
    text = " ".join(capsys.readouterr().out.split())
    assert "not with --check" in text
    assert "the wizard only" in text


def test_report_refuses_a_binary_file(tmp_path: Path) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    for extra in ([], ["--json"]):
        out = rltui("report", blob, *extra)
        assert out.returncode == 2
        assert "binary" in one_line(out) and str(blob) in one_line(out)
        assert out.stdout == ""


def test_report_of_a_text_file_without_steps_still_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "other.log"
    log.write_text("hello\nworld\n")
    out = rltui("report", log)
    assert out.returncode == 0 and "no GRPO step found" in " ".join(out.stdout.split())


# --- ids that name nothing ------------------------------------------------------------------

class FakeJobs:
    """RayJobs as the dashboard answers it: two jobs (one of them rltui's own volume probe)."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def list(self) -> list[Any]:
        from types import SimpleNamespace

        return [SimpleNamespace(submission_id="rltui-20261201-100000-aaaaaa", metadata={}, start_time_ms=1),
                SimpleNamespace(submission_id="probe-1", metadata={"rltui_probe": "1"}, start_time_ms=2),
                SimpleNamespace(submission_id="rltui-20261201-110000-bbbbbb", metadata={}, start_time_ms=3)]

    async def status(self, job_id: str) -> str:
        if job_id.startswith("rltui-"):
            return "SUCCEEDED"
        raise CloudError(f"job {job_id}: no job {job_id} on this Ray cluster", transient=False, code="NotFound")

    async def logs(self, job_id: str) -> str:
        await self.status(job_id)
        return "a line\n"


class FakeContext:
    def __init__(self, cfg: Any, endpoints: Any, root: Path) -> None:
        self.cfg, self.endpoints = cfg, endpoints
        self.run_dir = root / "run"

    async def dashboard(self) -> str:
        return "http://127.0.0.1:1"

    async def close(self) -> None:
        pass


class FakeEndpoints:
    label = "SANDBOX"

    def require_credentials(self) -> None:
        pass


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rltui import headless
    from rltui.cloud import rayjobs
    from rltui import sandbox_link

    monkeypatch.setattr(rayjobs, "RayJobs", FakeJobs)
    monkeypatch.setattr(headless, "Context", lambda cfg, ep: FakeContext(cfg, ep, tmp_path))
    monkeypatch.setattr(sandbox_link, "endpoints_for", lambda sandbox: FakeEndpoints())


def test_logs_of_a_job_that_does_not_exist_names_the_ones_that_do(
        fake_cluster: None, env_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["logs", "--job", "nosuchjob", "--env", str(env_file)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "nosuchjob" in err[0] and "rltui-20261201-100000-aaaaaa" in err[0] \
        and "rltui-20261201-110000-bbbbbb" in err[0] and "probe-1" not in err[0]
    assert cli.main(["logs", "--job", "nosuchjob", "--follow", "--env", str(env_file)]) == 2
    assert "rltui-20261201-110000-bbbbbb" in capsys.readouterr().err


def test_logs_of_a_job_that_exists_still_reads_it(fake_cluster: None, env_file: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["logs", "--job", "rltui-20261201-100000-aaaaaa", "--env", str(env_file)]) == 0
    assert capsys.readouterr().out.splitlines() == ["a line", "SUCCEEDED"]


def test_runs_compare_of_an_unknown_id_names_the_ids_that_exist(tmp_path: Path) -> None:
    from rltui import runs
    from rltui.config import parse_config
    from rltui.envfile import EnvFile
    from rltui.plan.context import Context
    from rltui.plan.jobs import JobRecord, remember_job

    ctx = Context(parse_config(EnvFile.read(DATA / "devrel-demos.env.sh").values()), endpoints=None)  # type: ignore[arg-type]
    for n, stamp in enumerate(("100000-aaaaaa", "110000-bbbbbb")):
        remember_job(ctx, JobRecord(f"rltui-20261201-{stamp}", f"/lustre/{n}", f"jobs/{n}", 1e9 + n))
    assert [r.id for r in runs.all_runs()] == ["rltui-20261201-100000-aaaaaa", "rltui-20261201-110000-bbbbbb"]
    for argv in (["nope", "rltui-20261201-10"], ["rltui-20261201-10", "nope"]):
        out = rltui("runs", "compare", *argv, cwd=tmp_path)
        assert out.returncode == 2
        line = one_line(out)
        assert "'nope'" in line and "rltui-20261201-100000-aaaaaa" in line \
            and "rltui-20261201-110000-bbbbbb" in line, line
    empty = rltui("runs", "--json", cwd=tmp_path)
    assert [r["id"] for r in json.loads(empty.stdout)] == ["rltui-20261201-100000-aaaaaa",
                                                           "rltui-20261201-110000-bbbbbb"]
