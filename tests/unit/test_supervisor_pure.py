"""The job supervisor's pure parts: what it reads from the log, what makes a failure a lost node,
the objects `rltui submit` makes for it, and that its code runs on the Ray image's Python."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import pytest

from rltui import manifests_supervisor as ms
from rltui.config import RLConfig, parse_config
from rltui.oncluster import pods
from rltui.oncluster import supervisor as sup
from rltui.plan.supervision import parse_state

DATA = Path(__file__).resolve().parents[1] / "data"


def _cfg() -> RLConfig:
    return parse_config({"PROJECT_ID": "team-rl-sandbox-42"})


def test_the_supervisor_reads_steps_and_completed_saves_as_the_wizard_does() -> None:
    """Its two regexes agree with joblog's parser on the noisy NeMo-RL sample (tests/data)."""
    expected = json.loads((DATA / "grpo_noisy.expected.json").read_text())
    text = (DATA / "grpo_noisy.log").read_text()
    progress = sup.Progress()
    for cut in range(0, len(text), 997):  # any chunking: the log grows as the job runs
        progress.feed(text[:cut])
    progress.feed(text)
    assert progress.first_step == expected["steps"][0]["step"]
    assert progress.step == expected["steps"][-1]["step"]
    assert progress.total == expected["steps"][-1]["total_steps"]
    assert progress.saved == expected["checkpoints"][-1]["step"]
    assert progress.ended


def test_a_save_counts_only_once_the_driver_goes_on() -> None:
    progress = sup.Progress()
    progress.feed("========================= Step 3/20 =========================\n"
                  "Saving checkpoint for step 2...\n")
    assert progress.saved is None  # still writing tmp_step_2: a preemption now loses it
    progress.feed("========================= Step 3/20 =========================\n"
                  "Saving checkpoint for step 2...\n"
                  "(MegatronPolicyWorker[rank=0] pid=1, ip=10.0.0.1) ===== Step 9/20 =====\n"
                  "========================= Step 4/20 =========================\n")
    assert (progress.saved, progress.step) == (2, 4)  # a worker's line is not the driver's


def _epochs(*epochs: list[str], total_epochs: int = 2, per_epoch: int = 3) -> str:
    """NeMo-RL's headers (grpo.py `grpo_train`): the step count restarts each epoch."""
    out = []
    for e, lines in enumerate(epochs, 1):
        out.append(f"========================= Epoch {e}/{total_epochs} =========================")
        out += [f"========================= Step {x}/{per_epoch} ========================="
                if x.isdigit() else x for x in lines]
    return "\n".join(out) + "\n"


def test_saves_and_steps_after_the_first_epoch_count_as_the_saves_do() -> None:
    """Saves print the run-wide step: a save in epoch 2 completes at the next header of epoch 2,
    and the step a lost attempt reached is compared with it in the same count."""
    progress = sup.Progress()
    progress.feed(_epochs(["1", "2", "3", "Saving checkpoint for step 3..."],
                          ["1", "2", "Saving checkpoint for step 5...", "3"]))
    assert (progress.step, progress.total, progress.epoch, progress.total_epochs) == (3, 3, 2, 2)
    assert (progress.global_step, progress.saved) == (6, 5)  # before: saved stayed at 3


def test_an_attempt_resumed_in_the_second_epoch_starts_at_the_saved_step() -> None:
    progress = sup.Progress()
    progress.feed("========================= Epoch 2/2 =========================\n"
                  "========================= Step 3/3 =========================\n")
    assert progress.first_step == 6


def _pod(name: str, uid: str, *, node: str = "n1", created: str = "2026-12-01T10:00:00Z", ready: bool = True,
         restarts: int = 0) -> dict:
    return {"metadata": {"name": name, "uid": uid, "creationTimestamp": created},
            "spec": {"nodeName": node},
            "status": {"phase": "Running" if ready else "Pending",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "containerStatuses": [{"restartCount": restarts}]}}


