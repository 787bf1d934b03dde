"""`rltui sandbox stall`'s choice of the job to freeze (sandbox/rltui_sandbox/kuberay/stall.py),
from Ray's JobDetails as GET /api/jobs/ answers them: the one RUNNING job, or the one named;
anything else is one line saying why, and nothing is stopped. The freezing itself runs against
a real Ray head in tests/e2e/test_stall.py."""

from __future__ import annotations

import pytest

from rltui import cli
from rltui_sandbox.kuberay.stall import _choose

HEAD = object()


def _job(sid: str, status: str, pid: str | None = "4242") -> dict:
    return {"type": "SUBMISSION", "submission_id": sid, "status": status,
            "driver_info": {"id": "01000000", "node_ip_address": "127.0.0.1", "pid": pid} if pid else None}


def test_the_one_running_job_or_the_one_named() -> None:
    jobs = [(HEAD, _job("rltui-a", "SUCCEEDED")), (HEAD, _job("rltui-b", "RUNNING"))]
    assert _choose(jobs, None)[1]["submission_id"] == "rltui-b"  # type: ignore[arg-type]
    assert _choose(jobs, "rltui-b")[1]["submission_id"] == "rltui-b"  # type: ignore[arg-type]


@pytest.mark.parametrize(("jobs", "named", "error", "says"), [
    ([], None, LookupError, "no job is RUNNING on the sandbox's Ray heads"),
    ([_job("rltui-a", "SUCCEEDED")], None, LookupError, "no job is RUNNING"),
    ([_job("rltui-a", "RUNNING"), _job("rltui-b", "RUNNING")], None, ValueError,
     "2 jobs are RUNNING (rltui-a, rltui-b): name one with --job"),
    ([_job("rltui-a", "RUNNING")], "rltui-z", LookupError, "no job rltui-z on the sandbox's Ray heads; their jobs: rltui-a"),
    ([_job("rltui-a", "STOPPED")], "rltui-a", ValueError, "job rltui-a is STOPPED, not RUNNING"),
])
def test_anything_else_is_one_line(jobs: list, named: str | None, error: type, says: str) -> None:
    with pytest.raises(error) as raised:
        _choose([(HEAD, j) for j in jobs], named)  # type: ignore[misc]
    assert says in str(raised.value.args[0]) and "\n" not in str(raised.value.args[0])


def test_without_a_sandbox_it_says_so(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                      tmp_path) -> None:
    monkeypatch.setenv("RLTUI_SANDBOX_DIR", str(tmp_path / "none"))
    assert cli.main(["sandbox", "stall"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["no sandbox running: start it with `rltui sandbox start`"]
