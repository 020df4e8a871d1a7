"""Gemma 4 (31B dense, 26B-A4B MoE): sliding-window layers and full-attention layers whose KV heads and head dim
differ (global_head_dim, num_global_key_value_heads), K=V full layers, an MoE block beside a dense MLP. The E2B/E4B
variants (KV shared across layers, per-layer input embeddings) are refused by the reader. The multimodal model's
vision tower is towers/gemma4_vit.py; an audio tower is not modelled (--language-model-only)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import UserError
from ..model.arch import ModelArch
from ..towers.gemma4_vit import Gemma4ViT
from . import Family
from .decoder import read_decoder


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    a = read_decoder(cfg, name)
    a = replace(a, vision=_tower(cfg, name, a.hidden_size))
    if a.moe is not None:  # 26B-A4B: its V2 graph estimate measured with its tower and without (vllm-0.33.json)
        a = replace(a, extras=replace(a.extras, graph_factor="cudagraph_v2_gemma4_moe_factor"))
    if cfg.get("audio_config"):
        a = replace(a, extras=replace(a.extras, tower_unmodelled="Gemma 4's audio tower"))
    return a


def _tower(cfg: dict[str, Any], name: str, text_hidden: int) -> Gemma4ViT | None:
    """The vision tower of Gemma4ForConditionalGeneration (None for the text model)."""
    v = cfg.get("vision_config")
    if v is None:
        return None
    if not isinstance(v, dict) or v.get("model_type") != "gemma4_vision":
        raise UserError(f"{name}: vision_config is not Gemma 4's vision tower (model_type "
                        f"{v.get('model_type') if isinstance(v, dict) else v!r})")
    try:
        tower = Gemma4ViT(depth=int(v["num_hidden_layers"]), hidden=int(v["hidden_size"]),
                          intermediate=int(v["intermediate_size"]), head_dim=int(v["head_dim"]),
                          patch=int(v["patch_size"]), pooling=int(v["pooling_kernel_size"]),
                          position_size=int(v["position_embedding_size"]),
                          image_tokens=int(v.get("default_output_length") or 280), text_hidden=text_hidden)
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{name}: vision_config lacks a whole number for {e}; the file is damaged") from None
    if min(tower.depth, tower.hidden, tower.intermediate, tower.head_dim, tower.patch, tower.pooling,
           tower.position_size, tower.image_tokens) <= 0:
        raise UserError(f"{name}: vision_config of Gemma 4's vision tower has a size out of range")
    return tower


FAMILY = Family(
    name="Gemma 4",
    architectures=("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"),
    model_types=("gemma4", "gemma4_text"),
    read=read,
    evidence="lab startups on vLLM 0.26.0 (H100: 31B and 26B-A4B, transformers 5.14.1 and 5.17); its vision tower "
             "from vLLM 0.33.0's source, 0.33.0 startups of 26B-A4B with it (H100: weights +1.07 GiB as planned, "
             "activation as planned, available KV +0.06) and without (--language-model-only, H200: +0.02 at 1,024 "
             "seqs, +0.05 at 128; its CUDA-graph estimate its own, the same with either backend)",
)
