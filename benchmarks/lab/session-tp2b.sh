#!/usr/bin/env bash
# Second TP=2 session (issue 11) on nvidia-h200-x2, vLLM 0.26.0, NCCL_NVLS_ENABLE=0.
#   STEP=graph: unpack, the Triton cache of the H100 host (same SM 9.0), then the graph-mode TP=2 startup with MTP 2
#     again, with vLLM's allreduce+RMSNorm fusion off: the first try died with cudaErrorIllegalAddress after vLLM
#     auto-selected FlashInfer's "mnnvl" all-reduce (NVLink multicast, which this host keeps off).
#   STEP=probe: `vrambudget probe -tp 2` end to end through `vllm serve` (its defaults 1024 seqs / 8192 tokens),
#     eager, fp8 KV, GMU 0.093 (predicted ceiling ~96k tokens, so the verify prompt stays short).
cd "$(dirname "$0")/../.."
M=tests/fixtures/models
export LAB_BUNDLE=.gpu-bundle-026 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm LAB_EXTRA="--gdn-prefill-backend triton"
mkdir -p /tmp/labout
[ -f "$LAB_BUNDLE/jit-cache.tgz" ] && [ ! -d ~/.triton/cache ] && tar xzf "$LAB_BUNDLE/jit-cache.tgz" -C ~
case "${STEP:-graph}" in
  graph)
    NOFUSE='"compilation":{"pass_config":{"fuse_allreduce_rms":false}}'
    OUT=/tmp/labout LAB_STEP_TIMEOUT=500 timeout 570 bash benchmarks/lab/run.sh unpack \
      "s:tp2-q9-g-fp8-mtp2-nofuse:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.1,\"kv\":\"fp8\",\"eager\":false,\"mtp\":2,\"max_model_len\":32768,\"gdn\":\"triton\",\"max_num_seqs\":8,\"mnbt\":2048,\"tp\":2,$NOFUSE}";;
  probe)
    OUT=/tmp/labout LAB_STEP_TIMEOUT=530 timeout 575 bash benchmarks/lab/run.sh unpack \
      "probe:tp2p:-m $M/qwen3.5-9b --vllm-version 0.26.0 -tp 2 --gmu 0.093 --kv-cache-dtype fp8 --enforce-eager --no-fit --max-startups 3";;
esac
tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; ls /tmp/lab
