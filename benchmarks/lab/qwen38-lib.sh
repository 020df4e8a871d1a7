# The helpers of the Qwen3.8 lab sessions (session-tp2c.sh, session-h100f.sh), sourced from the repository root:
# `models` writes each bundled Qwen3.8 profile's config (profiles/models/NAME.json 'config') to /tmp/models/NAME with
# the stand-in processor files of fake_processor.py; `run` unpacks the carried vLLM 0.26.0 bundle and the JIT cache
# once, then runs benchmarks/lab/run.sh's steps (T: the step timeout).
mkdir -p /tmp/lab /tmp/parts26 /tmp/cfg /tmp/models
models() {
  for n in qwen3.8-27b qwen3.8-27b-fp8 qwen3.8-27b-int4-autoround; do
    [ -f /tmp/models/$n/config.json ] && continue
    mkdir -p /tmp/cfg/$n
    python3 -c "import json,sys; json.dump(json.load(open('profiles/models/$n.json'))['config'], open('/tmp/cfg/$n/config.json','w'), indent=1)"
    python3 benchmarks/lab/fake_processor.py /tmp/cfg/$n /tmp/models/$n
  done
}
run() {
  [ -f /tmp/site26/vllm/__init__.py ] || { mkdir -p /tmp/site26; cat /tmp/parts26/part-* | xz -d | tar x -C /tmp/site26; }
  [ -f .gpu-bundle-026/jit-cache.tgz ] && [ ! -f /tmp/jit26 ] && tar -xzf .gpu-bundle-026/jit-cache.tgz -C ~ && touch /tmp/jit26
  models
  LAB_BUNDLE=/nonexistent LAB_PYTHONPATH=/tmp/site26 LAB_STEP_TIMEOUT=${T:-400} bash benchmarks/lab/run.sh "$@"
}
M=/tmp/models
