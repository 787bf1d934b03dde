"""Write grpo_noisy.log and grpo_noisy.expected.json (run: python tests/data/make_noisy_log.py).

A noisy 20-step NeMo-RL v0.4.0 GRPO run as `ray job submit` tails it, with the codelab's
settings (32 prompts x 8 generations, save_period 2, keep_top_k 2, val_period 10).
The expected file holds the values this script printed, not what a parser read back.
Deterministic: the same seed gives the same bytes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
JOB = "raysubmit_9fQk2LrT7uVw1XyZ"
CKPT_DIR = "/lustre/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1"
LOG_DIR = "logs/exp_001"
STEPS, SAVE_PERIOD, KEEP_TOP_K, VAL_PERIOD, SAMPLES = 20, 2, 2, 10, 40315
CYAN, GREEN, YELLOW, BOLD, RESET = "\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[1m", "\x1b[0m"
DEDUP_WARNING = (
    " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication,"
    " or see https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html"
    "#log-deduplication for more options.)"
)
RANK0 = "MegatronPolicyWorker[rank=0] pid=2210, ip=10.8.0.11"
RANK3 = "MegatronPolicyWorker[rank=3] pid=2213, ip=10.8.0.11"
VLLM = "VllmGenerationWorker pid=3301, ip=10.8.0.12"


def worker(source: str, msg: str, repeat: int = 0, first_repeat: bool = False) -> str:
    """A line as Ray's print_worker_logs and LogDeduplicator print it."""
    line = f"{CYAN}({source}){RESET} {msg}"
    if repeat:
        line += f"{GREEN} [repeated {repeat}x across cluster]"
        line += (DEDUP_WARNING if first_repeat else "") + RESET
    return line + "\n"


def progress(source: str, total: int) -> str:
    """A vLLM tqdm bar: one Ray line whose updates are separated by bare carriage returns."""
    bars = [f"Processed prompts: {p:3d}%|{'█' * (p // 10):<10}| {total * p // 100}/{total} "
            f"[00:{p // 3:02d}<00:{(100 - p) // 3:02d}, est. speed output: {p * 31.7:.2f} toks/s]"
            for p in (0, 50, 100)]
    return f"{CYAN}({source}){RESET} " + "\r".join(bars) + "\n"


def preamble() -> list[str]:
    return [
        "\x1b]0;ray job submit\x07Job submission server address: http://127.0.0.1:8265\r\n",
        f"2025-06-12 09:14:02,114\tINFO dashboard_sdk.py:338 -- Uploading package gcs://_ray_pkg_4c1e.zip.\r\n",
        "-------------------------------------------------------\n",
        f"Job '{JOB}' submitted successfully\n",
        "-------------------------------------------------------\n",
        "\n",
        "Next steps\n",
        f"  Query the logs of the job:\n    ray job logs {JOB}\n",
        "  Query the status of the job:\n"
        f"    \x1b]8;;http://127.0.0.1:8265\x1b\\ray job status {JOB}\x1b]8;;\x1b\\\n",
        "\n",
        "Tailing logs until the job exits (disable with --no-wait):\n",
        "2025-06-12 09:14:05,002\tINFO job_manager.py:531 -- Runtime env is setting up.\n",
        f"Running entrypoint for job {JOB}: bash ./run_nemo_rl.sh\n",
        "+ export RAY_OVERRIDE_JOB_RUNTIME_ENV=1\n",
        "+ echo '--- Running on Ray Cluster ---'\n--- Running on Ray Cluster ---\n",
        "+ uv run python examples/run_grpo_math.py --config examples/configs/grpo_math_70B_megatron.yaml"
        " grpo.max_num_steps=20 grpo.num_generations_per_prompt=8 grpo.num_prompts_per_step=32"
        f" checkpointing.enabled=True checkpointing.save_period=2 checkpointing.keep_top_k=2"
        f" checkpointing.metric_name=null checkpointing.checkpoint_dir={CKPT_DIR}\n",
        "Final config:\n",
        "  grpo:\n    max_num_steps: 20\n    val_period: 10\n",
        f"  checkpointing:\n    save_period: 2\n    keep_top_k: 2\n    checkpoint_dir: {CKPT_DIR}\n",
        f"📊 Using log directory: {LOG_DIR}\n",
        f"📊 Using checkpoint directory: {CKPT_DIR}\n",
        worker("raylet, ip=10.8.0.13", "WARNING: 8 PYTHON worker processes have been started on node"
               " (see https://github.com/ray-project/ray/issues/3644 for a discussion)."),
        "\n▶ Setting up data...\n",
        f"  ✓ Training dataloader loaded with {SAMPLES} samples\n",
        "Loading checkpoint shards:  50%|█████     | 2/4 [00:03<00:03]\r"
        "Loading checkpoint shards: 100%|██████████| 4/4 [00:06<00:00]\r\n",
        worker("autoscaler +2m13s", "Tip: use `ray status` to view detailed cluster status."),
        "\n========================= Epoch 1/1 =========================\n",
    ]


