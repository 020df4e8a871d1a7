"""Qwen3-VL (dense and MoE): a Qwen3 / Qwen3-MoE decoder in `text_config` and Qwen3.5's vision tower with
Qwen3-VL's deepstack mergers, one per `deepstack_visual_indexes` entry (vLLM 0.33 qwen3_vl.py, qwen3_vl_moe.py); with
the tower vLLM also keeps one max_num_batched_tokens x hidden buffer per deepstack level (budget.weight_bytes)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..model.arch import ModelArch
from . import Family
from .decoder import read_decoder

TOWER = ("Qwen3-VL's deepstack vision tower (vLLM 0.33.0 with it, Qwen3-VL-8B on an H100: 0.53 GiB less KV memory than "
         "the Qwen3.5 tower's model plans, in its encoder profile, kept buffers and CUDA graphs; "
         "lab-vllm-0.33.0-h100/vision/q3vl-8b-vis)")


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    """The decoder and its tower's weights; the tower's profile is not modelled, so it takes --language-model-only."""
    a = read_decoder(cfg, name)
    return replace(a, extras=replace(a.extras, tower_unmodelled=TOWER if a.vision is not None else ""))

FAMILY = Family(
    name="Qwen3-VL (Qwen3 decoder, deepstack vision tower)",
    architectures=("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"),
    model_types=("qwen3_vl", "qwen3_vl_moe"),
    read=read,
    evidence="vLLM 0.33.0 source (qwen3_vl.py, qwen3_vl_moe.py); the text model is the GQA family's Qwen3 decoder; a lab "
             "startup on vLLM 0.33.0 with the tower (H100: Qwen3-VL-8B, stand-in processor files: weights within 0.04 "
             "GiB, the rest of the tower not modelled, tests/fixtures/lab-vllm-0.33.0-h100/vision/q3vl-8b-vis)",
)
