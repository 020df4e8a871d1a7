"""Multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2): the KV cache holds one compressed latent of
kv_lora_rank plus the rope key of qk_rope_head_dim per token, K only, whole on every tensor-parallel rank (vLLM 0.26
MLAAttention: num_kv_heads 1, head_size kv_lora_rank + qk_rope_head_dim; config/model.py get_num_kv_heads returns 1
with MLA). The block size is the MLA backend's (gpu_facts.json mla_backends: FLASH_ATTN_MLA 16 and FLASHMLA 64 on
Hopper, FLASHINFER_MLA 32 on SM100, TRITON_MLA 16 elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..errors import UserError
from ..kv.spec import MLASpec
from .base import CacheContext, LayerKind, Tensor


@dataclass(frozen=True)
class MLA:
    hidden: int
    num_heads: int
    q_lora_rank: int | None  # None: q_proj straight from hidden (DeepSeek-V2-Lite)
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    kind = LayerKind.MLA

    @property
    def latent_dim(self) -> int:
        """What a token keeps in the cache: the latent and the rope key."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    def tensors(self, prefix: str, part: str) -> Iterator[Tensor]:
        """vLLM 0.26 deepseek_v2.py DeepseekV2MLAAttention: the down projections (q_a and kv_a fused) are whole on
        every rank, the up projections split by heads, o_proj by its input."""
        p, h, n = f"{prefix}.self_attn", self.hidden, self.num_heads
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        if self.q_lora_rank:
            yield Tensor(f"{p}.fused_qkv_a_proj", h, self.q_lora_rank + self.latent_dim, part=part, replicated=True)
            yield Tensor(f"{p}.q_a_layernorm", self.q_lora_rank, 1, linear=False, part=part)
            yield Tensor(f"{p}.q_b_proj", self.q_lora_rank, n * qk, part=part)
        else:
            yield Tensor(f"{p}.q_proj", h, n * qk, part=part)
            yield Tensor(f"{p}.kv_a_proj_with_mqa", h, self.latent_dim, part=part, replicated=True)
        yield Tensor(f"{p}.kv_a_layernorm", self.kv_lora_rank, 1, linear=False, part=part)
        yield Tensor(f"{p}.kv_b_proj", self.kv_lora_rank, n * (self.qk_nope_head_dim + self.v_head_dim), part=part)
        yield Tensor(f"{p}.o_proj", n * self.v_head_dim, h, part=part)

    def cache_spec(self, ctx: CacheContext) -> MLASpec:
        token_bytes = 656 if ctx.mla_fp8_ds else 0  # fp8_ds_mla: 512 fp8 + 4 fp32 scales + 64 bf16 rope values
        return MLASpec(1, self.latent_dim, ctx.kv_dtype_bytes, ctx.mla_block_size, 0, token_bytes=token_bytes)

    def check_tp(self, tp: int, name: str) -> None:
        if self.num_heads % tp:
            raise UserError(f"--tensor-parallel-size {tp} must divide {name}'s {self.num_heads} attention heads")
