"""Write the `xpk` wrapper that puts the sandbox's fake xpk first on PATH (gcloud and kubectl are
the real ones)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_PACKAGE_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the rltui package

_WRAPPER = """#!{python} -I
# rltui sandbox: a fake `xpk` 1.16.0 that deploys on the sandbox at {url}.
# Written by rltui.sandbox.tools.install; put its folder first on PATH only for sandbox work.
import sys
sys.path.insert(0, {root!r})
from rltui.sandbox.tools import run
from rltui.sandbox.tools.xpk import main
run(lambda: main(sys.argv[1:], control_url={url!r}))
"""


def install_tools(bin_dir: Path, control_url: str) -> None:
    """Write executable `bin_dir/xpk` bound to the sandbox at `control_url`."""
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    text = _WRAPPER.format(python=sys.executable, url=control_url, root=str(_PACKAGE_ROOT))
    target, tmp = bin_dir / "xpk", bin_dir / ".xpk.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    os.replace(tmp, target)
    (bin_dir / "gcloud").unlink(missing_ok=True)  # an older sandbox's fake gcloud
