"""env.sh validation: every message names the variable, and no secret ever shows."""

import pytest
from hypothesis import given, settings, strategies as st

from rltui.config import (LUSTRE_TIERS, ConfigError, RLConfig, check_field, parse_config,
                          submit_problems)

GOOD = {"PROJECT_ID": "team-rl-sandbox-42", "ZONE": "us-east1-b", "REGION": "us-east1",
        "CLUSTER_NAME": "ray-a4-gpu-spot", "LUSTRE_INSTANCE_ID": "rl-demo-gpu-lustre",
        "LUSTRE_CAPACITY": "9000", "NUM_NODES": "8", "GPUS_PER_NODE": "8", "DEVICE_TYPE": "b200-8"}
TOKEN = "hf_" + "Zq8" * 12


def problems(**changes):
    values = {**GOOD, **changes}
    with pytest.raises(ConfigError) as info:
        parse_config(values)
    return {p.field: p.message for p in info.value.problems}


def test_the_codelab_defaults_are_valid_and_derive_the_network():
    cfg = parse_config(GOOD)
    assert cfg.network == "ray-a4-gpu-spot-net-0"
    assert cfg.address_name == "google-managed-services-ray-a4-gpu-spot-net-0"
    assert (cfg.pv_name, cfg.pvc_name) == ("rl-demo-gpu-lustre-pv", "rl-demo-gpu-lustre-pvc")
    assert cfg.device.accelerator == "nvidia-b200" and cfg.lustre_throughput == 1000


@pytest.mark.parametrize("field,value,words", [
    ("PROJECT_ID", "<YOUR_PROJECT_ID>", "placeholder"),
    ("PROJECT_ID", "{{PROJECT_ID}}", "placeholder"),
    ("PROJECT_ID", "My_Project", "not a project ID"),
    ("PROJECT_ID", "abc", "not a project ID"),
    ("PROJECT_ID", "ends-with-hyphen-", "not a project ID"),
    ("ZONE", "us-east1", "not a zone"),
    ("CLUSTER_NAME", "Ray-Cluster", "not a GKE cluster name"),
    ("CLUSTER_NAME", "a" * 41, "at most 40"),
    ("CLUSTER_NAME", "1cluster", "starting with a letter"),
    ("LUSTRE_INSTANCE_ID", "rl-lustre-", "not a Lustre instance ID"),
    ("LUSTRE_INSTANCE_ID", "x" * 64, "not a Lustre instance ID"),
    ("NUM_NODES", "0", "at least 1"),
    ("NUM_NODES", "eight", "whole number"),
    ("DEVICE_TYPE", "tpu-v9", "not a known device type"),
    ("LUSTRE_THROUGHPUT", "300", "must be one of 125, 250, 500, 1000"),
    ("CHECKPOINT_METRIC", "accuracy", "val:"),
    ("CHECKPOINT_DIR", "/tmp/ckpt", "/lustre/"),
    ("MODEL_NAME", "Qwen'; rm -rf /", "may hold only"),
])
def test_a_bad_field_is_named_with_what_to_do(field, value, words):
    found = problems(**{field: value})
    assert field in found, found
    assert words in found[field]


def test_region_must_be_the_zone_without_its_last_part():
    assert problems(REGION="us-west1")["REGION"] == (
        "us-west1 does not match ZONE us-east1-b: expected us-east1")


@pytest.mark.parametrize("tier,capacity,ok", [
    (1000, 9000, True), (1000, 18000, True), (1000, 9001, False), (1000, 4500, False),
    (1000, 1_530_000, True), (1000, 1_539_000, False), (1000, 1_584_000, True),
    (1000, 10_008_000, True), (1000, 10_080_000, False),
    (500, 9000, False), (500, 18000, True), (500, 27000, False),
    (250, 36000, True), (250, 54000, False), (125, 72000, True), (125, 36000, False),
])
def test_lustre_capacity_follows_the_tier_table(tier, capacity, ok):
    values = {**GOOD, "LUSTRE_THROUGHPUT": str(tier), "LUSTRE_CAPACITY": str(capacity)}
    if ok:
        assert parse_config(values).lustre_capacity == capacity
    else:
        assert "LUSTRE_CAPACITY" in problems(LUSTRE_THROUGHPUT=str(tier), LUSTRE_CAPACITY=str(capacity))


