"""The files the codelab writes by hand: same fields, plus the Secret wiring, and no secret."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from rltui import manifests
from rltui.config import parse_config
from rltui.script import equivalent_script

CODELAB = Path(__file__).parent.parent / "data" / "codelab"
TOKEN, WANDB = "hf_" + "Secr3t" * 6, "wandb" + "K3y" * 10
ENV = {"PROJECT_ID": "team-rl-sandbox-42", "HF_TOKEN": TOKEN, "WANDB_API_KEY": WANDB}


@pytest.fixture
def cfg():
    return parse_config(ENV)


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


def test_raycluster_matches_the_codelab_plus_secret_env(cfg):
    expected = yaml.safe_load((CODELAB / "ray-cluster.yaml").read_text())
    ours = yaml.safe_load(manifests.codelab_files(cfg, None)[manifests.RAYCLUSTER_FILE])
    # The one deliberate difference: the codelab says 2.54.0, the nemo-rl v0.4.0 image runs 2.46.0.
    assert expected["spec"].pop("rayVersion") == "2.54.0"
    assert_holds(expected, ours)
    assert ours["spec"]["rayVersion"] == "2.46.0"
    for spec in (ours["spec"]["headGroupSpec"]["template"]["spec"],
                 ours["spec"]["workerGroupSpecs"][0]["template"]["spec"]):
        env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in spec["containers"][0]["env"]}
        assert env == {k: {"name": "ray-a4-gpu-spot-job-secrets", "key": k, "optional": True}
                       for k in ("HF_TOKEN", "WANDB_API_KEY")}


def test_the_secret_holds_the_tokens_only_in_memory(cfg):
    secret = manifests.job_secret(cfg)
    assert secret["stringData"] == {"HF_TOKEN": TOKEN, "WANDB_API_KEY": WANDB}
    assert secret["metadata"]["name"] == manifests.secret_name(cfg)
    no_wandb = manifests.job_secret(parse_config({**ENV, "WANDB_API_KEY": ""}))
    assert list(no_wandb["stringData"]) == ["HF_TOKEN"]


def test_no_written_file_and_no_script_carries_a_secret(cfg):
    texts = list(manifests.codelab_files(cfg, "10.90.0.2").values()) + [equivalent_script(cfg)]
    for text in texts:
        assert TOKEN not in text and WANDB not in text
    assert "HF_TOKEN" not in json.dumps(manifests.runtime_env(cfg))


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


def test_runtime_env_and_rayignore(cfg):
    assert manifests.runtime_env(cfg) == {"env_vars": {
        "HF_HOME": "/lustre/huggingface_cache", "GLOO_SOCKET_IFNAME": "eth0",
        "NCCL_SOCKET_IFNAME": "eth0"}}
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