def step_lines(rng: random.Random, s: int, truth: dict) -> list[str]:
    header = f"========================= Step {s}/{STEPS} ========================="
    out = ["\n" + (f"{BOLD}{header}{RESET}" if s == 7 else header) + "\n"]
    if s > 2 and (s - 1) % SAVE_PERIOD == 0:  # the previous save's collapsed repeats, late
        out.append(worker(RANK3, f"  successfully saved checkpoint from iteration {s - 1:7d} to "
                          f"{CKPT_DIR}/tmp_step_{s - 1}/policy/weights [ t 1/4, p 1/4 ]",
                          repeat=63, first_repeat=s == 3))
    out += ["▶ Preparing batch...\n", "▶ Generating responses for batch of size 256...\n"]
    out.append(progress(VLLM, 256))
    out.append(worker(RANK0, f"[Rank 0] step {s} | Loss: 9.9{s:02d} | lr 5.0e-07 | generation"))
    out += ["▶ Processing rewards...,\n", "▶ Computing advantages...\n",
            "▶ Preparing for logprob inference...\n", "▶ Computing logprobs...\n",
            "▶ Preparing for training...\n", "▶ Training policy...\n"]
    if s == 1:  # driver stderr: unprefixed, mentions "step", matches nothing
        out.append("/opt/nemo-rl/.venv/lib/python3.12/site-packages/torch/optim/lr_scheduler.py:198:"
                   " UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`.\n")

    timing = {
        "data_processing": rng.uniform(0.3, 0.9),
        "prepare_for_generation/total": rng.uniform(18, 26),
        "generation": rng.uniform(180, 260),
        "reward_calculation": rng.uniform(1, 3),
        "logprob_inference_prep": rng.uniform(2, 4),
        "policy_and_reference_logprobs": rng.uniform(25, 35),
        "training_prep": rng.uniform(4, 7),
        "policy_training": rng.uniform(80, 110),
    }
    timing["prepare_for_generation/transfer_and_update_weights"] = timing[
        "prepare_for_generation/total"] * rng.uniform(0.6, 0.8)  # nested: not added to total
    total = sum(v for k, v in timing.items() if "/transfer" not in k) + rng.uniform(1, 3)

    val_accuracy = None
    if s % VAL_PERIOD == 0:
        val_accuracy = round(rng.uniform(0.3, 0.6), 4)
        val_time = rng.uniform(90, 140)
        total += val_time
        out += [f"▶ Starting validation at step {s}...\n", worker(VLLM, "Adding requests: 100%|")]
        out += ["\n===============================\n", "Sample 1 (reward 1.0):\n",
                "Step 1/3: Let x be the number of apples.  • Loss: 0.0000 is not a metric here\n",
                "  • Loss: 9.9999\n", "===============================\n"]
        out += ["\n📊 Validation Results:\n", f"    • Accuracy: {val_accuracy:.4f}\n",
                f"    • Average response length: {rng.uniform(900, 1400):.1f} tokens\n",
                "    • Samples processed: 256\n", "\n  ⏱️  Validation Timing:\n",
                f"    • Total validation time: {val_time:.2f}s\n"]

    checkpoint_s = None
    if s % SAVE_PERIOD == 0:
        timing["checkpointing"] = checkpoint_s = rng.uniform(60, 250)
        total += checkpoint_s
        out.append(f"Saving checkpoint for step {s}...\n")
        out.append(worker(RANK0, f"saving checkpoint at iteration {s:7d} to "
                          f"{CKPT_DIR}/tmp_step_{s}/policy/weights in torch_dist format"))
        out.append(worker("DTensorPolicyWorker pid=4410, ip=10.8.0.14", "Saving checkpoint for step 99..."))
        out.append(worker(RANK0, f"  successfully saved checkpoint from iteration {s:7d} to "
                          f"{CKPT_DIR}/tmp_step_{s}/policy/weights [ t 1/4, p 1/4 ]"))
        if s > SAVE_PERIOD * KEEP_TOP_K:
            pruned = s - SAVE_PERIOD * KEEP_TOP_K
            truth["pruned"].append(pruned)
            out.append(f"Removing checkpoint {CKPT_DIR}/step_{pruned} due to being outside top-{KEEP_TOP_K}\n")
    out.append(f"Logged data to {LOG_DIR}/train_data_step{s - 1}.jsonl\n")

    loss, reward = rng.uniform(-0.04, 0.06), min(0.95, 0.2 + 0.02 * s + rng.uniform(-0.05, 0.05))
    out += ["\n📊 Training Results:\n", f"  • Loss: {loss:.4f}\n"]
    if s % 3 == 0:  # another source inside the block must not end it
        out.append(worker(RANK3, f"[Rank 3] step {s} | Loss: 0.{s:04d} | grad_norm 0.31"))
    out += [f"  • Avg Reward: {reward:.4f}\n", f"  • Mean Generation Length: {rng.uniform(800, 1500):.4f}\n"]

    out += ["\n⏱️  Timing:\n", f"  • Total step time: {total:.2f}s\n"]
    for i, (label, sec) in enumerate(sorted(timing.items(), key=lambda kv: kv[1], reverse=True)):
        out.append(f"  • {label}: {sec:.2f}s ({sec / total * 100:.1f}%)\n")
        if s == 7 and i == 2:  # a progress bar, \r-split, in the middle of the table
            out.append(progress(VLLM, 64))
        if s % 4 == 0 and i == 1:
            out.append(worker(RANK0, "step time breakdown logged", repeat=7))

    tokens_per_gpu, tflops = rng.uniform(900, 1600), rng.uniform(40000, 55000)
    mfu = tflops / 64 / 2250 * 100
    out += ["\n🔍 Performance Metrics:\n",
            f"  • Mean Total Tokens per Sample: {rng.uniform(1000, 1700):.2f}\n",
            "  • Throughputs (per GPU):\n",
            f"    - E2E (Samples/sec/gpu): {256 / total / 64:.2f}\n",
            f"    - E2E (Tokens/sec/gpu): {tokens_per_gpu:.2f}\n",
            f"    - Policy Training (Tokens/sec/gpu): {tokens_per_gpu * 4.1:.2f}\n",
            f"    - Policy and Reference Logprobs (Tokens/sec/gpu): {tokens_per_gpu * 9.3:.2f}\n",
            f"    - Training Worker Group (Tokens/sec/gpu): {tokens_per_gpu * 3.2:.2f}\n",
            f"    - Generation Worker Group (Tokens/sec/gpu): {tokens_per_gpu * 1.6:.2f}\n",
            "  • Throughputs (per Group):\n",
            f"    - E2E (Samples/sec): {256 / total:.2f}\n",
            f"    - E2E (Tokens/sec): {tokens_per_gpu * 64:.2f}\n",
            f"    - Training Worker Group (Tokens/sec): {tokens_per_gpu * 204.8:.2f}\n",
            f"    - Generation Worker Group (Tokens/sec): {tokens_per_gpu * 102.4:.2f}\n",
            f"  • Training FLOPS: {tflops:.2f} TFLOPS ({tflops / 64:.2f} TFLOPS per rank)\n",
            f"  • Training Model Floating Point Utilization: {mfu:.2f}%\n"]

    truth["steps"].append({
        "step": s, "total_steps": STEPS, "loss": float(f"{loss:.4f}"),
        "avg_reward": float(f"{reward:.4f}"), "step_time_s": float(f"{total:.2f}"),
        "checkpoint_s": float(f"{checkpoint_s:.2f}") if checkpoint_s is not None else None,
        "val_accuracy": val_accuracy,
    })
    truth["performance"].append({"step": s, "tokens_per_sec_per_gpu": float(f"{tokens_per_gpu:.2f}"),
                                 "mfu_percent": float(f"{mfu:.2f}")})
    if checkpoint_s is not None:
        truth["checkpoints"].append({"step": s, "path": f"{CKPT_DIR}/step_{s}",
                                     "seconds": float(f"{checkpoint_s:.2f}")})
    return out


def main() -> None:
    rng = random.Random(20250612)
    truth: dict = {"checkpoint_dir": CKPT_DIR, "dataloader_samples": SAMPLES, "end": "max_steps",
                   "steps": [], "performance": [], "checkpoints": [], "pruned": []}
    lines = preamble()
    for s in range(1, STEPS + 1):
        lines += step_lines(rng, s, truth)
    lines.append("Max number of steps has been reached, stopping training early\n")
    lines.append(worker(RANK0, "[Gloo] Rank 0 is connected to 63 peer ranks", repeat=63))
    lines.append(f"{CYAN}({RANK3}){RESET} [Gloo] Rank 3 is disconnec")  # cut: a partial last line
    (HERE / "grpo_noisy.log").write_text("".join(lines), encoding="utf-8", newline="")
    (HERE / "grpo_noisy.expected.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
