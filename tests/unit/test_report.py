"""rltui.report: `rltui report LOG [--json]` over a noisy 20-step NeMo-RL log."""

from __future__ import annotations

import ast
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from rltui.joblog import TrainingStep
from rltui.report import JSON_KEYS, json_lines, read_log, render_table, summarize, track

DATA = Path(__file__).parent.parent / "data"
LOG = DATA / "grpo_noisy.log"
EXPECTED = json.loads((DATA / "grpo_noisy.expected.json").read_text(encoding="utf-8"))
PACKAGE = Path(__file__).parent.parent.parent / "rltui"


@pytest.fixture(scope="module")
def records() -> list[TrainingStep]:
    return summarize(read_log(LOG))


@pytest.mark.parametrize("field", ["loss", "avg_reward", "step_time_s", "checkpoint_s", "val_accuracy"])
def test_summarize_reproduces_every_step_of_the_noisy_log(records: list[TrainingStep], field: str) -> None:
    assert [(r.step, r.total_steps) for r in records] == [(s["step"], 20) for s in EXPECTED["steps"]]
    assert [getattr(r, field) for r in records] == [s[field] for s in EXPECTED["steps"]]


def test_noisy_log_checkpoints_pruning_throughput_and_end() -> None:
    tracker = track(read_log(LOG))
    assert [{"step": c.step, "path": c.path, "seconds": c.seconds} for c in tracker.checkpoints] == \
        EXPECTED["checkpoints"]
    assert [p.step for p in tracker.pruned] == EXPECTED["pruned"]
    assert all(p.keep_top_k == 2 for p in tracker.pruned)
    assert (tracker.checkpoint_dir, tracker.dataloader_samples) == \
        (EXPECTED["checkpoint_dir"], EXPECTED["dataloader_samples"])
    assert tracker.ended is not None and tracker.ended.reason == EXPECTED["end"]
    assert [{"step": r.step, "tokens_per_sec_per_gpu": r.tokens_per_sec_per_gpu, "mfu_percent": r.mfu_percent}
            for r in tracker.records] == EXPECTED["performance"]


def test_summarize_takes_lines_with_or_without_their_newlines(records: list[TrainingStep]) -> None:
    text = LOG.read_bytes().decode("utf-8")
    assert summarize(text.splitlines()) == records
    assert summarize(text.splitlines(keepends=True)) == records


def test_read_log_survives_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(b"\xff\xfe garbage\n" + LOG.read_bytes())
    assert len(summarize(read_log(log))) == 20


def test_json_lines_has_exactly_the_documented_keys_and_nulls(records: list[TrainingStep]) -> None:
    objects = [json.loads(line) for line in json_lines(records)]
    assert objects == EXPECTED["steps"]
    assert all(tuple(o) == JSON_KEYS for o in objects)
    assert objects[0]["checkpoint_s"] is None and objects[0]["val_accuracy"] is None
    assert objects[9]["val_accuracy"] is not None and objects[9]["checkpoint_s"] is not None


def test_json_lines_stays_valid_json_when_the_loss_diverges() -> None:
    [line] = json_lines([TrainingStep(3, 20, loss=math.nan, avg_reward=math.inf, step_time_s=1.5)])

    def reject(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    assert json.loads(line, parse_constant=reject) == {
        "step": 3, "total_steps": 20, "loss": None, "avg_reward": None, "step_time_s": 1.5,
        "checkpoint_s": None, "val_accuracy": None,
    }


def _rendered_rows(records: list[TrainingStep]) -> tuple[list[str], list[list[str]]]:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(render_table(records))
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in console.file.getvalue().splitlines()
            if line.startswith("│")]
    header = [c.strip() for c in console.file.getvalue().splitlines()[1].split("┃")[1:-1]]
    return header, rows


def test_render_table_shows_s_over_S_and_blank_cells_where_none(records: list[TrainingStep]) -> None:
    header, rows = _rendered_rows(records)
    assert header == ["step", "reward", "loss", "step time (s)", "checkpoint (s)", "val accuracy"]
    assert len(rows) == 20
    first, second, tenth = EXPECTED["steps"][0], EXPECTED["steps"][1], EXPECTED["steps"][9]
    assert rows[0] == ["1/20", f"{first['avg_reward']:.4f}", f"{first['loss']:.4f}",
                       f"{first['step_time_s']:.2f}", "", ""]
    assert rows[1][4] == f"{second['checkpoint_s']:.2f}" and rows[1][5] == ""
    assert rows[9][0] == "10/20" and rows[9][5] == f"{tenth['val_accuracy']:.4f}"


def test_render_table_leaves_an_unfinished_step_blank() -> None:
    _, rows = _rendered_rows([TrainingStep(21, 40)])
    assert rows == [["21/40", "", "", "", "", ""]]


FORBIDDEN = {"textual", "grpc", "google", "kubernetes", "ray", "aiohttp", "pydantic", "numpy"}


def test_pure_core_imports_only_stdlib_and_rich() -> None:
    allowed = {"joblog.py": set(), "report.py": {"rich", "rltui"}}
    for name, extra in allowed.items():
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
        roots |= {node.module.split(".")[0] for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
        assert roots - set(sys.stdlib_module_names) - {"__future__"} <= extra, name


def test_importing_the_report_loads_no_cloud_or_ui_library() -> None:
    code = ("import sys, rltui.report, rltui.joblog; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))")
    out = subprocess.run([sys.executable, "-c", code, *FORBIDDEN], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent, timeout=60)
    assert out.stdout.strip() == "[]"
