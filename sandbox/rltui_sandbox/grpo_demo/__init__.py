"""The sandbox's NeMo-RL stand-in: a small but real GRPO on a toy math task, in numpy.

`python -m rltui_sandbox.grpo_demo [--config FILE] key=value...` takes the codelab's overrides,
prints NeMo-RL v0.4.0's log lines and writes NeMo-RL's checkpoint layout. This module stays light
(no numpy import) so the sandbox can find the default config without loading the trainer.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_CONFIG_PATH = Path(__file__).with_name("grpo_math_70B_megatron.yaml")


def main(argv: list[str] | None = None) -> int:
    from .run import main as run_main

    return run_main(argv)
