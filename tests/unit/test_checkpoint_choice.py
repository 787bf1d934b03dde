"""New or resumed, decided from what the Lustre volume holds (rltui/plan/checkpoints.py and
plan/jobs.py checkpoint_dir_for): NeMo-RL resumes from the newest step_N in its folder by
itself, so the local job records alone cannot tell a new run from a resumed one.

The check job's script runs here as it runs on the Ray head (LUSTRE_MOUNT pointing at a folder),
and its one JSON line is read back as submit reads it."""

from __future__ import annotations

import pickle
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rltui.config import parse_config
from rltui.plan.checkpoints import PROBE, PROBE_FILE, Folder, ProbeError, Volume, entrypoint, parse_answer
from rltui.plan.jobs import FolderChoice, JobRecord, Refused, checkpoint_dir_for

DATA = Path(__file__).parent.parent / "data"
BASE = "/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1"  # CHECKPOINT_DIR's default


def cfg(**values: str):
    from rltui.envfile import EnvFile

    return parse_config({**EnvFile.read(DATA / "env" / "devrel-demos.env.sh").values(), **values})


def volume(**folders: tuple[int, ...]) -> Volume:
    """The family's folders by suffix: base=(2, 4), _2=() (present, no checkpoint), ..."""
    paths = {BASE + ("" if key == "base" else "-" + key.lstrip("_")): steps for key, steps in folders.items()}
    return Volume(BASE, {p: Folder(p, True, s) for p, s in paths.items()})


def job(folder: str) -> JobRecord:
    return JobRecord("rltui-x", folder, "/tmp/job", 0.0)


# --- the decision ---

def test_an_empty_volume_is_a_new_run_in_the_folder_env_sh_names():
    plan = checkpoint_dir_for(cfg(), [], Volume(BASE))
    assert (plan.folder, plan.why, plan.resume_from) == (BASE, "", None)


def test_checkpoints_on_the_volume_ask_even_with_no_local_record():
    """A new machine, a lost state folder, a folder another user wrote: asked, not resumed."""
    with pytest.raises(FolderChoice) as found:
        checkpoint_dir_for(cfg(), [], volume(base=(2, 4)))
    assert (found.value.folder, found.value.newest, found.value.count) == (BASE, 4, 2)
    assert found.value.fresh == BASE + "-2"
    line = str(found.value)
    assert "\n" not in line and BASE in line and "step_4" in line
    assert "--resume" in line and "--new-folder" in line


def test_resume_continues_the_newest_step_on_the_volume():
    plan = checkpoint_dir_for(cfg(), [], volume(base=(2, 4)), resume=True)
    assert (plan.folder, plan.resume_from) == (BASE, 4)
    assert "step_4" in plan.why


def test_new_folder_takes_a_name_the_volume_does_not_hold_nor_a_recorded_job_used():
    """-2 exists on the volume (empty: another user's run before its first save), -3 was
    recorded here: -4 is fresh."""
    plan = checkpoint_dir_for(cfg(), [job(BASE + "-3"), job(BASE)], volume(base=(6,), _2=()),
                              new_folder=True)
    assert plan.folder == BASE + "-4" and plan.resume_from is None
    assert BASE + "-4" in plan.why


def test_the_folder_in_question_is_the_last_recorded_runs_when_it_is_of_the_family():
    plan = checkpoint_dir_for(cfg(), [job(BASE), job(BASE + "-2")], volume(base=(20,), _2=(2, 4)),
                              resume=True)
    assert (plan.folder, plan.resume_from) == (BASE + "-2", 4)
    # env.sh names another folder now: that one is asked about, not the old record's.
    other = "/lustre/elsewhere/run"
    plan = checkpoint_dir_for(cfg(CHECKPOINT_DIR=other), [job(BASE)], Volume(other))
    assert plan.folder == other


def test_a_folder_without_step_n_is_a_new_run_there():
    plan = checkpoint_dir_for(cfg(), [job(BASE)], volume(base=()))
    assert plan.folder == BASE and plan.resume_from is None
    # --new-folder with nothing to keep apart from: that folder is new already; said so.
    plan = checkpoint_dir_for(cfg(), [], volume(base=()), new_folder=True)
    assert plan.folder == BASE and "holds no checkpoint" in plan.why


