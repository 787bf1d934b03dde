"""The canary of rltui/widgets/textual_compat.py: the private names of Textual, textual-plotext and
plotext that rltui uses are still there, in the shape it was written against, and no other
module of rltui/ touches them.

A failure here names the upstream file and the name that changed: revisit the function of
rltui/widgets/textual_compat.py that uses it (its comment says why rltui needs it) before
moving the pin in pyproject.toml.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata
import inspect
import re
from pathlib import Path

import pytest

from rltui.widgets import textual_compat
from rltui.widgets.textual_compat import PINNED, PINNED_NAMES, VERSIONS, Pinned

ROOT = Path(__file__).resolve().parents[2] / "rltui"
COMPAT = ROOT / "widgets" / "textual_compat.py"
COMPAT_REL = "rltui/widgets/textual_compat.py"
UPSTREAM = ("textual", "rich", "plotext", "textual_plotext")
DIST = {"textual": "textual", "textual_plotext": "textual-plotext", "plotext": "plotext"}


def _revisit(pinned: Pinned, what: str) -> str:
    dist = DIST[pinned.upstream.split("/")[0]]  # the distribution whose file it is
    where = f"{pinned.owner}.{pinned.name}" if pinned.owner else f"{pinned.module}.{pinned.name}"
    return (f"{pinned.upstream} ({dist} {importlib.metadata.version(dist)} installed, "
            f"{VERSIONS[dist]} pinned): {where} {what}. {COMPAT_REL} relies on it (see its comment "
            f"for {pinned.name}) and must be revisited before this version is used.")


def test_installed_versions_are_the_ones_the_compat_module_was_checked_against():
    for dist, pinned in VERSIONS.items():
        installed = importlib.metadata.version(dist)
        assert installed == pinned, (
            f"{dist} {installed} is installed, {COMPAT_REL} was checked against {pinned}: re-read "
            f"each upstream function it names (behaviour, not only signatures), then update VERSIONS.")


@pytest.mark.parametrize("pinned", PINNED, ids=lambda p: f"{p.owner or p.module}.{p.name}")
def test_pinned_name_exists_with_its_shape(pinned: Pinned):
    module = importlib.import_module(pinned.module)
    if not pinned.owner:
        assert hasattr(module, pinned.name), _revisit(pinned, "is gone")
        return
    owner = getattr(module, pinned.owner, None)
    assert isinstance(owner, type), _revisit(pinned, f"has no class {pinned.owner} to live on")
    if pinned.params is not None:
        try:
            found = inspect.getattr_static(owner, pinned.name)
        except AttributeError:
            pytest.fail(_revisit(pinned, "is gone"))
        function = found.__func__ if isinstance(found, (classmethod, staticmethod)) else found
        assert callable(function), _revisit(pinned, f"is no longer a method ({type(found).__name__})")
        params = tuple(inspect.signature(function).parameters)
        assert params == pinned.params, _revisit(
            pinned, f"now takes {params}, not {pinned.params}")
    else:
        instance = owner()  # App(), Screen(), Widget(): none needs a running app
        assert pinned.name in vars(instance), _revisit(pinned, f"is no longer set by {pinned.owner}()")
        value = vars(instance)[pinned.name]
        assert isinstance(value, pinned.value or object), _revisit(
            pinned, f"starts as {type(value).__name__}, not {pinned.value and pinned.value.__name__}")


def test_process_line_swaps_one_character_for_one():
    """widgets/logpane.py `_widest` measures an ASCII line without tabs by `len`: it relies on
    Log._process_line expanding tabs and replacing each control code with one character."""
    pinned = next(p for p in PINNED if p.name == "_process_line")
    line = "a\x1b[1mb\x07c"
    assert len(textual_compat.process_line(line)) == len(line), _revisit(
        pinned, "no longer swaps a control code for one character")
    assert textual_compat.process_line("a\tb") == "a       b", _revisit(pinned, "no longer expands tabs")


# --- the rest of rltui/ stays off them ---

def _touches(tree: ast.AST) -> list[tuple[int, str]]:
    """Where a module touches a pinned private name: `x._name`, a `def _name`, a "_name" string
    (getattr and friends), or an import from a private module of Textual, Rich or plotext."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PINNED_NAMES:
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in PINNED_NAMES:
            found.append((node.lineno, f"def {node.name}"))
        elif isinstance(node, ast.Constant) and node.value in PINNED_NAMES:
            found.append((node.lineno, repr(node.value)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                       else [alias.name for alias in node.names])
            for module in modules:
                parts = module.split(".")
                if parts[0] in UPSTREAM and any(p.startswith("_") and not p.startswith("__") for p in parts):
                    found.append((node.lineno, f"import from {module}"))
    return found


def test_only_the_compat_module_touches_the_pinned_names():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == COMPAT:
            continue
        for line, what in _touches(ast.parse(path.read_text(), str(path))):
            offenders.append(f"{path.relative_to(ROOT.parent)}:{line}: {what}")
    assert not offenders, (
        f"private Textual/plotext names outside {COMPAT_REL}; call its functions instead (or add "
        "one there, with its upstream file and why):\n" + "\n".join(offenders))


def test_the_compat_module_uses_every_name_it_pins():
    """The list the scan above checks against is the module's own: a name pinned but no longer
    used there is stale, a name used but not pinned would escape the canary."""
    used = {node.attr for node in ast.walk(ast.parse(COMPAT.read_text()))
            if isinstance(node, ast.Attribute) and node.attr.startswith("_")
            and not node.attr.startswith("__")}
    assert PINNED_NAMES <= used, f"pinned in {COMPAT_REL} but not used there: {sorted(PINNED_NAMES - used)}"
    assert used <= PINNED_NAMES, (f"used in {COMPAT_REL} but not pinned (the canary would not see "
                                  f"them change): {sorted(used - PINNED_NAMES)}")


@functools.cache
def _privates_of(base: type) -> frozenset[str]:
    """The private names an upstream class defines, or sets on self in its own source."""
    names = {k for k in vars(base) if k.startswith("_") and not k.startswith("__")}
    try:
        names.update(re.findall(r"self\.(_[A-Za-z]\w*)\s*[:=]", inspect.getsource(base)))
    except (OSError, TypeError):
        pass
    return frozenset(names)


def _upstream_privates(cls: type) -> set[str]:
    """The private names a class's Textual/Rich/plotext bases define or set on self."""
    return {name for base in cls.__mro__ if base.__module__.split(".")[0] in UPSTREAM
            for name in _privates_of(base)}


WIZARD_MODULES = ["rltui.app", *(f"rltui.{p.parent.name}.{p.stem}"
                                 for folder in ("screens", "widgets")
                                 for p in sorted((ROOT / folder).glob("*.py"))
                                 if p.stem not in ("__init__", "textual_compat"))]


@pytest.mark.parametrize("module_name", WIZARD_MODULES)
def test_no_rltui_class_reaches_into_its_upstream_bases(module_name: str):
    """Beyond the pinned names: a class of rltui that subclasses a Textual (or plotext) class
    neither defines one of its bases' private methods (a `_on_idle` would override Textual's own
    handler convention) nor reads or sets one of their private attributes on self."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__ or "").read_text())
    offenders = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(module, node.name, None)
        if not isinstance(cls, type):
            continue
        private = _upstream_privates(cls)
        for inner in ast.walk(node):
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name in private:
                offenders.append(f"{node.name}.{inner.name} (line {inner.lineno}) overrides an upstream one")
            elif (isinstance(inner, ast.Attribute) and inner.attr in private
                  and isinstance(inner.value, ast.Name) and inner.value.id in ("self", "cls")):
                offenders.append(f"{node.name}: self.{inner.attr} (line {inner.lineno}) is an upstream one")
    assert not offenders, (f"{module_name} reaches into Textual's private names; move the use to "
                           f"{COMPAT_REL}:\n" + "\n".join(offenders))
