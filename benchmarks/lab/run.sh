#!/usr/bin/env bash
# The lab session on the GPU host (device tool): bash benchmarks/lab/run.sh STEP...
# LAB_BUNDLE: the folder of bundle parts (default .gpu-bundle; .gpu-bundle-026 for vLLM 0.26.0).
# Steps: ctx (CUDA context per process, no vLLM), unpack, one JSON startup per "s:NAME:JSON" argument,
# LAB_PYTHONPATH: what startups import first (default /tmp/site). "probe:NAME:ARGS" (a vrambudget probe run; LAB_EXTRA: more vLLM flags), cache (JIT caches to $OUT). Each step's output goes to $OUT/NAME.log; state in /tmp/lab.
set -uo pipefail
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p /tmp/lab /tmp/parts /tmp/site
here=$(cd "$(dirname "$0")" && pwd)
for p in "${LAB_BUNDLE:-.gpu-bundle}"/part-*; do [ -f "$p" ] && cp -n "$p" /tmp/parts/; done
for step in "$@"; do
  name=${step%%:*}; rest=${step#*:}
  case "$name" in
    ctx)
      nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee "$OUT/ctx.log"
      python3 -c "
import torch; torch.cuda.init(); f0,t=torch.cuda.mem_get_info(); x=torch.zeros(1,device='cuda'); torch.cuda.synchronize()
f1,_=torch.cuda.mem_get_info(); p=torch.cuda.get_device_properties(0)
print('LAB ctx total',t,'used_after_init',t-f0,'used_after_first_alloc',t-f1,'sms',p.multi_processor_count,'name',p.name)" | tee -a "$OUT/ctx.log";;
    unpack)
      [ -f /tmp/site/vllm/__init__.py ] || (cat /tmp/parts/part-* | xz -d | tar x -C /tmp/site)
      PYTHONPATH=/tmp/site python3 -c "import vllm; print('LAB vllm', vllm.__version__)" 2>&1 | tail -1 | tee "$OUT/unpack.log";;
    s)
      tag=${rest%%:*}; json=${rest#*:}
      [ -f "/tmp/lab/$tag.done" ] && continue
      PYTHONPATH=${LAB_PYTHONPATH:-/tmp/site} VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_LOGGING_LEVEL=DEBUG \
        timeout "${LAB_STEP_TIMEOUT:-560}" python3 "$here/startup.py" "$json" > "/tmp/lab/$tag.log" 2>&1
      echo "rc $?" >> "/tmp/lab/$tag.log"; grep -q "LAB done" "/tmp/lab/$tag.log" && touch "/tmp/lab/$tag.done"
      cp "/tmp/lab/$tag.log" "$OUT/$tag.log"; grep -E "^LAB|Available KV|Model loading took|torch peak|rc " "/tmp/lab/$tag.log" | tail -15;;
    cache)  # the JIT caches a first Qwen3.5 boot builds (Triton/FLA, FlashInfer), for a later host
      tar -C ~ -czf "$OUT/jit-cache.tgz" .triton/cache .cache/flashinfer 2>/dev/null; ls -l "$OUT/jit-cache.tgz";;
    probe)
      tag=${rest%%:*}; args=${rest#*:}
      [ -f "/tmp/lab/$tag.done" ] && continue
      mkdir -p "/tmp/lab/$tag"
      PYTHONPATH=/tmp/site:$PWD timeout "${LAB_STEP_TIMEOUT:-560}" python3 -m vrambudget.cli probe $args \
        --vllm-cmd "python3 -m vllm.entrypoints.cli.main serve" --dummy-weights --extra-args "--skip-tokenizer-init ${LAB_EXTRA:-}" \
        --runs-dir "/tmp/lab/$tag" > "/tmp/lab/$tag/probe.txt" 2>&1
      echo "rc $?" >> "/tmp/lab/$tag/probe.txt"; grep -q "^ceiling\|^smallest\|probe stopped" "/tmp/lab/$tag/probe.txt" && touch "/tmp/lab/$tag.done"
      tar -C /tmp/lab -czf "$OUT/$tag.tgz" "$tag"; tail -25 "/tmp/lab/$tag/probe.txt";;
  esac
done
