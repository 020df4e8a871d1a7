"""Qwen's GatedDeltaNet hybrids: Qwen3.5 / Qwen3.6 / Qwen3.8 (dense and MoE, nested `text_config`, an optional vision
tower, an MTP head) and Qwen3-Next (flat, `full_attention_interval`): three GatedDeltaNet layers to one gated
full-attention layer."""

from __future__ import annotations

from . import Family
from .decoder import read_decoder

FAMILY = Family(
    name="Qwen3.5 / 3.6 / 3.8 and Qwen3-Next (GatedDeltaNet hybrids)",
    architectures=("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForCausalLM",
                   "Qwen3_5MoeForCausalLM", "Qwen3NextForCausalLM"),
    model_types=("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next"),
    read=read_decoder,
    evidence="lab startups on vLLM 0.20.2 and 0.26.0 (H100, H200, 2x H200: 0.8B to 35B-A3B, AWQ, FP8, AutoRound, "
             "MTP, DFlash, the vision tower), club-3090's public logs",
)
