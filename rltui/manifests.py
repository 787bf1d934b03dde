"""What the codelab writes by hand, as pure functions of the config.

The codelab puts HF_TOKEN and WANDB_API_KEY into the job's runtime env JSON and uploads the
working dir (env.sh included). Here the tokens live in a Kubernetes Secret mounted as files in
every Ray container (SECRETS_MOUNT); no env var, run script, runtime env or .rayignore holds one.
Env vars would not do: NeMo-RL v0.4.0's init_ray passes the driver's whole os.environ as the
job's runtime env, and RayWorkerGroup each worker's (nemo_rl/distributed/virtual_cluster.py,
worker_groups.py), which Ray's API shows; and a `secretKeyRef` env var keeps the value the
container started with. A mounted Secret follows changes (kubernetes.io "Secrets": "Mounted
Secrets are updated automatically"). The driver finds the files through HF_TOKEN_PATH
(huggingface_hub constants.py) and NETRC (wandb sdk/lib/apikey.py, requests.utils.get_netrc_auth).
The Secret object is built in memory for the API and never written to disk.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterable
from typing import Any

from .config import RLConfig

IMAGE = "nvcr.io/nvidia/nemo-rl:v0.4.0"
# The Ray the image runs: nemo-rl v0.4.0 pins ray[default]==2.46.0 (its pyproject.toml and uv.lock).
# KubeRay reads rayVersion to choose the probes it injects; the codelab's 2.54.0 does not match it.
RAY_VERSION = "2.46.0"
MANAGED_BY = {"app.kubernetes.io/managed-by": "rltui"}
LUSTRE_MOUNT = "/lustre"
LUSTRE_IP_PLACEHOLDER = "<LUSTRE_IP>"
# The job Secret's keys, one file each in SECRETS_MOUNT: the Hugging Face token as huggingface_hub
# reads a token file (HF_TOKEN_PATH), W&B's key as the netrc entry wandb writes itself
# (wandb 0.21.1 sdk/lib/apikey.py write_netrc: machine, login user, password).
SECRETS_MOUNT = "/var/run/secrets/rltui"
SECRETS_VOLUME = "job-secrets"
HF_TOKEN_KEY, NETRC_KEY = "HF_TOKEN", "netrc"
SECRET_KEYS = (HF_TOKEN_KEY, NETRC_KEY)
WANDB_HOST = "api.wandb.ai"  # wandb's default base_url https://api.wandb.ai (wandb_settings.py)
# Keys an earlier rltui wrote (read through secretKeyRef): removed when the Secret is applied.
OLD_SECRET_KEYS = ("WANDB_API_KEY",)
# In the job's runtime env: which Secret the run was submitted with (no secret: see fingerprint).
FINGERPRINTS_ENV = "RLTUI_SECRET_FINGERPRINTS"
# How long the run script waits for the kubelet to project a changed Secret: a pod is synced
# every syncFrequency (1 min) plus up to 50% jitter (pkg/kubelet/pod_workers.go
# workerResyncIntervalJitterFactor), so 90 s at worst after the watch brings the change; twice that.
SECRET_WAIT_S = 180

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


def _secret_values(cfg: RLConfig) -> dict[str, str]:
    """Key -> value of the job Secret, for the tokens env.sh sets. Never log or write these."""
    values = {}
    if cfg.hf_token is not None:
        values[HF_TOKEN_KEY] = cfg.hf_token.get_secret_value()
    if cfg.wandb_api_key is not None:
        key = cfg.wandb_api_key.get_secret_value()
        values[NETRC_KEY] = f"machine {WANDB_HOST}\n  login user\n  password {key}\n"
    return values


def job_secret(cfg: RLConfig, present: Iterable[str] = ()) -> dict[str, Any]:
    """The Secret the containers read the tokens from. Keep it in memory: never dump it.
    `present`: the keys the Secret has now; those env.sh no longer sets are removed (`null`
    in a merge patch deletes a key: RFC 7386), so a token taken out of env.sh leaves the pods."""
    values = _secret_values(cfg)
    gone = sorted(k for k in present if k not in values and k in (*SECRET_KEYS, *OLD_SECRET_KEYS))
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": secret_name(cfg), "namespace": "default", "labels": dict(MANAGED_BY)},
        "stringData": values,
    }
    if gone:
        secret["data"] = dict.fromkeys(gone)
    return secret


def fingerprint(value: str) -> str:
    """The first 12 hex of the value's sha256: names a token without giving it away."""
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def secret_fingerprints(cfg: RLConfig) -> str:
    """`HF_TOKEN=<fp> netrc=<fp|none>`: the Secret a job is submitted with, as its run script
    compares it with the mounted files (`sha256sum | cut -c1-12`)."""
    values = _secret_values(cfg)
    return " ".join(f"{k}={fingerprint(values[k]) if k in values else 'none'}" for k in SECRET_KEYS)


def _secret_volume(cfg: RLConfig) -> dict[str, Any]:
    # optional: pods start without the Secret (a token is needed only to submit). No subPath:
    # a subPath mount never receives updates (kubernetes.io "Secrets").
    return {"name": SECRETS_VOLUME, "secret": {"secretName": secret_name(cfg), "optional": True}}


