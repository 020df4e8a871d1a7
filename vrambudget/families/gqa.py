"""Decoders of full (and Qwen2-style sliding-window) GQA attention with a dense MLP or a mixture of experts: Llama,
Mistral, Qwen2, Qwen3, Qwen3-MoE, Mixtral, Phi-3/Phi-4 (vLLM's Phi3ForCausalLM subclasses Llama's; its fused qkv and
gate_up projections hold the same bytes as split ones)."""

from __future__ import annotations

from . import Family
from .decoder import read_decoder

FAMILY = Family(
    name="GQA decoders (Llama, Mistral, Qwen2/Qwen3, Qwen3-MoE, Mixtral, Phi-3/4)",
    architectures=("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                   "Qwen3MoeForCausalLM", "MixtralForCausalLM", "Phi3ForCausalLM"),
    model_types=("llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "phi3"),
    read=read_decoder,
    evidence="lab startups on vLLM 0.20.2 and 0.26.0 (Llama-3.1-8B, Qwen3-8B, Qwen3-30B-A3B, Phi-4, Mixtral cut to 16 "
             "layers; vLLM's default flags, Model Runner V1 and V2) and 0.33.0 (Qwen3-8B, Llama-3.1-8B, Qwen3-30B-A3B at "
             "2,048 to 32,768 batched tokens, Mixtral cut to 16 layers: its CUDA-graph estimate 0.77 GiB below the MoE "
             "factor, said as a band), public logs of Llama, Qwen2.5, Qwen3 and Phi-3 on 0.10-0.30 "
             "(tests/fixtures/public-logs)",
)
