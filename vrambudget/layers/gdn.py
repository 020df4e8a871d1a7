"""GatedDeltaNet linear attention (Qwen3.5/3.6 `linear_attention` layers, Qwen3-Next): no KV cache, a fixed state
per sequence: the causal conv's last (kernel - 1 + speculative tokens) rows of q, k and v, and the recurrent
matrix of every value head (value head dim x key head dim) in `ssm_dtype`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..errors import UserError
from ..kv.spec import MambaSpec
from ..units import dtype_bytes
from .base import CacheContext, LayerKind, Role, Tensor


@dataclass(frozen=True)
class GatedDeltaNet:
    hidden: int
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    ssm_dtype: str  # dtype of the recurrent state (Qwen3.5: float32; Qwen3-Next: model dtype)

    kind = LayerKind.GDN

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the causal conv: q, k and v concatenated."""
        return 2 * self.key_dim + self.value_dim

    def tensors(self, prefix: str, part: str) -> Iterator[Tensor]:
        p, h = f"{prefix}.linear_attn", self.hidden
        yield Tensor(f"{p}.in_proj_qkv", h, 2 * self.key_dim + self.value_dim, part=part)
        yield Tensor(f"{p}.in_proj_z", h, self.value_dim, part=part)
        yield Tensor(f"{p}.in_proj_b", h, self.num_value_heads, part=part, role=Role.STATE_GATE)
        yield Tensor(f"{p}.in_proj_a", h, self.num_value_heads, part=part, role=Role.STATE_GATE)
        yield Tensor(f"{p}.conv1d", self.conv_kernel, self.conv_dim, linear=False, part=part)
        yield Tensor(f"{p}.A_log+dt_bias", 2, self.num_value_heads, linear=False, part=part)
        yield Tensor(f"{p}.norm", self.value_head_dim, 1, linear=False, part=part)
        yield Tensor(f"{p}.out_proj", self.value_dim, h, part=part)

    def cache_spec(self, ctx: CacheContext) -> MambaSpec:
        """The state per rank (the FP8 KV cache dtype does not touch it)."""
        tp = ctx.tp
        conv = (self.conv_kernel - 1 + ctx.spec_tokens, self.conv_dim // tp)
        recurrent = (max(1, self.num_value_heads // tp), self.value_head_dim, self.key_head_dim)
        return MambaSpec((conv, recurrent), (dtype_bytes(ctx.model_dtype), dtype_bytes(self.ssm_dtype)),
                         blocks_per_request=ctx.state_blocks)

    def check_tp(self, tp: int, name: str) -> None:
        if self.num_key_heads % tp or self.num_value_heads % tp:
            raise UserError(f"--tensor-parallel-size {tp} must divide {name}'s GatedDeltaNet heads "
                            f"({self.num_key_heads} key, {self.num_value_heads} value)")
