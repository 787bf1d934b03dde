"""Fixtures of the unit tests that run rltui's commands."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent.parent / "data" / "env"


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    """The devrel-demos env.sh, private (0600) as env.sh must be, in a folder of its own."""
    path = tmp_path / "env.sh"
    path.write_text((DATA / "devrel-demos.env.sh").read_text())
    path.chmod(0o600)
    return path
