"""Deterministic data for the Job screen: env.sh with the codelab's values, and a last job."""

from __future__ import annotations

from rltui.config import parse_config
from rltui.seam import JobStatusUpdate
from rltui.session import ConfigState
from rltui.widgets.chrome import HeaderInfo

PROJECT = "team-rl-sandbox-42"
HEADER = HeaderInfo(mode="SANDBOX", project=PROJECT, cluster="ray-a4-gpu-spot",
                    job="RUNNING 5/20", clock="12:04")
JOB_STATUS = JobStatusUpdate("raysubmit_9fQk2LrT7uVw1XyZ", "RUNNING")


def codelab_values() -> dict[str, str]:
    """env.sh as the codelab writes it, every default filled in (no secrets)."""
    return parse_config({"PROJECT_ID": PROJECT}).env_values()


def config_state(**changes: str) -> ConfigState:
    values = {**codelab_values(), **changes}
    return ConfigState(env_path="/home/user/rl-codelab/env.sh", values=values,
                       expressions={"NETWORK_NAME": "${CLUSTER_NAME}-net-0"}, problems=(),
                       secrets_set={"HF_TOKEN": True, "WANDB_API_KEY": False})
