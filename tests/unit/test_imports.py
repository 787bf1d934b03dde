"""The pure core and the CLI's startup path load none of the heavy libraries."""

import subprocess
import sys

import pytest

HEAVY = ("textual", "grpc", "google", "kubernetes", "ray")
PURE = ["rltui.config", "rltui.envfile", "rltui.latency", "rltui.plan", "rltui.manifests", "rltui.script", "rltui.joblog",
        "rltui.report", "rltui.cli"]


@pytest.mark.parametrize("module", PURE)
def test_module_imports_no_heavy_library(module):
    code = (f"import sys, {module}\n"
            f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()}"


def test_cli_commands_that_need_no_cloud_stay_light(tmp_path):
    code = ("import sys, runpy\nsys.argv=['rltui','--version']\n"
            "from rltui import cli\ntry:\n    cli.main(['--version'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
