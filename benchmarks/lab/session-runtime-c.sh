#!/usr/bin/env bash
# Third lab host of 2026-11-22 (vLLM 0.20.2, H100): the mission's 4060 Ti deployment (9B AWQ, fp8 KV,
# eager, MTP 2, 8 seqs, 2048 batched tokens, prefix caching) simulated, with FLASHINFER forced as vLLM
# picks it on Ada for fp8 KV and the FLA GDN path. p5 (GMU 0.97, then 0.95 and a shorter length, --max-startups 3)
# ran on the first host; p6/p7 look for the GMU that serves, one startup each.
cd "$(dirname "$0")/../.."
[ -f .gpu-bundle/jit-cache.tgz ] && [ ! -d ~/.triton/cache ] && tar -xzf .gpu-bundle/jit-cache.tgz -C ~
M=tests/fixtures/models
export LAB_STEP_TIMEOUT=${LAB_STEP_TIMEOUT:-560} LAB_EXTRA="--gdn-prefill-backend triton"
timeout 585 bash benchmarks/lab/run.sh unpack \
  "probe:p6:-m $M/qwen3.5-9b-awq --simulate-gpu rtx4060ti --gmu 0.91 --vllm-version 0.20.2 --no-fit --kv-cache-dtype fp8 --enforce-eager --mtp 2 --max-num-seqs 8 --max-num-batched-tokens 2048 --enable-prefix-caching --max-model-len 32768 --attention-backend FLASHINFER --max-startups 1" \
  "probe:p7:-m $M/qwen3.5-9b-awq --simulate-gpu rtx4060ti --gmu 0.85 --vllm-version 0.20.2 --no-fit --kv-cache-dtype fp8 --enforce-eager --mtp 2 --max-num-seqs 8 --max-num-batched-tokens 2048 --enable-prefix-caching --max-model-len 32768 --attention-backend FLASHINFER --max-startups 1"
