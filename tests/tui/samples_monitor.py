"""Deterministic data for the Monitor screen: 8 workers + head (one preempted), the
RayCluster (1 head + 8 workers, as the codelab's manifest), the replacement worker, a NeMo-RL
step block, step records, two checkpoints and recent Events. Times are fixed: NOW below."""

from __future__ import annotations

from datetime import datetime, timezone

from rltui.plan.pods import KubeEvent
from rltui.joblog import CheckpointEvent, TrainingStep
from rltui.seam import JobStatusUpdate
from rltui.widgets.chrome import HeaderInfo

NOW = 1_750_000_000.0
CLUSTER = "ray-a4-gpu-spot"
CKPT_DIR = "/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1"
JOB_ID = "raysubmit_9fQk2LrT7uVw1XyZ"
HEADER = HeaderInfo(mode="SANDBOX", project="team-rl-sandbox-42", cluster=CLUSTER,
                    job="RUNNING 5/20", clock="12:04")
WORKER_SUFFIXES = ("2b9xk", "4mzq7", "7hq3d", "9qzpl", "c5t8w", "fk2rn", "m3v6j", "x8d4s")
PREEMPTED = f"{CLUSTER}-gpu-worker-group-worker-9qzpl"
REPLACEMENT = f"{CLUSTER}-gpu-worker-group-worker-q1w2e"
GROUP = "gpu-worker-group"
# The codelab's requests (rltui/manifests.py): head 8 CPU (limit 32), workers 8 GPU, 100 CPU.
HEAD_RESOURCES = {"limits": {"cpu": "32", "memory": "1000Gi"}, "requests": {"cpu": "8", "memory": "64Gi"}}
WORKER_RESOURCES = {"limits": {"nvidia.com/gpu": 8, "cpu": "100", "memory": "1000Gi"},
                    "requests": {"nvidia.com/gpu": 8, "cpu": "100", "memory": "1000Gi"}}


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(i: int) -> str:
    return f"gke-{CLUSTER}-np-a4-8f3a2b1c-{'abcdefgh'[i]}{i}k{i}"


def pod(name: str, kind: str, node_name: str | None, *, phase: str = "Running",
        restarts: int = 0, age_s: float = 2 * 3600, waiting: str | None = None,
        deleting: bool = False) -> dict:
    state = {"waiting": {"reason": waiting}} if waiting else (
        {"running": {}} if phase == "Running" else {})
    meta = {"name": name, "namespace": "default", "creationTimestamp": stamp(NOW - age_s),
            "labels": {"ray.io/cluster": CLUSTER, "ray.io/node-type": kind,
                       "ray.io/group": "headgroup" if kind == "head" else GROUP}}
    if deleting:
        meta["deletionTimestamp"] = stamp(NOW)
    container = {"name": "ray-head" if kind == "head" else "ray-worker",
                 "image": "nvcr.io/nvidia/nemo-rl:v0.4.0",
                 "resources": HEAD_RESOURCES if kind == "head" else WORKER_RESOURCES}
    spec: dict = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": phase,
                   "containerStatuses": [{"name": "ray", "restartCount": restarts, "state": state}]},
    }


def head() -> dict:
    return pod(f"{CLUSTER}-head-x7k2q", "head", node(0), age_s=2 * 3600 + 125)


def worker(i: int, **kw) -> dict:
    return pod(f"{CLUSTER}-gpu-worker-group-worker-{WORKER_SUFFIXES[i]}", "worker", node(i), **kw)


def pod_events() -> list[KubeEvent]:
    """The watch: the list (9 pods), SYNCED, then worker 3 preempted (deleted by pod GC)."""
    events = [KubeEvent("ADDED", head())]
    events += [KubeEvent("ADDED", worker(i, restarts=1 if i == 5 else 0, age_s=7000 - 60 * i))
               for i in range(8)]
    events.append(KubeEvent("SYNCED", {"count": 9}))
    events.append(KubeEvent("DELETED", worker(3, age_s=6820)))
    return events


def raycluster(replicas: int = 8) -> dict:
    """The codelab's RayCluster as the API returns it (spec only: what the counts need)."""
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": CLUSTER, "namespace": "default"},
            "spec": {"rayVersion": "2.54.0", "headGroupSpec": {},
                     "workerGroupSpecs": [{"groupName": GROUP, "replicas": replicas,
                                           "minReplicas": replicas, "maxReplicas": replicas}]}}


def replacement(phase: str = "Running") -> dict:
    """The worker KubeRay created for the preempted one, on the node that came back."""
    return pod(REPLACEMENT, "worker", node(3) if phase != "Pending" else None, phase=phase,
               age_s=30)


def recovered_events() -> list[KubeEvent]:
    """After pod_events(): the replacement is scheduled, then runs."""
    return [KubeEvent("ADDED", replacement("Pending")), KubeEvent("MODIFIED", replacement())]


