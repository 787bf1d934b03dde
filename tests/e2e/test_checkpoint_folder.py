"""New or resumed, decided from the Lustre volume (rltui/plan/checkpoints.py): on the sandbox,
`up`, a 4-step run that saves step_2 and step_4, then:
- `submit` again without flags: exit 2, one line naming the folder and step_4 and both flags;
- `submit --resume` (MAX_STEPS raised to 6): the demo's log says it resumes from step 4;
- jobs.json deleted (a new machine): `submit` still asks, now about step_6;
- `submit --new-folder`: a fresh CHECKPOINT_DIR-2 on the volume, trained from step 1;
- `export --to gs://bars-bucket/run1` (the bucket made by the real gcloud): the newest run's
  step_N folders listed by `gcloud storage ls` directly under run1/; `down --export-to` a missing
  bucket deletes nothing of Lustre; `down --yes --no-export` makes no offer and leaves nothing.
The headless commands run as a user runs them (subprocesses); the volume is read from the
sandbox's folder standing in for the Lustre instance, not through rltui. One test per phase,
sharing the cluster: they run in file order.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.headless_user import User, make_user, private_sandbox

pytestmark = pytest.mark.slow

PROJECT, ZONE, INSTANCE = "checkpoint-folder-e2e", "us-east1-b", "rl-demo-gpu-lustre"
BASE = "/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1"  # CHECKPOINT_DIR's default


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    # A sandbox of its own: not in the shared sandbox's xdist group, so it runs beside it.
    root = tmp_path_factory.mktemp("ckptsbx")
    with private_sandbox(root, speed=300.0, kuberay_version="1.6.0", timeout=60.0) as status:
        u = make_user(tmp_path_factory.mktemp("ckptdir"), PROJECT, root, status)
        set_env(u, MAX_STEPS="4")
        yield u


def set_env(user: User, **values: str) -> None:
    text = user.env_sh.read_text()
    user.env_sh.write_text(text + "".join(f'export {k}="{v}"\n' for k, v in values.items()))


def on_volume(user: User, folder: str) -> list[str]:
    """The folder's step_N entries in the sandbox's stand-in for the Lustre instance."""
    roots = list(user.sandbox_dir.rglob(f"lustre/{PROJECT}/{ZONE}/{INSTANCE}"))
    assert len(roots) == 1, roots
    path = roots[0] / folder.removeprefix("/lustre/")
    return sorted((p.name for p in path.iterdir() if re.fullmatch(r"step_\d+", p.name)),
                  key=lambda n: int(n[5:])) if path.is_dir() else []


def steps_in(log: str) -> list[int]:
    return [int(s) for s in re.findall(r"=+ Step (\d+)/\d+ =+", log)]


def test_a_first_run_saves_checkpoints_on_the_volume(user):
    up = user.run("up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-2000:]
    sub = user.run("submit", "--follow")
    assert sub.returncode == 0, sub.stderr[-2000:]
    assert sub.stdout.rstrip("\n").splitlines()[-1] == "SUCCEEDED"
    assert steps_in(sub.stdout) == [1, 2, 3, 4]
    assert on_volume(user, BASE) == ["step_2", "step_4"]


def test_a_second_submit_without_flags_asks_naming_the_folder_and_newest_step(user):
    out = user.run("submit")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert BASE in lines[0] and "step_4" in lines[0], lines[0]
    assert "--resume" in lines[0] and "--new-folder" in lines[0], lines[0]
    assert out.stdout == ""  # no job id: nothing was submitted


def test_resume_continues_from_the_newest_step(user):
    set_env(user, MAX_STEPS="6")
    out = user.run("submit", "--resume", "--follow")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "resuming from step_4" in out.stderr, out.stderr
    assert re.search(r"Resuming from checkpoint \S+/nemo-rl-grpo-test1/step_4 \(step 4\)", out.stdout), \
        out.stdout[-3000:]
    assert steps_in(out.stdout) == [5, 6]
    assert on_volume(user, BASE)[-1] == "step_6"


def test_a_new_machine_is_still_asked_and_new_folder_trains_from_step_1(user):
    records = list((user.home / "state").rglob("jobs.json"))
    assert len(records) == 1, records
    records[0].unlink()  # a new machine, or a lost state folder
    asked = user.run("submit")
    assert asked.returncode == 2, asked.stdout + asked.stderr
    assert BASE in asked.stderr and "step_6" in asked.stderr and len(asked.stderr.splitlines()) == 1

    out = user.run("submit", "--new-folder", "--follow")
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"checkpoints go to {BASE}-2" in out.stderr, out.stderr
    assert "Resuming from checkpoint" not in out.stdout
    assert steps_in(out.stdout) == [1, 2, 3, 4, 5, 6]
    assert on_volume(user, BASE + "-2") == ["step_4", "step_6"]
    assert on_volume(user, BASE)[-1] == "step_6"  # the first run's folder as it was


def gcloud(user: User, *args: str) -> subprocess.CompletedProcess[str]:
    """The real gcloud after `eval "$(rltui sandbox env)"`, in the user's project."""
    return subprocess.run(["gcloud", *args, f"--project={PROJECT}"], env=user.tool_env(), capture_output=True,
                          text=True, timeout=120)


def test_export_puts_the_runs_step_folders_under_the_prefix(user):
    made = gcloud(user, "storage", "buckets", "create", "gs://bars-bucket")
    assert made.returncode == 0, made.stderr
    out = user.run("export", "--to", "gs://bars-bucket/run1")
    assert out.returncode == 0, out.stdout + out.stderr
    # The newest run's folder (--new-folder chose CHECKPOINT_DIR-2), and what was copied, last.
    assert out.stdout.splitlines()[0].startswith(f"exporting {BASE.removeprefix('/lustre')}-2 from Lustre")
    assert re.fullmatch(r"exported \d+ files \(.+\) from \S+-2 on Lustre to gs://bars-bucket/run1/",
                        out.stdout.splitlines()[-1]), out.stdout
    listed = gcloud(user, "storage", "ls", "gs://bars-bucket/run1/")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["gs://bars-bucket/run1/step_4/", "gs://bars-bucket/run1/step_6/"]


def test_export_to_a_missing_bucket_fails_and_down_deletes_nothing_of_lustre(user):
    out = user.run("down", "--yes", "--export-to", "gs://no-such-bucket/run1")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "bucket does not exist" in out.stderr, out.stderr
    assert on_volume(user, BASE + "-2") == ["step_4", "step_6"]  # the instance and its files are there


def test_down_yes_no_export_skips_the_offer(user):
    out = user.run("down", "--yes", "--no-export")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "not exported" not in out.stdout and "--export-to" not in out.stdout, out.stdout
    assert out.stdout.splitlines()[-1].startswith("leak scan: nothing of rltui's left")
