"""MiMo-V2-Flash (MiMoV2FlashForCausalLM): full-attention and sliding-window layers by `hybrid_layer_pattern` (0 full,
1 sliding), each kind with its own heads, KV heads and head dims, a V head dim below the Q/K one (192 / 128: vLLM's
FLASH_ATTN_DIFFKV keeps K and V in one page of heads x (192 + 128)), a learned sink per head on the sliding layers;
a dense MLP or a mixture of experts (fp32 router and routing bias, no shared expert) by `moe_layer_freq`; partial
rotary with one cache per distinct rope theta; the MTP layer is not loaded without speculative decoding (vLLM 0.33
mimo_v2.py; its drafter is not modelled)."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.ffn import DenseMLP, MoE
from ..layers.sliding import SlidingAttention
from ..model.arch import ModelArch
from . import Family
from .common import base


def _per_layer(t: dict[str, Any], key: str, layers: int, name: str) -> list[int]:
    """A 0 / 1 list with an entry for each layer; vLLM reads entry i for layer i, so a longer list (a model cut to
    fewer layers) keeps its first entries."""
    v = t.get(key)
    if not isinstance(v, list) or len(v) < layers or any(x not in (0, 1) for x in v[:layers]):
        raise UserError(f"config.json of {name}: {key} must list 0 or 1 for each of the {layers} layers")
    return v[:layers]


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    b = base(cfg, name)
    t = b.text
    sliding = _per_layer(t, "hybrid_layer_pattern", b.layers, name)
    moe_layers = _per_layer(t, "moe_layer_freq", b.layers, name)
    full = FullAttention(b.hidden, b.heads, b.kv_heads, b.count("head_dim"), v_head_dim=b.count("v_head_dim"),
                         sinks=bool(t.get("add_full_attention_sink_bias", False)))
    swa_heads = b.count("swa_num_attention_heads", default=b.heads)
    swa_kv = b.count("swa_num_key_value_heads", default=b.kv_heads)
    if swa_heads % swa_kv:
        raise UserError(f"config.json of {name}: swa_num_attention_heads {swa_heads} is not a multiple of "
                        f"swa_num_key_value_heads {swa_kv}; the file is damaged")
    swa = SlidingAttention(b.hidden, swa_heads, swa_kv, b.count("swa_head_dim", default=full.head_dim),
                           v_head_dim=b.count("swa_v_head_dim", default=full.v_dim),
                           sinks=bool(t.get("add_swa_attention_sink_bias", False)),
                           window=b.count("sliding_window_size", default=b.count("sliding_window")))
    moe = MoE(b.hidden, b.count("n_routed_experts"), b.count("num_experts_per_tok"), b.count("moe_intermediate_size"),
              b.count("n_shared_experts", default=0, minimum=0) * b.count("moe_intermediate_size"),
              shared_gate=False, router_bias=True, router_fp32=True)
    dense = DenseMLP(b.hidden, b.count("intermediate_size"))
    layers = tuple(DecoderLayer(swa if s else full, moe if m else dense) for s, m in zip(sliding, moe_layers))
    factor = float(t.get("partial_rotary_factor", 1.0))
    thetas = {t.get("rope_theta"), t.get("swa_rope_theta", t.get("rope_theta"))}
    rotary = tuple((b.max_position, int(full.head_dim * factor), 0) for _ in thetas)
    return b.arch(layers, tie=False, rotary_caches=rotary)


FAMILY = Family(
    name="MiMo-V2-Flash",
    architectures=("MiMoV2FlashForCausalLM",),
    model_types=("mimo_v2_flash",),
    read=read,
    evidence="vLLM 0.33.0 source (mimo_v2.py, flash_attn_diffkv.py); two lab startups on vLLM 0.33.0 (H200: cut to "
             "6 layers, bf16, eager and at serve defaults)",
)