def test_capacity_message_suggests_the_nearest_allowed_values():
    assert "nearest: 9000 or 18000" in problems(LUSTRE_CAPACITY="10000")["LUSTRE_CAPACITY"]
    assert all(t.describe() for t in LUSTRE_TIERS.values())


def test_gpus_per_node_must_match_the_device_type():
    assert problems(GPUS_PER_NODE="4")["GPUS_PER_NODE"] == "b200-8 nodes have 8 GPUs, not 4"


def test_prompts_times_generations_must_be_a_multiple_of_the_batch():
    msg = problems(PROMPTS_PER_STEP="20")["GLOBAL_BATCH_SIZE"]
    assert "= 160 is not a multiple of 256" in msg
    # 64 x 32 = 2048 is a multiple of 512: the 70B config's own defaults are fine.
    parse_config({**GOOD, "PROMPTS_PER_STEP": "64", "GENERATIONS_PER_PROMPT": "32",
                  "GLOBAL_BATCH_SIZE": "512"})


def test_batch_must_divide_by_the_data_parallel_size():
    # 3 nodes x 8 = 24 GPUs cannot hold TP4 x PP4.
    assert "TP 4 x PP 4" in problems(NUM_NODES="3")["NUM_NODES"]
    # 8 nodes: DP = 4; 258 is a multiple of nothing useful.
    found = problems(GLOBAL_BATCH_SIZE="6", PROMPTS_PER_STEP="3", GENERATIONS_PER_PROMPT="2")
    assert "data-parallel size 4" in found["GLOBAL_BATCH_SIZE"]


def test_hf_token_is_needed_only_to_submit():
    cfg = parse_config({**GOOD, "HF_TOKEN": ""})
    assert cfg.hf_token is None
    assert [p.field for p in submit_problems(cfg)] == ["HF_TOKEN"]
    assert not submit_problems(parse_config({**GOOD, "HF_TOKEN": TOKEN}))
    # The template's placeholder means "not set".
    assert parse_config({**GOOD, "HF_TOKEN": "<YOUR_HF_TOKEN>"}).hf_token is None


def test_wandb_is_on_only_with_a_key():
    assert not parse_config(GOOD).use_wandb
    assert parse_config({**GOOD, "WANDB_API_KEY": "k" * 40}).use_wandb
    assert "WANDB_API_KEY" in problems(WANDB_ENABLED="True")


def test_secrets_never_show_in_repr_str_or_errors():
    cfg = parse_config({**GOOD, "HF_TOKEN": TOKEN, "WANDB_API_KEY": TOKEN[::-1]})
    for text in (repr(cfg), str(cfg), str(cfg.model_dump()), str(cfg.env_values())):
        assert TOKEN not in text and TOKEN[::-1] not in text
    assert cfg.hf_token.get_secret_value() == TOKEN
    with pytest.raises(ConfigError) as info:
        parse_config({**GOOD, "HF_TOKEN": TOKEN + " x", "REGION": "bad"})
    assert TOKEN not in str(info.value) and TOKEN not in repr(info.value.problems)
    assert "HF_TOKEN" in {p.field for p in info.value.problems}


def test_check_field_gives_the_message_a_form_shows():
    assert check_field("CLUSTER_NAME", "ray-b200") is None
    assert "at most 40" in check_field("CLUSTER_NAME", "x" * 41)
    assert "expected us-east1" in check_field("REGION", "us-west1", {"ZONE": "us-east1-b"})


