"""A Spot preemption during the codelab's training job, as on GKE: the RayCluster with the GRPO
demo submitted through Ray's real job API; a worker's node preempted at step >= 3 fails the job
(Ray's own "Job entrypoint command failed with exit code 1"), its log names the node, the newest
checkpoint stays; the same job resubmitted once the node is back resumes and succeeds. Then the
head's node: the job and Ray's job table go with the head, and the workers' containers restart.

One Ray head at a time for the module (the head preemption makes the second); tests run in order.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from rltui import manifests

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120, func_only=True)]

NAME = "ray-a4-gpu-spot"
RUN_SCRIPT = Path(__file__).parents[1] / "demo" / "run_nemo_rl.sh"  # the codelab's script
STEP = re.compile(r"=+ Step (\d+)/20 =+")


def _pods(core: client.CoreV1Api) -> list[Any]:
    return core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={NAME}").items


def _ready(pod: Any) -> bool:
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _kind(pod: Any) -> str:
    return pod.metadata.labels["ray.io/node-type"]


@pytest.fixture(scope="module")
def box(make_box, tools):
    box = make_box(controller_profile=tools.profile(spot_replace=50.0))  # a Spot node is back after ~1 s
    cfg = tools.config()
    box.codelab_raycluster(cfg)
    box.lustre = Path(box.fn(box.world.lustre_dir, tools.project, cfg.zone, cfg.lustre_instance_id))
    _all_ready(box, tools, 60)
    return box


def _all_ready(box: Any, tools: Any, timeout: float) -> list[Any]:
    return tools.wait_for(lambda: (pods := _pods(box.core)) and len(pods) == 3 and all(map(_ready, pods))
                          and box.controller.dashboard_url() and pods, timeout, "head and 2 workers Ready")


def _jobs(box: Any) -> Any:
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(box.controller.dashboard_url())


def _submit(box: Any, workdir: Path, step_seconds: float, **env: str) -> tuple[Any, str]:
    workdir.mkdir(exist_ok=True)
    # The box has two GPU workers; NeMo-RL waits for num_nodes x gpus_per_node GPUs before it starts.
    (workdir / "run_nemo_rl.sh").write_text(RUN_SCRIPT.read_text().replace("cluster.num_nodes=8", "cluster.num_nodes=2"))
    jobs = _jobs(box)
    job = jobs.submit_job(entrypoint="bash run_nemo_rl.sh", runtime_env={
        "working_dir": str(workdir),
        "env_vars": {"RLTUI_DEMO_STEP_SECONDS": str(step_seconds), "RLTUI_DEMO_CHECKPOINT_MB": "0.5", **env}})
    return jobs, job


def _saved(box: Any) -> list[int]:
    """The step_N checkpoints on the Lustre instance, oldest first."""
    ckpt = box.lustre / "nemo_rl_qwen_72b_ds_cp" / "nemo-rl-grpo-test1"
    return sorted(int(p.name.split("_")[1]) for p in ckpt.glob("step_*"))


def _wait_terminal(jobs: Any, job: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (status := jobs.get_job_status(job)).is_terminal():
        assert time.monotonic() < deadline, f"job still {status}: {jobs.get_job_logs(job)[-2000:]}"
        time.sleep(0.2)
    return status


def _steps(logs: str) -> list[int]:
    return [int(m.group(1)) for line in logs.splitlines() if (m := STEP.fullmatch(line))]


@pytest.fixture(scope="module")
def preempted(box, tools, tmp_path_factory) -> dict:
    """The job submitted, a worker's node preempted once Step 3 started; the job's end."""
    from ray.job_submission import JobStatus

    jobs, job = _submit(box, tmp_path_factory.mktemp("job"), step_seconds=0.3)
    tools.wait_for(lambda: max(_steps(jobs.get_job_logs(job)), default=0) >= 3, 45, "Step 3 of the job")
    before = {p.metadata.name: p for p in _pods(box.core)}
    code, result = box.post_preempt({})
    assert code == 200, result
    status = _wait_terminal(jobs, job, 20)
    assert status == JobStatus.FAILED
    return {"job": job, "info": jobs.get_job_info(job), "logs": jobs.get_job_logs(job), "result": result,
            "before": before, "saved": _saved(box)}


def test_a_preempted_worker_node_fails_the_job_as_ray_does(preempted) -> None:
    node, (victim,) = preempted["result"]["node"], preempted["result"]["pods"]
    pod = preempted["before"][victim]
    assert _kind(pod) == "worker"
    info, logs = preempted["info"], preempted["logs"]
    assert info.driver_exit_code == 1
    assert info.message.startswith("Job entrypoint command failed with exit code 1, last available logs")
    assert f"(raylet) The node with node id: " in logs and f"and address: {pod.status.pod_ip} " in logs
    assert "has been marked dead because the detector has missed too many heartbeats from it." in logs
    assert "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task." in logs
    assert "\tclass_name: MegatronPolicyWorker\n" in logs and f"\tip: {pod.status.pod_ip}\n" in logs
    assert "The actor died because its node has died. Node Id: " in logs
    assert f"was pod {victim} on Kubernetes node {node} ({pod.status.host_ip})" in logs
    assert "Max number of steps has been reached" not in logs


def test_the_newest_checkpoint_stays_intact(box, preempted) -> None:
    ckpt = box.lustre / "nemo_rl_qwen_72b_ds_cp" / "nemo-rl-grpo-test1"
    steps = preempted["saved"]
    assert steps and steps[-1] >= 2  # Step 3 had started: step_2 was saved (save_period=2)
    newest = ckpt / f"step_{steps[-1]}"
    assert json.loads((newest / "training_info.json").read_text())["step"] == steps[-1]
    assert (newest / "policy" / "weights" / "model.npz").is_file()
    for tmp in ckpt.glob("tmp_step_*"):  # a save the preemption cut short stays unfinished
        assert int(tmp.name.split("_")[-1]) > steps[-1]


def test_resubmitted_once_the_node_is_back_the_job_resumes_and_succeeds(box, preempted, tools, tmp_path) -> None:
    from ray.job_submission import JobStatus

    node = preempted["result"]["node"]
    tools.wait_for(lambda: box.core.read_node(node), 10, "the Spot node to come back")
    pods = _all_ready(box, tools, 20)
    assert node in {p.spec.node_name for p in pods if _kind(p) == "worker"}
    jobs, job = _submit(box, tmp_path / "again", step_seconds=0.0)
    status = _wait_terminal(jobs, job, 45)
    logs = jobs.get_job_logs(job)
    assert status == JobStatus.SUCCEEDED, logs[-3000:]
    saved = preempted["saved"][-1]
    assert _steps(logs)[0] == saved + 1 and _steps(logs)[-1] == 20
    assert f"/step_{saved} (step {saved})..." in logs


def test_a_preempted_head_takes_the_job_and_ray_job_table_with_it(box, tools, tmp_path) -> None:
    from ray.job_submission import JobStatus

    # A fresh Lustre folder: in the instance's, step_20 would end the job at once.
    jobs, job = _submit(box, tmp_path / "job", step_seconds=2.0, LUSTRE_MOUNT=str(tmp_path / "lustre"))
    tools.wait_for(lambda: STEP.search(jobs.get_job_logs(job)), 30, "the job's first step")
    assert jobs.get_job_status(job) == JobStatus.RUNNING
    before = {p.metadata.name: p for p in _pods(box.core)}
    head = next(p for p in before.values() if _kind(p) == "head")
    survivor = next(p for p in before.values() if _kind(p) == "worker" and p.spec.node_name != head.spec.node_name)
    code, result = box.post_preempt({"head": True})
    assert code == 200, result
    assert result["node"] == head.spec.node_name and head.metadata.name in result["pods"]
    assert box.post_preempt({"head": True, "node": "x"})[0] == 400

    # The survivor's raylet loses the GCS: its container restarts (same pod), not Ready meanwhile.
    restarted = tools.wait_for(lambda: (p := box.core.read_namespaced_pod(survivor.metadata.name, "default"))
                               .status.container_statuses[0].restart_count == 1 and p, 10,
                               "the surviving worker's container to restart")
    assert restarted.metadata.uid == survivor.metadata.uid
    assert restarted.status.container_statuses[0].last_state.terminated.exit_code == 1
    pods = _all_ready(box, tools, 60)
    new_head = next(p for p in pods if _kind(p) == "head")
    assert new_head.metadata.uid != head.metadata.uid
    assert {p.metadata.uid for p in pods} >= {survivor.metadata.uid}
    assert job not in {j.submission_id for j in _jobs(box).list_jobs()}  # a new head, an empty job table
    assert "lost the GCS" in box.core.read_namespaced_pod_log(survivor.metadata.name, "default")
