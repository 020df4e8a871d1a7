#!/usr/bin/env bash
# The vLLM 0.26.0 lab session (issue 11, issue 10) on an H100: the 0.20.2 fixture matrix again, on 0.26.0, plus
# Gemma 4 (text-only configs) with dummy weights. Every device call runs this same command; finished steps
# are skipped (state in /tmp/lab). Qwen3.5 runs with the FLA (Triton) GDN prefill: 0.26.0's Hopper default is
# FlashInfer's CuTe-DSL kernel, left out of the bundle (build-bundle-0.26.sh says why).
cd "$(dirname "$0")/../.."
[ -f .gpu-bundle-026/jit-cache.tgz ] && [ ! -d ~/.triton/cache ] && tar -xzf .gpu-bundle-026/jit-cache.tgz -C ~
M=tests/fixtures/models
export LAB_BUNDLE=.gpu-bundle-026 LAB_STEP_TIMEOUT=${LAB_STEP_TIMEOUT:-560}
Q="\"gdn\":\"triton\",\"max_num_seqs\":8,\"mnbt\":2048"
mkdir -p /tmp/labout
OUT=/tmp/labout timeout ${LAB_TOTAL:-585} bash benchmarks/lab/run.sh unpack \
  "s:q9-e-fp8-mtp0:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.3,\"kv\":\"fp8\",\"eager\":true,$Q}" \
  cache \
  "s:q9-e-fp8-mtp2:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.3,\"kv\":\"fp8\",\"eager\":true,\"mtp\":2,$Q}" \
  "s:q9-e-bf16-mtp0:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.3,\"kv\":\"auto\",\"eager\":true,$Q}" \
  "s:awq-e-fp8-mtp2-pc:{\"model\":\"$M/qwen3.5-9b-awq\",\"gmu\":0.25,\"kv\":\"fp8\",\"eager\":true,\"mtp\":2,\"prefix_caching\":true,$Q}" \
  "s:g31-e-bf16:{\"model\":\"$M/gemma-4-31b-text\",\"gmu\":0.92,\"kv\":\"auto\",\"eager\":true,\"lmo\":false,\"max_num_seqs\":8,\"mnbt\":2048}" \
  "s:g26-e-bf16:{\"model\":\"$M/gemma-4-26b-a4b-text\",\"gmu\":0.85,\"kv\":\"auto\",\"eager\":true,\"lmo\":false,\"max_num_seqs\":8,\"mnbt\":2048}" \
  "s:q9-g-fp8-mtp2-32k-cold:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.3,\"kv\":\"fp8\",\"eager\":false,\"mtp\":2,\"max_model_len\":32768,$Q}" \
  "s:q9-g-fp8-mtp2-32k-warm:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.3,\"kv\":\"fp8\",\"eager\":false,\"mtp\":2,\"max_model_len\":32768,$Q}" \
  "s:q9-g-fp8-mtp2-40k:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.3,\"kv\":\"fp8\",\"eager\":false,\"mtp\":2,\"max_model_len\":40960,$Q}" \
  "s:q9-e-fp8-defaults:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.3,\"kv\":\"fp8\",\"eager\":true,\"gdn\":\"triton\",\"defaults\":true}" \
  cache
tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; cp /tmp/labout/jit-cache.tgz "$OUT/" 2>/dev/null; ls /tmp/lab
