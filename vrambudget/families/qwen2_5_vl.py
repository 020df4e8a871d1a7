"""Qwen2.5-VL: a Qwen2 decoder (flat config, M-RoPE) beside a window-attention vision tower (vLLM 0.33
qwen2_5_vl.py; towers/qwen2_5_vit.py, its encoder peak traced in vLLM 0.33.0's source)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import UserError
from ..model.arch import ModelArch
from ..towers.qwen2_5_vit import Qwen25ViT
from . import Family
from .decoder import read_decoder


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    """The text model; its M-RoPE cos/sin cache holds 4 x max_position rows (vLLM 0.33 rotary_embedding/mrope.py:
    the positions of a long video exceed the tokens; get_rope's default factor 4, which qwen2.py keeps; Qwen3-VL and
    Qwen3.5 pass 1 unless video pruning is on). Qwen2.5-VL-7B with --language-model-only loaded 14.40 GiB; with
    max_position rows 14.28 were planned."""
    a = replace(read_decoder(cfg, name), vision=_tower(cfg, name))
    rope = cfg.get("rope_scaling") or {}
    if not (isinstance(rope, dict) and rope.get("mrope_section")):
        return a
    caches = tuple((rows * 4, dim, nbytes) for rows, dim, nbytes in a.extras.rotary_caches)
    return replace(a, extras=replace(a.extras, rotary_caches=caches))


def _tower(cfg: dict[str, Any], name: str) -> Qwen25ViT | None:
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return None
    try:
        return Qwen25ViT(depth=int(v["depth"]), hidden=int(v["hidden_size"]), intermediate=int(v["intermediate_size"]),
                         heads=int(v["num_heads"]), out_hidden=int(v["out_hidden_size"]),
                         patch=int(v.get("patch_size", 14)), temporal_patch=int(v.get("temporal_patch_size", 2)),
                         spatial_merge=int(v.get("spatial_merge_size", 2)), in_channels=int(v.get("in_chans", 3)))
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{name}: vision_config lacks a whole number for {e}; the file is damaged") from None


FAMILY = Family(
    name="Qwen2.5-VL (Qwen2 decoder, window-attention vision tower)",
    architectures=("Qwen2_5_VLForConditionalGeneration",),
    model_types=("qwen2_5_vl",),
    read=read,
    evidence="vLLM 0.33.0 source (qwen2_5_vl.py); the text model is the GQA family's Qwen2 decoder: lab startups on "
             "vLLM 0.33.0 of Qwen2.5-VL-7B with --language-model-only (H200: +0.09 GiB of KV, its weights within 0.03 with "
             "M-RoPE's cache of 4 x max_position rows) and with the tower (H100 profiled with a 14-frame video, H200 "
             "with one image and with --mm-processor-kwargs max_pixels: its encoder peak traced in the source, "
             "available KV within +0.05, its weights' allocator holes replayed on a GPU)",
)
