"""The last run's progress on disk, for `rltui status` and a UI that reopens.

Informational only: the runner always re-probes the cloud. Written atomically (temp file,
fsync, rename) so a crash or Ctrl-C leaves either the old or the new file, never half of one.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rltui.atomic import write_private
from rltui.plan.folders import run_dir
from rltui.plan.step import StepState

VERSION = 1
_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass
class StepProgress:
    state: StepState
    title: str = ""
    started_at: float | None = None    # wall clock (time.time)
    finished_at: float | None = None
    attempts: int = 0
    message: str = ""


@dataclass
class RunRecord:
    mode: str                          # "up" or "down"
    outcome: str                       # "running", "ok", "failed" or "interrupted"
    started_at: float
    updated_at: float
    pid: int = field(default_factory=os.getpid)   # lets `status` tell a crashed run
    steps: dict[str, StepProgress] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["version"] = VERSION
        for rec in data["steps"].values():
            rec["state"] = StepState(rec["state"]).value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        if data.get("version") != VERSION:
            raise ValueError(f"unknown progress file version {data.get('version')!r}")
        steps = {name: StepProgress(**{**rec, "state": StepState(rec["state"])})
                 for name, rec in data["steps"].items()}
        return cls(mode=data["mode"], outcome=data["outcome"], started_at=data["started_at"],
                   updated_at=data["updated_at"], pid=data["pid"], steps=steps)


def progress_path(project: str, cluster: str) -> Path:
    """$XDG_STATE_HOME/rltui/runs/<project>/<cluster>/progress.json (~/.local/state by default)."""
    return run_dir(project, cluster) / "progress.json"


class ProgressStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def save(self, record: RunRecord) -> None:
        _make_private_dirs(self.path.parent)
        write_private(self.path, json.dumps(record.to_json(), indent=1, sort_keys=True))
        _fsync_dir(self.path.parent)

    def load(self) -> RunRecord | None:
        """The last saved run, or None when there is none or the file is not ours."""
        try:
            data = json.loads(self.path.read_bytes())
            return RunRecord.from_json(data)
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def _make_private_dirs(folder: Path) -> None:
    missing: list[Path] = []
    probe = folder
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)   # mkdir's mode is filtered by the umask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
