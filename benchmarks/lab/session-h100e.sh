#!/usr/bin/env bash
# H100 session 5 (2026-11-22, fourth session of the day), vLLM 0.26.0, issue 10: the quantized Qwen3.6-27B
# checkpoints users serve, as layouts (benchmarks/lab/quant_layouts.py), dummy weights, eager, fp8 KV, MTP 2,
# the flags of lab-vllm-0.26.0-h100/q36-27b-e-fp8-mtp2 (bf16) so that only the weights differ:
#   STEP=part26  copies the carried .gpu-bundle-026 part to /tmp/parts26
#   STEP=q36fp8  Qwen/Qwen3.6-27B-FP8's layout (fp8 128 x 128 blocks: CUTLASS block-scaled on Hopper)
#                (the bundle lacks DeepGEMM's JIT headers: vLLM's first pick, FlashInfer's DeepGEMM block-scaled GEMM,
#                loads the weights and then fails the first forward; q36fp8c disables it: CUTLASS block-scaled)
#   STEP=q36ar   the AutoRound INT4 layout with vLLM's own kernel choice (Machete on Hopper)
#   STEP=q36arm  the same with Machete disabled: Marlin, the kernel every consumer card runs it with
cd "$(dirname "$0")/../.."
M=tests/fixtures/models
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/labout /tmp/parts26
Q='"eager":true,"gdn":"triton","kv":"fp8","mtp":2,"gmu":0.92,"lmo":true'
run() {
  [ -f /tmp/site26/vllm/__init__.py ] || { mkdir -p /tmp/site26; cat /tmp/parts26/part-* | xz -d | tar x -C /tmp/site26; }
  [ -f .gpu-bundle-026/jit-cache.tgz ] && [ ! -f /tmp/jit26 ] && tar -xzf .gpu-bundle-026/jit-cache.tgz -C ~ && touch /tmp/jit26
  LAB_BUNDLE=/nonexistent LAB_PYTHONPATH=/tmp/site26 LAB_STEP_TIMEOUT=560 timeout 585 bash benchmarks/lab/run.sh "$@"
}
case "${STEP}" in
  part26) cp -n .gpu-bundle-026/s/part-* /tmp/parts26/ 2>/dev/null; ls -l /tmp/parts26;;
  q36fp8) run "s:q36fp8-e-fp8-mtp2:{\"model\":\"$M/qwen3.6-27b-fp8\",$Q}";;
  q36fp8c) VLLM_USE_DEEP_GEMM=0 VLLM_DISABLED_KERNELS=FlashInferFp8DeepGEMMDynamicBlockScaledKernel \
    run "s:q36fp8c-e-fp8-mtp2:{\"model\":\"$M/qwen3.6-27b-fp8\",$Q}";;
  q36ar) run "s:q36ar-e-fp8-mtp2:{\"model\":\"$M/qwen3.6-27b-int4-autoround\",$Q}";;
  q36arm) VLLM_DISABLED_KERNELS=MacheteLinearKernel run "s:q36arm-e-fp8-mtp2:{\"model\":\"$M/qwen3.6-27b-int4-autoround\",$Q}";;
esac
[ "${STEP}" = part26 ] || { tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; ls /tmp/lab; }
