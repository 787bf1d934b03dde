"""The lines NeMo-RL v0.4.0's synchronous grpo_train prints, character for character.

Read from NVIDIA-NeMo/RL v0.4.0 nemo_rl/algorithms/grpo.py, algorithms/utils.py, utils/logger.py
(SOURCES.md#nemo-rl-grpo-output): same emoji, bullets, spacing and number formats, so the
product's log parser cannot tell the demo from the real job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def out(line: str = "") -> None:
    print(line, flush=True)


def epoch_header(epoch: int, epochs: int) -> None:
    out(f"\n{'=' * 25} Epoch {epoch}/{epochs} {'=' * 25}")


def step_header(step: int, steps: int) -> None:
    out(f"\n{'=' * 25} Step {step}/{steps} {'=' * 25}")


def training_results(loss: float, avg_reward: float, mean_gen_length: float) -> None:
    out("\n📊 Training Results:")
    out(f"  • Loss: {loss:.4f}")
    out(f"  • Avg Reward: {avg_reward:.4f}")
    out(f"  • Mean Generation Length: {mean_gen_length:.4f}")


def timing(timings: dict[str, float]) -> None:
    total = timings.get("total_step_time", 0.0)
    out("\n⏱️  Timing:")
    out(f"  • Total step time: {total:.2f}s")
    for label, sec in sorted(timings.items(), key=lambda kv: kv[1], reverse=True):
        if label == "total_step_time":
            continue
        pct = sec / total * 100 if total > 0 else 0.0
        out(f"  • {label}: {sec:.2f}s ({pct:.1f}%)")


@dataclass
class StepVolume:
    samples: int
    total_tokens: int
    total_gpus: int
    model_params: float  # nominal parameter count of policy.model_name


B200_PEAK_TFLOPS = 2250.0  # dense BF16 per GPU


def model_params(model_name: str) -> float:
    """Nominal size from a name like 'Qwen/Qwen2.5-72B-Instruct' (72e9); 1e9 if unnamed."""
    m = re.search(r"(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", model_name.split("/")[-1])
    return float(m.group(1)) * 1e9 if m else 1e9


def _rate(amount: float, seconds: float, gpus: int) -> float:
    return amount / seconds / gpus if seconds > 0 and gpus > 0 else 0.0


def performance(t: dict[str, float], v: StepVolume) -> None:
    """Throughputs from measured times. Training and generation are colocated on all GPUs."""
    gpus = v.total_gpus
    total = t.get("total_step_time", 0.0)
    train, logprobs, gen = (t.get(k, 0.0) for k in
                            ("policy_training", "policy_and_reference_logprobs", "generation"))
    e2e_samples = _rate(v.samples, total, gpus)
    e2e_tokens = _rate(v.total_tokens, total, gpus)
    worker_group = _rate(v.total_tokens, train + logprobs, gpus)
    generation = _rate(v.total_tokens, gen, gpus)
    out("\n🔍 Performance Metrics:")
    out(f"  • Mean Total Tokens per Sample: {v.total_tokens / max(v.samples, 1):.2f}")
    out("  • Throughputs (per GPU):")
    out(f"    - E2E (Samples/sec/gpu): {e2e_samples:.2f}")
    out(f"    - E2E (Tokens/sec/gpu): {e2e_tokens:.2f}")
    out(f"    - Policy Training (Tokens/sec/gpu): {_rate(v.total_tokens, train, gpus):.2f}")
    out(f"    - Policy and Reference Logprobs (Tokens/sec/gpu): {_rate(v.total_tokens, logprobs, gpus):.2f}")
    out(f"    - Training Worker Group (Tokens/sec/gpu): {worker_group:.2f}")
    out(f"    - Generation Worker Group (Tokens/sec/gpu): {generation:.2f}")
    out("  • Throughputs (per Group):")
    out(f"    - E2E (Samples/sec): {e2e_samples * gpus:.2f}")
    out(f"    - E2E (Tokens/sec): {e2e_tokens * gpus:.2f}")
    out(f"    - Training Worker Group (Tokens/sec): {worker_group * gpus:.2f}")
    out(f"    - Generation Worker Group (Tokens/sec): {generation * gpus:.2f}")
    if train > 0:
        # FLOPs of the named model (6 * params per trained token) over the measured training time.
        tflops = 6.0 * v.model_params * v.total_tokens / train / 1e12
        per_rank = tflops / gpus
        out(f"  • Training FLOPS: {tflops:.2f} TFLOPS ({per_rank:.2f} TFLOPS per rank)")
        out(f"  • Training Model Floating Point Utilization: {per_rank / B200_PEAK_TFLOPS * 100:.2f}%")


def validation_start(step: int) -> None:
    out(f"▶ Starting validation at step {step}...")


def validation_results(accuracy: float, avg_length: float, samples: int, seconds: float) -> None:
    out("\n📊 Validation Results:")
    out(f"    • Accuracy: {accuracy:.4f}")
    out(f"    • Average response length: {avg_length:.1f} tokens")
    out(f"    • Samples processed: {samples}")
    out("\n  ⏱️  Validation Timing:")
    out(f"    • Total validation time: {seconds:.2f}s")
