"""Sliding-window attention: K and V of the last `window` tokens, plus the tokens a scheduler step keeps in
flight (vLLM's SlidingWindowSpec: a request holds cdiv(min(window - 1 + in flight, L), block) + 1 blocks)."""

from __future__ import annotations

from dataclasses import dataclass

from ..kv.spec import SlidingWindowSpec
from .attention import FullAttention
from .base import CacheContext, LayerKind


@dataclass(frozen=True)
class SlidingAttention(FullAttention):
    window: int = 4096

    kind = LayerKind.SLIDING

    def cache_spec(self, ctx: CacheContext) -> SlidingWindowSpec:
        return SlidingWindowSpec(self.kv_heads_per_rank(ctx.tp), self.head_dim, ctx.kv_dtype_bytes, ctx.block_size,
                                 ctx.kv_scale_bytes, v_head_dim=self.v_head_dim or 0, window=self.window,
                                 in_flight_tokens=ctx.in_flight_tokens)
