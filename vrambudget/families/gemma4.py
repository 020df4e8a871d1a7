"""Gemma 4 (31B dense, 26B-A4B MoE): sliding-window layers and full-attention layers whose KV heads and head dim
differ (global_head_dim, num_global_key_value_heads), K=V full layers, an MoE block beside a dense MLP. The E2B/E4B
variants (KV shared across layers, per-layer input embeddings) are refused by the reader."""

from __future__ import annotations

from . import Family
from .decoder import read_decoder

FAMILY = Family(
    name="Gemma 4",
    architectures=("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"),
    model_types=("gemma4", "gemma4_text"),
    read=read_decoder,
    evidence="lab startups on vLLM 0.26.0 (H100: 31B and 26B-A4B, transformers 5.14.1 and 5.17)",
)
