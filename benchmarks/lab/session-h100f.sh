#!/usr/bin/env bash
# H100 session 6 (issue 10, 2026-11-23), vLLM 0.26.0, dummy weights, one GPU: the two questions the TP=2 session
# (session-tp2c.sh, whose model folders and helpers this reuses) left open.
#   STEP="S1 S2 ..." runs these steps in turn:
#   part   copies the carried .gpu-bundle-026 part to /tmp/parts26 (one part per call)
#   f      q38fp8-vis: the TP=2 FP8 startup (q38fp8-tp2-e-auto-mtp3-vis) on one GPU: are the 0.25 GiB of weights it
#          loaded beyond the model a TP=2 effect or the tower's (the one-GPU FP8 startup so far was text only)?
#   g      q38bf-8k: Qwen3.8-27B bf16, eager, text only, 2 seqs / 8192 tokens, fp8 KV, MTP 3: the forward peak at
#          8192 tokens on one GPU (0.98 logged vs 0.76 at TP=2; 9B: 1.00 vs 0.79)
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
. benchmarks/lab/qwen38-lib.sh
for step in ${STEP}; do case "$step" in
  part) cp -n .gpu-bundle-026/s/part-* /tmp/parts26/ 2>/dev/null; ls -l /tmp/parts26;;
  f) T=330 VLLM_USE_DEEP_GEMM=0 VLLM_DISABLED_KERNELS=FlashInferFp8DeepGEMMDynamicBlockScaledKernel run \
       "s:q38fp8-e-auto-mtp3-vis:{\"model\":\"$M/qwen3.8-27b-fp8\",\"eager\":true,\"gdn\":\"triton\",\"kv\":\"auto\",\"mtp\":3,\"gmu\":0.92,\"max_model_len\":262144,\"max_num_seqs\":256,\"mnbt\":2048,\"lmo\":false,\"tokenizer\":true}";;
  g) T=200 run "s:q38bf-e-fp8-mtp3-lmo-8k:{\"model\":\"$M/qwen3.8-27b\",\"eager\":true,\"gdn\":\"triton\",\"kv\":\"fp8\",\"mtp\":3,\"gmu\":0.92,\"max_model_len\":262144,\"max_num_seqs\":2,\"mnbt\":8192}";;
esac; done
[ "${STEP}" = part ] || { tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; ls /tmp/lab; }
