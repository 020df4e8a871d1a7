#!/usr/bin/env bash
# Real-GPU check of `vrambudget probe` (how the records in tests/fixtures/probe-* were made).
# On a GPU host with vLLM 0.20.2 unpacked in /tmp/site (see ../shared/gpu-lab/):
#   bash benchmarks/real_probe.sh MODEL_DIR GMU OUTDIR [extra vrambudget flags]
# Dummy weights, fp8 KV cache, MTP 2, eager, 8 seqs, 2048 batched tokens; the probe bisects
# max_model_len at GMU, verifies the ceiling with a real request, records and refits.
set -uo pipefail
model=$1; gmu=$2; out=$3; shift 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
mkdir -p "$out"
python3 -m vrambudget.cli probe --model "$model" --gpu auto --vllm-version 0.20.2 --gmu "$gmu" \
  --kv-cache-dtype fp8 --mtp 2 --enforce-eager --max-num-seqs 8 --max-num-batched-tokens 2048 \
  --vllm-cmd "python3 -m vllm.entrypoints.cli.main serve" --dummy-weights \
  --extra-args "--skip-tokenizer-init" --runs-dir "$out" --startup-timeout 540 "$@" 2>&1 | tee "$out/probe.txt"
