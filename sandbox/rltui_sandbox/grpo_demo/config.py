"""The demo's configuration: NeMo-RL's YAML plus `dotted.key=value` overrides, and its checks."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

DEFAULT_CONFIG = Path(__file__).with_name("grpo_math_70B_megatron.yaml")

# Override keys the demo understands; anything else is reported and ignored.
ACCEPTED_PREFIXES = ("grpo.", "policy.", "checkpointing.", "cluster.", "logger.")
ACCEPTED_KEYS = ("data.dataset_name",)
REQUIRED_SECTIONS = ("grpo", "policy", "checkpointing", "cluster", "logger", "data")

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", re.IGNORECASE)


class ConfigError(ValueError):
    """A configuration NeMo-RL would refuse; the message says which setting and why."""


def load_config(path: Path | None) -> dict[str, Any]:
    try:
        with open(path or DEFAULT_CONFIG, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def parse_value(text: str) -> Any:
    """Hydra-style scalars: quoted strings, null, true/false (any case), ints, floats."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    low = text.lower()
    if low in ("null", "none", "~"):
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def split_override(arg: str) -> tuple[str, Any]:
    key, sep, value = arg.partition("=")
    key = key.strip().lstrip("+")
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*", key):
        raise ConfigError(f"cannot parse override {arg!r}: expected key.path=value")
    return key, parse_value(value.strip())


def apply_overrides(config: dict[str, Any], overrides: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Return the merged config and warnings for the overrides that were ignored."""
    merged = copy.deepcopy(config)
    warnings = []
    for arg in overrides:
        key, value = split_override(arg)
        if not (key.startswith(ACCEPTED_PREFIXES) or key in ACCEPTED_KEYS):
            warnings.append(f"WARNING: ignoring unknown override {key}={value!r}")
            continue
        node = merged
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[leaf] = value
    return merged, warnings


def validate(config: dict[str, Any]) -> None:
    """The checks NeMo-RL makes before training that a codelab user can trip over."""
    for section in REQUIRED_SECTIONS:
        if not isinstance(config.get(section), dict):
            raise ConfigError(f"config section {section!r} is missing")
    grpo, policy, ckpt, cluster = (config[k] for k in ("grpo", "policy", "checkpointing", "cluster"))
    for section, key in (("grpo", "num_prompts_per_step"), ("grpo", "num_generations_per_prompt"),
                         ("grpo", "max_num_steps"), ("policy", "train_global_batch_size"),
                         ("cluster", "num_nodes"), ("cluster", "gpus_per_node")):
        value = config[section].get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{section}.{key} must be a positive integer, got {value!r}")
    samples = grpo["num_prompts_per_step"] * grpo["num_generations_per_prompt"]
    gbs = policy["train_global_batch_size"]
    if samples % gbs:
        raise ConfigError(
            f"num_prompts_per_step * num_generations_per_prompt ({samples}) must be a multiple "
            f"of policy.train_global_batch_size ({gbs})")
    mcfg = policy.get("megatron_cfg") or {}
    model_parallel = (mcfg.get("tensor_model_parallel_size", 1) * mcfg.get("pipeline_model_parallel_size", 1)
                      * mcfg.get("context_parallel_size", 1))
    world = cluster["num_nodes"] * cluster["gpus_per_node"]
    if world % model_parallel:
        raise ConfigError(f"world size {world} is not divisible by TP*PP*CP = {model_parallel}")
    dp = world // model_parallel
    if gbs % dp:
        raise ConfigError(
            f"policy.train_global_batch_size ({gbs}) must be divisible by the data parallel size ({dp})")
    if ckpt.get("enabled"):
        metric = ckpt.get("metric_name")
        if metric is not None and not str(metric).startswith(("val:", "train:")):
            raise ConfigError(
                f"checkpointing.metric_name must start with 'val:' or 'train:', got {metric!r}")
        for key in ("save_period", "keep_top_k"):
            value = ckpt.get(key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"checkpointing.{key} must be a positive integer, got {value!r}")
        if not ckpt.get("checkpoint_dir"):
            raise ConfigError("checkpointing.checkpoint_dir is empty")
