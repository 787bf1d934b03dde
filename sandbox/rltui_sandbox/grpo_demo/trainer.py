"""The GRPO loop: NeMo-RL's grpo_train step by step, on the toy math task."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager

import numpy as np

from . import driver, report, task
from .activity import SUFFIX, Activity, memory_fraction
from .checkpoint import MIB, CheckpointManager
from .cluster import ClusterWatch
from .config import ConfigError
from .policy import LossConfig, Policy, group_advantages
from .report import out
from .timing import Pacer, Timer, timed_phase

_STEP_SALT = 1_000_003  # keeps a step's random stream apart from validation's
_VAL_SALT = 2_000_003


@dataclass
class DemoSettings:
    """What the sandbox tunes through the environment, not the NeMo-RL config."""

    step_seconds: float = 1.0
    checkpoint_bytes: int = 50 * MIB

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str]) -> "DemoSettings":
        def number(name: str, default: float) -> float:
            raw = environ.get(name, "")
            try:
                value = float(raw) if raw.strip() else default
            except ValueError:
                raise ConfigError(f"{name} must be a number, got {raw!r}") from None
            if value < 0:
                raise ConfigError(f"{name} must not be negative, got {raw!r}")
            return value

        return cls(step_seconds=number("RLTUI_DEMO_STEP_SECONDS", 1.0),
                   checkpoint_bytes=int(number("RLTUI_DEMO_CHECKPOINT_MB", 50.0) * MIB))


def next_experiment_dir(base: str) -> Path:
    """logs/exp_001, exp_002, ... like NeMo-RL's get_next_experiment_dir."""
    base_path = Path(base)
    ids = [int(m.group(1)) for p in base_path.glob("exp_*") if (m := re.fullmatch(r"exp_(\d+)", p.name))]
    path = base_path / f"exp_{max(ids, default=0) + 1:03d}"
    path.mkdir(parents=True, exist_ok=True)
    return path


