"""DeepSeek V2 / V3 / R1 and Kimi K2 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM): multi-head latent attention in
every layer; the first `first_k_dense_replace` layers with a dense MLP, the rest (every `moe_layer_freq`) a mixture
of routed experts, shared experts and, with `topk_method` noaux_tc, an fp32 routing bias (vLLM 0.26 deepseek_v2.py).
The MTP layer (num_nextn_predict_layers) is not loaded without speculative decoding, and DeepSeek's MTP drafting is
not modelled. The sparse-attention variants (DeepSeek V3.2, GLM-5: an `index_topk` in the config) have a lightning
indexer in every layer (layers/sparse_mla.py; vLLM 0.33 models/deepseek_v32)."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..layers.base import DecoderLayer
from ..layers.ffn import DenseMLP, MoE
from ..layers.mla import MLA
from ..layers.sparse_mla import SparseMLA
from ..model.arch import ModelArch
from . import Family
from .common import base


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    b = base(cfg, name)
    t = b.text
    sparse_attention = bool(t.get("index_topk")) or b.architecture in ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")
    if sparse_attention and (t.get("index_topk_freq") or t.get("index_topk_pattern")):
        raise UserError(f"{name} ({b.architecture}): an indexer on only some layers (index_topk_freq / "
                        "index_topk_pattern) is not modelled")
    if not t.get("kv_lora_rank"):
        raise UserError(f"{name} ({b.architecture}): a DeepSeek config without kv_lora_rank (multi-head attention, "
                        "not MLA) is not modelled")
    n = b.layers
    q_lora = t.get("q_lora_rank")
    shape = (b.hidden, b.heads, int(q_lora) if q_lora else None, b.count("kv_lora_rank"), b.count("qk_nope_head_dim"),
             b.count("qk_rope_head_dim"), b.count("v_head_dim"))
    mla = SparseMLA(*shape, index_heads=b.count("index_n_heads"), index_head_dim=b.count("index_head_dim"),
                    index_topk=b.count("index_topk")) if sparse_attention else MLA(*shape)
    if sparse_attention and mla.index_head_dim % 128:
        raise UserError(f"config.json of {name}: index_head_dim {mla.index_head_dim} is not a multiple of 128 (the "
                        "indexer keeps one fp8 scale per 128 values)")
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
    if sparse_attention:
        return b.arch(layers, rotary_caches=_sparse_rotary(t, rows, rope))
    return b.arch(layers, rotary_caches=((rows, rope, 2),))


def _sparse_rotary(t: dict[str, Any], rows: int, rope: int) -> tuple[tuple[int, int, int | None], ...]:
    """The attention's rope cache and the indexer's, one where both rotate alike (indexer_rope_interleave, GLM-5),
    two where not (DeepSeek V3.2); DeepSeek's YaRN cache in fp32, a plain rope's in the model dtype (vLLM 0.33
    models/deepseek_v32/attention.py, deepseek_scaling_rope.py: V3.2 4 layers 28.43 GiB logged, GLM-5 24.33)."""
    scaling = t.get("rope_scaling") or {}
    yarn = isinstance(scaling, dict) and scaling.get("type", scaling.get("rope_type")) in ("yarn", "deepseek_yarn")
    caches = 1 if t.get("indexer_rope_interleave") else 2
    return ((rows, rope, 4 if yarn else None),) * caches


FAMILY = Family(
    name="DeepSeek V2 / V3 / R1, Kimi K2 (MLA); DeepSeek V3.2, GLM-5 (sparse MLA)",
    architectures=("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                   "GlmMoeDsaForCausalLM"),
    model_types=("deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa"),
    read=read,
    evidence="vLLM 0.26.0 source (deepseek_v2.py, mla_attention.py, kv_cache_interface.py); lab startups on vLLM 0.26.0 "
             "(H100: DeepSeek-V2-Lite eager and graphs on Model Runner V2, DeepSeek-V3 cut to 5 layers on V1; fp8 KV "
             "(FlashMLA, block 64) from source only) and on vLLM 0.33.0 (H200 and H100: DeepSeek-V3 cut to 5 layers at "
             "2,048 to 32,768 batched tokens and 32 to 1,024 seqs, its MLA profile peak and CUDA-graph estimate from vLLM "
             "0.33.0's source; Kimi K2 cut to 2 layers; DeepSeek V3.2 cut to 4 and 5 layers and GLM-5 cut to 4, eager, "
             "kv auto and fp8: the indexer's cache, weights and workspaces; under CUDA graphs a base fitted on them, held "
             "out at 64 seqs, a 32,768-token context and GLM-5 at 256 seqs: within 0.12)",
)
