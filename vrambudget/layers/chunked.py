"""Chunked local attention (Llama 4's RoPE layers): attention within chunks of `attention_chunk_size` tokens, so a
request keeps the current chunk and the tokens in flight (kv/spec.py ChunkedLocalSpec). vLLM 0.26 captures no FULL
CUDA graphs with it (its builder supports none): PIECEWISE."""

from __future__ import annotations

from dataclasses import dataclass

from ..kv.spec import ChunkedLocalSpec
from .attention import FullAttention
from .base import CacheContext, LayerKind


@dataclass(frozen=True)
class ChunkedAttention(FullAttention):
    chunk: int = 8192

    kind = LayerKind.CHUNKED

    def cache_spec(self, ctx: CacheContext) -> ChunkedLocalSpec:
        return ChunkedLocalSpec(self.kv_heads_per_rank(ctx.tp), self.head_dim, ctx.kv_dtype_bytes, ctx.block_size,
                                ctx.kv_scale_bytes, chunk=self.chunk, in_flight_tokens=ctx.in_flight_tokens)
