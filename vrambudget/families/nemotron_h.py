"""Nemotron-H and Nemotron-3 (NemotronHForCausalLM): one layer per character of `hybrid_override_pattern` (or
`layers_block_type`): M a Mamba2 mixer, * attention (no RoPE), - a squared-ReLU MLP, E a mixture of experts with a
shared expert and an fp32 routing bias; the mixer-only and MLP-only layers each with one RMSNorm (vLLM 0.26
nemotron_h.py). The SSM state is float32 (vLLM's NemotronH config override from 0.20.2). Latent MoE (Nemotron-3
Super) is refused."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.ffn import DenseMLP, MoE
from ..layers.mamba2 import Mamba2
from ..model.arch import ModelArch
from . import Family
from .common import base, count

BLOCK_TYPES = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    b = base(cfg, name)
    t = b.text
    pattern = t.get("hybrid_override_pattern")
    if not pattern and isinstance(t.get("layers_block_type"), list):
        pattern = "".join(BLOCK_TYPES.get(str(x), "?") for x in t["layers_block_type"])
    if not isinstance(pattern, str) or len(pattern) != b.layers or set(pattern) - set("M*-E"):
        raise UserError(f"{name}: hybrid_override_pattern {str(pattern)[:60]!r} does not give one of M, *, -, E for "
                        f"each of the {b.layers} layers; the file is damaged")
    if t.get("moe_latent_size"):
        raise UserError(f"{name} ({b.architecture}): latent MoE (moe_latent_size, Nemotron-3 Super) is not modelled")
    if t.get("sliding_window"):
        raise UserError(f"{name} ({b.architecture}): Nemotron-H with sliding-window attention is not modelled")
    mamba = Mamba2(b.hidden, b.count("mamba_num_heads"), b.count("mamba_head_dim"),
                   _first(t, name, "n_groups", "mamba_n_groups"), b.count("ssm_state_size"),
                   _first(t, name, "conv_kernel", "mamba_d_conv"), "float32",
                   proj_bias=bool(t.get("use_bias", False)), conv_bias=bool(t.get("use_conv_bias", True)))
    attention = FullAttention(b.hidden, b.heads, b.kv_heads, b.head_dim)
    inter = t.get("intermediate_size")
    mlp_sizes = inter if isinstance(inter, list) else None
    experts = b.count("n_routed_experts", default=0, minimum=0)
    moe = None
    if experts:
        shared = b.count("moe_shared_expert_intermediate_size", default=0, minimum=0) * \
            b.count("n_shared_experts", default=1, minimum=0)
        moe = MoE(b.hidden, experts, b.count("num_experts_per_tok"), b.count("moe_intermediate_size"), shared,
                  shared_gate=False, gated=False, router_bias=True, shared_gated=False)
    layers, mlp_index = [], 0
    for ch in pattern:
        if ch == "M":
            layers.append(DecoderLayer(mamba, None))
        elif ch == "*":
            layers.append(DecoderLayer(attention, None))
        elif ch == "-":
            width = int(mlp_sizes[mlp_index]) if mlp_sizes else b.count("intermediate_size")
            mlp_index += 1
            layers.append(DecoderLayer(None, DenseMLP(b.hidden, width, gated=False, bias=bool(t.get("mlp_bias")), holds_gate_up=False)))
        else:
            if moe is None:
                raise UserError(f"{name}: an E (MoE) layer in hybrid_override_pattern without n_routed_experts")
            layers.append(DecoderLayer(None, moe))
    return b.arch(tuple(layers), tie=False, norms_per_layer=1)  # vLLM 0.26 never ties Nemotron-H's lm_head


def _first(t: dict[str, Any], name: str, *keys: str) -> int:
    key = next((k for k in keys if t.get(k) is not None), keys[0])
    return count(t, key, name)


FAMILY = Family(
    name="Nemotron-H / Nemotron-3 (Mamba2 hybrids)",
    architectures=("NemotronHForCausalLM",),
    model_types=("nemotron_h",),
    read=read,
    evidence="vLLM 0.26.0 source (nemotron_h.py, mamba_mixer2.py, mamba_utils.py); lab startups on vLLM 0.26.0 (H100: "
             "Nemotron-3 Nano 30B-A3B eager and graphs, Nemotron-H 56B cut to 24 layers)",
)
