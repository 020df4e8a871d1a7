"""Llama 4 (Llama4ForCausalLM, and the text model of Llama4ForConditionalGeneration): chunked local attention on the
RoPE layers and full attention on the NoPE ones (`no_rope_layers`, default every fourth layer NoPE), a mixture of
experts every `interleave_moe_layer_step` layers (a router, one shared expert, the routed experts) and a dense MLP
of intermediate_size_mlp elsewhere (vLLM 0.26 llama4.py). Its rope cache spans max_position_embeddings rows (10.5 M
for Scout: 2.5 GiB in bf16). No FULL CUDA graphs with chunked layers. The vision tower is towers/llama4_vit.py."""

from __future__ import annotations

from typing import Any

from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.chunked import ChunkedAttention
from ..layers.ffn import DenseMLP, MoE
from ..errors import UserError
from ..model.arch import ModelArch
from ..towers.llama4_vit import Llama4ViT
from . import Family
from .common import base


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    b = base(cfg, name)
    t = b.text
    n = b.layers
    nope = t.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n)]
    chunk = b.count("attention_chunk_size", default=8192)
    shape = dict(hidden=b.hidden, num_heads=b.heads, num_kv_heads=b.kv_heads, head_dim=b.head_dim,
                 qkv_bias=bool(t.get("attention_bias")))
    step = b.count("interleave_moe_layer_step", default=1, minimum=0)
    experts, top_k = b.count("num_local_experts"), b.count("num_experts_per_tok", default=1)
    inter = b.count("intermediate_size")
    moe = MoE(b.hidden, experts, top_k, inter, inter, shared_gate=False)
    dense = DenseMLP(b.hidden, b.count("intermediate_size_mlp", default=inter), holds_gate_up=False)  # LlamaMLP
    sparse = tuple(i for i in range(n) if step and (i + 1) % step == 0)
    layers = tuple(DecoderLayer(ChunkedAttention(**shape, chunk=chunk) if nope[i] else FullAttention(**shape),
                                moe if i in sparse else dense) for i in range(n))
    return b.arch(layers, rotary_caches=((b.max_position, b.head_dim, None),), vision=_tower(cfg, name, b.hidden))


def _tower(cfg: dict[str, Any], name: str, text_hidden: int) -> Llama4ViT | None:
    """The vision tower of Llama4ForConditionalGeneration (None for the text model)."""
    v = cfg.get("vision_config")
    if v is None:
        return None
    try:
        tower = Llama4ViT(depth=int(v["num_hidden_layers"]), hidden=int(v["hidden_size"]),
                          intermediate=int(v["intermediate_size"]), heads=int(v["num_attention_heads"]),
                          tile=int(v["image_size"]), patch=int(v["patch_size"]),
                          shuffle_ratio=float(v["pixel_shuffle_ratio"]), adapter_in=int(v["projector_input_dim"]),
                          adapter_out=int(v["projector_output_dim"]), vision_out=int(v["vision_output_dim"]),
                          text_hidden=text_hidden)
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{name}: vision_config lacks a readable {e} for Llama 4's vision tower")
    if min(tower.depth, tower.hidden, tower.intermediate, tower.heads, tower.patch, tower.adapter_in,
           tower.adapter_out, tower.vision_out) <= 0 or tower.tile < tower.patch or not 0 < tower.shuffle_ratio <= 1 \
            or tower.hidden % tower.heads:
        raise UserError(f"{name}: vision_config of Llama 4's vision tower has a size out of range")
    return tower


FAMILY = Family(
    name="Llama 4 (chunked local attention, interleaved MoE)",
    architectures=("Llama4ForCausalLM", "Llama4ForConditionalGeneration"),
    model_types=("llama4", "llama4_text"),
    read=read,
    evidence="vLLM 0.26.0 source (llama4.py, chunked_local_attention.py, kv_cache_interface.py); a lab startup on "
             "vLLM 0.26.0 (H100: Scout's text model cut to 4 layers; at its 10M-token default max_model_len the block "
             "tables, 10 GiB, left too little to allocate the KV cache, which predict plans); vLLM 0.33.0 startups with "
             "its vision tower (H100, the text model cut to 4 layers: 8,192 and 32,768 batched tokens, available KV "
             "+0.12 and -0.03 GiB)"
)