SECRETS_VOLUME_MOUNT = {"name": SECRETS_VOLUME, "mountPath": SECRETS_MOUNT, "readOnly": True}


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
        # The nemo-rl v0.4.0 image installs Ray with `uv sync --link-mode symlink` (docker/Dockerfile),
        # so the dashboard's /static files are symlinks aiohttp will not serve: a blank page
        # (NeMo-RL issue 1476). Ray 2.46.0 follows them when this is "1" (http_server_head.py).
        "env": [{"name": "RAY_DASHBOARD_BUILD_FOLLOW_SYMLINKS", "value": "1"}],
        "volumeMounts": [lustre_mount, dict(SECRETS_VOLUME_MOUNT)],
    }
    worker = {
        "name": "ray-worker",
        "image": IMAGE,
        "resources": {
            "limits": {"nvidia.com/gpu": gpus, "cpu": "100", "memory": "1000Gi"},
            "requests": {"nvidia.com/gpu": gpus, "cpu": "100", "memory": "1000Gi"},
        },
        "volumeMounts": [lustre_mount, {"mountPath": "/dev/shm", "name": "dshm"},
                         dict(SECRETS_VOLUME_MOUNT)],
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
                                      "volumes": [lustre_volume, _secret_volume(cfg)]}},
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
                                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                                _secret_volume(cfg)],
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


def _token_files(cfg: RLConfig) -> str:
    """The run script's part that finds the tokens: the Secret's files, once they are the ones
    `rltui submit` applied (FINGERPRINTS_ENV; unset: the files as they are), named to the driver
    by path. xtrace is off meanwhile: the loop would fill the log."""
    name, cluster = secret_name(cfg), cfg.cluster_name
    return f"""# The tokens are files of Secret {name}, never env vars: NeMo-RL's init_ray copies the
# driver's whole environment into the job's runtime env, which Ray's API shows.
SECRETS_MOUNT="${{SECRETS_MOUNT:-{SECRETS_MOUNT}}}"
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN WANDB_API_KEY
{{ set +x; }} 2>/dev/null
secret_is_current() {{  # each "key=fingerprint" of the submit against the mounted file
  local entry file have
  for entry in ${{{FINGERPRINTS_ENV}:-}}; do
    file="$SECRETS_MOUNT/${{entry%%=*}}" have=none
    if [ -f "$file" ]; then have="$(sha256sum < "$file" | cut -c1-12)"; fi
    if [ "$have" != "${{entry#*=}}" ]; then stale="${{entry%%=*}}"; return 1; fi
  done
}}
if [ -n "${{{FINGERPRINTS_ENV}:-}}" ] && [ ! -d "$SECRETS_MOUNT" ]; then
  echo "rltui: no Secret volume at $SECRETS_MOUNT: RayCluster {cluster} was made before rltui" \\
       "mounted the tokens as files. Delete it (kubectl delete raycluster {cluster}) and run rltui up." >&2
  exit 1
fi
# The kubelet writes a changed Secret into running pods at its next sync of the pod (about a
# minute): wait for it rather than run with the old token.
waited=0
until secret_is_current; do
  if [ "$waited" -ge "${{SECRET_WAIT_S:-{SECRET_WAIT_S}}}" ]; then
    echo "rltui: after $waited s, $stale in $SECRETS_MOUNT is still not what this job was submitted" \\
         "with: Secret {name} changed since (another rltui submit or up), or the kubelet cannot" \\
         "update this pod (kubectl describe pod of the Ray head). Submit again." >&2
    exit 1
  fi
  [ "$waited" -gt 0 ] || echo "Waiting for the kubelet to update $stale from Secret {name} in this pod..."
  sleep 1
  waited=$((waited + 1))
done
[ "$waited" -eq 0 ] || echo "The tokens in $SECRETS_MOUNT are current after $waited s."
set -x
# huggingface_hub reads the token file HF_TOKEN_PATH; wandb the netrc file NETRC.
if [ -f "$SECRETS_MOUNT/{HF_TOKEN_KEY}" ]; then export HF_TOKEN_PATH="$SECRETS_MOUNT/{HF_TOKEN_KEY}"; fi
if [ -f "$SECRETS_MOUNT/{NETRC_KEY}" ]; then export NETRC="$SECRETS_MOUNT/{NETRC_KEY}"; fi
"""


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
{_token_files(cfg)}cd "${{NEMO_RL_DIR:-/opt/nemo-rl}}"

# Ensure directories exist on the high-speed Lustre drive
mkdir -p "${{LUSTRE_MOUNT}}/huggingface_cache"
mkdir -p {_lustre_path(parent)}

echo "Launching NeMo-RL GRPO training..."
uv run python examples/run_grpo_math.py \\
  --config examples/configs/grpo_math_70B_megatron.yaml{overrides}
"""


def runtime_env(cfg: RLConfig, *, fingerprints: bool = False) -> dict[str, Any]:
    """The job's runtime env: no token here (the containers mount them from the Secret). With
    `fingerprints` (a submit that applied the Secret just before), the Secret's fingerprints,
    so the run script waits until the pod's files are that Secret."""
    env = {
        "HF_HOME": f"{LUSTRE_MOUNT}/huggingface_cache",
        "GLOO_SOCKET_IFNAME": "eth0",
        "NCCL_SOCKET_IFNAME": "eth0",
    }
    if fingerprints:
        env[FINGERPRINTS_ENV] = secret_fingerprints(cfg)
    return {"env_vars": env}


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
