"""The codelab by hand on a private sandbox, as a user types it: a shell whose PATH holds only the
system's folders, `eval "$(rltui sandbox env)"` (rltui by its full path), then the codelab's own
commands and files with gcloud, kubectl, the sandbox's xpk and the user's ray CLI. It fails where
the codelab fails on Google, with Google's words, and works once the user fixes each step as
docs/by-hand.md says; then `kubectl port-forward service/<cluster>-head-svc` and the codelab's
`ray job submit` train. The tests share the project and run in file order.

The codelab's steps that fail on Google:
- section 4: xpk's Cluster Toolkit path does not enable the Lustre CSI driver, so the codelab's
  fallback enables it after the GPU nodes exist: they never get the driver, and the pods wait
  in ContainerCreating ("driver name lustre.csi.storage.gke.io not found in the list of
  registered CSI drivers");
- section 5: the instance is made with --gke-support-enabled, reached only on the legacy LNet
  port 6988, so recreated nodes without --enable-legacy-lustre-port cannot mount it ("Is the
  MGS running?");
- section 6: ray-cluster.yaml says rayVersion 2.54.0 while the image runs Ray 2.46.0; the add-on's
  KubeRay probes the head where Ray 2.53+ answers, the head answers 404, is never Ready and is
  restarted by its liveness probe;
- section 9: the clean-up deletes the cluster before the IP range and never the peering, so
  Terraform cannot delete the network, and the range cannot go while the peering holds it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests import headless_user

# A Ray head starting and a 20-step job, in real seconds, on a machine that may be busy.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
RLTUI = Path(sys.executable).parent / "rltui"
if not all(shutil.which(tool, path=SYSTEM_PATH) for tool in ("gcloud", "kubectl", "gke-gcloud-auth-plugin", "curl")):
    pytest.skip("gcloud, kubectl, its auth plugin and curl must be in the system's folders", allow_module_level=True)

PROJECT = "by-hand-codelab"
CLUSTER = "ray-a4-gpu-spot"
GPU_POOL = f"a4-highgpu-8g-{CLUSTER}-a4-pool"   # the a4 blueprint's pool (xpk 1.16.0, Cluster Toolkit)
ENV_SH = f"""\
export PROJECT_ID="{PROJECT}"
export ZONE="us-east1-b"
export REGION="us-east1"
export CLUSTER_NAME="{CLUSTER}"
export NETWORK_NAME="${{CLUSTER_NAME}}-net-0" # Implicitly targets the VPC created by XPK
export LUSTRE_INSTANCE_ID="rl-demo-gpu-lustre"
export LUSTRE_CAPACITY="9000" # Capacity in GiB
export HF_TOKEN="hf_byHandNotARealToken" # Required for downloading models
export WANDB_API_KEY="" # Optional
export NUM_NODES="2"
export GPUS_PER_NODE="8" # Fixed for A4/B200 architecture
export DEVICE_TYPE="b200-8"
"""
# The codelab's files, written as it writes them (heredocs expanding env.sh's variables).
VOLUME_YAML = (Path(__file__).parent.parent / "data" / "codelab" / "rl-lustre-volume.yaml").read_text() \
    .replace("team-rl-sandbox-42/us-east1-b/rl-demo-gpu-lustre", "${PROJECT_ID}/${ZONE}/${LUSTRE_INSTANCE_ID}") \
    .replace("10.90.0.2", "${LUSTRE_IP}").replace("9000Gi", "${LUSTRE_CAPACITY}Gi")
CLUSTER_YAML = (Path(__file__).parent.parent / "data" / "codelab" / "ray-cluster.yaml").read_text() \
    .replace(f"name: {CLUSTER}\n", "name: ${CLUSTER_NAME}\n").replace("Replicas: 8", "Replicas: ${NUM_NODES}") \
    .replace("replicas: 8", "replicas: ${NUM_NODES}")
RUN_SCRIPT = """\
cat << EOF > run_nemo_rl.sh
#!/bin/bash
set -ex

# Override job runtime conflicts (NeMo-RL passes os.environ to ray.init)
export RAY_OVERRIDE_JOB_RUNTIME_ENV=1

