"""Qwen3-VL (dense and MoE): a Qwen3 / Qwen3-MoE decoder in `text_config` and Qwen3.5's vision tower with
Qwen3-VL's deepstack mergers, one per `deepstack_visual_indexes` entry (vLLM 0.33 qwen3_vl.py, qwen3_vl_moe.py); with
the tower vLLM also keeps one max_num_batched_tokens x hidden buffer per deepstack level (towers/qwen_vit.py
Qwen3VLViT, whose encoder peak is traced in vLLM 0.33.0's source)."""

from __future__ import annotations

from . import Family
from .decoder import read_decoder

FAMILY = Family(
    name="Qwen3-VL (Qwen3 decoder, deepstack vision tower)",
    architectures=("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"),
    model_types=("qwen3_vl", "qwen3_vl_moe"),
    read=read_decoder,
    evidence="vLLM 0.33.0 source (qwen3_vl.py, qwen3_vl_moe.py); the text model is the GQA family's Qwen3 decoder; lab "
             "startups on vLLM 0.33.0 of Qwen3-VL-8B with --language-model-only (H200: +0.02 GiB of KV) and with the "
             "tower (H100 at 8,192 batched tokens, H200 at 32,768, and its dummy video with images off at both: its "
             "encoder peak traced in the source, available KV within 0.06)",
)
