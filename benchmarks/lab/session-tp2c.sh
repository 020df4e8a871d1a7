#!/usr/bin/env bash
# Third TP=2 session (issue 10, 2026-11-23) on nvidia-h200-x2, vLLM 0.26.0, dummy weights: the bundled Qwen3.8-27B
# profiles at tensor parallel 2, the way 2x 3090 / 2x 5090 owners serve them. The model folders are written on the
# host from the profiles themselves (profiles/models/NAME.json 'config'), named as the profiles, so that
# `vrambudget explain` and benchmarks/accuracy.py resolve each log to its bundled profile; the vision runs get the
# stand-in processor files of benchmarks/lab/fake_processor.py.
#   STEP="S1 S2 ..." runs these steps in turn:
#   part   copies the carried .gpu-bundle-026 part to /tmp/parts26 (one part per call)
#   a      unpack; q38fp8: Qwen/Qwen3.8-27B-FP8's layout with the flags of vllm-project/recipes PR 810's 2x RTX 5090
#          row (max_model_len 262,144, KV auto, MTP 3, vision tower on; 256 seqs / 2048 tokens, vLLM's defaults below
#          70 GiB), eager, CUTLASS block-scaled FP8 (the bundle lacks DeepGEMM's JIT headers)
#   b      q38ar: the AutoRound INT4 layout through Marlin (the consumer cards' kernel) with club-3090 #104's flags
#          (MTP 3, 2 seqs, 8192 tokens, prefix caching, GMU 0.92, 262,144, vision on, CUDA graphs), fp8 e4m3 KV
#          instead of their fp8_e5m2 (Hopper's FlashAttention takes e4m3 only)
#   c      q38bf: Qwen3.8-27B bf16, fp8 KV, MTP 3, text only, eager
#   d      q38ar-lmo: step b's startup eager and text only
#   e      q38ar-vis-e: step b's startup eager (with the tower: at 8192 tokens eager the encoder's TP=2 peak shows)
#   cache  the JIT caches (Triton kernels for the TP=2 27B shapes) to $OUT
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm
. benchmarks/lab/qwen38-lib.sh
R104='"tp":2,"gdn":"triton","kv":"fp8","mtp":3,"gmu":0.92,"max_model_len":262144,"max_num_seqs":2,"mnbt":8192,"prefix_caching":true'
NOFUSE='"compilation":{"pass_config":{"fuse_allreduce_rms":false}}'
for step in ${STEP}; do case "$step" in
  part) cp -n .gpu-bundle-026/s/part-* /tmp/parts26/ 2>/dev/null; ls -l /tmp/parts26;;
  a) T=420 VLLM_USE_DEEP_GEMM=0 VLLM_DISABLED_KERNELS=FlashInferFp8DeepGEMMDynamicBlockScaledKernel run \
       "s:q38fp8-tp2-e-auto-mtp3-vis:{\"model\":\"$M/qwen3.8-27b-fp8\",\"tp\":2,\"eager\":true,\"gdn\":\"triton\",\"kv\":\"auto\",\"mtp\":3,\"gmu\":0.92,\"max_model_len\":262144,\"max_num_seqs\":256,\"mnbt\":2048,\"lmo\":false,\"tokenizer\":true}";;
  b) T=560 VLLM_DISABLED_KERNELS=MacheteLinearKernel run \
       "s:q38ar-tp2-g-fp8-mtp3-vis:{\"model\":\"$M/qwen3.8-27b-int4-autoround\",$R104,\"eager\":false,\"lmo\":false,\"tokenizer\":true,$NOFUSE}";;
  e) T=330 VLLM_DISABLED_KERNELS=MacheteLinearKernel run \
       "s:q38ar-tp2-e-fp8-mtp3-vis:{\"model\":\"$M/qwen3.8-27b-int4-autoround\",$R104,\"eager\":true,\"lmo\":false,\"tokenizer\":true}";;
  c) T=150 run "s:q38bf-tp2-e-fp8-mtp3-lmo:{\"model\":\"$M/qwen3.8-27b\",\"tp\":2,\"eager\":true,\"gdn\":\"triton\",\"kv\":\"fp8\",\"mtp\":3,\"gmu\":0.92,\"max_model_len\":262144,\"max_num_seqs\":8,\"mnbt\":2048}";;
  d) T=150 VLLM_DISABLED_KERNELS=MacheteLinearKernel run \
       "s:q38ar-tp2-e-fp8-mtp3-lmo:{\"model\":\"$M/qwen3.8-27b-int4-autoround\",$R104,\"eager\":true,\"lmo\":true}";;
  cache) tar -C ~ -czf "$OUT/jit-cache-tp2.tgz" .triton/cache .cache/flashinfer 2>/dev/null; ls -l "$OUT/jit-cache-tp2.tgz";;
esac; done
[ "${STEP}" = part ] || { tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; ls /tmp/lab; }
