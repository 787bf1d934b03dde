"""Run summaries (rltui/runs.py) as a user meets them: two GRPO demo runs recorded through the
parser path both faces use (plan/jobs.py's remember_job and recorder), kept after `down`, listed
and compared by `rltui runs` run as a subprocess with no env.sh and no sandbox."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rltui import runs
from rltui.config import parse_config
from rltui.envfile import EnvFile
from rltui.plan.context import Context
from rltui.statedir import state_root
from rltui.plan.jobs import JobRecord, job_records, record_log, recorder, remember_job, retire_jobs

DATA = Path(__file__).parent.parent / "data"
SECRET = "hf_" + "Runs5ecret" * 4
REWARD = re.compile(r"^\s+• Avg Reward: (\S+)$", re.M)
STEP_TIME = re.compile(r"^\s+• Total step time: (\S+)s$", re.M)


def rltui(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rltui.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def demo_log(tmp: Path, steps: int, generations: int) -> str:
    """The sandbox's GRPO demo (what the sandbox's Ray job runs), as `ray job logs` shows it."""
    env = dict(os.environ, RLTUI_DEMO_STEP_SECONDS="0", RLTUI_DEMO_CHECKPOINT_MB="0.1")
    out = subprocess.run([sys.executable, "-m", "rltui_sandbox.grpo_demo", f"grpo.max_num_steps={steps}",
                          f"grpo.num_generations_per_prompt={generations}", "grpo.num_prompts_per_step=32",
                          f"policy.train_global_batch_size={32 * generations}", "checkpointing.enabled=True",
                          "checkpointing.save_period=2", f"checkpointing.checkpoint_dir={tmp / 'ckpt'}"],
                         cwd=tmp, env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


def context(cluster: str = "ray-a4-gpu-spot") -> Context:
    text = (DATA / "env" / "devrel-demos.env.sh").read_text().replace('HF_TOKEN=""', f'HF_TOKEN="{SECRET}"')
    values = EnvFile.parse(text, "env.sh").values()
    values["CLUSTER_NAME"] = cluster
    return Context(parse_config(values), endpoints=None)  # type: ignore[arg-type]  # folders only


def follow(ctx: Context, job_id: str, text: str, status: str, chunk: int = 997) -> None:
    """What follow_logs does with each chunk the log follower delivers, then at the end."""
    rec = recorder(ctx, job_id)
    assert rec is not None
    for i in range(0, len(text), chunk):
        rec.feed(text[i:i + chunk])
    rec.finish(status)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return (demo_log(tmp_path_factory.mktemp("demo-a"), 6, 8),
            demo_log(tmp_path_factory.mktemp("demo-b"), 4, 4))


def test_two_runs_are_listed_and_compared_side_by_side_after_down(logs: tuple[str, str], tmp_path: Path):
    log_a, log_b = logs
    ctx = context()
    remember_job(ctx, JobRecord("rltui-20261201-100000-aaaaaa", "/lustre/a", "jobs/a", 1_764_583_200.0))
    follow(ctx, "rltui-20261201-100000-aaaaaa", log_a, "SUCCEEDED")
    remember_job(ctx, JobRecord("rltui-20261201-110000-bbbbbb", "/lustre/a-2", "jobs/b", 1_764_586_800.0))
    follow(ctx, "rltui-20261201-110000-bbbbbb", log_b[: len(log_b) * 3 // 4], "RUNNING")
    assert retire_jobs(ctx, "destroyed")       # `down` removed the RayCluster: jobs.json moves away
    assert job_records(ctx) == []

    listed = rltui("runs", "--json", cwd=tmp_path)   # no env.sh in cwd, no sandbox
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [r["id"] for r in rows] == ["rltui-20261201-100000-aaaaaa", "rltui-20261201-110000-bbbbbb"]
    assert set(rows[0]) == {"id", "started", "status", "steps", "final_reward", "attempts"}
    rewards_a = [float(v) for v in REWARD.findall(log_a)]
    assert rows[0] == {"id": "rltui-20261201-100000-aaaaaa", "started": "2025-12-01T10:00:00Z",
                       "status": "SUCCEEDED", "steps": 6, "final_reward": rewards_a[-1], "attempts": 1}
    # B was cut mid-run and its cluster deleted: UNKNOWN, its steps so far kept.
    assert rows[1]["status"] == "UNKNOWN" and 1 <= rows[1]["steps"] < 4

    table = rltui("runs", cwd=tmp_path)
    assert table.returncode == 0 and "SUCCEEDED" in table.stdout and "UNKNOWN" in table.stdout
    assert "rltui-20261201-110000-bbbbbb" in table.stdout

    compared = rltui("runs", "compare", "rltui-20261201-10", "rltui-20261201-11", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    rows_out = {int(line.split()[0]): line.split() for line in compared.stdout.splitlines()
                if line[:4].strip().isdigit()}
    times_a = STEP_TIME.findall(log_a)
    rewards_b = [float(v) for v in REWARD.findall(log_b)]
    assert sorted(rows_out) == [1, 2, 3, 4, 5, 6]
    assert rows_out[1][1:3] == [f"{rewards_a[0]:.4f}", f"{rewards_b[0]:.4f}"]   # A's beside B's
    assert rows_out[6][1] == f"{rewards_a[5]:.4f}" and f"{float(times_a[5]):.1f}" in rows_out[6]
    assert "generations_per_prompt" not in compared.stdout  # same env.sh: no config difference
    for text in (listed.stdout, table.stdout, compared.stdout):
        assert SECRET not in text
    for path in (state_root() / "runs").rglob("*.json"):
        assert SECRET not in path.read_text() and path.stat().st_mode & 0o077 == 0


def test_compare_names_an_unknown_or_ambiguous_id_and_exits_2(logs: tuple[str, str], tmp_path: Path):
    ctx = context()
    for n, stamp in enumerate(("100000-aaaaaa", "110000-bbbbbb")):
        remember_job(ctx, JobRecord(f"rltui-20261201-{stamp}", f"/lustre/{n}", f"jobs/{n}", 1e9 + n))
    ambiguous = rltui("runs", "compare", "rltui-2026", "rltui-20261201-11", cwd=tmp_path)
    assert ambiguous.returncode == 2 and "'rltui-2026'" in ambiguous.stderr and "ambiguous" in ambiguous.stderr
    assert "Traceback" not in ambiguous.stderr and ambiguous.stderr.count("\n") == 1
    unknown = rltui("runs", "compare", "rltui-20261201-10", "nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "'nope'" in unknown.stderr and "no such run" in unknown.stderr


def test_a_just_submitted_run_is_pending_and_a_plain_logs_read_records_its_steps(logs: tuple[str, str]):
    ctx = context()
    remember_job(ctx, JobRecord("rltui-20261201-120000-cccccc", "/lustre/c", "jobs/c", 1e9))
    assert [r.row()["status"] for r in runs.all_runs()] == ["PENDING"]
    summary = runs.all_runs()[0]
    assert summary.config["num_nodes"] == 8 and "hf_token" not in summary.config
    record_log(ctx, None, logs[1], "SUCCEEDED")    # `rltui logs` (no --follow): the newest job
    summary = runs.all_runs()[0]
    assert summary.status == "SUCCEEDED" and [s.step for s in summary.steps] == [1, 2, 3, 4]
    assert summary.steps[1].checkpoint_s is not None and summary.steps[0].checkpoint_s is None


def test_a_resumed_attempts_steps_replace_the_lost_ones_and_a_later_follow_keeps_earlier_steps():
    old = [runs.StepSummary(1, 0.1), runs.StepSummary(2, 0.2), runs.StepSummary(3, 0.3)]
    new = [runs.StepSummary(3, 0.35), runs.StepSummary(4, 0.4)]
    assert [(s.step, s.reward) for s in runs.merge_steps(old, new)] == [(1, 0.1), (2, 0.2), (3, 0.35), (4, 0.4)]


def test_previous_run_skips_the_current_one_and_its_attempts():
    a = runs.RunSummary("r-a", "p", "c", 1.0, steps=[runs.StepSummary(1, 0.5)])
    b = runs.RunSummary("r-b", "p", "c", 2.0, steps=[runs.StepSummary(1, 0.6)])
    assert runs.previous([a, b], "r-b-a2") is a
    assert runs.previous([a, b], None) is b
    assert runs.previous([a], "r-a") is None


def test_the_state_folder_follows_xdg_and_ignores_a_relative_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert state_root() == tmp_path / "rltui"
    for value in ("relative/ignored", ""):
        monkeypatch.setenv("XDG_STATE_HOME", value)
        assert state_root() == tmp_path / "home" / ".local" / "state" / "rltui"
