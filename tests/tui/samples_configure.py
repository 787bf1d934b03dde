"""Configure screen samples: the codelab's env.sh, and one with a bad region and capacity."""

from __future__ import annotations

from rltui.config import Problem
from rltui.session import ConfigState

ENV_PATH = "/home/user/rl-demo/env.sh"

CODELAB_VALUES = {
    "PROJECT_ID": "team-rl-sandbox-42",
    "ZONE": "us-east1-b",
    "REGION": "us-east1",
    "CLUSTER_NAME": "ray-a4-gpu-spot",
    "NETWORK_NAME": "ray-a4-gpu-spot-net-0",
    "LUSTRE_INSTANCE_ID": "rl-demo-gpu-lustre",
    "LUSTRE_CAPACITY": "9000",
    "NUM_NODES": "8",
    "GPUS_PER_NODE": "8",
    "DEVICE_TYPE": "b200-8",
    "LUSTRE_THROUGHPUT": "1000",
    "MAX_STEPS": "20",
    "PROMPTS_PER_STEP": "32",
    "GENERATIONS_PER_PROMPT": "8",
    "GLOBAL_BATCH_SIZE": "256",
}
EXPRESSIONS = {"NETWORK_NAME": "${CLUSTER_NAME}-net-0"}


def codelab_state() -> ConfigState:
    """env.sh as the codelab writes it, with the HF token set and no W&B key."""
    return ConfigState(ENV_PATH, dict(CODELAB_VALUES), dict(EXPRESSIONS), (),
                       {"HF_TOKEN": True, "WANDB_API_KEY": False})


def bad_state() -> ConfigState:
    """REGION does not match ZONE; 10000 GiB is not a size the 1000 MB/s tier allows."""
    values = {**CODELAB_VALUES, "REGION": "us-central1", "LUSTRE_CAPACITY": "10000",
              "GLOBAL_BATCH_SIZE": "100"}
    problems = (
        Problem("REGION", "us-central1 does not match ZONE us-east1-b: expected us-east1"),
        Problem("LUSTRE_CAPACITY", "10000 GiB: must be a multiple of 9000 GiB for throughput"
                                   " tier 1000 (nearest: 9000 or 18000)"),
        Problem("GLOBAL_BATCH_SIZE", "PROMPTS_PER_STEP x GENERATIONS_PER_PROMPT = 256 is not a"
                                     " multiple of 100"),
    )
    return ConfigState(ENV_PATH, values, dict(EXPRESSIONS), problems,
                       {"HF_TOKEN": False, "WANDB_API_KEY": False})
