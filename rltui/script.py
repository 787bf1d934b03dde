"""The whole codelab flow as one bash script: what rltui does, for people who want to read it.

Beyond the codelab it waits for what must be ready (Lustre ACTIVE, RayCluster ready), runs xpk
from one fixed state folder (so `xpk cluster delete` finds its networks), keeps the tokens in a
Kubernetes Secret, and deletes the peering, address and PV/PVC at teardown (`down` is rendered
from the plan: each step's down_command, in the plan's teardown order). Secrets appear only
as `$HF_TOKEN` / `$WANDB_API_KEY`, read from env.sh at run time.
"""

from __future__ import annotations

from shlex import quote as q

from . import __version__
from .config import RLConfig
from .manifests import (
    RAYCLUSTER_FILE,
    RUN_SCRIPT_FILE,
    RUNTIME_ENV_FILE,
    VOLUME_FILE,
    persistent_volume,
    persistent_volume_claim,
    ray_cluster,
    rayignore,
    run_script,
    runtime_env_json,
    secret_name,
    to_yaml,
)
from .plan.codelab import APIS
from .plan.folders import runs_subdir, xpk_subdir


def _heredoc(path: str, text: str) -> str:
    return f"cat > {path} <<'RLTUI_EOF'\n{text.rstrip(chr(10))}\nRLTUI_EOF\n"


def _down_lines(cfg: RLConfig) -> str:
    """`down`, from the plan: each step's own teardown command, in the order rltui runs them
    (the Lustre instance, then the peering and the range, before xpk deletes the network)."""
    from pathlib import Path

    from .cloud.endpoints import Endpoints
    from .plan.context import Context
    from .plan.runner import Runner
    from .plan.steps import build_plan

    ctx = Context(cfg, Endpoints.google(), root=Path("${STATE}"))
    steps = Runner(build_plan(ctx), ctx).order("down")
    return "\n".join(f"  # undo: {step.title}\n  {step.down_command()}" for step in steps if step.down_command())


