"""The GRPO demo as the sandbox's job runs it: learning, NeMo-RL's lines, checkpoints, resume."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rltui_sandbox.grpo_demo.checkpoint import MIB, CheckpointManager
from rltui_sandbox.grpo_demo.config import ConfigError, apply_overrides, parse_value, validate, load_config
from rltui_sandbox.nemo_rl_tree import install_fake_nemo_rl, write_uv_shim

STEP_HEADER = re.compile(r"={25} Step (\d+)/(\d+) ={25}")
REWARD = re.compile(r"  • Avg Reward: (\d\.\d{4})")
NUM = r"\d+\.\d{2}"
PHASES = [
    "▶ Preparing batch...",
    "▶ Generating responses for batch of size 256...",
    "▶ Processing rewards...,",
    "▶ Computing advantages...",
    "▶ Preparing for logprob inference...",
    "▶ Computing logprobs...",
    "▶ Preparing for training...",
    "▶ Training policy...",
]
TIMERS = {
    "data_processing", "prepare_for_generation/total",
    "prepare_for_generation/transfer_and_update_weights", "generation", "reward_calculation",
    "logprob_inference_prep", "policy_and_reference_logprobs", "training_prep", "policy_training",
}
PERFORMANCE = [
    "",
    re.escape("🔍 Performance Metrics:"),
    rf"  • Mean Total Tokens per Sample: {NUM}",
    re.escape("  • Throughputs (per GPU):"),
    rf"    - E2E \(Samples/sec/gpu\): {NUM}",
    rf"    - E2E \(Tokens/sec/gpu\): {NUM}",
    rf"    - Policy Training \(Tokens/sec/gpu\): {NUM}",
    rf"    - Policy and Reference Logprobs \(Tokens/sec/gpu\): {NUM}",
    rf"    - Training Worker Group \(Tokens/sec/gpu\): {NUM}",
    rf"    - Generation Worker Group \(Tokens/sec/gpu\): {NUM}",
    re.escape("  • Throughputs (per Group):"),
    rf"    - E2E \(Samples/sec\): {NUM}",
    rf"    - E2E \(Tokens/sec\): {NUM}",
    rf"    - Training Worker Group \(Tokens/sec\): {NUM}",
    rf"    - Generation Worker Group \(Tokens/sec\): {NUM}",
    rf"  • Training FLOPS: {NUM} TFLOPS \({NUM} TFLOPS per rank\)",
    rf"  • Training Model Floating Point Utilization: {NUM}%",
]


def step_rewards(lines: list[str]) -> dict[int, str]:
    """Printed Avg Reward per step number."""
    rewards, step = {}, None
    for line in lines:
        if m := STEP_HEADER.fullmatch(line):
            step = int(m.group(1))
        elif (m := REWARD.fullmatch(line)) and step is not None:
            rewards[step] = m.group(1)
    return rewards


def step_blocks(lines: list[str]) -> dict[int, list[str]]:
    """Lines after each step header up to the blank line that precedes the next header."""
    starts = [(i, int(m.group(1))) for i, l in enumerate(lines) if (m := STEP_HEADER.fullmatch(l))]
    blocks = {}
    for n, (i, step) in enumerate(starts):
        end = starts[n + 1][0] - 1 if n + 1 < len(starts) else len(lines)
        blocks[step] = lines[i + 1:end]
    return blocks


class Lines:
    """Walk a block, matching each line in full against a regex."""

    def __init__(self, block: list[str], step: int) -> None:
        self.block, self.pos, self.step = block, 0, step

    def expect(self, pattern: str) -> re.Match[str]:
        assert self.pos < len(self.block), f"step {self.step}: ran out of lines expecting {pattern!r}"
        line = self.block[self.pos]
        m = re.fullmatch(pattern, line)
        assert m, f"step {self.step}, line {self.pos}: {line!r} does not match {pattern!r}"
        self.pos += 1
        return m

    def literal(self, text: str) -> None:
        self.expect(re.escape(text))

    def peek(self, pattern: str) -> bool:
        return self.pos < len(self.block) and re.fullmatch(pattern, self.block[self.pos]) is not None


def test_reward_rises_over_twenty_steps(codelab_run) -> None:
    rewards = [float(r) for _, r in sorted(step_rewards(codelab_run.lines).items())]
    assert len(rewards) == 20
    first, last = np.mean(rewards[:3]), np.mean(rewards[-3:])
    assert 0.1 < first < 0.3, rewards
    assert last > 0.6, rewards


def test_startup_and_end_lines(codelab_run) -> None:
    lines = codelab_run.lines
    first_epoch = lines.index("=" * 25 + " Epoch 1/1 " + "=" * 25)
    startup = lines[:first_epoch]
    assert f"📊 Using checkpoint directory: {codelab_run.checkpoint_dir}" in startup
    assert "  ✓ Training dataloader loaded with 40315 samples" in startup
    assert lines[first_epoch - 1] == ""
    assert lines[-1] == "Max number of steps has been reached, stopping training early"
    assert [int(m.group(2)) for l in lines if (m := STEP_HEADER.fullmatch(l))] == [20] * 20


def test_every_step_prints_nemo_rl_block(codelab_run) -> None:
    blocks = step_blocks(codelab_run.lines[:-1])
    assert sorted(blocks) == list(range(1, 21))
    ckpt = re.escape(str(codelab_run.checkpoint_dir))
    for step, block in blocks.items():
        w = Lines(block, step)
        for phase in PHASES:
            w.literal(phase)
        if step % 10 == 0:  # val_period 10 from the 70B config
            w.literal(f"▶ Starting validation at step {step}...")
            w.literal("")
            w.literal("📊 Validation Results:")
            w.expect(r"    • Accuracy: \d\.\d{4}")
            w.expect(r"    • Average response length: \d+\.\d tokens")
            w.literal("    • Samples processed: 256")
            w.literal("")
            w.literal("  ⏱️  Validation Timing:")
            w.expect(rf"    • Total validation time: {NUM}s")
        if step % 2 == 0:
            w.literal(f"Saving checkpoint for step {step}...")
            removed = []
            while w.peek(r"Removing checkpoint .*"):
                m = w.expect(rf"Removing checkpoint {ckpt}/step_(\d+) due to being outside top-2")
                removed.append(int(m.group(1)))
            assert removed == ([step - 4] if step >= 6 else []), f"step {step} removed {removed}"
        w.literal(f"Logged data to logs/exp_001/train_data_step{step - 1}.jsonl")
        w.literal("")
        w.literal("📊 Training Results:")
        w.expect(r"  • Loss: -?\d+\.\d{4}")
        w.expect(r"  • Avg Reward: \d\.\d{4}")
        w.expect(r"  • Mean Generation Length: \d+\.\d{4}")
        w.literal("")
        w.literal("⏱️  Timing:")
        w.expect(rf"  • Total step time: {NUM}s")
        labels, seconds = [], []
        while w.peek(r"  • .*"):
            m = w.expect(rf"  • ([\w/]+): ({NUM})s \((\d+\.\d)%\)")
            labels.append(m.group(1))
            seconds.append(float(m.group(2)))
        assert set(labels) == TIMERS | ({"checkpointing"} if step % 2 == 0 else set()), step
        assert seconds == sorted(seconds, reverse=True), f"step {step}: timings not largest first"
        for pattern in PERFORMANCE:
            w.expect(pattern)
        assert w.pos == len(block), f"step {step}: unexpected trailing lines {block[w.pos:]}"


def test_train_data_is_logged_per_step(codelab_run) -> None:
    records = [json.loads(l) for l in
               (codelab_run.cwd / "logs" / "exp_001" / "train_data_step0.jsonl").read_text().splitlines()]
    assert len(records) == 256
    assert all(r["rewards"] in (0.0, 1.0) for r in records)
    assert "What is" in records[0]["content"][0] and "\\boxed{" in records[0]["content"][1]


def test_checkpoints_rotate_to_the_newest_two(codelab_run) -> None:
    ckpt = codelab_run.checkpoint_dir
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_18", "step_20"]
    for step in (18, 20):
        d = ckpt / f"step_{step}"
        info = json.loads((d / "training_info.json").read_text())
        assert info["step"] == info["total_steps"] == step
        assert 0.0 <= info["reward"] <= 1.0
        assert "grpo" in (d / "config.yaml").read_text()
        assert (d / "train_dataloader.pt").stat().st_size > 0
        assert (d / "policy" / "weights" / "model.npz").is_file()
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        assert abs(size - 0.5 * MIB) < 0.05 * MIB, size  # RLTUI_DEMO_CHECKPOINT_MB=0.5


def test_resume_continues_after_the_newest_checkpoint(tmp_path: Path, codelab_run, run_demo, demo) -> None:
    ckpt = tmp_path / "lustre" / "nemo_rl_qwen_72b_ds_cp" / "nemo-rl-grpo-test1"
    first = subprocess.Popen(demo.argv(*demo.overrides(ckpt)), cwd=tmp_path,
                             env=demo.env(step_seconds=0.05), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    assert first.stdout is not None
    for line in first.stdout:
        if line.rstrip("\n") == "=" * 25 + " Step 8/20 " + "=" * 25:
            first.send_signal(signal.SIGKILL)  # like a Spot preemption
            break
    first.wait(timeout=10)
    assert first.returncode == -signal.SIGKILL
    newest = max(int(p.name.split("_")[1]) for p in ckpt.glob("step_*"))
    assert newest in (6, 8)
    (ckpt / "tmp_step_99").mkdir()  # a save that never finished

    second = run_demo(tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"▶ Resuming from checkpoint {ckpt}/step_{newest} (step {newest})..." in second.lines
    rewards = step_rewards(second.lines)
    assert sorted(rewards) == list(range(newest + 1, 21))
    assert second.lines[-1] == "Max number of steps has been reached, stopping training early"
    # Weights, optimizer state, data order and sampling all resumed: identical to the unbroken run.
    unbroken = step_rewards(codelab_run.lines)
    assert rewards == {s: unbroken[s] for s in rewards}
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_18", "step_20"]
    assert "Logged data to logs/exp_002/" in second.stdout


def test_pacing_stretches_each_step(tmp_path: Path, run_demo) -> None:
    run = run_demo(tmp_path, overrides=["grpo.max_num_steps=2", "grpo.num_prompts_per_step=8",
                                        "grpo.num_generations_per_prompt=4", "policy.train_global_batch_size=32"],
                   step_seconds=0.3)
    assert run.returncode == 0, run.stderr
    totals = [float(m.group(1)) for l in run.lines if (m := re.fullmatch(r"  • Total step time: (\S+)s", l))]
    assert len(totals) == 2 and all(0.27 <= t <= 0.6 for t in totals), totals


def test_unknown_override_is_ignored_with_a_warning(tmp_path: Path, run_demo) -> None:
    run = run_demo(tmp_path, overrides=["grpo.max_num_steps=1", "loss_fn.reference_policy_kl_penalty=5",
                                        "grpo.num_prompts_per_step=8", "grpo.num_generations_per_prompt=4",
                                        "policy.train_global_batch_size=32", "bogus.key='x'"])
    assert run.returncode == 0, run.stderr
    assert "WARNING: ignoring unknown override loss_fn.reference_policy_kl_penalty=5" in run.stderr
    assert "WARNING: ignoring unknown override bogus.key='x'" in run.stderr
    assert "'reference_policy_kl_penalty': 0.01" in run.stdout  # Final config kept the default
    assert "=" * 25 + " Step 1/1 " + "=" * 25 in run.lines


@pytest.mark.parametrize("override, message", [
    ("policy.train_global_batch_size=100", "must be a multiple of policy.train_global_batch_size (100)"),
    ("policy.train_global_batch_size=2", "(2) must be divisible by the data parallel size (4)"),
    ("checkpointing.metric_name=accuracy", "must start with 'val:' or 'train:'"),
    ("grpo.max_num_steps=ten", "grpo.max_num_steps must be a positive integer"),
])
def test_settings_nemo_rl_refuses_exit_1(tmp_path: Path, run_demo, demo, override: str, message: str) -> None:
    ckpt = tmp_path / "ck"
    run = run_demo(tmp_path, overrides=[*demo.overrides(ckpt), override])
    assert run.returncode == 1
    assert message in run.stderr
    assert not ckpt.exists()


def test_override_values_follow_hydra_syntax() -> None:
    assert parse_value("null") is None and parse_value("None") is None
    assert parse_value("True") is True and parse_value("false") is False
    assert parse_value("20") == 20 and parse_value("-3") == -3
    assert parse_value("1e-6") == 1e-6 and parse_value("0.5") == 0.5
    assert parse_value("'Qwen/Qwen2.5-72B-Instruct'") == "Qwen/Qwen2.5-72B-Instruct"
    assert parse_value('"20"') == "20"
    assert parse_value("DeepScaler") == "DeepScaler"
    config, warnings = apply_overrides(load_config(None), [
        "+grpo.new_key=3", "logger.wandb.name='run 1'", "data.dataset_name=DeepScaler", "data.shuffle=False"])
    assert config["grpo"]["new_key"] == 3
    assert config["logger"]["wandb"]["name"] == "run 1"
    assert config["data"] == {**load_config(None)["data"], "dataset_name": "DeepScaler"}
    assert warnings == ["WARNING: ignoring unknown override data.shuffle=False"]
    with pytest.raises(ConfigError):
        apply_overrides(config, ["no_equals_sign"])
    validate(config)  # the 70B defaults themselves are valid


def test_metric_pruning_keeps_best_k_and_the_newest(tmp_path: Path, capsys) -> None:
    mgr = CheckpointManager(tmp_path, keep_top_k=2, metric_name="val:accuracy")
    arrays = {"w": np.zeros(3)}
    for step, acc in [(1, 0.9), (2, 0.1), (3, 0.8), (4, 0.2)]:
        mgr.save(step, {"total_steps": step, "val:accuracy": acc}, {}, arrays, arrays, {}, 4096)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_1", "step_3", "step_4"]
    assert f"Removing checkpoint {tmp_path}/step_2 due to being outside top-2" in capsys.readouterr().out


def test_uv_shim_runs_only_uv_run_python(tmp_path: Path) -> None:
    uv = write_uv_shim(tmp_path / "bin")
    ran = subprocess.run([str(uv), "run", "python", "-c", "import sys; print(sys.executable)"],
                         capture_output=True, text=True, timeout=30)
    from rltui_sandbox.images import ray_env

    assert ran.returncode == 0 and ran.stdout.strip() == str(ray_env().python)  # the image's Python
    refused = subprocess.run([str(uv), "sync"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "only 'uv run python ARGS...'" in refused.stderr


def test_codelab_script_runs_the_demo_through_the_fake_tree(tmp_path: Path, demo) -> None:
    """run_nemo_rl.sh unmodified, with NEMO_RL_DIR/LUSTRE_MOUNT/PATH as the sandbox's head sets them."""
    nemo_rl = install_fake_nemo_rl(tmp_path / "opt" / "nemo-rl")
    bin_dir = write_uv_shim(tmp_path / "bin").parent
    lustre = tmp_path / "lustre"
    env = demo.env()
    env.update(NEMO_RL_DIR=str(nemo_rl), LUSTRE_MOUNT=str(lustre), PATH=f"{bin_dir}:{env['PATH']}")
    ran = subprocess.run(["bash", str(demo.run_script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "Loaded configuration from: examples/configs/grpo_math_70B_megatron.yaml" in ran.stdout
    assert (lustre / "huggingface_cache").is_dir()
    ckpt = lustre / "nemo_rl_qwen_72b_ds_cp" / "nemo-rl-grpo-test1"
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_18", "step_20"]
    assert (nemo_rl / "logs" / "exp_001" / "train_data_step19.jsonl").is_file()


def test_epochs_roll_over_when_the_dataset_runs_out(tmp_path: Path, monkeypatch, capsys) -> None:
    from rltui_sandbox.grpo_demo import main, task

    monkeypatch.setitem(task.DATASET_SIZES, "Tiny", 70)  # two batches of 32, the rest dropped
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLTUI_DEMO_STEP_SECONDS", "0")
    code = main(["grpo.num_prompts_per_step=32", "grpo.num_generations_per_prompt=8",
                 "policy.train_global_batch_size=256", "grpo.max_num_epochs=2", "grpo.max_num_steps=10",
                 "data.dataset_name=Tiny", "checkpointing.enabled=true", "checkpointing.save_period=3",
                 f"checkpointing.checkpoint_dir={tmp_path / 'ck'}"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    headers = [m.group(1) for l in lines if (m := re.fullmatch(r"={25} (\w+ \d+/\d+) ={25}", l))]
    assert headers == ["Epoch 1/2", "Step 1/2", "Step 2/2", "Epoch 2/2", "Step 1/2", "Step 2/2"]
    assert "  ✓ Training dataloader loaded with 70 samples" in lines
    # Saved at step 3 (period) and at the last step of the last epoch.
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["step_3", "step_4"]
