"""The demo's driver joins its Ray cluster as NeMo-RL's does, so Ray's job API knows it as the
job's driver (JobDetails.driver_info, whose pid `rltui sandbox stall` freezes: kuberay/stall.py).

NeMo-RL v0.4.0's examples/run_grpo_math.py main calls init_ray() right after printing the log and
checkpoint directories, and init_ray (nemo_rl/distributed/virtual_cluster.py) first tries
ray.init(address="auto", log_to_driver=True, include_dashboard=False, runtime_env=...). Here the
same call without the runtime env: NeMo-RL passes the driver's whole os.environ in it, which the
demo's job does not need (it starts no Ray worker) and rltui keeps free of tokens anyway.

Only inside a Ray job: Ray's JobSupervisor gives the entrypoint RAY_JOB_CONFIG_JSON_ENV_VAR (ray
2.46.0 dashboard/modules/job/job_supervisor.py _get_driver_env_vars), which ray.init reads to tie
the driver to the job's submission id. Run by hand or by a test without a cluster, the demo
connects to nothing, as before.
"""

from __future__ import annotations

import os

JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # ray._private.runtime_env.constants


def connect() -> bool:
    """ray.init as NeMo-RL's init_ray does, when run as a Ray job's entrypoint; whether it did."""
    if not os.environ.get(JOB_CONFIG_ENV):
        return False
    try:
        import ray
    except ImportError:  # an image without Ray cannot be a Ray job's: nothing to join
        return False
    ray.init(address="auto", log_to_driver=True, include_dashboard=False)
    return True
