"""Two distributions, one checkout: rltui installs no Ray and no numpy; its sandbox
(sandbox/pyproject.toml, `rltui[sandbox]`) brings them, and an editable install of rltui with
its test extra runs the sandbox live from sandbox/."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RLTUI = tomllib.loads((ROOT / "pyproject.toml").read_text())
SANDBOX = tomllib.loads((ROOT / "sandbox" / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _by_name(requirements: list[str]) -> dict[str, str]:
    return {_name(r): re.sub(r"\s+", "", r) for r in requirements}


def test_rltui_itself_needs_no_ray_and_no_numpy() -> None:
    names = set(_by_name(RLTUI["project"]["dependencies"]))
    assert not names & {"ray", "numpy", "rltui-sandbox"}, names & {"ray", "numpy", "rltui-sandbox"}


def test_the_sandbox_is_a_distribution_of_its_own_behind_an_extra() -> None:
    assert "sandbox" in SANDBOX["project"]["name"]
    assert SANDBOX["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["rltui_sandbox"]
    (extra,) = RLTUI["project"]["optional-dependencies"]["sandbox"]
    # A version range, never a path: a path would be the build machine's, in every wheel.
    assert _name(extra) == SANDBOX["project"]["name"] and "@" not in extra, extra
    from rltui.sandbox_link import CONTRACT_MAJOR

    assert extra.endswith(f"~={CONTRACT_MAJOR}.0"), extra
    assert SANDBOX["project"]["version"].split(".")[0] == str(CONTRACT_MAJOR)
    assert {"ray", "numpy"} <= set(_by_name(SANDBOX["project"]["dependencies"]))


def test_the_test_extra_installs_everything_the_sandbox_needs() -> None:
    """`pip install -e '.[test]'` uses sandbox/ live (dev-mode-dirs), so the sandbox's own
    dependencies must come with the test extra: the same requirement, or rltui's own."""
    have = _by_name(RLTUI["project"]["dependencies"] + RLTUI["project"]["optional-dependencies"]["test"])
    needed = _by_name(SANDBOX["project"]["dependencies"])
    needed.pop("rltui")
    missing = {name: spec for name, spec in needed.items() if have.get(name) != spec}
    assert not missing, f"in sandbox/pyproject.toml but not (alike) in rltui's test extra: {missing}"
    assert "sandbox" in RLTUI["tool"]["hatch"]["build"]["dev-mode-dirs"]


def test_the_sandbox_is_importable_from_the_checkout() -> None:
    import rltui_sandbox

    assert Path(rltui_sandbox.__file__).resolve().parent == ROOT / "sandbox" / "rltui_sandbox"
