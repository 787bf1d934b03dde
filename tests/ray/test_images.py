"""Which environment runs which image (sandbox/rltui_sandbox/images.py), and what a user sees when the
sandbox's Ray environment is missing. No Ray head here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rltui_sandbox import images
from rltui_sandbox.nemo_rl_tree import install_fake_nemo_rl, write_uv_shim

REPO = Path(__file__).resolve().parents[2]


def test_the_requirements_pin_the_ray_the_images_run() -> None:
    """`make ray-env` installs what images.py expects (nemo-rl v0.4.0 pins ray[default]==2.46.0)."""
    pins = [line.strip() for line in images.REQUIREMENTS.read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert f"ray[default]=={images.RAY_VERSION}" in pins
    assert images.IMAGES == {"nvcr.io/nvidia/nemo-rl:v0.4.0": "2.46.0", "rayproject/ray:2.46.0": "2.46.0"}


def test_the_images_run_with_the_ray_environment() -> None:
    env = images.ray_env()
    assert env.root == REPO / ".venv-ray"
    for image in ("nvcr.io/nvidia/nemo-rl:v0.4.0", "rayproject/ray:2.46.0", "docker.io/rayproject/ray:2.46.0"):
        assert images.for_image(image) == env
    ran = subprocess.run([str(env.python), "-c", "import ray, numpy, yaml; print(ray.__version__, numpy.__version__)"],
                         capture_output=True, text=True, timeout=60)
    assert ran.stdout.split() == ["2.46.0", "1.26.4"], ran.stderr


@pytest.mark.parametrize("image", ["rayproject/ray:2.54.0", "rayproject/ray:2.46.0-py311", "python:3.12",
                                   "nvcr.io/nvidia/nemo-rl:v0.3.1"])
def test_an_image_without_an_environment_is_unavailable(image: str) -> None:
    with pytest.raises(images.ImageUnavailable, match=re.escape(f'no local environment runs image "{image}"')):
        images.for_image(image)


def test_a_missing_or_other_environment_names_the_command_that_installs_it(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(images.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(images.MissingRayEnv, match=r"not installed at .*nowhere \(from RLTUI_SANDBOX_RAY_ENV\): "
                                                   r"run `make ray-env`"):
        images.for_image("rayproject/ray:2.46.0")
    other = tmp_path / "other"
    (other / "bin").mkdir(parents=True)
    for name in ("python", "ray"):
        (other / "bin" / name).touch()
    (other / "lib" / "python3.11" / "site-packages" / "ray-2.60.0.dist-info").mkdir(parents=True)
    monkeypatch.setenv(images.ENV_VAR, str(other))
    with pytest.raises(images.MissingRayEnv, match=r"holds Ray 2\.60\.0, not 2\.46\.0: run `make ray-env`"):
        images.ray_env()


def test_sandbox_start_without_the_environment_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, images.ENV_VAR: str(tmp_path / "nowhere"), "RLTUI_SANDBOX_DIR": str(tmp_path / "sbx")}
    ran = subprocess.run([sys.executable, "-m", "rltui.cli", "sandbox", "start"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 1
    assert ran.stdout == ""
    assert ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.startswith("sandbox: the sandbox's Ray 2.46.0 environment")
    assert ran.stderr.rstrip().endswith("run `make ray-env`")
    assert not (tmp_path / "sbx" / "daemon.json").exists()


def test_the_codelab_job_runs_the_demo_with_the_images_python(tmp_path: Path) -> None:
    """`uv run python examples/run_grpo_math.py` (run_nemo_rl.sh) runs the demo under Ray 2.46.0's
    Python; the stand-in loads no rltui module beyond rltui, rltui_sandbox and the demo (those
    must stay light: the image's environment has only Ray, numpy and Ray's dependencies)."""
    nemo_rl = install_fake_nemo_rl(tmp_path / "nemo-rl")
    uv = write_uv_shim(tmp_path / "bin")
    probe = ("import runpy, sys\n"
             "sys.argv = ['examples/run_grpo_math.py', *sys.argv[1:]]\n"
             "try:\n"
             "    runpy.run_path('examples/run_grpo_math.py', run_name='__main__')\n"
             "finally:\n"
             "    import ray\n"
             "    other = sorted(m for m in sys.modules if m.startswith('rltui') and m not in ('rltui', 'rltui_sandbox')"
             " and not m.startswith('rltui_sandbox.grpo_demo'))\n"
             "    print('PROBE', ray.__version__, sys.prefix, other, sep='|', file=sys.stderr)\n")
    env = {**os.environ, "RLTUI_DEMO_STEP_SECONDS": "0", "RLTUI_DEMO_CHECKPOINT_MB": "0.1"}
    ran = subprocess.run([str(uv), "run", "python", "-c", probe, "--config",
                          "examples/configs/grpo_math_70B_megatron.yaml", "grpo.max_num_steps=2",
                          "checkpointing.enabled=True", "checkpointing.save_period=2",
                          f"checkpointing.checkpoint_dir={tmp_path / 'ckpt'}"],
                         cwd=nemo_rl, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "=" * 25 + " Step 2/2 " + "=" * 25 in ran.stdout
    probe_line = next(line for line in ran.stderr.splitlines() if line.startswith("PROBE|"))
    assert probe_line.split("|")[1:] == ["2.46.0", str(images.ray_env().root), "[]"]
    assert (tmp_path / "ckpt" / "step_2").is_dir()


def test_the_demos_actor_died_error_is_ray_246s_own() -> None:
    """grpo_demo/cluster.py builds ray.exceptions.ActorDiedError from ray.core.generated.common_pb2:
    under the image's Ray it is Ray 2.46.0's class, with Ray's text."""
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "from rltui_sandbox.grpo_demo import cluster\n"
            "node = cluster.RayNode('w-1', 'uid-1', 0, 'gke-n1', '10.0.0.2', '10.8.0.5', 'worker', 8, True)\n"
            "err = cluster.actor_died_error(cluster.Actor('lm_policy-0-0', 'MegatronPolicyWorker', node),\n"
            "                               cluster.HEALTH_CHECK_FAILED, False)\n"
            "import ray; print(type(err).__module__, type(err).__name__, ray.__version__); print(err)\n")
    ran = subprocess.run([str(images.ray_env().python), "-c", code, str(REPO / "sandbox")], capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0, ran.stderr
    first, *text = ran.stdout.splitlines()
    assert first == "ray.exceptions ActorDiedError 2.46.0"
    assert text[0] == "The actor died unexpectedly before finishing this task."
    assert "\tname: lm_policy-0-0" in text and "\tip: 10.8.0.5" in text
    assert text[-1] == ("\tthe actor's node was terminated unexpectedly: health check failed due to missing too "
                        "many heartbeats")