echo "--- Running on Ray Cluster ---"
cd /opt/nemo-rl

# Ensure directories exist on the high-speed Lustre drive
mkdir -p /lustre/huggingface_cache
mkdir -p /lustre/nemo_rl_qwen_72b_ds_cp

echo "Launching NeMo-RL GRPO training..."
uv run python examples/run_grpo_math.py \\\\
  --config examples/configs/grpo_math_70B_megatron.yaml \\\\
  policy.model_name='Qwen/Qwen2.5-72B-Instruct' \\\\
  policy.megatron_cfg.converter_type='Qwen2ForCausalLM' \\\\
  logger.wandb_enabled=False \\\\
  cluster.num_nodes=${NUM_NODES} \\\\
  cluster.gpus_per_node=${GPUS_PER_NODE} \\\\
  logger.wandb.name='nemo-rl-grpo-test1' \\\\
  grpo.max_num_steps=20 \\\\
  grpo.num_generations_per_prompt=8 \\\\
  grpo.num_prompts_per_step=32 \\\\
  policy.train_global_batch_size=256 \\\\
  checkpointing.enabled=True \\\\
  checkpointing.save_period=2 \\\\
  checkpointing.keep_top_k=2 \\\\
  checkpointing.metric_name=null \\\\
  checkpointing.checkpoint_dir=/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1 \\\\
  data.dataset_name='DeepScaler'
