"""DeepSeek V2 / V3 / R1 and Kimi K2 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM): multi-head latent attention in
every layer; the first `first_k_dense_replace` layers with a dense MLP, the rest (every `moe_layer_freq`) a mixture
of routed experts, shared experts and, with `topk_method` noaux_tc, an fp32 routing bias (vLLM 0.26 deepseek_v2.py).
The MTP layer (num_nextn_predict_layers) is not loaded without speculative decoding, and DeepSeek's MTP drafting is
not modelled. The sparse-attention variants (DeepSeek V3.2, GLM-5: an indexer cache beside MLA) are refused."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..layers.base import DecoderLayer
from ..layers.ffn import DenseMLP, MoE
from ..layers.mla import MLA
from ..model.arch import ModelArch
from . import Family
from .common import base


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    b = base(cfg, name)
    t = b.text
    if t.get("index_topk") or b.architecture in ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"):
        raise UserError(f"{name} ({b.architecture}): sparse MLA with a lightning indexer (DeepSeek V3.2 / GLM-5) is not "
                        "modelled: its indexer cache and DeepGEMM's workspaces are not in the plan")
    if not t.get("kv_lora_rank"):
        raise UserError(f"{name} ({b.architecture}): a DeepSeek config without kv_lora_rank (multi-head attention, "
                        "not MLA) is not modelled")
    n = b.layers
    q_lora = t.get("q_lora_rank")
    mla = MLA(b.hidden, b.heads, int(q_lora) if q_lora else None, b.count("kv_lora_rank"),
              b.count("qk_nope_head_dim"), b.count("qk_rope_head_dim"), b.count("v_head_dim"))
    experts = b.count("n_routed_experts", default=0, minimum=0)
    first_dense = b.count("first_k_dense_replace", default=0, minimum=0)
    freq = b.count("moe_layer_freq", default=1)
    moe_inter = b.count("moe_intermediate_size", default=0, minimum=0)
    shared = moe_inter * b.count("n_shared_experts", default=0, minimum=0)
    top_k = b.count("num_experts_per_tok", default=1)
    sparse = tuple(i for i in range(n) if experts and i >= first_dense and i % freq == 0)
    moe = MoE(b.hidden, experts, top_k, moe_inter, shared, shared_gate=False,
              router_bias=t.get("topk_method") == "noaux_tc") if experts else None
    dense = DenseMLP(b.hidden, b.count("intermediate_size"))
    layers = tuple(DecoderLayer(mla, moe if i in sparse else dense) for i in range(n))
    rope = b.count("qk_rope_head_dim")
    scaling = t.get("rope_scaling") or {}
    rows = (int(scaling.get("original_max_position_embeddings", b.max_position) * scaling.get("factor", 1))
            if isinstance(scaling, dict) and scaling.get("factor") else b.max_position)
    return b.arch(layers, rotary_caches=((rows, rope, 2),))


FAMILY = Family(
    name="DeepSeek V2 / V3 / R1, Kimi K2 (MLA)",
    architectures=("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                   "GlmMoeDsaForCausalLM"),
    model_types=("deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa"),
    read=read,
    evidence="vLLM 0.26.0 source (deepseek_v2.py, mla_attention.py, kv_cache_interface.py); lab startups on vLLM 0.26.0 "
             "(H100: DeepSeek-V2-Lite eager and graphs on Model Runner V2, DeepSeek-V3 cut to 5 layers on V1; fp8 KV "
             "(FlashMLA, block 64) and Kimi K2 from source only) and on vLLM 0.33.0 (H200 and H100: DeepSeek-V3 cut to 5 "
             "layers at 2,048 to 32,768 batched tokens, its MLA profile peak from vLLM 0.33.0's source)",
)
