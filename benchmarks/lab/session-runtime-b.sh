#!/usr/bin/env bash
# Second lab host of 2026-11-22 (vLLM 0.20.2, H100): the runtime OOM in graph mode on a simulated 24 GB card.
# e1g: in-process startup that compiles the graphs (cold), so the probe's boots load them warm, as a
#      restart does; p3: probe of a simulated RTX 3090 at GMU 0.97 (predicted: starts, OOMs serving 64K);
# p4: the same in eager mode (the kernel warmup after the KV cache is allocated needs room too).
cd "$(dirname "$0")/../.."
[ -f .gpu-bundle/jit-cache.tgz ] && [ ! -d ~/.triton/cache ] && tar -xzf .gpu-bundle/jit-cache.tgz -C ~
M=tests/fixtures/models
export LAB_STEP_TIMEOUT=${LAB_STEP_TIMEOUT:-560} LAB_EXTRA="--gdn-prefill-backend triton"
P="-m $M/qwen3.5-9b --simulate-gpu rtx3090 --vllm-version 0.20.2 --no-fit --kv-cache-dtype fp8 --max-num-seqs 4 --max-num-batched-tokens 8192 --max-model-len 65536 --max-startups 3"
timeout 585 bash benchmarks/lab/run.sh unpack \
  "s:e1g:{\"model\":\"$M/qwen3.5-9b\",\"gmu\":0.5,\"kv\":\"fp8\",\"eager\":false,\"gdn\":\"triton\",\"mnbt\":8192,\"max_num_seqs\":4,\"max_model_len\":65536,\"prompts\":[60000]}" \
  "probe:p3:$P --gmu 0.97" \
  "probe:p4:$P --gmu 0.97 --enforce-eager"
