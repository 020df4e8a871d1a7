"""Full attention (GQA / MHA): every token's K and V, one page of `block_size` tokens at a time. Variants: a gated
output (Qwen3.5: q_proj doubles), per-head q/k RMSNorms, biases, attention sinks (gpt-oss: one learned logit per
head), a V head dim of its own (MiMo)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..errors import UserError
from ..kv.spec import AttentionSpec
from .base import CacheContext, LayerKind, Tensor


@dataclass(frozen=True)
class FullAttention:
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    output_gate: bool = False  # q_proj also produces the gate (2 x heads x head_dim)
    qk_norm: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    sinks: bool = False  # one learned sink logit per head (gpt-oss)
    v_head_dim: int | None = None  # None: head_dim
    qk_norm_all_heads: bool = False  # q/k RMSNorms over all heads (MiniMax-M2) rather than one head dim each

    kind = LayerKind.FULL

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    def tensors(self, prefix: str, part: str) -> Iterator[Tensor]:
        p, h = f"{prefix}.self_attn", self.hidden
        q_out = self.num_heads * self.head_dim * (2 if self.output_gate else 1)
        yield Tensor(f"{p}.q_proj", h, q_out, bias=self.qkv_bias, part=part)
        yield Tensor(f"{p}.k_proj", h, self.num_kv_heads * self.head_dim, bias=self.qkv_bias, part=part)
        yield Tensor(f"{p}.v_proj", h, self.num_kv_heads * self.v_dim, bias=self.qkv_bias, part=part)  # K=V too
        yield Tensor(f"{p}.o_proj", self.num_heads * self.v_dim, h, bias=self.o_bias, part=part)
        if self.qk_norm:
            yield Tensor(f"{p}.q_norm+k_norm", 2 * self.head_dim, 1, linear=False, part=part)
        if self.qk_norm_all_heads:
            yield Tensor(f"{p}.q_norm+k_norm", (self.num_heads + self.num_kv_heads) * self.head_dim, 1, linear=False,
                         part=part, tp_split=True)
        if self.sinks:
            yield Tensor(f"{p}.sinks", self.num_heads, 1, linear=False, part=part)

    def forward_bytes(self, tokens: int, tp: int, act_bytes: int) -> int:
        """The attention's own tensors when o_proj writes its output in an eager forward over `tokens` tokens, per
        rank: the fused qkv projection's output, the q/k RMSNorms' copies, the attention's output and o_proj's
        output (whole hidden). vLLM 0.26.0's allocator at the profile's peak, 8192 tokens
        (lab-vllm-0.26.0-h100/moe-forward/snap-*): Qwen3-30B-A3B 80 + 64 + 8 + 64 + 32 MiB, Mixtral 8x7B
        96 + 64 + 64, beside the residual stream (ModelArch.residual_stream_bytes) and the fused-MoE scratch."""
        heads, kv = self.num_heads // tp, self.kv_heads_per_rank(tp)
        q = heads * self.head_dim * (2 if self.output_gate else 1)
        k, v = kv * self.head_dim, kv * self.v_dim
        norms = heads * self.head_dim + k if self.qk_norm or self.qk_norm_all_heads else 0
        return tokens * act_bytes * (q + k + v + norms + heads * self.v_dim + self.hidden)

    def kv_heads_per_rank(self, tp: int) -> int:
        """vLLM splits the KV heads over the ranks, or replicates them where there are fewer heads than ranks."""
        return max(1, self.num_kv_heads // tp)

    def cache_spec(self, ctx: CacheContext) -> AttentionSpec:
        return AttentionSpec(self.kv_heads_per_rank(ctx.tp), self.head_dim, ctx.kv_dtype_bytes, ctx.block_size,
                             ctx.kv_scale_bytes, v_head_dim=self.v_head_dim or 0)

    def check_tp(self, tp: int, name: str) -> None:
        if self.num_heads % tp:
            raise UserError(f"--tensor-parallel-size {tp} must divide the {self.num_heads} attention heads")
        kv = self.num_kv_heads
        if (kv % tp) if tp <= kv else (tp % kv):
            raise UserError(f"--tensor-parallel-size {tp} does not split {name}'s {kv} KV heads evenly: "
                            "pick a divisor or a multiple of them")
