"""Qwen2.5-VL: a Qwen2 decoder (flat config, M-RoPE) beside a window-attention vision tower (vLLM 0.33
qwen2_5_vl.py). The text model is planned; the tower (its weights, encoder budget and profile) is not modelled, so a
startup with it is refused until --language-model-only is given, which plans what vLLM then serves."""

from __future__ import annotations

from . import Family
from .decoder import reader_with_tower_unmodelled

TOWER = ("Qwen2.5-VL's window-attention vision tower (vLLM 0.33.0 with it, Qwen2.5-VL-7B on an H100: a 14.88 GiB "
         "profile peak from its encoder; lab-vllm-0.33.0-h100/vision/q25vl-7b-vis)")


FAMILY = Family(
    name="Qwen2.5-VL (Qwen2 decoder; the tower refused)",
    architectures=("Qwen2_5_VLForConditionalGeneration",),
    model_types=("qwen2_5_vl",),
    read=reader_with_tower_unmodelled(TOWER),
    evidence="vLLM 0.33.0 source (qwen2_5_vl.py); the text model is the GQA family's Qwen2 decoder: a lab startup on "
             "vLLM 0.33.0 with --language-model-only (H200: Qwen2.5-VL-7B, +0.18 GiB of KV, its weights 0.12 GiB above "
             "the plan, not traced)",
)
