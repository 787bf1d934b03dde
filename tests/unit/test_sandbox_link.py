"""rltui reaches its sandbox only through sandbox_link: a missing sandbox, one of another
contract version, or one without its own dependencies is one line naming what to install,
never a traceback from deep inside a daemon start."""

from __future__ import annotations

import sys

import pytest

from rltui import cli, sandbox_link
from rltui.sandbox_link import SandboxProblem


def test_no_sandbox_installed_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rltui_sandbox", None)   # import fails as if absent
    with pytest.raises(SandboxProblem, match=r"not installed .*pip install 'rltui\[sandbox\]'"):
        sandbox_link.contract()


def test_another_major_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from rltui_sandbox import contract

    monkeypatch.setattr(contract, "CONTRACT_VERSION", "2.0")
    with pytest.raises(SandboxProblem, match=r"speaks contract 2\.0, this rltui 1\.x"):
        sandbox_link.contract()
    monkeypatch.setattr(contract, "CONTRACT_VERSION", "1.7")   # a newer minor only adds
    assert sandbox_link.contract() is contract


def test_missing_sandbox_dependencies_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from rltui_sandbox import contract

    monkeypatch.setattr(contract, "_NEEDS", ("numpy", "no_such_module_for_rltui"))
    with pytest.raises(SandboxProblem, match=r"dependencies are missing \(no_such_module_for_rltui\)"):
        sandbox_link.contract()


def test_a_running_daemon_of_another_contract_is_refused() -> None:
    from rltui_sandbox.contract import CONTRACT_VERSION, SandboxError

    assert sandbox_link.check_status({"contract": CONTRACT_VERSION, "pid": 1})["pid"] == 1
    for info in ({"pid": 1}, {"contract": "2.0", "pid": 1}, {"contract": "x", "pid": 1}):
        with pytest.raises(SandboxError, match="restart it"):
            sandbox_link.check_status(info)


def test_the_cli_says_it_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                     env_file) -> None:
    monkeypatch.setitem(sys.modules, "rltui_sandbox", None)
    assert cli.main(["status", "--sandbox", "--env", str(env_file)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the sandbox is not installed"), err
    assert cli.main(["sandbox", "status"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not installed" in err[0], err
