"""Qwen2.5-VL: a Qwen2 decoder (flat config, M-RoPE) beside a window-attention vision tower (vLLM 0.33
qwen2_5_vl.py). The text model is planned; the tower (its weights, encoder budget and profile) is not modelled, so a
startup with it is refused until --language-model-only is given, which plans what vLLM then serves."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..model.arch import ModelArch
from . import Family
from .decoder import reader_with_tower_unmodelled

TOWER = ("Qwen2.5-VL's window-attention vision tower (vLLM 0.33.0 with it, Qwen2.5-VL-7B on an H100: a 14.88 GiB "
         "profile peak from its encoder; lab-vllm-0.33.0-h100/vision/q25vl-7b-vis)")


_read = reader_with_tower_unmodelled(TOWER)


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    """The text model; its M-RoPE cos/sin cache holds 4 x max_position rows (vLLM 0.33 rotary_embedding/mrope.py:
    the positions of a long video exceed the tokens; get_rope's default factor 4, which qwen2.py keeps; Qwen3-VL and
    Qwen3.5 pass 1 unless video pruning is on). Qwen2.5-VL-7B with --language-model-only loaded 14.40 GiB; with
    max_position rows 14.28 were planned."""
    a = _read(cfg, name)
    rope = cfg.get("rope_scaling") or {}
    if not (isinstance(rope, dict) and rope.get("mrope_section")):
        return a
    caches = tuple((rows * 4, dim, nbytes) for rows, dim, nbytes in a.extras.rotary_caches)
    return replace(a, extras=replace(a.extras, rotary_caches=caches))


FAMILY = Family(
    name="Qwen2.5-VL (Qwen2 decoder; the tower refused)",
    architectures=("Qwen2_5_VLForConditionalGeneration",),
    model_types=("qwen2_5_vl",),
    read=read,
    evidence="vLLM 0.33.0 source (qwen2_5_vl.py); the text model is the GQA family's Qwen2 decoder: a lab startup on "
             "vLLM 0.33.0 with --language-model-only (H200: Qwen2.5-VL-7B, +0.09 GiB of KV, its weights within 0.03 with "
             "M-RoPE's cache of 4 x max_position rows)",
)
