"""Write the sandbox's commands into its bin folder: `xpk` (the fake xpk; gcloud and kubectl are
the real ones) and `bash` (the real bash, seeing a Ray head container's paths: container_paths.py).
The folder is first on PATH for the tools rltui runs and for the sandbox's Ray heads; a user's
shell gets only `xpk` from it (manage.shell_tools)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the rltui_sandbox package

_WRAPPER = """#!{python} -I
# rltui sandbox: a fake `xpk` 1.16.0 that deploys on the sandbox at {url}.
# Written by rltui_sandbox.tools.install; put its folder first on PATH only for sandbox work.
import sys
sys.path.insert(0, {root!r})
from rltui_sandbox.tools import run
from rltui_sandbox.tools.xpk import main
run(lambda: main(sys.argv[1:], control_url={url!r}))
"""

# Only a Ray head sets NEMO_RL_DIR or LUSTRE_MOUNT (kuberay/headpod.py): everyone else runs the
# real bash at once.
_BASH = """#!/bin/sh
# rltui sandbox: bash for the Ray heads' jobs (sandbox/rltui_sandbox/tools/container_paths.py).
if [ -n "${{NEMO_RL_DIR}}${{LUSTRE_MOUNT}}" ] && [ -f "$1" ]; then
    exec {python} -I -c {code} {bash} "$@"
fi
exec {bash} "$@"
"""
_BASH_CODE = ("import sys; sys.path.insert(0, {root!r}); "
              "from rltui_sandbox.tools.container_paths import exec_bash; exec_bash(sys.argv[1], sys.argv[2:])")


def _write(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    os.replace(tmp, target)


def real_bash(bin_dir: Path) -> str:
    """The first bash on PATH outside bin_dir (else /bin/bash)."""
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and Path(d).resolve() != Path(bin_dir).resolve())
    return shutil.which("bash", path=path) or "/bin/bash"


def install_tools(bin_dir: Path, control_url: str) -> None:
    """Write executable `bin_dir/xpk` bound to the sandbox at `control_url`, and `bin_dir/bash`."""
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    _write(bin_dir / "xpk", _WRAPPER.format(python=sys.executable, url=control_url, root=str(_PACKAGE_ROOT)))
    _write(bin_dir / "bash", _BASH.format(python=shlex.quote(sys.executable), bash=shlex.quote(real_bash(bin_dir)),
                                          code=shlex.quote(_BASH_CODE.format(root=str(_PACKAGE_ROOT)))))
    (bin_dir / "gcloud").unlink(missing_ok=True)  # an older sandbox's fake gcloud
