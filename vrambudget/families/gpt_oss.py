"""gpt-oss (GptOssForCausalLM): alternating sliding-window (128, even layers) and full attention with a learned sink
per head, biased projections, and a mixture of experts whose routed experts are MXFP4 (vLLM 0.26 gpt_oss.py:
`layer_idx % 2 == 0` slides; mxfp4.py quantizes the experts only; the YaRN rope cache in fp32)."""

from __future__ import annotations

from typing import Any

from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.ffn import MoE
from ..layers.sliding import SlidingAttention
from ..model.arch import ModelArch
from . import Family
from .common import base


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    b = base(cfg, name)
    t = b.text
    shape = dict(hidden=b.hidden, num_heads=b.heads, num_kv_heads=b.kv_heads, head_dim=b.head_dim, qkv_bias=True,
                 o_bias=True, sinks=True)
    window = b.count("sliding_window", default=128)
    experts, top_k = b.count("num_local_experts"), b.count("num_experts_per_tok", default=4)
    inter = b.count("intermediate_size")
    moe = MoE(b.hidden, experts, top_k, inter, expert_bias=True, fused=True)
    layers = tuple(DecoderLayer(SlidingAttention(**shape, window=window) if i % 2 == 0 else FullAttention(**shape),
                                moe) for i in range(b.layers))
    scaling = t.get("rope_scaling") or {}
    rows = int(scaling.get("original_max_position_embeddings", 4096) * scaling.get("factor", 1)) if scaling else \
        b.max_position
    return b.arch(layers, rotary_caches=((rows, b.head_dim, 4),), cudagraph_capture_max=1024)


FAMILY = Family(
    name="gpt-oss (sinks, sliding window, MXFP4 experts)",
    architectures=("GptOssForCausalLM",),
    model_types=("gpt_oss",),
    read=read,
    evidence="vLLM 0.26.0 source (gpt_oss.py, mxfp4.py, the MXFP4 MoE backends' layouts); lab startups on vLLM 0.26.0 "
             "(H100: gpt-oss-20b, MXFP4 via Triton) and 0.33.0 (H200 and H100: gpt-oss-20b at its defaults and at 2,048 "
             "to 32,768 batched tokens)",
)
