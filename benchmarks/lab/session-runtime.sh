#!/usr/bin/env bash
# The 2026-11-22 lab session for the runtime (issue 9) and the attention backends (issue 8), vLLM 0.20.2 on
# an H100. Each device call runs this same command; finished steps are skipped (state in /tmp/lab).
# e1/e1b: in-process startups on the FLA (Triton) GDN prefill path that every non-Hopper GPU takes, then
#         long prompts: torch's max reserved memory during the prompt against before it.
# p1/p2:  probes of a simulated 16 GB (mission deployment) and 24 GB card at a GMU predicted not to serve.
# e3/e2:  the attention backend forced (TRITON_ATTN, FLASHINFER): its cost in the profile and at runtime.
cd "$(dirname "$0")/../.."
M=tests/fixtures/models
R=benchmarks/lab/run.sh
export LAB_STEP_TIMEOUT=${LAB_STEP_TIMEOUT:-560} LAB_EXTRA="--gdn-prefill-backend triton"
P="--vllm-version 0.20.2 --no-fit --enforce-eager --kv-cache-dtype fp8"
timeout 585 bash $R unpack \
  "s:e1:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.5,\"kv\":\"fp8\",\"eager\":true,\"gdn\":\"triton\",\"mnbt\":8192,\"max_num_seqs\":4,\"max_model_len\":65536,\"prompts\":[8000,60000]}" \
  "probe:p2:-m $M/qwen3.5-9b --simulate-gpu rtx3090 --gmu 0.98 $P --max-num-seqs 4 --max-num-batched-tokens 8192 --max-model-len 65536 --max-startups 3" \
  "s:e1g:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.5,\"kv\":\"fp8\",\"eager\":false,\"gdn\":\"triton\",\"mnbt\":8192,\"max_num_seqs\":4,\"max_model_len\":65536,\"prompts\":[60000]}" \
  "s:e1g2:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.5,\"kv\":\"fp8\",\"eager\":false,\"gdn\":\"triton\",\"mnbt\":8192,\"max_num_seqs\":4,\"max_model_len\":65536,\"prompts\":[60000]}" \
  "probe:p1:-m $M/qwen3.5-9b --simulate-gpu rtx3090 --gmu 0.96 --vllm-version 0.20.2 --no-fit --kv-cache-dtype fp8 --max-num-seqs 4 --max-num-batched-tokens 8192 --max-model-len 65536 --max-startups 3" \
  "s:e3:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.5,\"kv\":\"fp8\",\"eager\":true,\"gdn\":\"triton\",\"mnbt\":8192,\"max_num_seqs\":4,\"max_model_len\":65536,\"backend\":\"TRITON_ATTN\",\"prompts\":[60000]}" \
  "s:e2:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.5,\"kv\":\"fp8\",\"eager\":true,\"gdn\":\"triton\",\"mnbt\":8192,\"max_num_seqs\":4,\"max_model_len\":65536,\"backend\":\"FLASHINFER\",\"prompts\":[60000]}" \
  cache