def test_resume_with_nothing_on_the_volume_is_refused_even_with_a_local_record():
    """A resume that would quietly start again at step 1 (another Lustre instance, another
    CHECKPOINT_DIR): refused, naming what to run instead."""
    for jobs in ([], [job(BASE)]):
        with pytest.raises(Refused) as refused:
            checkpoint_dir_for(cfg(), jobs, Volume(BASE), resume=True)
        assert not isinstance(refused.value, FolderChoice)
        assert "--resume" in str(refused.value) and "nothing to resume" in str(refused.value)


def test_a_finished_run_is_not_resumed_into_zero_steps():
    """step_20 with MAX_STEPS 20: NeMo-RL would 'succeed' without a step."""
    with pytest.raises(Refused) as refused:
        checkpoint_dir_for(cfg(), [], volume(base=(18, 20)), resume=True)
    assert "MAX_STEPS" in str(refused.value) and "--new-folder" in str(refused.value)
    with pytest.raises(FolderChoice) as found:
        checkpoint_dir_for(cfg(), [], volume(base=(18, 20)))
    assert found.value.finished and "raise MAX_STEPS" in str(found.value)
    plan = checkpoint_dir_for(cfg(MAX_STEPS="30"), [], volume(base=(18, 20)), resume=True)
    assert plan.resume_from == 20


def test_the_choice_crosses_the_wizards_worker_link_whole():
    from rltui.cloudworker import portable

    found = FolderChoice(BASE, 4, 2, BASE + "-2", 20)
    back = pickle.loads(pickle.dumps(portable(found)))
    assert isinstance(back, FolderChoice) and str(back) == str(found)
    assert (back.folder, back.newest, back.count, back.fresh, back.max_steps) == (BASE, 4, 2, BASE + "-2", 20)


# --- the cluster side: the check job's script and its answer ---

def probe(tmp_path: Path, mount: Path | None, base: str = BASE) -> subprocess.CompletedProcess[str]:
    (tmp_path / PROBE_FILE).write_text(PROBE)
    argv = [sys.executable, *shlex.split(entrypoint(base))[1:]]  # python3 on the head
    env = {"PATH": "/usr/bin:/bin", **({"LUSTRE_MOUNT": str(mount)} if mount else {})}
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)


def test_the_check_job_lists_step_n_as_nemo_rl_finds_them(tmp_path):
    mount = tmp_path / "volume"
    folder = mount / "nemo_rl_qwen_72b_ds_cp" / "nemo-rl-grpo-test1"
    for name in ("step_2", "step_10", "tmp_step_12", "old_step_4", "step_x"):
        (folder / name).mkdir(parents=True)
    (folder.parent / "nemo-rl-grpo-test1-2").mkdir()
    (folder.parent / "nemo-rl-grpo-test1-old").mkdir()   # not a fresh name rltui would take
    (folder.parent / "other").mkdir()
    out = probe(tmp_path, mount)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1
    got = parse_answer("some other line\n" + out.stdout, BASE)
    assert got.folder(BASE).steps == (2, 10)  # sorted by N, as get_latest_checkpoint_path does
    assert got.folder(BASE + "-2") == Folder(BASE + "-2", True, ())
    assert set(got.folders) == {BASE, BASE + "-2"}
    assert got.fresh(set()) == BASE + "-3"


def test_an_absent_folder_is_an_empty_answer_and_a_missing_mount_an_error(tmp_path):
    mount = tmp_path / "volume"
    mount.mkdir()
    assert parse_answer(probe(tmp_path, mount).stdout, BASE).folders == {}
    with pytest.raises(ProbeError, match="no Lustre volume"):
        parse_answer(probe(tmp_path, tmp_path / "not-mounted").stdout, BASE)


@pytest.mark.parametrize("text", ["", "Traceback (most recent call last):\n", "RLTUI_CHECKPOINTS {nope"])
def test_anything_but_the_answer_is_not_guessed_at(text):
    with pytest.raises(ProbeError):
        parse_answer(text, BASE)


