#!/usr/bin/env bash
# H100 session 2 for vLLM 0.26.0 (issue 10): Gemma 4 read as vLLM 0.26.0 means it, and the Qwen3.6 models.
# Gemma 4: transformers 5.15+ moves global_head_dim / num_global_key_value_heads into per_layer_config, so vLLM
# 0.26.0 (on the host's transformers 5.17) read the full-attention layers as head_dim 256 / 16 KV heads (the
# first g31/g26 logs). Here transformers 5.14.1 (the newest that keeps them; its tokenizers pin <=0.23.0 is relaxed
# to the host's 0.23.2, an import-time check only) goes first on PYTHONPATH.
#   STEP=gemma: unpack, transformers 5.14.1, Gemma 4 31B and 26B-A4B, bf16 and fp8 KV, eager, auto-fit.
#   STEP=qwen:  Qwen3.6-27B (fp8 KV, MTP 2) and Qwen3.6-35B-A3B (fp8 KV), eager, auto-fit, dummy weights.
cd "$(dirname "$0")/../.."
M=tests/fixtures/models
B=.gpu-bundle-026
export LAB_BUNDLE=$B NCCL_NVLS_ENABLE=0
mkdir -p /tmp/labout
[ -f "$B/jit-cache.tgz" ] && [ ! -d ~/.triton/cache ] && tar xzf "$B/jit-cache.tgz" -C ~
E='"eager":true,"max_model_len":-1'
case "${STEP:-gemma}" in
  gemma)
    if [ ! -d /tmp/tf514/transformers ]; then
      mkdir -p /tmp/tf514 && (cd /tmp/tf514 && python3 -m zipfile -e "$OLDPWD/$B/transformers-5.14.1-py3-none-any.whl" .)
      sed -i 's/"tokenizers": "tokenizers>=0.22.0,<=0.23.0"/"tokenizers": "tokenizers>=0.22.0"/' /tmp/tf514/transformers/dependency_versions_table.py
    fi
    OUT=/tmp/labout bash benchmarks/lab/run.sh unpack
    PYTHONPATH=/tmp/tf514:/tmp/site python3 -c "import transformers, vllm; print('LAB transformers', transformers.__version__, 'vllm', vllm.__version__)"
    OUT=/tmp/labout LAB_PYTHONPATH=/tmp/tf514:/tmp/site LAB_STEP_TIMEOUT=240 timeout 540 bash benchmarks/lab/run.sh \
      "s:g31t-e-bf16:{\"model\":\"$M/gemma-4-31b-text\",\"gmu\":0.92,\"kv\":\"auto\",$E}" \
      "s:g26t-e-bf16:{\"model\":\"$M/gemma-4-26b-a4b-text\",\"gmu\":0.92,\"kv\":\"auto\",$E}" \
      "s:g31t-e-fp8:{\"model\":\"$M/gemma-4-31b-text\",\"gmu\":0.92,\"kv\":\"fp8\",$E}";;
  qwen)
    OUT=/tmp/labout LAB_STEP_TIMEOUT=400 timeout 560 bash benchmarks/lab/run.sh \
      "s:q36-27b-e-fp8-mtp2:{\"model\":\"$M/qwen3.6-27b\",\"gmu\":0.92,\"kv\":\"fp8\",\"mtp\":2,\"gdn\":\"triton\",$E}" \
      "s:q36-35b-e-fp8:{\"model\":\"$M/qwen3.6-35b-a3b\",\"gmu\":0.95,\"kv\":\"fp8\",\"gdn\":\"triton\",$E}";;
esac
tar -C /tmp/lab -czf "$OUT/logs.tgz" . 2>/dev/null; ls /tmp/lab
