"""MiniMax-M2 / M2.5 (MiniMaxM2ForCausalLM): full GQA attention in every layer (attn_type_list all 1) with q/k
RMSNorms over all heads, partial rotary (rotary_dim), a mixture of experts in every layer with an fp32 router and
an fp32 routing bias (use_routing_bias), no shared expert (vLLM 0.26 minimax_m2.py); the MTP modules are skipped."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.ffn import MoE
from ..model.arch import ModelArch
from . import Family
from .common import base


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    b = base(cfg, name)
    t = b.text
    if any(int(x) != 1 for x in t.get("attn_type_list") or []):
        raise UserError(f"{name}: MiniMax with linear-attention layers (attn_type_list 0) is not modelled")
    attn = FullAttention(b.hidden, b.heads, b.kv_heads, b.head_dim, qkv_bias=bool(t.get("attention_bias", False)),
                         qk_norm_all_heads=bool(t.get("use_qk_norm", True)))
    experts, top_k = b.count("num_local_experts"), b.count("num_experts_per_tok")
    inter = b.count("intermediate_size")
    moe = MoE(b.hidden, experts, top_k, inter, router_bias=bool(t.get("use_routing_bias", True)), router_fp32=True)
    layers = tuple(DecoderLayer(attn, moe) for _ in range(b.layers))
    return b.arch(layers, tie=False, rotary_caches=((b.max_position, b.count("rotary_dim", default=b.head_dim), None),))


FAMILY = Family(
    name="MiniMax-M2 / M2.5",
    architectures=("MiniMaxM2ForCausalLM",),
    model_types=("minimax_m2",),
    read=read,
    evidence="vLLM 0.26.0 source (minimax_m2.py); lab startups on vLLM 0.26.0 (H100: MiniMax-M2.5 cut to 4 layers, "
             "bf16) and 0.33.0 (H100: its FP8 block release cut to 4 layers, weights as logged)",
)
