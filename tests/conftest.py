"""Session fixtures shared by the suites that need the whole sandbox.

One daemon per test session (each can start a Ray head: ~650 MB, ~5 s), in a private
state folder, stopped by PID at the end. Suites that test one service start only that
service (see their own conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SPEED = 300.0  # 300 simulated minutes per real minute: a 25-minute xpk create takes 5 s


@pytest.fixture(scope="session")
def sandbox_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Short path: Ray's unix sockets live below it.
    return Path(tmp_path_factory.mktemp("sbx"))


@pytest.fixture(scope="session")
def sandbox(sandbox_dir: Path):
    """A running sandbox daemon; yields its status (what `rltui sandbox status --json` prints)."""
    from rltui.sandbox import manage

    old = os.environ.get("RLTUI_SANDBOX_DIR")
    os.environ["RLTUI_SANDBOX_DIR"] = str(sandbox_dir)
    status = manage.start(speed=SPEED, root=sandbox_dir)
    try:
        yield status.info
    finally:
        manage.stop(sandbox_dir)
        if old is None:
            os.environ.pop("RLTUI_SANDBOX_DIR", None)
        else:
            os.environ["RLTUI_SANDBOX_DIR"] = old
