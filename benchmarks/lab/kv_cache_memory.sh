#!/bin/bash
# One `vllm serve MODEL` at its defaults with --kv-cache-memory set to vrambudget's available KV at GMU 0.92 for this
# card (Qwen3-8B, vLLM 0.33: `vrambudget predict --model qwen3-8b --gpu h100|h200 --vllm-version 0.33 --json`,
# available_kv_bytes, 2026-11-27), then what nvidia-smi reports in use once the server is up (issue 47).
#   bash kv_cache_memory.sh MODEL_DIR PORT     (CUDA_VISIBLE_DEVICES: one GPU)
set -u
model=$1 port=$2 gpu=${CUDA_VISIBLE_DEVICES:-0}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "$gpu")
case "$name" in
  *H200*) kv=117676608117 ;;
  *H100*) kv=57791612246 ;;
  *) echo "LAB kv-cache-memory: no figure for $name"; exit 2 ;;
esac
log=$(mktemp)
setsid python3 -m vllm.entrypoints.cli.main serve "$model" --load-format dummy --skip-tokenizer-init --port "$port" \
  --kv-cache-memory "$kv" >"$log" 2>&1 &
pid=$!
up=1
for _ in $(seq 1 500); do
  if grep -q "Application startup complete" "$log"; then up=0; break; fi
  kill -0 $pid 2>/dev/null || break
  sleep 1
done
echo "LAB gpu $name kv_cache_memory $kv up $up"
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits -i "$gpu" | sed 's/^/LAB nvidia-smi MiB used,total: /'
kill -TERM -- -$pid 2>/dev/null; sleep 5; kill -KILL -- -$pid 2>/dev/null
cat "$log"
exit $up
