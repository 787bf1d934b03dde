"""Command line: NeMo-RL's examples/run_grpo_math.py argument handling and start-up lines."""

from __future__ import annotations

import argparse
import os
import pprint
import sys
from pathlib import Path

from . import tokens
from .config import DEFAULT_CONFIG, ConfigError, apply_overrides, load_config, validate
from .report import out
from .trainer import DemoSettings, GRPOTrainer


def main(argv: list[str] | None = None) -> int:
    # Emoji must survive a C locale, and every line must reach `ray job logs` at once.
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(encoding="utf-8", errors="replace", line_buffering=True)
    parser = argparse.ArgumentParser(prog="run_grpo_math.py",
                                     description="Run GRPO training (sandbox demo) with overrides")
    parser.add_argument("--config", type=Path, default=None, help="path to a YAML config file")
    args, overrides = parser.parse_known_args(argv)
    try:
        settings = DemoSettings.from_env(os.environ)
        config_path = args.config or DEFAULT_CONFIG
        config = load_config(config_path)
        out(f"Loaded configuration from: {config_path}")
        if overrides:
            out(f"Overrides: {overrides}")
        config, warnings = apply_overrides(config, overrides)
        for warning in warnings:
            print(warning, file=sys.stderr, flush=True)
        out("Applied CLI overrides")
        validate(config)
        out("Final config:")
        out(pprint.pformat(config))
        tokens.check(config, os.environ)   # where NeMo-RL's setup makes its logger (wandb.init)
        trainer = GRPOTrainer(config, settings)
        trainer.setup()
        trainer.train()
    except (ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0
