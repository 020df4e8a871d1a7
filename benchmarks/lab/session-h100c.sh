#!/usr/bin/env bash
# H100 session 3, vLLM 0.26.0 (issue 8): the vision encoder's profiling peak. Qwen3.5-0.8B (tower depth 12, width
# 768) and 9B (27 x 1152), dummy weights, eager, with the tower (language_model_only off) and without, same flags.
# The processor files come from benchmarks/lab/fake_processor.py (public Qwen3.5 image/video settings, a stand-in
# tokenizer with the config's special-token ids): the host reaches no hub.
cd "$(dirname "$0")/../.."
M=tests/fixtures/models
export LAB_BUNDLE=.gpu-bundle-026 NCCL_NVLS_ENABLE=0
mkdir -p /tmp/labout /tmp/mm
for m in qwen3.5-0.8b qwen3.5-9b; do python3 benchmarks/lab/fake_processor.py $M/$m /tmp/mm/$m; done
E='"eager":true,"gdn":"triton","max_model_len":32768,"kv":"auto","gmu":0.5'
case "${STEP:-a}" in
  a) OUT=/tmp/labout LAB_STEP_TIMEOUT=420 timeout 570 bash benchmarks/lab/run.sh unpack \
       "s:v08-lmo:{\"model\":\"/tmp/mm/qwen3.5-0.8b\",$E,\"lmo\":true}" \
       "s:v08-vis:{\"model\":\"/tmp/mm/qwen3.5-0.8b\",$E,\"lmo\":false,\"tokenizer\":true}" \
       "s:v08-vis-img:{\"model\":\"/tmp/mm/qwen3.5-0.8b\",$E,\"lmo\":false,\"tokenizer\":true,\"mm_limit\":{\"video\":0}}";;
  b) OUT=/tmp/labout LAB_STEP_TIMEOUT=300 timeout 570 bash benchmarks/lab/run.sh \
       "s:v9-vis:{\"model\":\"/tmp/mm/qwen3.5-9b\",$E,\"lmo\":false,\"tokenizer\":true}" \
       "s:v9-vis-img:{\"model\":\"/tmp/mm/qwen3.5-9b\",$E,\"lmo\":false,\"tokenizer\":true,\"mm_limit\":{\"video\":0}}" \
       "s:v9-lmo:{\"model\":\"/tmp/mm/qwen3.5-9b\",$E,\"lmo\":true}";;
esac
tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; ls /tmp/lab