def test_a_lost_node_is_read_from_the_pods_never_from_the_error_text() -> None:
    started = pods.stamp("2026-12-01T10:05:00Z")
    head, worker = _pod("rc-head", "u1"), _pod("rc-worker-a", "u2", node="gke-gpu-1")
    before = sup.pod_snapshot([head, worker])
    assert sup.lost_node(before, [head, worker], started) is None  # a Python error: not retried
    assert "rc-worker-a on node gke-gpu-1 was lost" in (sup.lost_node(before, [head], started) or "")
    replaced = _pod("rc-worker-b", "u3", node="gke-gpu-1", created="2026-12-01T10:09:00Z")
    assert "rc-worker-a on node gke-gpu-1 was lost" in (sup.lost_node(before, [head, replaced], started) or "")
    # Replaced before the supervisor first looked: its creation time still gives it away.
    late = sup.pod_snapshot([head, replaced])
    assert "recreated" in (sup.lost_node(late, [head, replaced], started) or "")
    assert "restarted" in (sup.lost_node(before, [head, _pod("rc-worker-a", "u2", restarts=1)], started) or "")
    assert "not running" in (sup.lost_node(before, [head, _pod("rc-worker-a", "u2", ready=False)], started) or "")
    # A node with the head and a worker: the head is named (the job table went with it).
    head["metadata"]["labels"] = {"ray.io/node-type": "head"}
    assert (sup.lost_node(sup.pod_snapshot([head, worker]), [], started) or "").startswith("the Ray head's pod rc-head")


def test_whole_means_the_head_and_every_worker_replica() -> None:
    rc = {"spec": {"workerGroupSpecs": [{"replicas": 7}, {"replicas": 2, "numOfHosts": 2},
                                        {"replicas": 5, "suspend": True}]}}
    assert sup.desired_pods(rc) == 1 + 7 + 4


def test_the_supervisor_objects_give_it_no_secrets_and_keep_it_off_spot_nodes() -> None:
    cfg = _cfg()
    job = "rltui-20261201-093000-ab12cd"
    spec = ms.run_spec(cfg, job, entrypoint="bash run_nemo_rl.sh", runtime_env={"env_vars": {"A": "1"}},
                       metadata={}, submitted_at=1.0)
    objs = {o["kind"] + "/" + o["metadata"]["name"]: o for o in ms.supervisor_objects(
        cfg, job, spec, {"run_nemo_rl.sh": "echo hi\n"})}
    role = objs[f"Role/{ms.deployment_name(job)}"]
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert "secrets" not in resources and "*" not in resources
    assert all("*" not in rule["verbs"] for rule in role["rules"])
    cm_rule = next(r for r in role["rules"] if r["resources"] == ["configmaps"])
    assert cm_rule["resourceNames"] == [ms.run_configmap(job)] and "create" not in cm_rule["verbs"]
    dep = objs[f"Deployment/{ms.deployment_name(job)}"]
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == ms.NAME
    assert pod["containers"][0]["image"] == "rayproject/ray:2.46.0"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]} in terms[0]["matchExpressions"]
    # The system pool's taint only: never the GPU nodes' nvidia.com/gpu taint.
    assert pod["tolerations"] == [{"key": "components.gke.io/gke-managed-components", "operator": "Equal",
                                   "value": "true", "effect": "NoSchedule"}]
    run = objs[f"ConfigMap/{ms.run_configmap(job)}"]
    assert json.loads(run["data"]["spec.json"])["max_attempts"] == 3
    assert run["data"]["job.run_nemo_rl.sh"] == "echo hi\n"
    assert parse_state(job, run["data"]).latest.id == job
    for obj in objs.values():
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "rltui"