def test_unknown_variables_are_ignored_by_the_model():
    assert parse_config({**GOOD, "MY_OWN": "x"}).project_id == "team-rl-sandbox-42"
    with pytest.raises(Exception):
        RLConfig(PROJECT_ID="team-rl-sandbox-42", MY_OWN="x")


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(RLConfig.model_fields) + list(GOOD) + ["X"]),
                       st.text(max_size=30), max_size=12))
def test_no_input_crashes_the_validators(values):
    try:
        parse_config(values)
    except ConfigError as exc:
        assert exc.problems and all(p.field and p.message for p in exc.problems)


# --- every field's problem at once (issue 12) ---

def test_a_broken_field_does_not_hide_another_fields_cross_check():
    """CLUSTER_NAME fails its own rule; LUSTRE_CAPACITY only a rule across fields (the tier):
    both are named, as `rltui check` must name them."""
    found = problems(CLUSTER_NAME="Ray-GPU", LUSTRE_CAPACITY="10000")
    assert set(found) == {"CLUSTER_NAME", "LUSTRE_CAPACITY"}, found
    assert "not a GKE cluster name" in found["CLUSTER_NAME"]
    assert "nearest: 9000 or 18000" in found["LUSTRE_CAPACITY"]
    found = problems(ZONE="us-east1", LUSTRE_CAPACITY="10000", PROMPTS_PER_STEP="20")
    assert set(found) == {"ZONE", "LUSTRE_CAPACITY", "GLOBAL_BATCH_SIZE"}, found
    # A missing project ID hides nothing either.
    assert set(problems(PROJECT_ID="", GPUS_PER_NODE="4")) == {"PROJECT_ID", "GPUS_PER_NODE"}


def test_a_derived_check_waits_for_a_valid_base_value():
    """REGION is compared with a valid ZONE only, the GPU count with a known DEVICE_TYPE only,
    the batch with whole numbers only: a broken base value is its own one problem."""
    assert set(problems(ZONE="nowhere", REGION="us-west1")) == {"ZONE"}
    assert set(problems(DEVICE_TYPE="a100-8", GPUS_PER_NODE="4")) == {"DEVICE_TYPE"}
    assert set(problems(PROMPTS_PER_STEP="lots")) == {"PROMPTS_PER_STEP"}
    # With the tier unknown, a capacity no tier allows is still named; one some tier allows is not.
    found = problems(LUSTRE_THROUGHPUT="300", LUSTRE_CAPACITY="10000")
    assert set(found) == {"LUSTRE_THROUGHPUT", "LUSTRE_CAPACITY"}
    assert "no throughput tier" in found["LUSTRE_CAPACITY"]
    assert set(problems(LUSTRE_THROUGHPUT="300", LUSTRE_CAPACITY="36000")) == {"LUSTRE_THROUGHPUT"}


def test_check_field_names_an_empty_field_a_form_cannot_leave_empty():
    """In env.sh a missing variable means the default; in a form an emptied field is the user's
    blank, and must not pass as the default nobody sees."""
    assert "empty" in check_field("GLOBAL_BATCH_SIZE", "", GOOD) and "256" in \
        check_field("GLOBAL_BATCH_SIZE", "", GOOD)
    assert "empty" in check_field("ZONE", " ", GOOD)
    for name in ("NETWORK_NAME", "HF_TOKEN", "WANDB_API_KEY", "CHECKPOINT_METRIC", "WANDB_ENABLED"):
        assert check_field(name, "", GOOD) is None, name  # empty means something there


def test_a_network_name_derived_from_a_broken_cluster_name_is_not_a_second_problem():
    # env.sh's NETWORK_NAME="${CLUSTER_NAME}-net-0", as EnvFile expands it
    assert set(problems(CLUSTER_NAME="Ray-GPU", NETWORK_NAME="Ray-GPU-net-0")) == {"CLUSTER_NAME"}
    assert set(problems(CLUSTER_NAME="Ray-GPU", NETWORK_NAME="My_Net")) == {"CLUSTER_NAME", "NETWORK_NAME"}
