"""Write the `gcloud` and `xpk` wrappers that put the sandbox's fakes first on PATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

TOOLS = ("gcloud", "xpk")
PROPERTIES_FILE = "gcloud-properties.json"  # what `gcloud config set` writes, beside the wrappers
_PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the rltui package

_WRAPPER = """#!{python} -I
# rltui sandbox: a fake `{tool}` that acts on the sandbox at {url}.
# Written by rltui.sandbox.tools.install; put its folder first on PATH only for sandbox work.
import sys
sys.path.insert(0, {root!r})
from rltui.sandbox.tools import run
from rltui.sandbox.tools.{tool} import main
run(lambda: main(sys.argv[1:], control_url={url!r}, properties={props!r}))
"""


def install_tools(bin_dir: Path, control_url: str) -> None:
    """Write executable `bin_dir/gcloud` and `bin_dir/xpk` bound to the sandbox at `control_url`."""
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    props = str((bin_dir / PROPERTIES_FILE).resolve())
    for tool in TOOLS:
        text = _WRAPPER.format(python=sys.executable, tool=tool, url=control_url, root=str(_PACKAGE_ROOT),
                               props=props)
        target = bin_dir / tool
        tmp = bin_dir / f".{tool}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o755)
        os.replace(tmp, target)