LOG = """\
\x1b[1m========================= Step 4/20 =========================\x1b[0m
▶ Preparing batch...
▶ Generating responses for batch of size 256...
\x1b[36m(VllmGenerationWorker pid=3301, ip=10.8.0.12)\x1b[0m Processed prompts:   0%|          | 0/256\rProcessed prompts: 100%|██████████| 256/256 [00:33<00:00]
▶ Processing rewards...,
▶ Computing advantages...
▶ Preparing for logprob inference...
▶ Computing logprobs...
▶ Preparing for training...
▶ Training policy...
Saving checkpoint for step 4...
\x1b[36m(MegatronPolicyWorker[rank=0] pid=2210, ip=10.8.0.11)\x1b[0m saving checkpoint at iteration 4 to /lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1/tmp_step_4/policy/weights
Logged data to logs/exp_001/train_data_step3.jsonl

📊 Training Results:
  • Loss: -0.0152
  • Avg Reward: 0.2980
  • Mean Generation Length: 1187.4410

⏱️  Timing:
  • Total step time: 396.41s
  • generation: 171.20s (43.2%)
  • checkpointing: 77.03s (19.4%)
  • policy_training: 98.61s (24.9%)

========================= Step 5/20 =========================
▶ Preparing batch...
▶ Generating responses for batch of size 256...
\x1b[36m(raylet, ip=10.8.0.13)\x1b[0m A worker died or was killed while executing a task by an unexpected system error.
"""


def log_lines() -> list[str]:
    return LOG.split("\n")[:-1]  # as the app splits: on "\n" only


def step_records() -> list[TrainingStep]:
    rewards = (0.234, 0.195, 0.251, 0.298)
    times = (346.78, 512.25, 351.02, 396.41)
    saves = {2: 111.37, 4: 77.03}
    out = [TrainingStep(step=i + 1, total_steps=20, epoch=1, avg_reward=r, step_time_s=t,
                      checkpoint_s=saves.get(i + 1))
           for i, (r, t) in enumerate(zip(rewards, times))]
    out.append(TrainingStep(step=5, total_steps=20, epoch=1))  # started, nothing measured yet
    return out


def saves() -> list:
    """The same two saves as the app times them (rltui.saves): started when their `Saving
    checkpoint` line arrived."""
    from rltui.saves import Save

    return [Save(2, NOW - 900.0, 111.37, f"{CKPT_DIR}/step_2"),
            Save(4, NOW - 420.0, 77.03, f"{CKPT_DIR}/step_4")]


def checkpoints() -> list[CheckpointEvent]:
    return [CheckpointEvent(2, f"{CKPT_DIR}/step_2", 111.37),
            CheckpointEvent(4, f"{CKPT_DIR}/step_4", 77.03)]


def kube_events() -> list[dict]:
    def event(age_s: float, kind: str, reason: str, obj: str, message: str) -> dict:
        return {"type": kind, "reason": reason, "message": message,
                "lastTimestamp": stamp(NOW - age_s),
                "involvedObject": {"kind": "Pod", "name": obj, "namespace": "default"}}
    replacement = f"{CLUSTER}-gpu-worker-group-worker-q1w2e"
    return [
        event(3600, "Normal", "Started", f"{CLUSTER}-head-x7k2q", "Started container ray-head"),
        event(40, "Warning", "NodeShutdown", PREEMPTED,
              "Pod was terminated in response to imminent node shutdown."),
        event(35, "Warning", "FailedScheduling", replacement,
              "0/8 nodes are available: 1 node(s) were unschedulable, 7 Insufficient nvidia.com/gpu."),
        event(20, "Normal", "TriggeredScaleUp", replacement,
              "pod triggered scale-up: [{a4-highgpu-8g 7->8 (max: 8)}]"),
    ]


JOB_STATUS = JobStatusUpdate(JOB_ID, "RUNNING")
DASHBOARD = "http://127.0.0.1:41865"


def gpu_metrics():
    """GKE's accelerator metrics of the running workers (not the head, not the preempted one): the
    last 5 minutes, busy while training and a dip at the last minute (a checkpoint save); 8 B200
    GPUs of 180 GB each per pod, the job holding 60% of each."""
    from rltui.cloud.monitoring import Point
    from rltui.seam import GpuMetrics

    running = [i for i in range(8) if i != 3]
    names = [f"{CLUSTER}-gpu-worker-group-worker-{WORKER_SUFFIXES[i]}" for i in running]
    times = [NOW - 60 * k for k in range(5, 0, -1)]
    busy = {n: tuple(Point(t, v - j) for t, v in zip(times, (97.0, 98.0, 96.0, 99.0, 12.0)))
            for j, n in enumerate(names)}
    used = {n: tuple(Point(t, 8 * 0.6 * 180e9) for t in times) for n in names}
    total = {n: tuple(Point(t, 8 * 180e9) for t in times) for n in names}
    return GpuMetrics(NOW, 60.0, busy, used, total)
