"""tests/conftest.py keeps the developer's shell and files away from every test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HOME_DIRS, developer_vars


def test_no_variable_of_the_developers_shell_is_left() -> None:
    assert developer_vars(os.environ) == []


def test_home_and_xdg_folders_are_this_tests_own(isolated_env: Path,
                                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    home = Path(os.environ["HOME"])
    assert home == isolated_env and home.is_relative_to(tmp_path_factory.getbasetemp())
    assert Path("~").expanduser() == home
    for var, sub in HOME_DIRS.items():
        assert os.environ[var] == str(home / sub) and (home / sub).is_dir()


def test_a_child_process_inherits_the_isolation(isolated_env: Path) -> None:
    out = subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                         capture_output=True, text=True, check=True).stdout
    env = json.loads(out)
    assert env["HOME"] == str(isolated_env) and developer_vars(env) == []