EOF
chmod +x run_nemo_rl.sh
cat << EOF > .rayignore
xpkclusters/
.git/
*.sh.log
EOF
cat << EOF > ray_runtime_env_nemo.json
{
  "env_vars": {
    "HF_TOKEN": "${HF_TOKEN}",
    "WANDB_API_KEY": "${WANDB_API_KEY}",
    "HF_HOME": "/lustre/huggingface_cache",
    "GLOO_SOCKET_IFNAME": "eth0",
    "NCCL_SOCKET_IFNAME": "eth0"
  }
}
EOF
"""


@dataclass
class Shell:
    """A fresh bash for each call, as after opening a terminal in the user's folder: system
    PATH only, then `eval "$(rltui sandbox env)"` and `source env.sh`."""

    sandbox_dir: Path
    work: Path
    home: Path

    def run(self, script: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        prelude = f'set -eo pipefail\neval "$({RLTUI} sandbox env)"\nsource env.sh\n'
        env = {"PATH": SYSTEM_PATH, "HOME": str(self.home), "RLTUI_SANDBOX_DIR": str(self.sandbox_dir),
               "LANG": "C.UTF-8"}
        t0 = time.monotonic()
        out = subprocess.run(["/bin/bash", "-c", prelude + script], cwd=self.work, env=env, text=True,
                             capture_output=True, timeout=timeout)
        print(f"{time.monotonic() - t0:6.1f} s  {script.strip().splitlines()[-1][:70]}")   # shown with -s
        if check:
            assert out.returncode == 0, f"{script}\n--- stdout\n{out.stdout[-4000:]}\n--- stderr\n{out.stderr[-4000:]}"
        return out

    def wait_for(self, what: str, script: str, want: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            got = self.run(script, check=False)
            if want in got.stdout:
                return got.stdout
            assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s:\n{got.stdout[-3000:]}{got.stderr[-2000:]}"
            time.sleep(1.0)


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shell]:
    root = tmp_path_factory.mktemp("byhand")
    work, home = root / "work", root / "home"
    work.mkdir()
    home.mkdir()
    (work / "env.sh").write_text(ENV_SH)
    with headless_user.private_sandbox(root / "sbx", speed=300.0, timeout=60.0):
        yield Shell(root / "sbx", work, home)


def test_sandbox_env_puts_xpk_and_ray_first_on_the_callers_path(tmp_path: Path) -> None:
    """Without a daemon: a status file naming this (live) process is all `sandbox env` reads."""
    from rltui_sandbox import contract, manage

    root = tmp_path / "sbx"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "xpk").write_text("#!/bin/sh\necho fake xpk\n")
    (root / "bin" / "xpk").chmod(0o755)
    info = {"contract": contract.CONTRACT_VERSION, "pid": os.getpid(), "bin_dir": str(root / "bin"), "gcloud_config": str(root / "gcloud"),
            "tool_env": {"KUBECONFIG": str(root / "kubeconfig-gcloud"), "CLOUDSDK_CONFIG": str(root / "gcloud")}}
    (root / manage.STATUS_FILE).write_text(json.dumps(info))
    mine = tmp_path / "my bin"   # the user's own folder, a space in its name: kept, after the tools
    mine.mkdir()
    script = f'eval "$({RLTUI} sandbox env)"; command -v xpk ray gcloud; xpk; printf "%s\\n" "$PATH"'
    env = {"PATH": f"{mine}:{SYSTEM_PATH}", "HOME": str(tmp_path), "RLTUI_SANDBOX_DIR": str(root)}
    out = subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    xpk, ray, gcloud, said, path = out.stdout.splitlines()
    assert (xpk, ray) == (str(root / "tools" / "xpk"), str(root / "tools" / "ray")) and said == "fake xpk"
    assert Path(ray).resolve() == (Path(sys.executable).parent / "ray").resolve()
    assert gcloud.startswith("/usr/") and path == f"{root / 'tools'}:{mine}:{SYSTEM_PATH}"
    assert out.stderr == ""
    # A reader taking each line as NAME=value (test helpers do) never gets "$PATH" unexpanded.
    lines = subprocess.run([str(RLTUI), "sandbox", "env"], env=env, capture_output=True, text=True,
                           timeout=60).stdout.splitlines()
    assert all(not ln.removeprefix("export ").startswith("PATH=") for ln in lines), lines


def test_the_heads_bash_runs_the_codelabs_script_in_the_heads_folders(tmp_path: Path) -> None:
    """`bash run_nemo_rl.sh` on a sandbox head: /opt/nemo-rl and /lustre are its local folders."""
    from rltui_sandbox.tools.install import install_tools

    install_tools(tmp_path / "bin", "http://127.0.0.1:9")
    checkout, lustre = tmp_path / "nemo rl", tmp_path / "lustre"   # a space: referenced, not pasted
    checkout.mkdir()
    lustre.mkdir()
    (tmp_path / "run.sh").write_text("#!/bin/bash\nset -e\ncd /opt/nemo-rl\nmkdir -p /lustre/hf\n"
                                     "echo \"$(pwd) $0 $1 /lustre2 /opt/nemo-rl-old\"\n")
    env = {"PATH": f"{tmp_path / 'bin'}:{SYSTEM_PATH}", "NEMO_RL_DIR": str(checkout), "LUSTRE_MOUNT": str(lustre)}
    out = subprocess.run(["bash", "run.sh", "a b"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{checkout} run.sh a b /lustre2 /opt/nemo-rl-old\n" and (lustre / "hf").is_dir()
    plain = subprocess.run(["bash", "-c", "echo $0 $1", "x", "y"], env={"PATH": env["PATH"]},
                           capture_output=True, text=True, timeout=30)
    assert plain.stdout == "x y\n"


WARNINGS = "kubectl get events --field-selector reason=FailedMount -o jsonpath='{range .items[*]}{.message}{\"\\n\"}{end}'"


def test_the_codelab_as_written_stops_where_it_stops_on_google(shell: Shell) -> None:
    found = shell.run("command -v xpk ray gcloud kubectl; echo \"$RLTUI_SANDBOX_TOOLS\"").stdout.split()
    assert [Path(p).parent for p in found[:2]] == [Path(found[4])] * 2 == [shell.sandbox_dir / "tools"] * 2
    assert all(p.startswith("/usr/") for p in found[2:4]), found
    shell.run("""
gcloud config set project $PROJECT_ID
gcloud services enable container.googleapis.com lustre.googleapis.com compute.googleapis.com \\
  servicenetworking.googleapis.com
xpk cluster create --num-nodes=${NUM_NODES} --device-type=${DEVICE_TYPE} \\
  --default-pool-cpu-machine-type="e2-standard-4" --spot --enable-lustre-csi-driver \\
  --project=${PROJECT_ID} --zone=${ZONE} --cluster=${CLUSTER_NAME}
