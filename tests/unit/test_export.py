"""`rltui export` and down's export offer without a cloud: the destination and folder rules
(plan/export.py), the offer's wording per flag (headless._offer_export), and the flags' refusals."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from rltui.config import RLConfig
from rltui.headless import _offer_export
from rltui.plan.context import Context
from rltui.plan.export import ExportDone, checkpoint_folder, destination, lustre_path
from rltui.plan.jobs import JobRecord, Refused, save_job_records

DATA = Path(__file__).parent.parent / "data"


@pytest.mark.parametrize("uri, want", [
    ("gs://bars-bucket/run1", "gs://bars-bucket/run1/"),
    ("gs://bars-bucket/run1/", "gs://bars-bucket/run1/"),
    ("gs://bars-bucket/a/b", "gs://bars-bucket/a/b/"),
    ("gs://bars-bucket", "gs://bars-bucket/"),
])
def test_a_destination_ends_with_a_slash_as_export_data_takes_it(uri, want):
    assert destination(uri) == want


@pytest.mark.parametrize("uri", ["bars-bucket/run1", "s3://bars-bucket/x", "gs://Bars/x", "gs://ab/x",
                                 "gs://bars-bucket/a//b"])
def test_a_bad_destination_is_refused_naming_the_flag(uri):
    with pytest.raises(Refused, match=r"^--to "):
        destination(uri)


def test_the_folder_on_the_instance_is_the_mounts_path_below_lustre():
    assert lustre_path("/lustre/nemo_rl/run") == "/nemo_rl/run"
    assert lustre_path("/lustre") == "/"
    with pytest.raises(Refused, match="CHECKPOINT_DIR"):
        lustre_path("/lustre2/run")


def _ctx(tmp_path: Path) -> Context:
    cfg = RLConfig(PROJECT_ID="rl-demo-project", LUSTRE_INSTANCE_ID="lus-one")
    return Context(cfg, endpoints=None, root=tmp_path)  # type: ignore[arg-type]  # no call is made


def test_the_runs_folder_is_the_newest_submits_else_checkpoint_dir(tmp_path):
    ctx = _ctx(tmp_path)
    assert checkpoint_folder(ctx) == ctx.cfg.checkpoint_dir
    save_job_records(ctx, [JobRecord("j1", "/lustre/x", "", 1.0), JobRecord("j2", "/lustre/x-2", "", 2.0)])
    assert checkpoint_folder(ctx) == "/lustre/x-2"


def test_down_yes_offers_the_export_in_a_line_and_no_export_says_nothing(tmp_path):
    ctx = _ctx(tmp_path)
    said: list[str] = []
    assert asyncio.run(_offer_export(ctx, yes=True, export_to=None, no_export=False, out=said.append)) is None
    assert len(said) == 1 and "not exported" in said[0] and "--export-to" in said[0] and "--no-export" in said[0]
    assert ctx.cfg.checkpoint_dir in said[0] and "lus-one" in said[0]
    said.clear()
    assert asyncio.run(_offer_export(ctx, yes=True, export_to=None, no_export=True, out=said.append)) is None
    assert said == []
    got = asyncio.run(_offer_export(ctx, yes=True, export_to="gs://bars-bucket/run1", no_export=False,
                                    out=said.append))
    assert got == "gs://bars-bucket/run1/" and said == []
    with pytest.raises(Refused, match="^--export-to "):
        asyncio.run(_offer_export(ctx, yes=True, export_to="nowhere", no_export=False, out=said.append))


def test_what_was_copied_is_one_line():
    assert ExportDone("/run", "gs://b1b/run1/", 12, 3_400_000).line() == \
        "exported 12 files (3.4 MB) from /run on Lustre to gs://b1b/run1/"


def rltui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rltui.cli", *args], capture_output=True, text=True, timeout=60)


def test_export_needs_to_and_down_takes_one_of_export_to_or_no_export(tmp_path):
    env = tmp_path / "env.sh"
    env.write_text((DATA / "env" / "devrel-demos.env.sh").read_text())
    env.chmod(0o600)
    out = rltui("export", "--env", str(env))
    assert out.returncode == 2 and "--to" in out.stderr
    out = rltui("down", "--env", str(env), "--no-export", "--export-to", "gs://b1b/x")
    assert out.returncode == 2 and "--no-export" in out.stderr and "--export-to" in out.stderr
    out = rltui("export", "--env", str(env), "--to", "bars-bucket")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--to 'bars-bucket'" in out.stderr


def test_the_wizards_teardown_exports_after_stopping_the_jobs_and_before_deleting(tmp_path, monkeypatch):
    """Session.down (the wizard's Teardown) with an export: checked first (an absent instance
    stops nothing), the jobs stop, the export runs and is waited for, then the runner deletes; a
    failed export deletes nothing."""
    import rltui.plan.background as background
    import rltui.plan.export as export
    import rltui.plan.jobs as jobs
    import rltui.plan.notices as notices
    from rltui.cloud.errors import CloudError
    from rltui.session import Session

    env = tmp_path / "env.sh"
    env.write_text((DATA / "env" / "devrel-demos.env.sh").read_text())
    env.chmod(0o600)
    order: list[str] = []

    async def stop_background(ctx, out):
        order.append("background")

    async def stop_jobs(ctx, out):
        order.append("jobs")

    async def export_checkpoints(ctx, to, out):
        order.append(f"export {to}")
        if to.startswith("gs://broken"):
            raise CloudError("the export to gs://broken/ failed: bucket", transient=False)
        return ExportDone("/run", to, 2, 10)

    async def announce(ctx, result):
        return None

    class Runner:
        async def down(self):
            from rltui.plan.runner import RunResult

            order.append("delete")
            return RunResult("down", True, {}, {}, 1.0)

    monkeypatch.setattr(background, "stop_background", stop_background)
    monkeypatch.setattr(jobs, "stop_jobs", stop_jobs)
    monkeypatch.setattr(jobs, "retire_jobs", lambda ctx, state: False)
    monkeypatch.setattr(export, "export_checkpoints", export_checkpoints)

    async def ready_to_export(ctx, to, whole=False):
        order.append("checked")
        return to, "/run"

    monkeypatch.setattr(export, "ready_to_export", ready_to_export)
    monkeypatch.setattr(notices, "announce_teardown", announce)
    session = Session(env, lambda: None)  # type: ignore[arg-type, return-value]  # no cloud call is made
    monkeypatch.setattr(session, "runner", lambda listener=None: Runner())
    monkeypatch.setattr(session, "context", lambda: None)
    heard: list[object] = []
    asyncio.run(session.down(heard.append, "gs://bars-bucket/run1/"))
    assert order == ["checked", "background", "jobs", "export gs://bars-bucket/run1/", "delete"]
    assert heard[-1] == "exported 2 files (10 B) from /run on Lustre to gs://bars-bucket/run1/"
    order.clear()
    with pytest.raises(CloudError):
        asyncio.run(session.down(heard.append, "gs://broken/"))
    assert order == ["checked", "background", "jobs", "export gs://broken/"]   # nothing deleted


class _Lustre:
    """The export's operation as Lustre reports it (counters, then done), for one instance."""

    def __init__(self, end: dict) -> None:
        self.end = end

    async def get(self, instance: str):
        from types import SimpleNamespace

        return SimpleNamespace(state=SimpleNamespace(name="ACTIVE"))

    async def export_data(self, instance: str, source: str, dest: str) -> str:
        return "operations/export-1"

    async def export_state(self, op: str):
        from rltui.cloud.lustre import ExportState

        counts = {"found_files": 4, "found_bytes": 4000, "copied_files": 4, "copied_bytes": 4000, "failed_files": 0}
        return ExportState(done=True, error="", error_code=0, **{**counts, **self.end})


def _export_ctx(end: dict):
    from types import SimpleNamespace

    return SimpleNamespace(lustre=_Lustre(end), cfg=SimpleNamespace(lustre_instance_id="rl-lustre"),
                           endpoints=SimpleNamespace(time_scale=1.0))


async def test_an_export_that_copied_everything_is_done() -> None:
    from rltui.plan.export import export_checkpoints

    done = await export_checkpoints(_export_ctx({}), "gs://bars-bucket/run1", whole=True, out=lambda _: None)
    assert (done.files, done.destination) == (4, "gs://bars-bucket/run1/")


@pytest.mark.parametrize("end, word", [({"copied_files": 3, "failed_files": 1}, "1 failed: Lustre is kept"),
                                       ({"found_files": 0, "copied_files": 0}, "nothing was copied")])
async def test_a_partial_or_empty_export_keeps_lustre(end: dict, word: str) -> None:
    """The teardown deletes Lustre only after an export that copied every file it found."""
    from rltui.cloud.errors import CloudError
    from rltui.plan.export import export_checkpoints

    with pytest.raises(CloudError, match=word):
        await export_checkpoints(_export_ctx(end), "gs://bars-bucket/run1", whole=True, out=lambda _: None)