class GRPOTrainer:
    def __init__(self, config: dict[str, Any], settings: DemoSettings) -> None:
        self.config = config
        self.settings = settings
        self.grpo = config["grpo"]
        self.ckpt_cfg = config["checkpointing"]
        self.prompts_per_step = self.grpo["num_prompts_per_step"]
        self.generations = self.grpo["num_generations_per_prompt"]
        self.batch_size = config["policy"]["train_global_batch_size"]
        self.seed = int(self.grpo.get("seed", 42))
        self.val_period = int(self.grpo.get("val_period") or 0)
        self.max_steps = self.grpo["max_num_steps"]
        self.max_epochs = int(self.grpo.get("max_num_epochs") or 1)
        self.total_gpus = config["cluster"]["num_nodes"] * config["cluster"]["gpus_per_node"]
        loss = config.get("loss_fn") or {}
        self.loss_cfg = LossConfig(kl_penalty=float(loss.get("reference_policy_kl_penalty", 0.01)),
                                   clip_low=float(loss.get("ratio_clip_min", 0.2)),
                                   clip_high=float(loss.get("ratio_clip_max", 0.2)))
        self.model_params = report.model_params(str(config["policy"].get("model_name", "")))
        self.watch: ClusterWatch | None = None  # where the actors are, once set up on a RayCluster
        self.activity: Activity | None = None   # what their GPUs do, for the sandbox's metrics
        self.pacer = Pacer(settings.step_seconds, tick=self.check_cluster)
        self.policy = Policy()
        self.checkpointer: CheckpointManager | None = None
        self.total_steps = 0
        self.current_step = 0
        self.current_epoch = 0
        self.consumed_samples = 0
        self.total_valid_tokens = 0
        self.val_reward = -99999999.0

    # --- setup -------------------------------------------------------------------------
    def setup(self) -> None:
        logger = self.config["logger"]
        self.log_dir = next_experiment_dir(str(logger.get("log_dir") or "logs"))
        out(f"📊 Using log directory: {self.log_dir}")
        resume_from = None
        if self.ckpt_cfg.get("enabled"):
            out(f"📊 Using checkpoint directory: {self.ckpt_cfg['checkpoint_dir']}")
            self.checkpointer = CheckpointManager(
                self.ckpt_cfg["checkpoint_dir"], self.ckpt_cfg.get("keep_top_k"),
                self.ckpt_cfg.get("metric_name"), bool(self.ckpt_cfg.get("higher_is_better", True)))
            self.checkpointer.remove_incomplete()
            resume_from = self.checkpointer.latest()
        driver.connect()  # where NeMo-RL's main calls init_ray, after these lines (driver.py)

        out("\n▶ Setting up data...")
        name = str(self.config["data"].get("dataset_name") or "DeepScaler")
        self.train_set = task.load_dataset(name)
        self.batches_per_epoch = len(self.train_set) // self.prompts_per_step  # drop_last
        if self.batches_per_epoch == 0:
            raise ConfigError(f"dataset {name} has fewer samples than grpo.num_prompts_per_step")
        if resume_from is not None:
            self._resume(resume_from)
        out(f"  ✓ Training dataloader loaded with {len(self.train_set)} samples")
        self.val_set = None
        if self.val_period > 0 or self.grpo.get("val_at_start"):
            self.val_set = task.load_val_dataset(name, int(self.grpo.get("max_val_samples") or 256))
            out(f"  ✓ Validation dataloader loaded with {len(self.val_set)} samples")

        out("\n▶ Setting up compute cluster...")
        gpus_per_node = int(self.config["cluster"]["gpus_per_node"])
        self.watch = ClusterWatch.from_env(os.environ, gpus_per_node, self.total_gpus)
        if self.watch is not None:
            self.activity = Activity(
                Path(str(self.watch.path) + SUFFIX),
                [{"pod": n.pod, "uid": n.uid, "gpus": n.gpus or gpus_per_node} for n in self.watch.nodes],
                memory_fraction(self.config))
        out(f"  ✓ Ray cluster initialized with {self.config['cluster']['num_nodes']} nodes")
        out("\n▶ Setting up model and training...")
        out(f"  ✓ Policy {self.config['policy'].get('model_name')} ready on {self.total_gpus} GPUs")
        if resume_from is not None:
            out(f"  ✓ Loaded policy weights and optimizer state from {resume_from / 'policy'}")
        out("\n" + "=" * 60)
        out(" " * 18 + "SETUP COMPLETE")
        out("=" * 60 + "\n")

    def _resume(self, path: Path) -> None:
        assert self.checkpointer is not None
        info, weights, optimizer = self.checkpointer.load(path)
        self.policy.load(weights, optimizer)
        self.total_steps = int(info["total_steps"])
        self.current_step = int(info["current_step"])
        self.current_epoch = int(info["current_epoch"])
        self.consumed_samples = int(info.get("consumed_samples", 0))
        self.total_valid_tokens = int(info.get("total_valid_tokens", 0))
        self.val_reward = float(info.get("val_reward", self.val_reward))
        if self.current_step >= self.batches_per_epoch:
            self.current_epoch, self.current_step = self.current_epoch + 1, 0
        out(f"▶ Resuming from checkpoint {path} (step {self.total_steps})...")

    def check_cluster(self, force: bool = False) -> None:
        """Raise Ray's ActorDiedError once a node the actors were placed on is gone (cluster.py)."""
        if self.watch is not None:
            self.watch.check(force)

    # --- the loop ----------------------------------------------------------------------
    def train(self) -> None:
        try:
            self._train()
        finally:
            if self.activity is not None:
                self.activity.end()

    def _train(self) -> None:
        if self.val_set is not None and self.grpo.get("val_at_start") and self.total_steps == 0:
            out("\n🔍 Running initial validation...")
            self.validate(0)
        steps_shown = min(self.batches_per_epoch, self.max_steps)
        while self.current_epoch < self.max_epochs and self.total_steps < self.max_steps:
            report.epoch_header(self.current_epoch + 1, self.max_epochs)
            while self.current_step < self.batches_per_epoch:
                report.step_header(self.current_step + 1, steps_shown)
                self.check_cluster(force=True)
                self.run_step()
                self.current_step += 1
                self.total_steps += 1
                if self.total_steps >= self.max_steps:
                    out("Max number of steps has been reached, stopping training early")
                    return
            self.current_epoch += 1
            self.current_step = 0

    def _order(self) -> np.ndarray:
        if self.config["data"].get("shuffle", True):
            return np.random.default_rng([self.seed, self.current_epoch]).permutation(len(self.train_set))
        return np.arange(len(self.train_set))

    def run_step(self) -> None:
        timer = Timer()
        policy, g = self.policy, self.generations
        rng = np.random.default_rng([self.seed, _STEP_SALT, self.total_steps])

        def phase(label: str) -> ContextManager[None]:
            return timed_phase(timer, self.pacer, label, self.activity)

        val_metrics = None
        with timer.time("total_step_time"):
            out("▶ Preparing batch...")
            with phase("data_processing"):
                start = self.current_step * self.prompts_per_step
                questions = self.train_set[self._order()[start:start + self.prompts_per_step]]
                prompts = [task.prompt_text(q) for q in questions]
                prompt_tokens = np.repeat([task.count_tokens(p) for p in prompts], g)
                batch = np.repeat(questions, g)
            out(f"▶ Generating responses for batch of size {len(batch)}...")
            with phase("prepare_for_generation/total"):
                with phase("prepare_for_generation/transfer_and_update_weights"):
                    engine_weights = policy.weights.copy()  # refit: the generation engine's copy
            with phase("generation"):
                answers = policy.sample(batch, rng, engine_weights)
                responses = [task.response_text(q, k) for q, k in zip(batch, answers)]
                gen_lengths = np.array([task.count_tokens(r) for r in responses])
            out("▶ Processing rewards...,")
            with phase("reward_calculation"):
                rewards = np.array([task.math_reward(q, r) for q, r in zip(batch, responses)])
            out("▶ Computing advantages...")
            advantages = group_advantages(rewards, g)
            out("▶ Preparing for logprob inference...")
            with phase("logprob_inference_prep"):
                order = np.arange(len(batch))
            out("▶ Computing logprobs...")
            with phase("policy_and_reference_logprobs"):
                prev_logprobs = policy.logprobs(batch, answers)
                ref_logprobs = policy.reference_logprobs(batch, answers)
            out("▶ Preparing for training...")
            with phase("training_prep"):
                minibatches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
            out("▶ Training policy...")
            with phase("policy_training"):
                losses = [policy.train_minibatch(batch[mb], answers[mb], advantages[mb],
                                                 prev_logprobs[mb], ref_logprobs[mb], self.loss_cfg)
                          for mb in minibatches]

            step_no = self.total_steps + 1
            if self.val_set is not None and self.val_period > 0 and step_no % self.val_period == 0:
                val_metrics = self.validate(step_no)
            self.consumed_samples += len(questions)
            tokens = int(prompt_tokens.sum() + gen_lengths.sum())
            self.total_valid_tokens += tokens
            if self.checkpointer is not None and self._is_save_step(step_no):
                with timer.time("checkpointing"):
                    out(f"Saving checkpoint for step {step_no}...")
                    self._save(step_no, float(rewards.mean()), val_metrics)

        self._log_train_data(prompts, responses, rewards, advantages, prev_logprobs, prompt_tokens)
        report.training_results(float(np.mean(losses)), float(rewards.mean()), float(gen_lengths.mean()))
        report.timing(dict(timer.totals))
        report.performance(dict(timer.totals), report.StepVolume(
            samples=len(batch), total_tokens=tokens, total_gpus=self.total_gpus,
            model_params=self.model_params))

    def _is_save_step(self, step_no: int) -> bool:
        last = step_no >= self.max_steps or (
            self.current_epoch + 1 == self.max_epochs and self.current_step + 1 == self.batches_per_epoch)
        period = int(self.ckpt_cfg.get("save_period") or 0)
        return last or (period > 0 and step_no % period == 0)

    def _save(self, step_no: int, reward: float, val_metrics: dict[str, float] | None) -> None:
        assert self.checkpointer is not None
        if val_metrics is not None:
            self.val_reward = val_metrics["accuracy"]
        info: dict[str, Any] = {
            "step": step_no, "total_steps": step_no, "max_num_steps": self.max_steps,
            "current_step": self.current_step + 1, "current_epoch": self.current_epoch,
            "consumed_samples": self.consumed_samples, "total_valid_tokens": self.total_valid_tokens,
            "reward": reward, "val_reward": self.val_reward,
        }
        if val_metrics is not None:
            info.update({f"val:{k}": v for k, v in val_metrics.items()})
        loader = {"epoch": self.current_epoch, "next_batch": self.current_step + 1,
                  "num_prompts_per_step": self.prompts_per_step, "seed": self.seed}
        self.checkpointer.save(step_no, info, self.config, self.policy.state(),
                               self.policy.optimizer_state(), loader, self.settings.checkpoint_bytes,
                               tick=self.check_cluster)

    def validate(self, step: int) -> dict[str, float]:
        assert self.val_set is not None
        timer = Timer()
        report.validation_start(step)
        with timed_phase(timer, self.pacer, "total_validation_time", self.activity):
            rng = np.random.default_rng([self.seed, _VAL_SALT, step])
            answers = self.policy.sample(self.val_set, rng)
            responses = [task.response_text(q, k) for q, k in zip(self.val_set, answers)]
            rewards = np.array([task.math_reward(q, r) for q, r in zip(self.val_set, responses)])
            lengths = np.array([task.count_tokens(r) for r in responses])
        metrics = {"accuracy": float(rewards.mean()), "avg_length": float(lengths.mean())}
        report.validation_results(metrics["accuracy"], metrics["avg_length"], len(self.val_set),
                                  timer.totals["total_validation_time"])
        return metrics

    def _log_train_data(self, prompts: list[str], responses: list[str], rewards: np.ndarray,
                        advantages: np.ndarray, logprobs: np.ndarray, input_lengths: np.ndarray) -> None:
        path = self.log_dir / f"train_data_step{self.total_steps}.jsonl"
        g = self.generations
        with open(path, "w", encoding="utf-8") as f:
            for i, response in enumerate(responses):
                f.write(json.dumps({"content": [prompts[i // g], response], "rewards": rewards[i],
                                    "advantages": round(float(advantages[i]), 6),
                                    "generation_logprobs": round(float(logprobs[i]), 6),
                                    "input_lengths": int(input_lengths[i])}) + "\n")
        out(f"Logged data to {path}")
