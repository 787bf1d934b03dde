"""Where rltui keeps what it knows between runs: $XDG_STATE_HOME/rltui, else ~/.local/state/rltui
(the XDG Base Directory spec: a relative XDG_STATE_HOME is invalid and ignored). Standard library
only: `rltui runs` reads it without loading the engine."""

from __future__ import annotations

import os
from pathlib import Path


def state_root() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path(os.path.expanduser("~")) / ".local" / "state"
    return root / "rltui"
