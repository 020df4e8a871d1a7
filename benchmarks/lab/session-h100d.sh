#!/usr/bin/env bash
# H100 session 4 (2026-11-22, third session of the day). Two bundles on one host, one part carried per call:
#   STEP=part20  copies the carried .gpu-bundle part (vLLM 0.20.2) to /tmp/parts
#   STEP=vis20   vLLM 0.20.2, issue 8: the vision encoder's profiling peak, Qwen3.5-0.8B (tower 12 x 768) and 9B
#                (27 x 1152), dummy weights, eager, with the tower and without (as session-h100c.sh did on 0.26.0)
#   STEP=part26  copies the carried .gpu-bundle-026 part to /tmp/parts26
#   STEP=dflash26 vLLM 0.26.0, issue 10: Qwen3.6-27B + the z-lab DFlash drafter (4 sliding + 1 full layer: 0.26 forces
#                its V2 model runner for that), dummy weights, eager, fp8 KV, 5 speculative tokens
cd "$(dirname "$0")/../.."
M=tests/fixtures/models
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/labout /tmp/mm /tmp/parts /tmp/parts26
E='"eager":true,"gdn":"triton","max_model_len":32768,"kv":"auto","gmu":0.5'
case "${STEP}" in
  part20) cp -n .gpu-bundle/s/part-* /tmp/parts/ 2>/dev/null; ls -l /tmp/parts;;
  vis20)
    [ -f .gpu-bundle/jit-cache.tgz ] && [ ! -d ~/.triton/cache ] && tar -xzf .gpu-bundle/jit-cache.tgz -C ~
    for m in qwen3.5-0.8b qwen3.5-9b; do python3 benchmarks/lab/fake_processor.py $M/$m /tmp/mm/$m; done
    LAB_BUNDLE=/nonexistent LAB_STEP_TIMEOUT=400 timeout 575 bash benchmarks/lab/run.sh unpack \
       "s:v20-08-lmo:{\"model\":\"/tmp/mm/qwen3.5-0.8b\",$E,\"lmo\":true}" \
       "s:v20-08-vis:{\"model\":\"/tmp/mm/qwen3.5-0.8b\",$E,\"lmo\":false,\"tokenizer\":true}" \
       "s:v20-9-vis:{\"model\":\"/tmp/mm/qwen3.5-9b\",$E,\"lmo\":false,\"tokenizer\":true}" \
       "s:v20-9-lmo:{\"model\":\"/tmp/mm/qwen3.5-9b\",$E,\"lmo\":true}";;
  part26) cp -n .gpu-bundle-026/s/part-* /tmp/parts26/ 2>/dev/null; ls -l /tmp/parts26;;
  dflash26)
    [ -f /tmp/site26/vllm/__init__.py ] || { mkdir -p /tmp/site26; cat /tmp/parts26/part-* | xz -d | tar x -C /tmp/site26; }
    [ -f .gpu-bundle-026/jit-cache.tgz ] && [ ! -f /tmp/jit26 ] && tar -xzf .gpu-bundle-026/jit-cache.tgz -C ~ && touch /tmp/jit26
    mkdir -p /tmp/dflash
    python3 - <<'PY'
import json
p = json.load(open("profiles/drafters/qwen3.6-27b-dflash.json"))["config"]
# keys the bundled profile leaves out, as the public copies of z-lab's drafter configs give them
p.update(hidden_act="silu", rms_norm_eps=1e-06, max_position_embeddings=262144, attention_bias=False,
         tie_word_embeddings=False, use_sliding_window=True, max_window_layers=5, rope_parameters={"rope_theta": 10000000, "rope_type": "default"})
json.dump(p, open("/tmp/dflash/config.json", "w"), indent=1)
PY
    D='"eager":true,"gdn":"triton","kv":"fp8","gmu":0.92,"lmo":true'
    LAB_BUNDLE=/nonexistent LAB_PYTHONPATH=/tmp/site26 LAB_STEP_TIMEOUT=560 timeout 585 bash benchmarks/lab/run.sh \
       "s:d26-q36-dflash5:{\"model\":\"$M/qwen3.6-27b\",$D,\"spec\":{\"method\":\"dflash\",\"model\":\"/tmp/dflash\",\"num_speculative_tokens\":5}}";;
esac
[ "${STEP}" = part20 ] || [ "${STEP}" = part26 ] || { tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; ls /tmp/lab; }
