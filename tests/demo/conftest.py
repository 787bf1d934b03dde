"""Fixtures for the GRPO demo and the sandbox's Ray head.

The Ray head costs ~3 s and ~650 MB: one per test session, stopped by PID at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

from rltui_sandbox.nemo_rl_tree import install_fake_nemo_rl, write_uv_shim
from rltui_sandbox.rayhead import RayHead

HERE = Path(__file__).parent
RUN_SCRIPT = HERE / "run_nemo_rl.sh"  # the codelab's script as rltui/manifests.py writes it
CKPT_SUBDIR = Path("nemo_rl_qwen_72b_ds_cp") / "nemo-rl-grpo-test1"


def codelab_overrides(checkpoint_dir: Path) -> list[str]:
    """The overrides of run_nemo_rl.sh, as argv after the shell removed the quotes."""
    return [
        "policy.model_name=Qwen/Qwen2.5-72B-Instruct",
        "policy.megatron_cfg.converter_type=Qwen2ForCausalLM",
        "logger.wandb_enabled=False",
        "cluster.num_nodes=8",
        "cluster.gpus_per_node=8",
        "logger.wandb.name=nemo-rl-grpo-test1",
        "grpo.max_num_steps=20",
        "grpo.num_generations_per_prompt=8",
        "grpo.num_prompts_per_step=32",
        "policy.train_global_batch_size=256",
        "checkpointing.enabled=True",
        "checkpointing.save_period=2",
        "checkpointing.keep_top_k=2",
        "checkpointing.metric_name=null",
        f"checkpointing.checkpoint_dir={checkpoint_dir}",
        "data.dataset_name='DeepScaler'",
    ]


def demo_env(step_seconds: float = 0.0, checkpoint_mb: float = 0.5) -> dict[str, str]:
    env = dict(os.environ)
    env.update(RLTUI_DEMO_STEP_SECONDS=str(step_seconds), RLTUI_DEMO_CHECKPOINT_MB=str(checkpoint_mb))
    return env


def demo_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "rltui_sandbox.grpo_demo", *args]


@dataclass
class DemoRun:
    returncode: int
    stdout: str
    stderr: str
    checkpoint_dir: Path
    cwd: Path

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


RunDemo = Callable[..., DemoRun]


def _run_demo(cwd: Path, *extra: str, overrides: list[str] | None = None,
              step_seconds: float = 0.0, timeout: float = 60) -> DemoRun:
    ckpt = cwd / "lustre" / CKPT_SUBDIR
    args = codelab_overrides(ckpt) if overrides is None else overrides
    proc = subprocess.run(demo_argv(*extra, *args), cwd=cwd, env=demo_env(step_seconds),
                          capture_output=True, text=True, timeout=timeout)
    return DemoRun(proc.returncode, proc.stdout, proc.stderr, ckpt, cwd)


@pytest.fixture
def run_demo() -> RunDemo:
    return _run_demo


@dataclass(frozen=True)
class DemoTools:
    """The helpers above, for test modules (importlib import mode cannot import conftest)."""

    run_script: Path = RUN_SCRIPT
    overrides: Callable[[Path], list[str]] = staticmethod(codelab_overrides)
    argv: Callable[..., list[str]] = staticmethod(demo_argv)
    env: Callable[..., dict[str, str]] = staticmethod(demo_env)


@pytest.fixture
def demo() -> DemoTools:
    return DemoTools()


@pytest.fixture(scope="module")
def codelab_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """One uninterrupted 20-step run with the codelab's overrides, shared by a module's tests."""
    run = _run_demo(tmp_path_factory.mktemp("codelab_run"))
    assert run.returncode == 0, run.stderr
    return run


