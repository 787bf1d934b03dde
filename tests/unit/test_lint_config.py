"""`make lint`'s mypy: a bare `mypy` from the root checks all of rltui, strictly where it must.

Read through mypy's own option parsing (the pinned version), so this is what `mypy` does, not
what the TOML seems to say.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy.main import process_options
from mypy.options import Options

ROOT = Path(__file__).resolve().parents[2]
# The commands and the wizard: outside the strict core (the refactor's to tighten).
NOT_CORE = {"headless", "session", "script", "app", "cli"}
STRICT_FLAGS = ("disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                "disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs",
                "disallow_untyped_decorators", "warn_unused_ignores", "warn_return_any",
                "strict_equality", "extra_checks")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


ALL = sorted(_module(p) for p in (ROOT / "rltui").rglob("*.py"))
# The core (the modules directly in rltui/, less the commands and the wizard) and cloud/.
STRICT = sorted([_module(p) for p in (ROOT / "rltui").glob("*.py") if p.stem not in NOT_CORE]
                + [_module(p) for p in (ROOT / "rltui" / "cloud").rglob("*.py")])


@pytest.fixture(scope="module")
def bare_mypy() -> tuple[set[str], Options]:
    """What `mypy` with no arguments, run from the root, would check, and with which options."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        mp.setenv("MYPY_CONFIG_FILE_DIR", str(ROOT))  # process_options sets it: undone after
        sources, options = process_options([])
    return {s.module for s in sources}, options


def test_a_bare_mypy_checks_every_module_of_rltui(bare_mypy):
    modules, options = bare_mypy
    assert options.packages == ["rltui"]
    assert options.python_version == (3, 11)
    assert set(ALL) <= modules, sorted(set(ALL) - modules)


@pytest.mark.parametrize("module", STRICT)
def test_the_core_and_cloud_are_strict(bare_mypy, module):
    per_module = bare_mypy[1].clone_for_module(module)
    loose = [flag for flag in STRICT_FLAGS if not getattr(per_module, flag)]
    assert not loose and not per_module.ignore_errors and not per_module.implicit_reexport, loose


def test_make_test_runs_the_linters_first():
    makefile = (ROOT / "Makefile").read_text()
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert lint, "no lint target"
    assert re.search(r"-m mypy\s*$", lint.group(1), re.M), "lint must run a bare mypy"
    assert re.search(r"-m ruff check\s*$", lint.group(1), re.M), "lint must run a bare ruff check"
    assert re.search(r"^test:.*\blint\b", makefile, re.M), "make test must run lint first"
