"""Gemma 3 (Gemma3ForCausalLM, and the text model of Gemma3ForConditionalGeneration): five sliding-window layers to
one full-attention layer (`layer_types`, else transformers' Gemma3TextConfig from `sliding_window_pattern`, default
6), q/k RMSNorms, four RMSNorms a layer, tied embeddings; a config's missing keys take Gemma3TextConfig's defaults
(transformers 5.17, which vLLM 0.26 reads it with). Two rope caches: the sliding layers' over max_position, the full
layers' linear-scaled one over max_position x factor (vLLM linear_scaling_rope.py). The multimodal model's SigLIP
tower is towers/siglip.py."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.ffn import DenseMLP
from ..layers.sliding import SlidingAttention
from ..model.arch import ModelArch
from ..towers.siglip import Siglip
from . import Family
from .common import base, config_text

# transformers 5.17 Gemma3TextConfig's defaults, for the keys a published config leaves out
TEXT_DEFAULTS = {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                 "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131_072,
                 "tie_word_embeddings": True, "sliding_window": 4096, "attention_bias": False}


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    text = {**TEXT_DEFAULTS, **config_text(cfg, name)}
    b = base(cfg, name, text_config=text)
    if text.get("use_bidirectional_attention"):
        raise UserError(f"{name}: Gemma 3 with bidirectional attention (an embedding model) is not modelled")
    pattern = int(text.get("sliding_window_pattern") or 6)
    types = text.get("layer_types") or ["sliding_attention" if (i + 1) % pattern else "full_attention"
                                        for i in range(b.layers)]
    if len(types) != b.layers or set(types) - {"sliding_attention", "full_attention"}:
        raise UserError(f"{name}: layer_types does not give sliding_attention or full_attention for each of the "
                        f"{b.layers} layers; the file is damaged")
    window = b.count("sliding_window")
    shape = dict(hidden=b.hidden, num_heads=b.heads, num_kv_heads=b.kv_heads, head_dim=b.head_dim, qk_norm=True,
                 qkv_bias=bool(text.get("attention_bias")))
    mlp = DenseMLP(b.hidden, b.count("intermediate_size"))
    layers = tuple(DecoderLayer(SlidingAttention(**shape, window=window) if t == "sliding_attention"
                                else FullAttention(**shape), mlp) for t in types)
    scaling = text.get("rope_scaling") or {}
    factor = float(scaling.get("factor", 1.0)) if isinstance(scaling, dict) else 1.0
    caches = ((b.max_position, b.head_dim, 0), (int(b.max_position * factor), b.head_dim, 0))
    return b.arch(layers, tie=bool(text["tie_word_embeddings"]), norms_per_layer=4, rotary_caches=caches,
                  vision=_tower(cfg, name, b.hidden))


def _tower(cfg: dict[str, Any], name: str, text_hidden: int) -> Siglip | None:
    """The SigLIP tower of Gemma3ForConditionalGeneration (None for the text model)."""
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return None
    if v.get("model_type", "siglip_vision_model") != "siglip_vision_model":
        raise UserError(f"{name}: vision_config model_type {v.get('model_type')!r} is not Gemma 3's SigLIP tower")
    try:
        tower = Siglip(depth=int(v["num_hidden_layers"]), hidden=int(v["hidden_size"]),
                       intermediate=int(v["intermediate_size"]), image_size=int(v["image_size"]),
                       patch=int(v["patch_size"]), text_hidden=text_hidden,
                       tokens_per_image=int(cfg.get("mm_tokens_per_image", 256)),
                       in_channels=int(v.get("num_channels", 3)))
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{name}: vision_config lacks a whole number for {e}; the file is damaged") from None
    if min(tower.depth, tower.hidden, tower.intermediate, tower.patch, tower.tokens_per_image) <= 0 \
            or tower.image_size < tower.patch:
        raise UserError(f"{name}: vision_config's sizes must be positive, the image at least one patch")
    return tower


FAMILY = Family(
    name="Gemma 3",
    architectures=("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
    model_types=("gemma3", "gemma3_text"),
    read=read,
    evidence="vLLM 0.26.0 source (gemma3.py, gemma3_mm.py); a lab startup on vLLM 0.26.0 (H100: Gemma 3 27B's text "
             "model, eager: 0.15 GiB more load and 0.11 more peak than modelled, so +0.26 GiB of KV); vLLM 0.33.0 "
             "startups with the SigLIP tower (4B and 27B on an H100, 4B at 16,384 batched tokens and with pan and "
             "scan on an H200) and without (--language-model-only, 4B on an H100, 27B on an H200 and at 32,768 "
             "batched tokens)",
)