gcloud container clusters update ${CLUSTER_NAME} --region ${REGION} --project ${PROJECT_ID} \\
  --update-addons=RayOperator=ENABLED
""", timeout=240)
    # xpk's Toolkit path left the driver off: the codelab's check prints nothing (not True).
    check = shell.run("gcloud container clusters describe ${CLUSTER_NAME} --region ${REGION} --project ${PROJECT_ID} "
                      "--format='value(addonsConfig.lustreCsiDriverConfig.enabled)'")
    assert check.stdout.strip() in ("", "False"), check.stdout
    shell.run(f"""
gcloud container clusters update ${{CLUSTER_NAME}} --region ${{REGION}} --project ${{PROJECT_ID}} \\
  --update-addons=LustreCsiDriver=ENABLED
gcloud compute addresses create "google-managed-services-${{NETWORK_NAME}}" --global --purpose=VPC_PEERING \\
  --prefix-length=24 --network="${{NETWORK_NAME}}" --project="${{PROJECT_ID}}"
gcloud services vpc-peerings connect --service=servicenetworking.googleapis.com \\
  --ranges="google-managed-services-${{NETWORK_NAME}}" --network="${{NETWORK_NAME}}" --project="${{PROJECT_ID}}"
gcloud lustre instances create "${{LUSTRE_INSTANCE_ID}}" --project="${{PROJECT_ID}}" --location="${{ZONE}}" \\
  --capacity-gib="${{LUSTRE_CAPACITY}}" --per-unit-storage-throughput="1000" --filesystem="lustre" \\
  --network="projects/${{PROJECT_ID}}/global/networks/${{NETWORK_NAME}}" --gke-support-enabled --async
until [ "$(gcloud lustre instances describe ${{LUSTRE_INSTANCE_ID}} --project ${{PROJECT_ID}} --location ${{ZONE}} \\
  --format='value(state)')" = ACTIVE ]; do sleep 1; done
export LUSTRE_IP=$(gcloud lustre instances describe "${{LUSTRE_INSTANCE_ID}}" --project="${{PROJECT_ID}}" \\
  --location="${{ZONE}}" --format="value(mountPoint)" | cut -d'@' -f1)
cat << EOF > rl-lustre-volume.yaml
{VOLUME_YAML}EOF
kubectl apply -f rl-lustre-volume.yaml
cat << EOF > ray-cluster.yaml
{CLUSTER_YAML}EOF
kubectl apply -f ray-cluster.yaml
""", timeout=240)
    assert "replicas: 2" in (shell.work / "ray-cluster.yaml").read_text()
    # The nodes predate the driver: every pod waits for its volume, as on GKE.
    shell.wait_for("FailedMount, no driver", WARNINGS, "driver name lustre.csi.storage.gke.io not found in the "
                   "list of registered CSI drivers", 60)
    pods = shell.run("kubectl get pods --no-headers").stdout
    assert pods.count("ContainerCreating") == 3, pods


def test_on_recreated_nodes_the_mount_needs_the_legacy_port_and_the_probes_the_images_ray(shell: Shell) -> None:
    # Recreate the GPU nodes as xpk itself does after enabling the driver (xpk core/nodepool.py
    # recreate_nodes_in_existing_node_pools: an upgrade of the pool to its own version).
    recreate = ("gcloud container clusters upgrade ${CLUSTER_NAME} --region ${REGION} --quiet "
                f"--node-pool={GPU_POOL} --cluster-version=$(gcloud container node-pools describe {GPU_POOL} "
                "--cluster ${CLUSTER_NAME} --region ${REGION} --format='value(version)')")
    shell.run(recreate, timeout=180)
    # The instance made with --gke-support-enabled listens on 6988 only: the mount cannot reach it.
    shell.wait_for("FailedMount, wrong LNet port", WARNINGS, "Is the MGS running?", 90)
    shell.run("gcloud container clusters update ${CLUSTER_NAME} --region ${REGION} --enable-legacy-lustre-port\n"
              + recreate, timeout=240)
    # Mounted now; but the add-on's KubeRay probes what the codelab's rayVersion (2.54.0) serves,
    # and the image's Ray (2.46.0) answers 404: the head is never Ready, its liveness kills it.
    shell.wait_for("the head's probes", "kubectl get events --field-selector reason=Unhealthy "
                   "-o jsonpath='{range .items[*]}{.message}{\"\\n\"}{end}'",
                   "Liveness probe failed: HTTP probe failed with statuscode: 404", 120)
    assert "1/1" not in shell.run("kubectl get pods --no-headers -l ray.io/node-type=head").stdout


def test_with_the_images_ray_version_the_codelabs_job_trains(shell: Shell) -> None:
    shell.run("""
