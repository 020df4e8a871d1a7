"""Qwen3-VL (dense and MoE): a Qwen3 / Qwen3-MoE decoder in `text_config` and Qwen3.5's vision tower with
Qwen3-VL's deepstack mergers, one per `deepstack_visual_indexes` entry (vLLM 0.33 qwen3_vl.py, qwen3_vl_moe.py); with
the tower vLLM also keeps one max_num_batched_tokens x hidden buffer per deepstack level (budget.weight_bytes)."""

from __future__ import annotations

from . import Family
from .decoder import reader_with_tower_unmodelled

TOWER = ("Qwen3-VL's deepstack vision tower (vLLM 0.33.0 with it, Qwen3-VL-8B on an H100: about 0.5 GiB less KV memory than "
         "the Qwen3.5 tower's model plans, in its encoder profile, kept buffers and CUDA graphs; "
         "lab-vllm-0.33.0-h100/vision/q3vl-8b-vis)")


FAMILY = Family(
    name="Qwen3-VL (Qwen3 decoder, deepstack vision tower)",
    architectures=("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"),
    model_types=("qwen3_vl", "qwen3_vl_moe"),
    read=reader_with_tower_unmodelled(TOWER),
    evidence="vLLM 0.33.0 source (qwen3_vl.py, qwen3_vl_moe.py); the text model is the GQA family's Qwen3 decoder; a lab "
             "startup on vLLM 0.33.0 with --language-model-only (H200: Qwen3-VL-8B, +0.02 GiB of KV) and one with the "
             "tower (H100: its weights within 0.04 GiB, the rest of the tower not modelled)",
)
