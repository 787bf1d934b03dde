"""The sandbox imitates Google and Kubernetes, not rltui: it imports nothing of rltui outside
sandbox/rltui_sandbox except plumbing (atomic writes, the latency profile's format). Read with ast,
not imported, so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import rltui

SANDBOX = Path(rltui.__file__).resolve().parent / "sandbox"
ALLOWED = {"rltui.atomic", "rltui.latency"}


def _module(path: Path) -> str:
    parts = path.relative_to(SANDBOX.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
            if name == "rltui":  # from rltui import config
                found += [(node.lineno, f"rltui.{alias.name}") for alias in node.names]
    return found


def _outside(name: str) -> bool:
    inside = name == "rltui_sandbox" or name.startswith("rltui_sandbox.")
    return (name == "rltui" or name.startswith("rltui.")) and not inside


def test_the_sandbox_imports_only_plumbing_from_rltui() -> None:
    files = sorted(SANDBOX.rglob("*.py"))
    assert len(files) > 20  # the walk found the sandbox
    bad = [f"{path.relative_to(SANDBOX)}:{line}: {name}"
           for path in files for line, name in _imports(path)
           if _outside(name) and not any(name == a or name.startswith(a + ".") for a in ALLOWED)]
    assert bad == [], "the sandbox must keep its own rules; move these into sandbox/rltui_sandbox:\n" + "\n".join(bad)


def test_the_checker_sees_relative_and_lazy_imports(tmp_path: Path) -> None:
    probe = SANDBOX / "kube" / "api.py"  # a real module path, to resolve `from ...x import y`
    tree = ast.parse("def f():\n    from ...config import LUSTRE_TIERS\n    import rltui.cloud\n")
    names = []
    package = _module(probe).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            names.append(".".join(base + [node.module]))
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    assert names == ["rltui.config", "rltui.cloud"] or sorted(names) == ["rltui.cloud", "rltui.config"]
    assert all(_outside(n) for n in names)
