#!/bin/bash
set -ex
export RAY_OVERRIDE_JOB_RUNTIME_ENV=1
echo "--- Running on Ray Cluster ---"
LUSTRE_MOUNT="${LUSTRE_MOUNT:-/lustre}"
cd "${NEMO_RL_DIR:-/opt/nemo-rl}"
mkdir -p "${LUSTRE_MOUNT}/huggingface_cache"
mkdir -p "${LUSTRE_MOUNT}/nemo_rl_qwen_72b_ds_cp"
echo "Launching NeMo-RL GRPO training..."
uv run python examples/run_grpo_math.py \
  --config examples/configs/grpo_math_70B_megatron.yaml \
  policy.model_name='Qwen/Qwen2.5-72B-Instruct' \
  policy.megatron_cfg.converter_type='Qwen2ForCausalLM' \
  logger.wandb_enabled=False \
  cluster.num_nodes=8 \
  cluster.gpus_per_node=8 \
  logger.wandb.name='nemo-rl-grpo-test1' \
  grpo.max_num_steps=20 \
  grpo.num_generations_per_prompt=8 \
  grpo.num_prompts_per_step=32 \
  policy.train_global_batch_size=256 \
  checkpointing.enabled=True \
  checkpointing.save_period=2 \
  checkpointing.keep_top_k=2 \
  checkpointing.metric_name=null \
  checkpointing.checkpoint_dir="${LUSTRE_MOUNT}/nemo_rl_qwen_72b_ds_cp/nemo-rl-grpo-test1" \
  data.dataset_name='DeepScaler'