def test_resume_and_new_folder_together_are_a_usage_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "rltui.cli", "submit", "--resume", "--new-folder",
                          "--env", str(tmp_path / "env.sh")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "--new-folder" in lines[0] and "--resume" in lines[0], out.stderr


# --- the check job, as rltui runs it: a failure is one clear error; it never becomes "the job" ---

class FakeRay:
    """Ray's job API as rltui's client sees it: the check job ends `status`, logging `log`."""

    jobs: dict[str, dict] = {}
    deleted: list[str] = []

    def __init__(self, url: str, status: str = "SUCCEEDED", log: str = "", message: str = "") -> None:
        self.status, self.log, self.message = status, log, message

    async def submit(self, job_dir, *, entrypoint, runtime_env, submission_id, metadata):
        assert (Path(job_dir) / PROBE_FILE).read_text() == PROBE
        FakeRay.jobs[submission_id] = {"entrypoint": entrypoint, "metadata": metadata}
        return submission_id

    async def info(self, job_id):
        from rltui.cloud.rayjobs import JobInfo

        return JobInfo(job_id, self.status, message=self.message)

    async def logs(self, job_id):
        return self.log


def ask(monkeypatch, **ray: str):
    import asyncio

    from rltui.cloud import rayjobs, rayrest
    from rltui.plan.checkpoints import ask_volume

    class Rest:
        def __init__(self, url: str) -> None:
            pass

        async def call(self, method, path, **_):
            FakeRay.deleted.append(f"{method} {path}")
            return 200, None

    FakeRay.jobs, FakeRay.deleted = {}, []
    monkeypatch.setattr(rayjobs, "RayJobs", lambda url: FakeRay(url, **ray))
    monkeypatch.setattr(rayrest, "RayRest", Rest)

    class Ctx:
        async def dashboard(self) -> str:
            return "http://127.0.0.1:1"

    return asyncio.run(ask_volume(Ctx(), BASE))  # type: ignore[arg-type]


def test_the_check_job_is_read_then_deleted(monkeypatch):
    answer = 'RLTUI_CHECKPOINTS {"mounted": true, "folders": {"nemo-rl-grpo-test1": [4, 2]}, "error": null}'
    got = ask(monkeypatch, log="+ python3\n" + answer + "\n")
    assert got.folder(BASE).steps == (2, 4)
    (job_id, job), = FakeRay.jobs.items()
    assert job["metadata"] == {"rltui_probe": "checkpoints"}
    assert shlex.split(job["entrypoint"])[1:] == [PROBE_FILE, "/nemo_rl_qwen_72b_ds_cp", "nemo-rl-grpo-test1"]
    assert FakeRay.deleted == [f"DELETE /api/jobs/{job_id}"]


def test_a_failed_check_job_is_one_clear_error_not_a_guess(monkeypatch):
    from rltui.cloud.errors import CloudError

    with pytest.raises(CloudError) as failed:
        ask(monkeypatch, status="FAILED", message="Job entrypoint command failed with exit code 127")
    assert failed.value.message.startswith(f"checking {BASE} on the Lustre volume: the check job")
    assert "FAILED" in failed.value.message and "\n" not in failed.value.message
    with pytest.raises(CloudError, match="no Lustre volume"):
        ask(monkeypatch, log='RLTUI_CHECKPOINTS {"mounted": false, "folders": {}, "error": null}\n')


def test_a_left_over_check_job_is_never_taken_for_the_newest_job(tmp_path, monkeypatch):
    import asyncio

    from rltui.cloud.rayjobs import JobInfo
    from rltui.plan.jobs import resolve_job_id

    class Jobs:
        async def list(self):
            return [JobInfo("rltui-run", "SUCCEEDED", start_time_ms=1),
                    JobInfo("rltui-checkpoints-x", "SUCCEEDED", start_time_ms=2,
                            metadata={"rltui_probe": "checkpoints"})]

    class Ctx:  # a machine with no jobs.json
        run_dir = tmp_path

    assert asyncio.run(resolve_job_id(Ctx(), Jobs(), None)) == "rltui-run"  # type: ignore[arg-type]