sed -i "s/rayVersion: '2.54.0'/rayVersion: '2.46.0'/" ray-cluster.yaml
kubectl delete -f ray-cluster.yaml --wait
kubectl apply -f ray-cluster.yaml
""", timeout=120)
    shell.wait_for("the head Ready", "kubectl get pods --no-headers -l ray.io/node-type=head", " 1/1 ", 150)
    with socket.socket() as s:   # a free local port: the codelab's 8265 may be taken on a shared machine
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = shell.run(RUN_SCRIPT + f"""
kubectl port-forward service/${{CLUSTER_NAME}}-head-svc {port}:8265 > port-forward.log 2>&1 &
PF=$!
trap 'kill $PF' EXIT
for i in $(seq 60); do curl -sf 127.0.0.1:{port}/api/version > version.json && break; sleep 0.5; done
ray job submit \\
    --address="http://localhost:{port}" \\
    --working-dir . \\
    --runtime-env ray_runtime_env_nemo.json \\
    -- bash run_nemo_rl.sh
""", timeout=300)
    assert "ray_version" in json.loads((shell.work / "version.json").read_text())
    text = out.stdout + out.stderr
    assert "--- Running on Ray Cluster ---" in text and "Step 20/20" in text, text[-4000:]
    assert "succeeded" in text, text[-3000:]
    log = (shell.work / "port-forward.log").read_text()
    assert "Forwarding from 127.0.0.1:" in log and "error" not in log.lower(), log


def test_the_codelabs_clean_up_leaves_the_network_until_the_peering_goes(shell: Shell) -> None:
    cleanup = shell.run("""
gcloud lustre instances delete "${LUSTRE_INSTANCE_ID}" --project="${PROJECT_ID}" --location="${ZONE}" --quiet --async
xpk cluster delete --project="${PROJECT_ID}" --zone="${ZONE}" --cluster="${CLUSTER_NAME}" --force || echo "xpk: $?"
gcloud compute addresses delete "google-managed-services-${NETWORK_NAME}" --global --project="${PROJECT_ID}" --quiet \\
  || echo "addresses delete: $?"
""", timeout=240)
    text = cleanup.stdout + cleanup.stderr
    assert "xpk: 1" in text and "addresses delete: 1" in text, text[-4000:]
    assert f"The network resource 'projects/{PROJECT}/global/networks/{CLUSTER}-net-0' is already being used by " \
           f"'projects/{PROJECT}/global/addresses/google-managed-services-{CLUSTER}-net-0'" in text, text[-4000:]
    assert f"is already being used by 'projects/{PROJECT}/global/networks/{CLUSTER}-net-0/peerings/" \
           "servicenetworking-googleapis-com'" in text, text[-4000:]
    # The peering first, then the range, then xpk again: nothing of the codelab's is left.
    shell.run("""
gcloud services vpc-peerings delete --service=servicenetworking.googleapis.com --network="${NETWORK_NAME}" --quiet
gcloud compute addresses delete "google-managed-services-${NETWORK_NAME}" --global --quiet
xpk cluster delete --project="${PROJECT_ID}" --zone="${ZONE}" --cluster="${CLUSTER_NAME}" --force
""", timeout=240)
    left = shell.run("gcloud compute networks list --format='value(name)'; gcloud compute addresses list "
                     "--format='value(name)'; gcloud container clusters list --format='value(name)'").stdout
    assert CLUSTER not in left, left
