"""Mamba2 (Nemotron-H, Granite 4.0-H, Falcon-H1): no KV cache, a fixed state per sequence (vLLM 0.26
layers/mamba/mamba_utils.py MambaStateShapeCalculator.mamba2_state_shape): the conv's last (kernel - 1 +
speculative tokens) rows of its intermediate + 2 x groups x state channels, and the SSM state of heads x head dim x
state size. The groups split over the ranks where they divide, else (one group) every rank keeps them all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..errors import UserError
from ..kv.spec import MambaSpec
from ..units import dtype_bytes
from .base import CacheContext, LayerKind, Tensor


@dataclass(frozen=True)
class Mamba2:
    hidden: int
    num_heads: int
    head_dim: int
    n_groups: int
    state_size: int
    conv_kernel: int
    ssm_dtype: str  # the SSM state's dtype (Nemotron-H: float32; Granite, Falcon-H1: the model's)
    proj_bias: bool = False
    conv_bias: bool = True
    rms_norm: bool = True

    kind = LayerKind.MAMBA2

    @property
    def intermediate(self) -> int:
        return self.num_heads * self.head_dim

    def groups_per_rank(self, tp: int) -> int:
        return self.n_groups // tp if self.n_groups % tp == 0 else self.n_groups

    def tensors(self, prefix: str, part: str) -> Iterator[Tensor]:
        """layers/mamba/mamba_mixer2.py (0.26): in_proj to z, x, B, C and dt; the conv, A (fp32), D, dt_bias and
        the gated RMSNorm unquantized; out_proj."""
        p, h, i = f"{prefix}.mixer", self.hidden, self.intermediate
        gn = self.n_groups * self.state_size
        yield Tensor(f"{p}.in_proj", h, 2 * i + 2 * gn + self.num_heads, bias=self.proj_bias, part=part)
        yield Tensor(f"{p}.conv1d", self.conv_kernel, i + 2 * gn, linear=False, part=part, tp_split=True)
        if self.conv_bias:
            yield Tensor(f"{p}.conv1d.bias", i + 2 * gn, 1, linear=False, part=part, tp_split=True)
        yield Tensor(f"{p}.A", self.num_heads, 1, linear=False, part=part, dtype_bytes=4, tp_split=True)
        yield Tensor(f"{p}.D+dt_bias", 2 * self.num_heads, 1, linear=False, part=part, tp_split=True)
        if self.rms_norm:
            yield Tensor(f"{p}.norm", i, 1, linear=False, part=part, tp_split=True)
        yield Tensor(f"{p}.out_proj", i, h, bias=self.proj_bias, part=part)

    def cache_spec(self, ctx: CacheContext) -> MambaSpec:
        tp = ctx.tp
        conv = (self.conv_kernel - 1 + ctx.spec_tokens,
                self.intermediate // tp + 2 * self.groups_per_rank(tp) * self.state_size)
        ssm = (self.num_heads // tp, self.head_dim, self.state_size)
        return MambaSpec((conv, ssm), (dtype_bytes(ctx.model_dtype), dtype_bytes(self.ssm_dtype)),
                         blocks_per_request=ctx.state_blocks)

    def check_tp(self, tp: int, name: str) -> None:
        if self.num_heads % tp or (self.n_groups % tp and self.n_groups != 1):
            raise UserError(f"--tensor-parallel-size {tp} must divide {name}'s {self.num_heads} Mamba2 heads and its "
                            f"{self.n_groups} groups (or the model have one group)")
