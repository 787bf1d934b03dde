"""`rltui report LOG [--json]`: one row per GRPO step of a saved NeMo-RL log.

Pure core: rich and the stdlib only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path

from rich.table import Table

from rltui.joblog import JobLogParser, RunTracker, TrainingStep

JSON_KEYS = ("step", "total_steps", "loss", "avg_reward", "step_time_s", "checkpoint_s", "val_accuracy")


def read_log(path: str | Path) -> Iterator[str]:
    """Lines of a saved log, keeping "\\r" (progress bars) and surviving bad bytes."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        yield from f


def track(lines: Iterable[str]) -> RunTracker:
    """Fold a whole log into a RunTracker (records plus run-wide facts)."""
    parser, tracker = JobLogParser(), RunTracker()
    for line in lines:
        if not line.endswith(("\n", "\r")):  # items of splitlines(), or the cut last line
            line += "\n"
        for event in parser.feed(line):
            tracker.update(event)
    for event in parser.flush():
        tracker.update(event)
    return tracker


def summarize(lines: Iterable[str]) -> list[TrainingStep]:
    """Per-step records of a log, streamed line by line (constant memory per line)."""
    return track(lines).records


def _cell(value: float | None, fmt: str) -> str:
    return "" if value is None or not math.isfinite(value) else format(value, fmt)


def render_table(records: Iterable[TrainingStep], title: str | None = None) -> Table:
    table = Table(title=title)
    table.add_column("step", justify="right")
    table.add_column("reward", justify="right")
    table.add_column("loss", justify="right")
    table.add_column("step time (s)", justify="right")
    table.add_column("checkpoint (s)", justify="right")
    table.add_column("val accuracy", justify="right")
    for r in records:
        table.add_row(
            f"{r.step}/{r.total_steps}",
            _cell(r.avg_reward, ".4f"),
            _cell(r.loss, ".4f"),
            _cell(r.step_time_s, ".2f"),
            _cell(r.checkpoint_s, ".2f"),
            _cell(r.val_accuracy, ".4f"),
        )
    return table


def _json_value(value: int | float | None) -> int | float | None:
    # NaN/inf (a diverged loss) become null: the output must stay valid JSON.
    return None if isinstance(value, float) and not math.isfinite(value) else value


def json_lines(records: Iterable[TrainingStep]) -> Iterator[str]:
    """One JSON object per step, keys exactly JSON_KEYS; null where a value is absent."""
    for r in records:
        yield json.dumps({key: _json_value(getattr(r, key)) for key in JSON_KEYS})
