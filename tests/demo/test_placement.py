"""The GRPO demo's driver knows where its actors are (no Ray head, no sandbox): the cluster file
the head pod keeps (sandbox/rltui_sandbox/kuberay/placement.py writes it; this test writes it the same
way), placement of the policy workers on every worker pod, and the driver failing as Ray makes
it fail once a pod it placed actors on is gone, terminating or restarted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from rltui_sandbox.grpo_demo import cluster
from rltui_sandbox.kuberay.placement import cluster_doc, write_atomic

CKPT = Path("lustre") / "nemo_rl_qwen_72b_ds_cp" / "nemo-rl-grpo-test1"


def _pod(name: str, uid: str, node: str, node_type: str = "worker", *, restarts: int = 0, ip: str = "10.8.1.5",
         terminating: bool = False, phase: str = "Running") -> dict:
    meta: dict = {"name": name, "uid": uid, "namespace": "default",
                  "labels": {"ray.io/cluster": "rc", "ray.io/node-type": node_type, "ray.io/group": "g"}}
    if terminating:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    gpus = {"nvidia.com/gpu": "8"} if node_type == "worker" else {}
    return {"metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "ray", "resources": {"limits": gpus}}]},
            "status": {"phase": phase, "hostIP": "10.0.0.9", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"restartCount": restarts, "state": {"running": {}}}]}}


HEAD = _pod("rc-head-aaaaa", "h-1", "gke-node-a", "head", ip="10.8.0.4")
W1 = _pod("rc-worker-bbbbb", "w-1", "gke-node-a", ip="10.8.0.5")
W2 = _pod("rc-worker-ccccc", "w-2", "gke-node-b", ip="10.8.1.5")


def _watch(tmp_path: Path, pods: list[dict]) -> cluster.ClusterWatch:
    path = tmp_path / "rc.json"
    write_atomic(path, cluster_doc(pods, "rc"))
    watch = cluster.ClusterWatch.from_env({cluster.ENV_VAR: str(path)}, gpus_per_node=8)
    assert watch is not None
    return watch


def _rewrite(watch: cluster.ClusterWatch, pods: list[dict]) -> None:
    time.sleep(0.01)  # a new mtime even on coarse clocks
    write_atomic(watch.path, cluster_doc(pods, "rc"))


def test_policy_workers_are_placed_on_every_worker_pod_one_per_gpu(tmp_path: Path) -> None:
    watch = _watch(tmp_path, [HEAD, W1, W2, _pod("rc-worker-ddddd", "w-3", "gke-node-c", phase="Pending")])
    assert [n.pod for n in watch.nodes] == ["rc-worker-bbbbb", "rc-worker-ccccc"]  # no head, nothing Pending
    assert len(watch.actors) == 16
    assert watch.actors[0].name == "lm_policy-0-0" and watch.actors[-1].name == "lm_policy-1-7"
    watch.check(force=True)  # nothing lost: no error


def test_a_job_started_before_every_worker_is_up_waits_for_its_gpus_as_nemo_rl_does(tmp_path: Path, capsys) -> None:
    """NeMo-RL asks Ray for num_nodes x gpus_per_node before it places anything: a worker still
    starting is waited for (and then holds actors), not left out of the run."""
    path = tmp_path / "rc.json"
    starting = _pod("rc-worker-ccccc", "w-2", "gke-node-b", phase="Pending")
    write_atomic(path, cluster_doc([HEAD, W1, starting], "rc"))
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            write_atomic(path, cluster_doc([HEAD, W1, W2], "rc"))

    watch = cluster.ClusterWatch.from_env({cluster.ENV_VAR: str(path)}, gpus_per_node=8, needed_gpus=16, sleep=sleep)
    assert watch is not None and slept == [1, 2]
    assert [n.pod for n in watch.nodes] == ["rc-worker-bbbbb", "rc-worker-ccccc"] and len(watch.actors) == 16
    out = capsys.readouterr().out.splitlines()
    assert out == ["Not enough GPUs available. Requested 16 GPUs, but only 8 are available in the cluster.",
                   "Retrying placement group creation... 1/6. Next retry in 1 seconds.",
                   "Not enough GPUs available. Requested 16 GPUs, but only 8 are available in the cluster.",
                   "Retrying placement group creation... 2/6. Next retry in 2 seconds."]


def test_a_cluster_that_never_has_the_gpus_ends_the_job_with_nemo_rls_error(tmp_path: Path) -> None:
    path = tmp_path / "rc.json"
    write_atomic(path, cluster_doc([HEAD, W1], "rc"))
    slept: list[float] = []
    env = {cluster.ENV_VAR: str(path), "NRL_VIRTUAL_CLUSTER_MAX_RETRIES": "3"}
    with pytest.raises(cluster.ResourceInsufficientError, match=r"Maximum number of retries reached \(3\)"):
        cluster.ClusterWatch.from_env(env, gpus_per_node=8, needed_gpus=16, sleep=slept.append)
    assert slept == [1, 2, 4]


def test_a_lost_worker_pod_fails_the_driver_with_rays_actor_died_error(tmp_path: Path, capsys) -> None:
    watch = _watch(tmp_path, [HEAD, W1, W2])
    _rewrite(watch, [HEAD, W1])  # W2's node was preempted: the pod GC removed it
    with pytest.raises(Exception) as raised:
        watch.check(force=True)
    err = raised.value
    assert type(err).__name__ == "ActorDiedError" and type(err).__module__ == "ray.exceptions"
    text = str(err)
    node_id = watch.nodes[1].node_id
    assert text.startswith("The actor died unexpectedly before finishing this task.\n\tclass_name: "
                           "MegatronPolicyWorker\n")
    assert "\tname: lm_policy-1-0\n" in text and "\tip: 10.8.1.5\n" in text
    assert text.endswith(f"The actor died because its node has died. Node Id: {node_id}\n\tthe actor's node "
                         "was terminated unexpectedly: health check failed due to missing too many heartbeats")
    out, err_text = capsys.readouterr()
    assert out.startswith(f"(raylet) The node with node id: {node_id} and address: 10.8.1.5 and node name: "
                          "10.8.1.5 has been marked dead because the detector has missed too many heartbeats")
    assert "pod rc-worker-ccccc on Kubernetes node gke-node-b (10.0.0.9); that pod is gone" in err_text


def test_a_replaced_or_restarted_pod_is_a_dead_node_too(tmp_path: Path, capsys) -> None:
    watch = _watch(tmp_path, [HEAD, W1, W2])
    # KubeRay recreated the worker on the same node once it was back: same name, another uid.
    _rewrite(watch, [HEAD, W1, _pod("rc-worker-eeeee", "w-9", "gke-node-b")])
    with pytest.raises(Exception, match="Node Id: " + watch.nodes[1].node_id):
        watch.check(force=True)
    watch = _watch(tmp_path, [HEAD, W1, W2])
    _rewrite(watch, [HEAD, _pod("rc-worker-bbbbb", "w-1", "gke-node-a", restarts=1), W2])  # raylet restarted
    with pytest.raises(Exception, match="lm_policy-0-0"):
        watch.check(force=True)
    assert "restarted its container (restartCount 1)" in capsys.readouterr().err


def test_a_terminating_pod_is_a_graceful_node_death(tmp_path: Path, capsys) -> None:
    watch = _watch(tmp_path, [HEAD, W1, W2])
    _rewrite(watch, [HEAD, W1, _pod("rc-worker-ccccc", "w-2", "gke-node-b", terminating=True)])
    with pytest.raises(Exception, match="the actor's node was terminated expectedly: received SIGTERM"):
        watch.check(force=True)
    assert "(raylet)" not in capsys.readouterr().out  # the GCS broadcasts only unexpected deaths


def test_checks_are_throttled_and_unreadable_files_are_no_news(tmp_path: Path) -> None:
    ticks = iter([0.0, 0.1, 1.0, 2.0])
    watch = _watch(tmp_path, [HEAD, W1, W2])
    watch._clock = lambda: next(ticks)
    watch.check()  # t=0: reads, fine
    _rewrite(watch, [HEAD, W1])
    watch.check()  # t=0.1: within CHECK_INTERVAL_S, not read yet
    watch.path.write_text("{half a fi")  # a torn write (the writer renames, but be safe)
    watch.check()  # t=1.0: unreadable: no news
    _rewrite(watch, [HEAD, W1])
    with pytest.raises(Exception, match="ActorDiedError|node has died"):
        watch.check()  # t=2.0


def test_the_demo_run_fails_when_a_placed_pod_goes(tmp_path: Path, demo) -> None:
    """The whole driver: `Step 3/20` started, a worker pod goes, exit 1 with Ray's traceback;
    the newest step_N stays intact, and a resumed run's first step is that N + 1."""
    state = tmp_path / "rc.json"
    write_atomic(state, cluster_doc([HEAD, W1, W2], "rc"))
    env = {**demo.env(step_seconds=0.3), cluster.ENV_VAR: str(state)}
    two_nodes = [*demo.overrides(tmp_path / CKPT), "cluster.num_nodes=2"]  # the file's two workers
    proc = subprocess.Popen(demo.argv(*two_nodes), cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        for line in proc.stdout:
            if line.rstrip("\n") == "=" * 25 + " Step 3/20 " + "=" * 25:
                write_atomic(state, cluster_doc([HEAD, W1], "rc"))
                break
        rest, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, err
    node_id = cluster.RayNode.from_json(cluster_doc([W2], "rc")["pods"][0]).node_id
    assert err.rstrip().splitlines()[-2:] == [
        f"The actor died because its node has died. Node Id: {node_id}",
        "\tthe actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats"]
    assert "Traceback (most recent call last):" in err and "ray.exceptions.ActorDiedError: " in err
    assert "gke-node-b" in err
    assert "Max number of steps" not in rest
    steps = sorted(int(p.name.split("_")[1]) for p in (tmp_path / CKPT).glob("step_*"))
    assert steps and steps[-1] >= 2
    write_atomic(state, cluster_doc([HEAD, W1, W2], "rc"))
    again = subprocess.run(demo.argv(*two_nodes), cwd=tmp_path,
                           env={**demo.env(step_seconds=0.0), cluster.ENV_VAR: str(state)},
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    headers = [int(m.group(1)) for line in again.stdout.splitlines()
               if (m := re.fullmatch(r"=+ Step (\d+)/20 =+", line))]
    assert headers[0] == steps[-1] + 1 and headers[-1] == 20
