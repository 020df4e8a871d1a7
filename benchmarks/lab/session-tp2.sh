#!/usr/bin/env bash
# Tensor parallel (issue 11) on a two-GPU host (device kind nvidia-h200-x2), vLLM 0.26.0, NCCL_NVLS_ENABLE=0 (the host
# notes). Each rank logs its own "Available KV cache memory"; run.sh's JSON startups set tensor_parallel_size.
# t1/t2: 9B, fp8 KV, eager and CUDA graphs; tp2p: `vrambudget probe -tp 2` end to end (bisect, verify).
cd "$(dirname "$0")/../.."
M=tests/fixtures/models
export LAB_BUNDLE=.gpu-bundle-026 LAB_STEP_TIMEOUT=${LAB_STEP_TIMEOUT:-540} NCCL_NVLS_ENABLE=0 LAB_EXTRA="--gdn-prefill-backend triton"
Q="\"gdn\":\"triton\",\"max_num_seqs\":8,\"mnbt\":2048,\"tp\":2"
mkdir -p /tmp/labout
OUT=/tmp/labout timeout ${LAB_TOTAL:-585} bash benchmarks/lab/run.sh unpack \
  "s:tp2-q9-e-fp8:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.075,\"kv\":\"fp8\",\"eager\":true,$Q}" \
  "s:tp2-q9-g-fp8-mtp2:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.08,\"kv\":\"fp8\",\"eager\":false,\"mtp\":2,\"max_model_len\":32768,$Q}" \
  "probe:tp2p:-m $M/qwen3.5-9b --vllm-version 0.26.0 -tp 2 --gmu 0.1 --kv-cache-dtype fp8 --enforce-eager --no-fit --max-startups 3"
tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; ls /tmp/lab
