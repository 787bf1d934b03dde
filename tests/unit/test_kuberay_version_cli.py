"""`rltui sandbox start --kuberay-version V` and what rltui prints for a KubeRay without the
HeadPodReady condition: the flag is checked before anything starts and reaches the daemon; the
equivalent script waits on the pods, which works on every KubeRay."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from rltui.cli import main
from rltui.config import parse_config
from rltui_sandbox import manage
from rltui.script import equivalent_script


@pytest.mark.parametrize("bad", ["1.0.0", "9.9", "latest"])
def test_an_unsupported_version_is_one_line_and_exit_2(bad, capsys, monkeypatch) -> None:
    monkeypatch.setattr(manage, "start", lambda *a, **k: pytest.fail("nothing may start"))
    assert main(["sandbox", "start", "--kuberay-version", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("--kuberay-version: KubeRay version")
    assert "1.1.0 to 1.7.0" in err


def test_the_version_reaches_the_daemon(tmp_path, monkeypatch) -> None:
    seen: list[list[str]] = []

    class Exited:
        def __init__(self, argv, **kwargs) -> None:
            seen.append(argv)

        def poll(self) -> int:
            return 3

    monkeypatch.setattr(manage.subprocess, "Popen", Exited)
    with pytest.raises(manage.SandboxError):
        manage.start(root=tmp_path, kuberay_version="1.2.2")
    assert seen[0][seen[0].index("--kuberay-version") + 1] == "1.2.2"
    with pytest.raises(manage.SandboxError):
        manage.start(root=tmp_path)
    assert "--kuberay-version" not in seen[1]   # the daemon's default: versions.DEFAULT


FAKE_KUBECTL = r"""#!/bin/bash
# kubectl against a KubeRay 1.2 cluster: the RayCluster never gets a HeadPodReady condition.
echo "$*" >> "$LOG"
case "$*" in
  "wait raycluster"*) echo "error: timed out waiting for the condition on rayclusters/x" >&2; exit 1;;
  "get pods -l"*node-type=head*) echo pod/ray-a4-gpu-spot-head-abcde;;
  "get pods -l"*node-type=worker*) for i in $(seq "$WORKERS"); do echo "pod/ray-a4-gpu-spot-worker-$i"; done;;
  "wait pod"*) exit 0;;
  *) exit 1;;
esac
"""


def test_the_script_waits_on_the_pods_which_works_without_the_condition(tmp_path: Path) -> None:
    cfg = parse_config({"PROJECT_ID": "rl-script-kr", "NUM_NODES": "2", "HF_TOKEN": "hf_" + "x" * 30})
    script = equivalent_script(cfg)
    start = script.index("  # Ready means")
    block = script[start:script.index("\n}", start)]
    (tmp_path / "kubectl").write_text(FAKE_KUBECTL)
    (tmp_path / "kubectl").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "LOG": str(tmp_path / "log"),
           "WORKERS": str(cfg.num_nodes)}
    subprocess.run(["bash", "-c", "set -euo pipefail\n" + block], env=env, check=True, timeout=30)
    calls = (tmp_path / "log").read_text().splitlines()
    assert "wait pod -l ray.io/cluster=ray-a4-gpu-spot,ray.io/node-type=head --for=condition=Ready" \
           " --timeout=60m" in calls
    assert any(c.startswith("wait pod -l ray.io/cluster=ray-a4-gpu-spot,ray.io/node-type=worker") for c in calls)
    assert not any(c.startswith("wait raycluster") for c in calls)
