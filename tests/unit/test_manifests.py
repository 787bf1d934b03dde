"""The files the codelab writes by hand: same fields, plus the Secret wiring, and no secret."""

import hashlib
import json
import netrc
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from rltui import manifests
from rltui.config import parse_config
from rltui.script import equivalent_script

CODELAB = Path(__file__).parent.parent / "data" / "codelab"
TOKEN, WANDB = "hf_" + "Secr3t" * 6, "wandb" + "K3y" * 10
HOOK = "https://hooks.slack.com/services/T0000/B0000/" + "W3bh00k" * 4   # NOTIFY_WEBHOOK: a secret too
ENV = {"PROJECT_ID": "team-rl-sandbox-42", "HF_TOKEN": TOKEN, "WANDB_API_KEY": WANDB, "NOTIFY_WEBHOOK": HOOK}


@pytest.fixture
def cfg():
    return parse_config(ENV)


def sha12(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def assert_holds(expected, actual, path="$"):
    """Every field of the codelab's object is in ours with the same value (lists item by item)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} missing"
            assert_holds(value, actual[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_holds(e, a, f"{path}[{i}]")
    else:
        assert str(actual) == str(expected), f"{path}: {actual!r} != {expected!r}"


def test_pv_and_pvc_match_the_codelab_field_by_field(cfg):
    expected = list(yaml.safe_load_all((CODELAB / "rl-lustre-volume.yaml").read_text()))
    ours = list(yaml.safe_load_all(manifests.codelab_files(cfg, "10.90.0.2")[manifests.VOLUME_FILE]))
    assert len(ours) == 2
    for e, a in zip(expected, ours):
        assert_holds(e, a)
    assert ours[1]["spec"]["storageClassName"] == ""


def test_raycluster_matches_the_codelab_plus_the_secret_volume(cfg):
    expected = yaml.safe_load((CODELAB / "ray-cluster.yaml").read_text())
    ours = yaml.safe_load(manifests.codelab_files(cfg, None)[manifests.RAYCLUSTER_FILE])
    # The one deliberate difference: the codelab says 2.54.0, the nemo-rl v0.4.0 image runs 2.46.0.
    assert expected["spec"].pop("rayVersion") == "2.54.0"
    assert ours["spec"]["rayVersion"] == "2.46.0"
    secret_volume = {"name": "job-secrets", "secret": {"secretName": "ray-a4-gpu-spot-job-secrets",
                                                       "optional": True}}
    secret_mount = {"name": "job-secrets", "mountPath": "/var/run/secrets/rltui", "readOnly": True}
    for spec in (ours["spec"]["headGroupSpec"]["template"]["spec"],
                 ours["spec"]["workerGroupSpecs"][0]["template"]["spec"]):
        container = spec["containers"][0]
        # The tokens reach every Ray container as files only: no env var holds one. The head's one
        # env var makes the dashboard serve the image's symlinked static files.
        env = container.pop("env", [])
        assert env == ([{"name": "RAY_DASHBOARD_BUILD_FOLLOW_SYMLINKS", "value": "1"}]
                       if container["name"] == "ray-head" else []) and "envFrom" not in container
        assert spec["volumes"].pop() == secret_volume
        assert container["volumeMounts"].pop() == secret_mount
    assert_holds(expected, ours)


NETRC = f"machine api.wandb.ai\n  login user\n  password {WANDB}\n"


def test_the_secret_holds_the_tokens_only_in_memory(cfg):
    secret = manifests.job_secret(cfg)
    assert secret["stringData"] == {"HF_TOKEN": TOKEN, "netrc": NETRC}
    assert "data" not in secret
    assert secret["metadata"]["name"] == manifests.secret_name(cfg)
    no_wandb = parse_config({**ENV, "WANDB_API_KEY": ""})
    assert list(manifests.job_secret(no_wandb)["stringData"]) == ["HF_TOKEN"]


def test_a_token_taken_out_of_env_sh_leaves_the_secret(cfg):
    """Applied over a Secret that has the W&B key (and an older rltui's WANDB_API_KEY), a config
    without it deletes both keys (null in the merge patch); a key not rltui's stays."""
    no_wandb = parse_config({**ENV, "WANDB_API_KEY": ""})
    secret = manifests.job_secret(no_wandb, present=["HF_TOKEN", "netrc", "WANDB_API_KEY", "mine"])
    assert secret["data"] == {"WANDB_API_KEY": None, "netrc": None}
    assert secret["stringData"] == {"HF_TOKEN": TOKEN}


def test_applying_the_secret_again_drops_the_keys_env_sh_no_longer_sets(cfg):
    """`up` and `submit` apply it through apply_job_secret: the keys it has now (read back
    without values) that env.sh no longer sets are deleted."""
    import asyncio

    from rltui.plan.steps_kube import apply_job_secret

    class Kube:
        applied: list = []

        async def get(self, plural, name):
            return {"data": {"HF_TOKEN": "<redacted>", "netrc": "<redacted>", "WANDB_API_KEY": "<redacted>"}}

        async def apply(self, obj):
            self.applied.append(obj)

    kube = Kube()
    asyncio.run(apply_job_secret(kube, parse_config({**ENV, "WANDB_API_KEY": ""})))
    (secret,) = kube.applied
    assert secret["data"] == {"WANDB_API_KEY": None, "netrc": None} and secret["stringData"] == {"HF_TOKEN": TOKEN}


def test_the_wandb_key_file_is_a_netrc_wandb_finds(cfg, tmp_path):
    """wandb 0.21.1 reads its key from the netrc file NETRC names (apikey.api_key)."""
    from rltui_sandbox.grpo_demo import tokens

    path = tmp_path / "netrc"
    path.write_text(manifests.job_secret(cfg)["stringData"]["netrc"])
    assert netrc.netrc(str(path)).authenticators("api.wandb.ai")[2] == WANDB
    assert tokens.wandb_api_key({"NETRC": str(path)}) == (WANDB, "the netrc file NETRC")


def test_no_written_file_and_no_script_carries_a_secret(cfg):
    from rltui import manifests_supervisor as ms

    texts = list(manifests.codelab_files(cfg, "10.90.0.2").values()) + [equivalent_script(cfg)]
    texts += list(manifests.job_files(cfg).values())
    assert "W3bh00k" not in json.dumps(manifests.job_secret(cfg))   # the Ray pods' Secret: tokens only
    for text in texts:
        assert TOKEN not in text and WANDB not in text and HOOK not in text and "W3bh00k" not in text
    for fingerprints in (False, True):
        env = json.dumps(manifests.runtime_env(cfg, fingerprints=fingerprints))
        assert "HF_TOKEN\"" not in env and TOKEN not in env and WANDB not in env and HOOK not in env
    # NOTIFY_WEBHOOK is the supervisor's alone: its own Secret (in memory), mounted in its pod
    # only; spec.json, the code, the Deployment and the Role name it nowhere, and no Ray pod mounts it.
    job = "rltui-20261201-093000-ab12cd"
    spec = ms.run_spec(cfg, job, entrypoint="bash run_nemo_rl.sh", runtime_env=manifests.runtime_env(cfg),
                       metadata={}, submitted_at=1.0)
    objs = ms.supervisor_objects(cfg, job, spec, manifests.job_files(cfg))
    assert "W3bh00k" not in json.dumps(objs) and "W3bh00k" not in json.dumps(spec)
    secret = ms.notify_secret(cfg)
    assert secret is not None and secret["stringData"] == {ms.NOTIFY_KEY: HOOK}
    assert ms.notify_secret(parse_config({**ENV, "NOTIFY_WEBHOOK": ""})) is None
    pod = next(o for o in objs if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert ms.NOTIFY_VOLUME in pod["volumes"] and ms.NOTIFY_VOLUME["secret"]["optional"] is True
    assert ms.NOTIFY_SECRET not in json.dumps(manifests.ray_cluster(cfg))


def test_run_script_has_the_codelab_overrides_with_checkpointing_on(cfg):
    no_wandb = parse_config({**ENV, "WANDB_API_KEY": ""})
    script = manifests.run_script(no_wandb)
    expected = (CODELAB / "run_nemo_rl.overrides").read_text().splitlines()
    got = [o.replace('"${LUSTRE_MOUNT}"', "/lustre") for o in manifests.run_overrides(no_wandb)]
    assert got == expected
    assert "checkpointing.enabled=True" in script
    assert "--config examples/configs/grpo_math_70B_megatron.yaml" in script
    subprocess.run(["bash", "-n"], input=script.encode(), check=True)


def test_run_script_expands_to_the_codelab_paths_by_default(cfg, tmp_path):
    # Run the script with stand-ins for `uv` and the NeMo-RL tree; check the argv NeMo-RL gets.
    (tmp_path / "bin").mkdir()
    uv = tmp_path / "bin" / "uv"
    uv.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n')
    uv.chmod(0o755)
    script = tmp_path / "run.sh"
    script.write_text(manifests.run_script(parse_config({**ENV, "WANDB_API_KEY": ""})))
    mount = tmp_path / "lustre"
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "ARGS_OUT": str(tmp_path / "args"),
           "LUSTRE_MOUNT": str(mount), "NEMO_RL_DIR": str(tmp_path)}
    subprocess.run(["bash", str(script)], env=env, check=True, capture_output=True)
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:4] == ["run", "python", "examples/run_grpo_math.py", "--config"]
    assert f"checkpointing.checkpoint_dir={mount}/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1" in args
    assert "policy.model_name=Qwen/Qwen2.5-72B-Instruct" in args
    assert (mount / "huggingface_cache").is_dir() and (mount / "nemo_rl_qwen_72b_ds_cp").is_dir()


def _job(tmp_path, cfg, secrets, fingerprints_of=None, **env):
    """The run script as a job runs it: a stand-in `uv` records what NeMo-RL would get (its
    argv, and the token variables of its environment), the Secret's files in `secrets`."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    uv = tmp_path / "bin" / "uv"
    uv.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n'
                  'env | grep -E "^(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|WANDB_API_KEY|HF_TOKEN_PATH|NETRC)=" '
                  '> "$ENV_OUT" || true\n'
                  '[ -z "$HF_TOKEN_PATH" ] || sha256sum < "$HF_TOKEN_PATH" | cut -c1-12 > "$ENV_OUT.hf"\n')
    uv.chmod(0o755)
    script = tmp_path / "run.sh"
    script.write_text(manifests.run_script(cfg))
    base = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "ARGS_OUT": str(tmp_path / "args"),
            "ENV_OUT": str(tmp_path / "env"), "LUSTRE_MOUNT": str(tmp_path / "lustre"),
            "NEMO_RL_DIR": str(tmp_path), "SECRETS_MOUNT": str(secrets)}
    if fingerprints_of is not None:
        base["RLTUI_SECRET_FINGERPRINTS"] = manifests.secret_fingerprints(fingerprints_of)
    return subprocess.Popen(["bash", str(script)], env={**base, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _write_secret(folder, cfg):
    folder.mkdir(exist_ok=True)
    for key, value in manifests.job_secret(cfg)["stringData"].items():
        tmp = folder / f".{key}.tmp"
        tmp.write_text(value)
        tmp.replace(folder / key)


def test_the_job_gets_the_tokens_as_file_paths_never_as_values(cfg, tmp_path):
    """HF_TOKEN_PATH and NETRC name the Secret's files; a token variable the container still
    had (a RayCluster made before) never reaches NeMo-RL, whose init_ray would copy it."""
    secrets = tmp_path / "secrets"
    _write_secret(secrets, cfg)
    job = _job(tmp_path, cfg, secrets, fingerprints_of=cfg, HF_TOKEN="hf_stale", WANDB_API_KEY="stale")
    output, _ = job.communicate(timeout=30)
    assert job.returncode == 0, output
    env = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines())
    assert env == {"HF_TOKEN_PATH": f"{secrets}/HF_TOKEN", "NETRC": f"{secrets}/netrc"}
    assert TOKEN not in output and WANDB not in output and "Waiting" not in output


def test_the_job_waits_until_the_pod_has_the_secret_it_was_submitted_with(cfg, tmp_path):
    """The kubelet updates a mounted Secret at its next sync of the pod: a job submitted right
    after a token change waits for it, then runs with the new token."""
    old = parse_config({**ENV, "HF_TOKEN": "hf_" + "Old0" * 8})
    secrets = tmp_path / "secrets"
    _write_secret(secrets, old)
    job = _job(tmp_path, cfg, secrets, fingerprints_of=cfg)
    time.sleep(2.5)
    assert job.poll() is None, "the job ran with the old token"
    _write_secret(secrets, cfg)
    output, _ = job.communicate(timeout=30)
    assert job.returncode == 0, output
    assert "Waiting for the kubelet to update HF_TOKEN from Secret ray-a4-gpu-spot-job-secrets" in output
    assert "The tokens in" in output and "are current after" in output
    assert (tmp_path / "env.hf").read_text().strip() == sha12(TOKEN)
    assert TOKEN not in output


def test_a_job_whose_secret_never_comes_fails_saying_so(cfg, tmp_path):
    secrets = tmp_path / "secrets"
    _write_secret(secrets, parse_config({**ENV, "WANDB_API_KEY": ""}))   # the W&B key never lands
    job = _job(tmp_path, cfg, secrets, fingerprints_of=cfg, SECRET_WAIT_S="2")
    output, _ = job.communicate(timeout=30)
    assert job.returncode == 1
    assert "rltui: after 2 s, netrc in" in output and "still not what this job was submitted with" in output
    assert not (tmp_path / "args").exists(), "NeMo-RL must not start"
    # A RayCluster made before the Secret was a volume: told at once what to do.
    job = _job(tmp_path, cfg, tmp_path / "absent", fingerprints_of=cfg)
    output, _ = job.communicate(timeout=30)
    assert job.returncode == 1
    assert "no Secret volume at" in output and "kubectl delete raycluster ray-a4-gpu-spot" in output


def test_runtime_env_and_rayignore(cfg):
    assert manifests.runtime_env(cfg) == {"env_vars": {
        "HF_HOME": "/lustre/huggingface_cache", "GLOO_SOCKET_IFNAME": "eth0",
        "NCCL_SOCKET_IFNAME": "eth0"}}
    # A submit names the Secret it applied: the first 12 hex of each value's sha256.
    fingerprints = manifests.runtime_env(cfg, fingerprints=True)["env_vars"]["RLTUI_SECRET_FINGERPRINTS"]
    assert fingerprints == f"HF_TOKEN={sha12(TOKEN)} netrc={sha12(NETRC)}"
    no_wandb = parse_config({**ENV, "WANDB_API_KEY": ""})
    assert manifests.secret_fingerprints(no_wandb) == f"HF_TOKEN={sha12(TOKEN)} netrc=none"
    lines = manifests.rayignore().splitlines()
    assert {"xpkclusters/", ".git/", "*.sh.log", "env.sh"} <= set(lines)


def test_without_an_ip_the_pv_has_a_marked_placeholder(cfg):
    text = manifests.codelab_files(cfg, None)[manifests.VOLUME_FILE]
    assert "placeholder" in text.splitlines()[0]
    assert yaml.safe_load_all(text)  # still valid YAML
    assert "<LUSTRE_IP>" in text


def test_equivalent_script_is_valid_bash_and_refers_to_secrets_by_name(cfg):
    script = equivalent_script(cfg)
    subprocess.run(["bash", "-n"], input=script.encode(), check=True)
    assert '"$HF_TOKEN"' in script
    for words in ("xpk cluster create", "--update-addons=RayOperator=ENABLED,LustreCsiDriver=ENABLED",
                  "gcloud compute addresses create", "vpc-peerings connect",
                  "gcloud lustre instances create", "condition=HeadPodReady",
                  "ray job submit", "xpk cluster delete", "vpc-peerings delete",
                  "gcloud compute addresses delete"):
        assert words in script, words
    # Lustre's chain starts before xpk finishes (xpk runs in the background, waited for later).
    assert script.index("gcloud lustre instances create") < script.index('wait "$XPK_PID"')


def test_script_down_frees_the_network_before_xpk_deletes_it(cfg):
    """The plan's teardown order, rendered from the steps: the Lustre instance, the peering and
    the address go before `xpk cluster delete`, which cannot delete a network they hold."""
    script = equivalent_script(cfg)
    down = script[script.index("down() {"):]
    xpk = down.index("xpk cluster delete")
    for words in ("kubectl delete raycluster", "gcloud lustre instances delete", "vpc-peerings delete",
                  "gcloud compute addresses delete"):
        assert down.index(words) < xpk, words
    assert down.index("gcloud lustre instances delete") < down.index("vpc-peerings delete") < \
        down.index("gcloud compute addresses delete")
    # xpk runs from the one state folder rltui's own delete uses.
    assert f'cd "${{STATE}}/xpk/{cfg.project_id}/{cfg.cluster_name}" && xpk cluster delete' in down


def test_the_pv_names_the_filesystem_of_the_instance_mount_point(cfg):
    # An instance made by hand with --filesystem=rlfs mounts as 10.90.0.2@tcp:/rlfs, not /lustre.
    assert manifests.lustre_ip("10.90.0.2@tcp:/rlfs") == "10.90.0.2"
    assert manifests.lustre_filesystem("10.90.0.2@tcp:/rlfs") == "rlfs"
    assert manifests.lustre_filesystem("") == "lustre"
    pv = manifests.persistent_volume(cfg, "10.90.0.2", manifests.lustre_filesystem("10.90.0.2@tcp:/rlfs"))
    assert pv["spec"]["csi"]["volumeAttributes"] == {"ip": "10.90.0.2", "filesystem": "rlfs"}