def equivalent_script(cfg: RLConfig) -> str:
    P, Z, R, C, N = (q(v) for v in (cfg.project_id, cfg.zone, cfg.region, cfg.cluster_name,
                                    cfg.network))
    L = q(cfg.lustre_instance_id)
    addr = q(cfg.address_name)
    pv_yaml = to_yaml(persistent_volume(cfg, "__LUSTRE_IP__"), persistent_volume_claim(cfg))
    pv_yaml = pv_yaml.replace("__LUSTRE_IP__", "${LUSTRE_IP}")
    secret = q(secret_name(cfg))
    n = cfg.num_nodes
    sel = q(f"ray.io/cluster={cfg.cluster_name}")  # KubeRay's label on the RayCluster's pods
    return f"""#!/bin/bash
# "Scale RL with GKE and Managed Lustre", as rltui {__version__} runs it.
# Usage: bash rltui-codelab.sh up|submit|logs|down     (run beside your env.sh)
# The tokens are read from env.sh when this runs; this file holds none.
set -euo pipefail
source ./env.sh
HF_TOKEN="${{HF_TOKEN:-}}"
WANDB_API_KEY="${{WANDB_API_KEY:-}}"
STATE="${{XDG_STATE_HOME:-$HOME/.local/state}}/rltui"
XPK_DIR="$STATE/{xpk_subdir(cfg.project_id, cfg.cluster_name)}"   # one fixed folder: xpk cluster delete needs it
JOB_DIR="$STATE/{runs_subdir(cfg.project_id, cfg.cluster_name)}/jobs/script"   # beside rltui's own job folders

up() {{
  gcloud services enable {" ".join(APIS)} --project={P}

  mkdir -p "$XPK_DIR"
  (cd "$XPK_DIR" && xpk cluster create \\
    --num-nodes={n} \\
    --device-type={q(cfg.device_type)} \\
    --default-pool-cpu-machine-type=e2-standard-4 \\
    {" ".join(q(f) for f in cfg.capacity_type.xpk_flags())} \\
    --enable-lustre-csi-driver \\
    --project={P} \\
    --zone={Z} \\
    --cluster={C}) &
  XPK_PID=$!

  # The Lustre chain needs only xpk's network: start it while xpk builds the node pool.
  until gcloud compute networks describe {N} --project={P} >/dev/null 2>&1; do sleep 20; done
  gcloud compute addresses describe {addr} --global --project={P} >/dev/null 2>&1 ||
    gcloud compute addresses create {addr} --global --purpose=VPC_PEERING \\
      --prefix-length=24 --network={N} --project={P}
  gcloud services vpc-peerings connect --service=servicenetworking.googleapis.com \\
      --ranges={addr} --network={N} --project={P} ||
    gcloud services vpc-peerings update --service=servicenetworking.googleapis.com \\
      --ranges={addr} --network={N} --project={P} --force
  gcloud lustre instances describe {L} --project={P} --location={Z} >/dev/null 2>&1 ||
    gcloud lustre instances create {L} --project={P} --location={Z} \\
      --capacity-gib={cfg.lustre_capacity} --per-unit-storage-throughput={cfg.lustre_throughput} \\
      --filesystem=lustre --network=projects/{cfg.project_id}/global/networks/{cfg.network} \\
      --labels=managed-by=rltui --async

  wait "$XPK_PID"
  # xpk ignores --enable-lustre-csi-driver for {cfg.device_type}: enable both addons in one update.
  gcloud container clusters update {C} --region={R} --project={P} \\
    --update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED
  gcloud container clusters get-credentials {C} --region={R} --project={P}

  until [ "$(gcloud lustre instances describe {L} --project={P} --location={Z} \\
             --format='value(state)')" = ACTIVE ]; do sleep 30; done
  LUSTRE_IP=$(gcloud lustre instances describe {L} --project={P} --location={Z} \\
              --format='value(mountPoint)' | cut -d'@' -f1)

  # The tokens go to a Secret through a pipe: never into a file, an argument or the job.
  kubectl create secret generic {secret} \\
    --from-env-file=<(printf 'HF_TOKEN=%s\\nWANDB_API_KEY=%s\\n' "$HF_TOKEN" "$WANDB_API_KEY") \\
    --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl label secret {secret} app.kubernetes.io/managed-by=rltui --overwrite

  kubectl apply -f - <<RLTUI_EOF
{pv_yaml.rstrip()}
RLTUI_EOF
  kubectl apply -f - <<'RLTUI_EOF'
{to_yaml(ray_cluster(cfg)).rstrip()}
RLTUI_EOF
  # Ready means the head pod and every worker pod Ready, not .status.state (set once, never
  # cleared). The pods say it on every KubeRay: `kubectl wait raycluster/{C}
  # --for=condition=HeadPodReady` works only from KubeRay 1.3 (readyWorkerReplicas from 1.2).
  # `kubectl wait -l` fails while no pod matches: first wait for the pods to exist.
  until [ -n "$(kubectl get pods -l {sel},ray.io/node-type=head -o name)" ]; do sleep 10; done
  kubectl wait pod -l {sel},ray.io/node-type=head --for=condition=Ready --timeout=60m
  until [ "$(kubectl get pods -l {sel},ray.io/node-type=worker -o name | wc -l)" -ge {n} ]; do sleep 10; done
  kubectl wait pod -l {sel},ray.io/node-type=worker --for=condition=Ready --timeout=60m
}}

port_forward() {{
  kubectl port-forward service/{q(cfg.head_service)} 8265:8265 >/dev/null 2>&1 &
  PF_PID=$!
  trap 'kill "$PF_PID" 2>/dev/null || true' EXIT
  until curl -sf http://127.0.0.1:8265/api/version >/dev/null; do sleep 1; done
}}

submit() {{
  [ -n "$HF_TOKEN" ] || {{ echo "HF_TOKEN is not set in env.sh: the model download needs it" >&2; exit 1; }}
  mkdir -p "$JOB_DIR" && cd "$JOB_DIR"   # a folder of its own: env.sh is never uploaded
  {_heredoc(RUN_SCRIPT_FILE, run_script(cfg)).rstrip()}
  {_heredoc(RUNTIME_ENV_FILE, runtime_env_json(cfg)).rstrip()}
  {_heredoc(".rayignore", rayignore()).rstrip()}
  port_forward
  ray job submit --address=http://127.0.0.1:8265 --working-dir=. \\
    --runtime-env={RUNTIME_ENV_FILE} --no-wait -- bash {RUN_SCRIPT_FILE}
}}

logs() {{
  port_forward
  ray job logs --address=http://127.0.0.1:8265 --follow \\
    "$(ray job list --address=http://127.0.0.1:8265 | grep -o "raysubmit_[A-Za-z0-9]*" | tail -1)"
}}

down() {{
{_down_lines(cfg)}
}}

case "${{1:-}}" in
  up|submit|logs|down) "$1" ;;
  *) echo "usage: bash $0 up|submit|logs|down" >&2; exit 2 ;;
esac
"""


__all__ = ["APIS", "RAYCLUSTER_FILE", "VOLUME_FILE", "equivalent_script"]
