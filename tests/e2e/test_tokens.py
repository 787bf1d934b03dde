"""Tokens changed in env.sh after `up` are the ones the next job sees, and no token sits where
Ray's API (or the pods' env) would show it. The headless commands run as a user runs them,
against the session's sandbox, in a project of their own; the job (the GRPO demo) reports only
fingerprints of the tokens it found (sandbox/rltui_sandbox/grpo_demo/tokens.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

DATA = Path(__file__).parent.parent / "data"
PROJECT = "team-rl-tokens-7"
OLD_TOKEN = "hf_" + "0ldT0ken" * 4
NEW_TOKEN = "hf_" + "N3wT0ken" * 4
WANDB_KEY = "W4ndbK3y" * 5   # 40 characters, as W&B's keys
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def sha12(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def write_env(path: Path, hf_token: str, wandb_key: str = "") -> None:
    text = (DATA / "env" / "devrel-demos.env.sh").read_text()
    text = (text.replace('PROJECT_ID="team-rl-sandbox-42"', f'PROJECT_ID="{PROJECT}"')
                .replace('HF_TOKEN=""', f'HF_TOKEN="{hf_token}"')
                .replace('WANDB_API_KEY=""', f'WANDB_API_KEY="{wandb_key}"')
                .replace('NUM_NODES="8"', 'NUM_NODES="2"'))
    path.write_text(text + 'export MAX_STEPS="2"\n')
    path.chmod(0o600)


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    from tests.headless_user import private_sandbox

    home = tmp_path_factory.mktemp("tokens")
    env_sh = home / "env.sh"
    write_env(env_sh, OLD_TOKEN)
    # A sandbox of its own: not in the shared sandbox's xdist group, so it runs beside it.
    sandbox_dir = tmp_path_factory.mktemp("tokensbx")
    with private_sandbox(sandbox_dir, speed=300.0, kuberay_version="1.6.0", timeout=60.0) as sandbox:
        env = {**os.environ, "RLTUI_SANDBOX_DIR": str(sandbox_dir), "XDG_STATE_HOME": str(home / "state"),
               "HOME": str(home)}
        yield {"env": env, "env_sh": env_sh, "home": home, "status": sandbox, "root": sandbox_dir, "outputs": []}


def rltui(user, *args, timeout=240):
    out = subprocess.run([sys.executable, "-m", "rltui.cli", *args, "--env", str(user["env_sh"]),
                          "--sandbox"], env=user["env"], capture_output=True, text=True,
                         timeout=timeout, cwd=user["home"])
    user["outputs"].append(out.stdout + out.stderr)
    return out


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=20) as resp:
        return resp.read().decode()


def test_a_token_changed_after_up_is_the_one_the_next_job_sees(user):
    """Up with one HF token; then env.sh gets another and a W&B key (W&B turns on): the next
    submit's job reads the new token and the key, from the Secret's files."""
    up = rltui(user, "up", "--yes")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    write_env(user["env_sh"], NEW_TOKEN, WANDB_KEY)
    out = rltui(user, "submit", "--follow")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = out.stdout
    assert log.rstrip().splitlines()[-1] == "SUCCEEDED", log[-3000:]
    assert "logger.wandb_enabled=True" in log
    assert f"rltui sandbox: Hugging Face token sha256:{sha12(NEW_TOKEN)} from the file HF_TOKEN_PATH" in log
    assert sha12(OLD_TOKEN) not in log
    assert f"rltui sandbox: W&B API key sha256:{sha12(WANDB_KEY)} from the netrc file NETRC" in log
    assert "variables with a token: none" in log
    user["job"] = log.splitlines()[0]


def test_no_token_in_rays_answers_the_pods_or_anything_rltui_wrote(user):
    """Ray's job API (the jobs, their runtime envs), the pods as the API has them, the Ray head
    process's environment, rltui's output and state folder: no token anywhere."""
    from rltui.cloud.endpoints import Endpoints
    from rltui.config import parse_config
    from rltui.envfile import EnvFile
    from rltui.plan.context import Context

    assert user.get("job"), "the job of the test before"
    cfg = parse_config(EnvFile.read(user["env_sh"]).values())

    async def ray_answers() -> list[str]:
        ctx = Context(cfg, Endpoints.sandbox(user["status"]))
        try:
            url = await ctx.dashboard()
            texts = []
            for path in ("/api/jobs/", f"/api/jobs/{user['job']}", "/api/v0/actors?detail=1",
                         "/api/v0/runtime_envs?detail=1"):
                # In a thread: the port-forward behind `url` runs on this loop.
                texts.append(await asyncio.to_thread(get, url + path))
            return texts
        finally:
            await ctx.close()

    texts = asyncio.run(ray_answers())
    job = json.loads(texts[1])
    assert set(job["runtime_env"]["env_vars"]) == {"HF_HOME", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME",
                                                    "RLTUI_SECRET_FINGERPRINTS"}
    kubectl = ["kubectl", "--kubeconfig", user["status"]["kubeconfig"]]
    pods = subprocess.run([*kubectl, "get", "pods", "-o", "json"], capture_output=True, text=True, timeout=60)
    assert pods.returncode == 0, pods.stderr
    assert "secretKeyRef" not in pods.stdout
    texts.append(pods.stdout)
    children = json.loads((user["root"] / "children.json").read_text())["pids"]
    for pid in children:
        try:
            texts.append(Path(f"/proc/{pid}/environ").read_text(errors="replace"))
        except OSError:
            pass
    texts += user["outputs"]
    texts += [p.read_text(errors="replace") for p in (user["home"] / "state").rglob("*") if p.is_file()]
    for text in texts:
        for secret in (OLD_TOKEN, NEW_TOKEN, WANDB_KEY):
            assert secret not in text