def test_the_supervisor_code_is_what_the_configmap_carries_and_parses_as_python_3_9() -> None:
    sources = ms.supervisor_sources()
    folder = Path(sup.__file__).parent
    assert list(sources) == list(ms.CODE_FILES) and ms.CODE_FILES[0] == "supervisor.py"
    assert sources == {name: (folder / name).read_text() for name in ms.CODE_FILES}
    # Every module the supervisor imports from its own folder travels with it.
    own = {name.removesuffix(".py") for name in ms.CODE_FILES}
    assert {"watchdog", "events", "webhook", "pods"} <= own
    for source in sources.values():
        ast.parse(source, feature_version=(3, 9))
        imported = {n.names[0].name.split(".")[0] for n in ast.walk(ast.parse(source))
                    if isinstance(n, ast.Import)} | {n.module.split(".")[0] for n in ast.walk(ast.parse(source))
                                                      if isinstance(n, ast.ImportFrom) and n.module}
        stdlib = {"__future__", "calendar", "collections", "http", "json", "logging", "os", "queue", "re", "signal",
                  "socket", "ssl", "statistics", "sys", "tempfile", "threading", "time", "urllib", "pathlib",
                  "typing", "asyncio", "enum"}
        assert imported <= stdlib | {"ray", "google"} | own, imported - stdlib - own


def test_the_recovery_line_says_what_the_monitor_shows() -> None:
    state = {"status": "RUNNING", "attempts": [
        {"id": "r", "reason": "submitted", "resumed_from_step": 0, "last_step": 9, "status": "FAILED"},
        {"id": "r-a2", "reason": "preempted", "resumed_from_step": 8, "recover_s": 190.4, "first_step": 9}]}
    run = parse_state("r", {"state.json": json.dumps(state)})
    assert run.recovery_line() == "preempted at step 9, resumed from step 8 in 3:10"


def test_the_supervisors_waits_are_the_clouds_times_scaled_and_its_polls_a_second_at_least() -> None:
    cfg, job = _cfg(), "rltui-20261201-093000-ab12cd"
    real = ms.run_spec(cfg, job, entrypoint="x", runtime_env={}, metadata={}, submitted_at=1.0)
    fast = ms.run_spec(cfg, job, entrypoint="x", runtime_env={}, metadata={}, submitted_at=1.0, time_scale=1 / 300)
    assert (real["poll_s"], real["node_grace_s"], real["gcs_reconnect_s"]) == (ms.POLL_S, ms.NODE_GRACE_S,
                                                                             ms.GCS_RECONNECT_S)
    assert fast["poll_s"] == 1.0 and fast["node_grace_s"] == round(ms.NODE_GRACE_S / 300, 3)


def _python39() -> str | None:
    import glob
    import shutil

    found = shutil.which("python3.9")
    if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
        return found
    # pyenv's 3.9 (the tests run with HOME elsewhere: find pyenv's root from PATH instead).
    roots = {os.environ.get("PYENV_ROOT", "")} | {str(Path(p).parent) for p in os.environ.get("PATH", "").split(":")
                                                  if p.endswith("/.pyenv/shims") or p.endswith("/.pyenv/bin")}
    found = [hit for root in sorted(roots - {""}) for hit in sorted(glob.glob(f"{root}/versions/3.9*/bin/python3.9"))]
    return found[0] if found else None


def test_the_shipped_files_import_under_python_3_9(tmp_path: Path) -> None:
    """The image's Python is 3.9: the ConfigMap's flat folder of files must import there, not
    only parse (a StrEnum or a 3.10 call would crash-loop the supervisor's pod at import)."""
    python = _python39()
    if python is None:
        pytest.skip("no Python 3.9 on this machine (pyenv's 3.9 is where these tests look)")
    for name, text in ms.supervisor_sources().items():
        (tmp_path / name).write_text(text)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import supervisor, jobstatus; "
            "print(sys.version_info[:2], sorted(jobstatus.FINAL), str(jobstatus.JobStatus.FAILED))")
    ran = subprocess.run([python, "-I", "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["(3,", "9)", "['FAILED',", "'STOPPED',", "'SUCCEEDED']", "FAILED"], ran.stdout
