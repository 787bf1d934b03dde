"""`rltui report LOG [--json]`: one row per GRPO step of a saved NeMo-RL log.

Pure core: rich and the stdlib only. A file that cannot be read as a text log is a ReportError:
one line, exit 2 (cli.py).
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


def is_binary(path: str | Path) -> bool:
    """A NUL in the first 8000 bytes: git's test for a binary file (a text log never holds one)."""
    with open(path, "rb") as f:
        return b"\0" in f.read(8000)


class ReportError(ValueError):
    """A file `rltui report` cannot read as a log; its text is the one line to show."""


def load(path: Path) -> list[TrainingStep]:
    """The per-step records of the saved log at `path`."""
    try:
        if is_binary(path):
            raise ReportError(f"{path}: a binary file, not a job log (a saved NeMo-RL GRPO log is text)")
        with path.open(encoding="utf-8", errors="replace", newline="") as f:
            return summarize(f)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{path}: is a folder, not a log file") from None
    except PermissionError:
        raise ReportError(f"{path}: cannot be read: permission denied") from None


def command(path: Path, as_json: bool) -> int:
    """`rltui report`: a table, or one JSON object per step and line."""
    records = load(path)
    if as_json:
        for line in json_lines(records):
            print(line)
        return 0
    from rich.console import Console

    console = Console()
    if not records:
        console.print(f"{path}: no GRPO step found (is this a NeMo-RL GRPO log?)")
        return 0
    console.print(render_table(records))
    return 0
