"""What the sandbox puts where the nemo-rl image has /opt/nemo-rl and uv, so the codelab's
unmodified run_nemo_rl.sh (`cd $NEMO_RL_DIR; uv run python examples/run_grpo_math.py ...`)
runs the GRPO demo instead of NeMo-RL.

Both run under the image's Python and Ray, not rltui's: the uv shim execs the Python of the
sandbox's Ray environment (images.py, Ray 2.46.0 as the nemo-rl v0.4.0 image pins it), and the
examples/run_grpo_math.py stand-in imports only rltui_sandbox.grpo_demo, whose chain (rltui,
rltui_sandbox, the demo) needs nothing but the standard library, numpy, PyYAML and Ray.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from rltui_sandbox import images
from rltui_sandbox.grpo_demo import DEFAULT_CONFIG_PATH

RUN_GRPO_MATH = '''\
#!/usr/bin/env python3
"""rltui sandbox stand-in for NeMo-RL's examples/run_grpo_math.py: runs rltui's GRPO demo."""
import sys

sys.path.insert(0, {root!r})
from rltui_sandbox.grpo_demo import main

raise SystemExit(main(sys.argv[1:]))
'''

UV_SHIM = '''\
#!/bin/sh
# rltui sandbox stand-in for uv: `uv run python ARGS...` runs ARGS with the image's python.
if [ "$1" = run ] && {{ [ "$2" = python ] || [ "$2" = python3 ]; }}; then
    shift 2
    exec {python} "$@"
fi
echo "uv (rltui sandbox): only 'uv run python ARGS...' is supported, got: uv $*" >&2
exit 2
'''


def install_fake_nemo_rl(dest: Path) -> Path:
    """Write dest/examples/run_grpo_math.py and dest/examples/configs/grpo_math_70B_megatron.yaml."""
    dest = Path(dest)
    configs = dest / "examples" / "configs"
    configs.mkdir(parents=True, exist_ok=True)
    # The folder holding the rltui_sandbox package, so the shim imports this very sandbox.
    root = str(Path(__file__).resolve().parents[1])  # .../sandbox/rltui_sandbox/nemo_rl_tree.py
    script = dest / "examples" / "run_grpo_math.py"
    script.write_text(RUN_GRPO_MATH.format(root=root), encoding="utf-8")
    script.chmod(0o755)
    shutil.copyfile(DEFAULT_CONFIG_PATH, configs / DEFAULT_CONFIG_PATH.name)
    return dest


def write_uv_shim(bin_dir: Path, python: Path | None = None) -> Path:
    """Write an executable bin_dir/uv bound to `python` (default: that of the environment running
    the nemo-rl image, images.py; MissingRayEnv when it is not installed)."""
    python = images.for_image(images.NEMO_RL_IMAGE).python if python is None else python
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    uv = bin_dir / "uv"
    uv.write_text(UV_SHIM.format(python=shlex.quote(str(python))), encoding="utf-8")
    uv.chmod(0o755)
    return uv
