"""GLM-4.5 / 4.6 / 4.7 (Glm4MoeForCausalLM): GQA attention with qkv biases (and q/k RMSNorms where use_qk_norm), the
first `first_k_dense_replace` layers a dense MLP, the rest a mixture of experts with shared experts, an fp32 router
and an fp32 routing bias (vLLM 0.26 glm4_moe.py); partial rotary; lm_head never tied; the MTP layer is not loaded
without speculative decoding (GLM's MTP drafting is not modelled)."""

from __future__ import annotations

from typing import Any

from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.ffn import DenseMLP, MoE
from ..model.arch import ModelArch
from . import Family
from .common import base


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    b = base(cfg, name)
    t = b.text
    qk_norm = bool(t.get("use_qk_norm", False))
    attn = FullAttention(b.hidden, b.heads, b.kv_heads, b.head_dim, qk_norm=qk_norm,
                         qkv_bias=bool(t.get("attention_bias", True)))
    experts, top_k = b.count("n_routed_experts"), b.count("num_experts_per_tok")
    inter = b.count("moe_intermediate_size")
    shared = inter * b.count("n_shared_experts", default=0, minimum=0)
    first_dense = b.count("first_k_dense_replace", default=0, minimum=0)
    moe = MoE(b.hidden, experts, top_k, inter, shared, shared_gate=False, router_bias=True, router_fp32=True)
    dense = DenseMLP(b.hidden, b.count("intermediate_size"))
    layers = tuple(DecoderLayer(attn, moe if i >= first_dense else dense) for i in range(b.layers))
    factor = float(t.get("partial_rotary_factor", 0.5))
    return b.arch(layers, tie=False, rotary_caches=((b.max_position, int(b.head_dim * factor), None),))


FAMILY = Family(
    name="GLM-4.5 / 4.6 / 4.7",
    architectures=("Glm4MoeForCausalLM",),
    model_types=("glm4_moe",),
    read=read,
    evidence="vLLM 0.26.0 source (glm4_moe.py); a lab startup on vLLM 0.26.0 (H100: a curated GLM-4.7 config cut to "
             "5 layers)",
)
