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
STRICT_FLAGS = ("disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                "disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs",
                "disallow_untyped_decorators", "warn_unused_ignores", "warn_return_any",
                "strict_equality", "extra_checks", "warn_unreachable")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# Every module of rltui, the wizard and the commands included, is checked strictly.
ALL = sorted(_module(p) for p in (ROOT / "rltui").rglob("*.py"))
STRICT = ALL


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
def test_every_module_of_rltui_is_strict(bare_mypy, module):
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


def test_ruff_has_no_per_file_escapes_under_rltui():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ignores = config["tool"]["ruff"]["lint"].get("per-file-ignores", {})
    under = [pattern for pattern in ignores if pattern.startswith(("rltui", "./rltui", "**"))]
    assert not under, f"per-file ruff ignores that reach rltui/: {under}"


def test_make_lint_checks_the_layers_and_the_sandbox():
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert lint and "lint-imports" in lint.group(1), "lint must run import-linter's contracts"
    assert re.search(r"cd sandbox && .*-m mypy\s*$", lint.group(1), re.M), "lint must type-check the sandbox"
