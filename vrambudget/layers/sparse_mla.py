"""Sparse MLA (DeepSeek V3.2, GLM-5): MLA whose attention reads only the `index_topk` tokens a lightning indexer
picks. Beside each layer's latent the cache keeps the indexer's key: index_head_dim fp8 values and one fp32 scale per
128, 132 bytes a token whatever --kv-cache-dtype says; both in one page of the backend's 64-token block (vLLM 0.33.0
models/deepseek_v32/attention.py, deepseek_v2.py get_kv_cache_spec, kv_cache_interface.py UniformTypeKVCacheSpecs).
On Hopper vLLM picks FLASH_ATTN_MLA_SPARSE (bf16 latent) or, with an fp8 cache, FLASHMLA_SPARSE (fp8_ds_mla: 656 bytes
a token), which reserves its prefill workspace when it is built (gpu_facts.json sparse_mla_backends)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from ..kv.spec import MLASpec
from .base import CacheContext, Tensor
from .mla import MLA

INDEXER_LOGITS_DUMMY_BYTES = 512 * 2**20  # VLLM_SPARSE_INDEXER_MAX_LOGITS_MB: the profile branch's dummy logits
MIB = 2**20


@dataclass(frozen=True)
class SparseMLA(MLA):
    index_heads: int = 64
    index_head_dim: int = 128
    index_topk: int = 2048

    @property
    def indexer_key_bytes(self) -> int:
        """A token's indexer key: index_head_dim fp8 values and an fp32 scale per 128 of them."""
        return self.index_head_dim + self.index_head_dim // 128 * 4

    def tensors(self, prefix: str, part: str) -> Iterator[Tensor]:
        """MLA's, and the indexer's: wq_b from the q latent (the model's quantization), wk and weights_proj merged
        (unquantized), k_norm's LayerNorm in fp32; all whole on every rank (attention.py)."""
        yield from super().tensors(prefix, part)
        p = f"{prefix}.self_attn.indexer"
        yield Tensor(f"{p}.wq_b", self.q_lora_rank or self.hidden, self.index_heads * self.index_head_dim, part=part,
                     replicated=True)
        yield Tensor(f"{p}.wk_weights_proj", self.hidden, self.index_head_dim + self.index_heads, linear=False,
                     part=part)
        yield Tensor(f"{p}.k_norm", 2 * self.index_head_dim, 1, linear=False, part=part, dtype_bytes=4)

    def cache_spec(self, ctx: CacheContext) -> MLASpec:
        token_bytes = 656 if ctx.mla_fp8_ds else 0  # fp8_ds_mla: 512 fp8 + 4 fp32 scales + 64 bf16 rope values
        return MLASpec(1, self.latent_dim, ctx.kv_dtype_bytes, ctx.mla_block_size, 0, token_bytes=token_bytes,
                       extra_token_bytes=self.indexer_key_bytes)

    def load_buffer_bytes(self, tokens: int, seqs: int, fp8_ds: bool) -> int:
        """Buffers each layer's attention allocates as the model is built (bytes, per rank): the decode rows' top-k
        indices and counts ((min(tokens, seqs) + 1) x (index_topk + 1) int32, index_group.py) and, on
        FLASH_ATTN_MLA_SPARSE, its query offsets (tokens + 1 int32)."""
        rows = min(tokens, seqs) + 1
        return rows * (self.index_topk + 1) * 4 + (0 if fp8_ds else (tokens + 1) * 4)

    def indexer_workspace_bytes(self, max_model_len: int) -> int:
        """The indexer's profile workspace, which vLLM's WorkspaceManager keeps: max_model_len x (1,152 // the key's
        bytes) x f keys (f = 5 up to 256 Ki tokens, else 2: sparse_mla_prefill_workspace_factor) and a 1 MiB radix
        buffer (sparse_attn_indexer.py, mla/indexer.py)."""
        keys = max_model_len * (1152 // self.indexer_key_bytes) * _factor(max_model_len)
        return keys * self.indexer_key_bytes + MIB

    def fp8_init_workspace_bytes(self, tokens: int, max_model_len: int, tp: int) -> int:
        """FLASHMLA_SPARSE's workspace, reserved when the layer is built and counted with the weights (bytes per
        rank, each part rounded to 256 B): the concatenated query (tokens x heads x 576), the bf16 prefill workspace
        (f x max_model_len x 576), the padded query and output (heads rounded up to 64) and the output
        (flashmla_sparse.py; DeepSeek-V3.2 4 layers: 5,507,121,152 B, 28.43 -> 33.56 GiB logged)."""
        heads, padded, lat = self.num_heads // tp, -(-self.num_heads // tp // 64) * 64, self.latent_dim
        parts = (tokens * heads * lat, _factor(max_model_len) * max_model_len * lat, tokens * padded * lat,
                 tokens * padded * self.kv_lora_rank, tokens * heads * self.kv_lora_rank)
        return sum(-(-2 * p // 256) * 256 for p in parts)

    def profile_bytes(self, tokens: int, tp: int, act_bytes: int, workspace_tokens: int, eager: bool = False) -> int:
        """The layer's peak in the profile run, at the indexer's call (no attention metadata, so no prefill
        placeholder): its 512 MiB dummy logits beside the tensors alive there, per token: the residual and normed
        input, the fused q/kv latent, the indexer's key and weights, the output, the latent and rope key, the q
        latent, q, the absorbed q (heads x kv_lora), the indexer's query in bf16 and fp8, its weights and the rope
        query (models/deepseek_v32/attention.py, common/kernels.py). DeepSeek-V3.2: 291,712 B a token, 2.73 GiB at
        8,192 tokens; 2.74 logged where it decides (lab-vllm-0.33.0-h200/families/dsv32-fp8)."""
        h, n = self.hidden, self.num_heads // tp
        ql, kl, r = self.q_lora_rank or 0, self.kv_lora_rank, self.qk_rope_head_dim
        ih, idim = self.index_heads, self.index_head_dim
        per_token = act_bytes * (2 * h + ql + kl + r + idim + ih + n * self.v_head_dim + kl + r + ql
                                 + n * (self.qk_nope_head_dim + r) + n * kl + ih * idim + n * r) + ih * idim + ih * 4
        return tokens * per_token + INDEXER_LOGITS_DUMMY_BYTES


# FA3's split count for FLASH_ATTN_MLA_SPARSE's decode on a 132-SM Hopper: no num_splits is passed, so its heuristic
# picks 28 for index_topk 2048 keys (64 x 64 tiles) at any batch up to 992 (flash_api.cpp, heuristics.h; the
# 0.33.0 logs' estimates rule out 32)
SPARSE_FA3_SPLITS = 28


def sparse_decode_bytes_per_seq(m: SparseMLA, tp: int, max_model_len: int, fp8_ds: bool) -> int:
    """What one decode sequence's eager warm-up allocates and leaves in torch's cache (bytes per rank): the indexer's
    fp32 logits over max_model_len, and the attention's split buffers: FA3's out_accum and lse_accum (28 splits) with
    the bf16 output and absorbed query on FLASH_ATTN_MLA_SPARSE, FlashMLA's o_accum on FLASHMLA_SPARSE
    (flashattn_mla_sparse.py, flashmla_sparse.py, sparse_attn_indexer.py)."""
    h, lat = m.num_heads // tp, m.kv_lora_rank
    logits = max_model_len * 4
    if fp8_ds:
        return h * lat * 4 + h * 4 + logits
    s = SPARSE_FA3_SPLITS
    return s * h * lat * 4 + s * h * 4 + 2 * h * lat * 2 + logits


def _factor(max_model_len: int) -> int:
    """vLLM's sparse_mla_prefill_workspace_factor: 5 up to 256 Ki tokens, else 2 (config/vllm.py)."""
    return 5 if max_model_len <= 256 * 1024 else 2
