"""What the codelab writes by hand, as pure functions of the config.

The codelab puts HF_TOKEN and WANDB_API_KEY into the job's runtime env JSON and uploads the
working dir (env.sh included). Here the tokens live in a Kubernetes Secret that the RayCluster
containers read through `secretKeyRef`; the run script, runtime env and .rayignore hold none.
The Secret object is built in memory for the API and never written to disk.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from .config import RLConfig

IMAGE = "nvcr.io/nvidia/nemo-rl:v0.4.0"
# The Ray the image runs: nemo-rl v0.4.0 pins ray[default]==2.46.0 (its pyproject.toml and uv.lock).
# KubeRay reads rayVersion to choose the probes it injects; the codelab's 2.54.0 does not match it.
RAY_VERSION = "2.46.0"
MANAGED_BY = {"app.kubernetes.io/managed-by": "rltui"}
LUSTRE_MOUNT = "/lustre"
LUSTRE_IP_PLACEHOLDER = "<LUSTRE_IP>"
SECRET_KEYS = ("HF_TOKEN", "WANDB_API_KEY")

# File names the codelab uses.
VOLUME_FILE = "rl-lustre-volume.yaml"
RAYCLUSTER_FILE = "ray-cluster.yaml"
RUN_SCRIPT_FILE = "run_nemo_rl.sh"
RUNTIME_ENV_FILE = "ray_runtime_env_nemo.json"
RAYIGNORE_FILE = ".rayignore"


def secret_name(cfg: RLConfig) -> str:
    return f"{cfg.cluster_name}-job-secrets"


def lustre_ip(mount_point: str) -> str:
    """`10.90.0.2@tcp:/lustre` -> `10.90.0.2` (the codelab's `cut -d'@' -f1`)."""
    return mount_point.split("@", 1)[0]


def lustre_filesystem(mount_point: str, default: str = "lustre") -> str:
    """`10.90.0.2@tcp:/lustrefs` -> `lustrefs`: the Lustre CSI driver mounts `<ip>@tcp:/<filesystem>`,
    so the PV's filesystem attribute must be the instance's (Instance.mount_point, google-cloud-lustre)."""
    _, sep, fs = mount_point.rpartition(":/")
    return fs.strip("/") if sep and fs.strip("/") else default


def persistent_volume(cfg: RLConfig, ip: str | None, filesystem: str = "lustre") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": cfg.pv_name, "labels": dict(MANAGED_BY)},
        "spec": {
            "capacity": {"storage": f"{cfg.lustre_capacity}Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "volumeMode": "Filesystem",
            "claimRef": {"namespace": "default", "name": cfg.pvc_name},
            "csi": {
                "driver": "lustre.csi.storage.gke.io",
                "volumeHandle": f"{cfg.project_id}/{cfg.zone}/{cfg.lustre_instance_id}",
                "volumeAttributes": {"ip": ip or LUSTRE_IP_PLACEHOLDER, "filesystem": filesystem},
            },
        },
    }


def persistent_volume_claim(cfg: RLConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": cfg.pvc_name, "namespace": "default", "labels": dict(MANAGED_BY)},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": cfg.pv_name,
            "resources": {"requests": {"storage": f"{cfg.lustre_capacity}Gi"}},
        },
    }


def job_secret(cfg: RLConfig) -> dict[str, Any]:
    """The Secret the containers read the tokens from. Keep it in memory: never dump it."""
    data = {"HF_TOKEN": cfg.hf_token, "WANDB_API_KEY": cfg.wandb_api_key}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": secret_name(cfg), "namespace": "default", "labels": dict(MANAGED_BY)},
        "stringData": {k: v.get_secret_value() for k, v in data.items() if v is not None},
    }


def _secret_env(cfg: RLConfig) -> list[dict[str, Any]]:
    # optional: pods start without a token (it is needed only to submit); NeMo-RL reads the env.
    return [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": secret_name(cfg), "key": key,
                                                      "optional": True}}}
        for key in SECRET_KEYS
    ]


def _pod_placement(cfg: RLConfig) -> dict[str, Any]:
    return {
        "nodeSelector": {"cloud.google.com/gke-accelerator": cfg.device.accelerator},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }


def ray_cluster(cfg: RLConfig) -> dict[str, Any]:
    lustre_volume = {"name": "lustre-storage", "persistentVolumeClaim": {"claimName": cfg.pvc_name}}
    lustre_mount = {"mountPath": LUSTRE_MOUNT, "name": "lustre-storage"}
    gpus = str(cfg.gpus_per_node)
    head = {
        "name": "ray-head",
        "image": IMAGE,
        "ports": [
            {"containerPort": 6379, "name": "gcs-server"},
            {"containerPort": 8265, "name": "dashboard"},
            {"containerPort": 10001, "name": "client"},
        ],
        "resources": {"limits": {"cpu": "32", "memory": "1000Gi"},
                      "requests": {"cpu": "8", "memory": "64Gi"}},
        "env": _secret_env(cfg),
        "volumeMounts": [lustre_mount],
    }
    worker = {
        "name": "ray-worker",
        "image": IMAGE,
        "resources": {
            "limits": {"nvidia.com/gpu": gpus, "cpu": "100", "memory": "1000Gi"},
            "requests": {"nvidia.com/gpu": gpus, "cpu": "100", "memory": "1000Gi"},
        },
        "env": _secret_env(cfg),
        "volumeMounts": [lustre_mount, {"mountPath": "/dev/shm", "name": "dshm"}],
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": cfg.cluster_name, "namespace": "default", "labels": dict(MANAGED_BY)},
        "spec": {
            "rayVersion": RAY_VERSION,
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0"},
                "template": {"spec": {**_pod_placement(cfg), "containers": [head],
                                      "volumes": [lustre_volume]}},
            },
            "workerGroupSpecs": [{
                "groupName": "gpu-worker-group",
                "replicas": cfg.num_nodes,
                "minReplicas": cfg.num_nodes,
                "maxReplicas": cfg.num_nodes,
                "rayStartParams": {},
                "template": {"spec": {
                    **_pod_placement(cfg),
                    "containers": [worker],
                    "volumes": [lustre_volume,
                                {"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                }},
            }],
        },
    }


def _lustre_path(path: str) -> str:
    """A /lustre path as the run script writes it: relative to the volume's mount point."""
    rest = path[len(LUSTRE_MOUNT):] if path.startswith(LUSTRE_MOUNT) else path
    return '"${LUSTRE_MOUNT}"' + shlex.quote(rest) if rest else '"${LUSTRE_MOUNT}"'


def run_overrides(cfg: RLConfig) -> list[str]:
    """The codelab's overrides of grpo_math_70B_megatron.yaml, shell-quoted as in run_nemo_rl.sh."""
    def q(v: str) -> str:  # validated plain words: quote them as the codelab does
        return f"'{v}'"

    return [
        f"policy.model_name={q(cfg.model_name)}",
        f"policy.megatron_cfg.converter_type={q(cfg.converter_type)}",
        f"logger.wandb_enabled={cfg.use_wandb}",
        f"cluster.num_nodes={cfg.num_nodes}",
        f"cluster.gpus_per_node={cfg.gpus_per_node}",
        f"logger.wandb.name={q(cfg.wandb_run_name)}",
        f"grpo.max_num_steps={cfg.max_steps}",
        f"grpo.num_generations_per_prompt={cfg.generations_per_prompt}",
        f"grpo.num_prompts_per_step={cfg.prompts_per_step}",
        f"policy.train_global_batch_size={cfg.global_batch_size}",
        # The 70B config has checkpointing off: the codelab's run needs it on.
        f"checkpointing.enabled={cfg.checkpoint_enabled}",
        f"checkpointing.save_period={cfg.checkpoint_period}",
        f"checkpointing.keep_top_k={cfg.checkpoint_keep_top_k}",
        f"checkpointing.metric_name={q(cfg.checkpoint_metric) if cfg.checkpoint_metric else 'null'}",
        f"checkpointing.checkpoint_dir={_lustre_path(cfg.checkpoint_dir)}",
        f"data.dataset_name={q(cfg.dataset)}",
    ]


def run_script(cfg: RLConfig) -> str:
    parent = cfg.checkpoint_dir.rsplit("/", 1)[0]
    overrides = "".join(f" \\\n  {o}" for o in run_overrides(cfg))
    return f"""#!/bin/bash
set -ex

# Override job runtime conflicts (NeMo-RL passes os.environ to ray.init)
export RAY_OVERRIDE_JOB_RUNTIME_ENV=1

echo "--- Running on Ray Cluster ---"
# Where the Lustre volume is mounted in this container (the RayCluster mounts it at /lustre).
LUSTRE_MOUNT="${{LUSTRE_MOUNT:-{LUSTRE_MOUNT}}}"
cd "${{NEMO_RL_DIR:-/opt/nemo-rl}}"

# Ensure directories exist on the high-speed Lustre drive
mkdir -p "${{LUSTRE_MOUNT}}/huggingface_cache"
mkdir -p {_lustre_path(parent)}

echo "Launching NeMo-RL GRPO training..."
uv run python examples/run_grpo_math.py \\
  --config examples/configs/grpo_math_70B_megatron.yaml{overrides}
"""


def runtime_env(cfg: RLConfig) -> dict[str, Any]:
    """The job's runtime env: no token here (the containers get them from the Secret)."""
    return {"env_vars": {
        "HF_HOME": f"{LUSTRE_MOUNT}/huggingface_cache",
        "GLOO_SOCKET_IFNAME": "eth0",
        "NCCL_SOCKET_IFNAME": "eth0",
    }}


def runtime_env_json(cfg: RLConfig) -> str:
    return json.dumps(runtime_env(cfg), indent=2) + "\n"


def rayignore() -> str:
    return "xpkclusters/\n.git/\n*.sh.log\nenv.sh\n"


def to_yaml(*docs: dict[str, Any], header: str = "") -> str:
    import yaml  # lazy: only the commands that write files need it

    body = "---\n".join(yaml.safe_dump(d, sort_keys=False, default_flow_style=False) for d in docs)
    return header + body


def job_files(cfg: RLConfig) -> dict[str, str]:
    """The files `ray job submit --working-dir` uploads: nothing secret among them."""
    return {RUN_SCRIPT_FILE: run_script(cfg), RUNTIME_ENV_FILE: runtime_env_json(cfg),
            RAYIGNORE_FILE: rayignore()}


def codelab_files(cfg: RLConfig, ip: str | None) -> dict[str, str]:
    """Every file the codelab writes by hand, by its codelab name."""
    note = "" if ip else (f"# {LUSTRE_IP_PLACEHOLDER} is a placeholder: the Lustre instance's IP is"
                          " known once it is ACTIVE.\n# Re-run with --lustre-ip IP, or let"
                          " `rltui up` apply the volume.\n")
    return {
        VOLUME_FILE: to_yaml(persistent_volume(cfg, ip), persistent_volume_claim(cfg), header=note),
        RAYCLUSTER_FILE: to_yaml(ray_cluster(cfg)),
        **job_files(cfg),
    }
