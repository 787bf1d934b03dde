"""A supervised run's events land in its summary (`rltui runs`, rltui/runs.py) with the spend at
that moment, each once: the supervisor's record is read again at every follow's end."""

from __future__ import annotations

from pathlib import Path

from rltui import runs


def _event(kind: str, at: float, spend: float | None) -> dict:
    return {"kind": kind, "at": at, "run": "rltui-r", "attempt": 1, "step": 7, "text": f"{kind} text",
            "spend_usd": spend}


def test_events_are_merged_by_kind_and_time(tmp_path: Path) -> None:
    base = runs.RunSummary(id="rltui-r", project="p", cluster="c", started_at=1.0, supervised=True)
    first = [_event("stalled", 10.0, 3.5), _event("recovering", 12.0, 3.6)]
    runs.Recorder(tmp_path, base).finish("RUNNING", events=first)
    again = runs.read(tmp_path, "rltui-r")
    assert again is not None and again.events == first
    later = [*first, _event("resumed", 20.0, 4.0), _event("succeeded", 40.0, 6.25)]
    runs.Recorder(tmp_path, again).finish("SUCCEEDED", events=later)
    runs.Recorder(tmp_path, runs.read(tmp_path, "rltui-r")).finish("SUCCEEDED", events=later)  # read twice
    final = runs.read(tmp_path, "rltui-r")
    assert final is not None
    assert [(e["kind"], e["spend_usd"]) for e in final.events] == [
        ("stalled", 3.5), ("recovering", 3.6), ("resumed", 4.0), ("succeeded", 6.25)]
    assert runs.merge_events(final.events, [_event("budget", 30.0, 5.0)])[3]["kind"] == "budget"


def test_a_budget_stop_is_one_message_not_two() -> None:
    """The guard stops the run and adds `budget`; the status change then adds no `stopped`."""
    from rltui.oncluster.events import add_event, status_events

    spec = {"run": "rltui-r"}
    state: dict = {"status": "STOPPED", "message": "the budget was reached", "attempts": [{}]}
    add_event(state, spec, "budget", "the budget was reached: ~$510 spent of $500", 5.0)
    status_events(state, spec, "RUNNING", 5.0)
    assert [e["kind"] for e in state["events"]] == ["budget"]
    plain: dict = {"status": "STOPPED", "message": "", "attempts": [{}]}
    status_events(plain, spec, "RUNNING", 6.0)
    assert [e["kind"] for e in plain["events"]] == ["stopped"]
