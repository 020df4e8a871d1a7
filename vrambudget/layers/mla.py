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

    def profile_bytes(self, tokens: int, tp: int, act_bytes: int, workspace_tokens: int, eager: bool = False) -> int:
        """An MLA layer's peak in vLLM's profile run (bytes per rank). The profile builds no attention metadata, so
        each MLA layer allocates the placeholder that stands for its prefill's up-projected context, `workspace_tokens`
        (the chunked-prefill workspace) x heads x (qk_nope + v) (vLLM 0.26.0 / 0.33.0 mla_attention.py, the branch
        where attn_metadata is None), beside the tensors alive at that call: q (heads x (qk_nope + rope)), the output
        (heads x v), the normed latent and rope key, and the residual. DeepSeek-V3 cut to 5 layers, vLLM 0.33.0 on an
        H100: 4.19, 5.49 and 6.99 GiB logged at 2,048, 16,384 and 32,768 batched tokens, 2.74 at 8,192 with a
        4,096-token context (a 32,768-token workspace; lab-vllm-0.33.0-h100/moe-tokens). Eager, the layer's input stays
        beside its normed copy (compiled, it is freed): one more hidden-size tensor (DeepSeek-V3 5 layers, vLLM 0.26.0
        eager: 6.69 GiB logged at 8,192 tokens, lab-vllm-0.26.0-h100/families/dsv3-e)."""
        heads = self.num_heads // tp
        placeholder = workspace_tokens * heads * (self.qk_nope_head_dim + self.v_head_dim)
        alive = tokens * (heads * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim)
                          + self.latent_dim + self.hidden * (2 if eager else 1))
        return (placeholder + alive) * act_bytes

    def check_tp(self, tp: int, name: str) -> None:
        if self.num_heads % tp:
            raise UserError(f"--tensor-parallel-size {tp} must divide {name}'s {self.num_heads} attention heads")


def chunked_prefill_workspace_tokens(max_model_len: int, max_num_seqs: int, block_size: int, seq_floor: bool) -> int:
    """vLLM's MLA chunked-prefill workspace in tokens: 8 full-length requests or 4 blocks a sequence, at most 65,536
    (mla_attention.py determine_chunked_prefill_workspace_size); then at least a block a sequence (0.26.0,
    `seq_floor`), or rounded up to a whole block (0.33.0)."""
    tokens = min(max(8 * max_model_len, 4 * max_num_seqs * block_size), 64 * 1024)
    if seq_floor:
        return max(tokens, max_num_seqs * block_size)
    return -(-max(tokens, block_size) // block_size) * block_size
