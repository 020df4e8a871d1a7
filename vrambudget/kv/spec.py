"""One small spec per layer kind, the way vLLM's `v1/kv_cache_interface.py` models them: each
answers its page size (bytes of one block) and how many blocks a request of L tokens holds.
All sizes are bytes per rank; lengths are tokens."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ..units import cdiv


@dataclass(frozen=True)
class AttentionSpec:
    """Full attention: K and V of every token, `block_size` tokens per block."""

    num_kv_heads: int  # per rank
    head_dim: int
    dtype_bytes: int  # fp8 / int8 = 1, bf16 = 2
    block_size: int = 16
    scale_bytes: int = 0  # per-token-head KV: one fp32 scale per head and token, for K and for V
    v_head_dim: int = 0  # V's head dim where it differs from K's (MiMo-V2: 128 beside 192); 0: head_dim

    @property
    def bytes_per_token(self) -> int:
        return self.num_kv_heads * ((self.head_dim + (self.v_head_dim or self.head_dim)) * self.dtype_bytes
                                    + 2 * self.scale_bytes)

    @property
    def page_size_bytes(self) -> int:
        return self.block_size * self.bytes_per_token

    def blocks_for(self, tokens: int) -> int:
        return cdiv(tokens, self.block_size)

    def memory_for(self, tokens: int) -> int:
        return self.blocks_for(tokens) * self.page_size_bytes


@dataclass(frozen=True)
class SlidingWindowSpec(AttentionSpec):
    """Sliding-window attention keeps only the last `window` tokens (+ the ones in flight)."""

    window: int = 4096
    in_flight_tokens: int = 0  # max_num_batched_tokens, as vLLM bounds a chunk

    def blocks_for(self, tokens: int) -> int:
        return cdiv(min(self.window - 1 + self.in_flight_tokens, tokens), self.block_size) + 1


@dataclass(frozen=True)
class ChunkedLocalSpec(AttentionSpec):
    """Chunked local attention (Llama 4's RoPE layers): K and V of the current chunk of `chunk` tokens plus the
    tokens in flight; a request holds cdiv(min(chunk + in flight, L), block_size) blocks (vLLM 0.26
    ChunkedLocalAttentionSpec.max_memory_usage_bytes: no extra block, unlike a sliding window)."""

    chunk: int = 8192
    in_flight_tokens: int = 0

    def blocks_for(self, tokens: int) -> int:
        return cdiv(min(self.chunk + self.in_flight_tokens, tokens), self.block_size)


@dataclass(frozen=True)
class MLASpec(AttentionSpec):
    """Multi-head latent attention: one latent of `head_dim` = kv_lora_rank + rope dims per token, K only (no V),
    whole on every tensor-parallel rank (vLLM 0.26 MLAAttentionSpec, num_kv_heads 1); fp8_ds_mla stores 656 bytes a
    token instead (`token_bytes`)."""

    token_bytes: int = 0  # where the format fixes a token's bytes (fp8_ds_mla: 656); 0: head_dim x dtype
    extra_token_bytes: int = 0  # kept beside the latent in the same page (sparse MLA's indexer key: 132)

    @property
    def bytes_per_token(self) -> int:
        return (self.token_bytes or self.num_kv_heads * self.head_dim * self.dtype_bytes) + self.extra_token_bytes


@dataclass(frozen=True)
class MambaSpec:
    """A layer's fixed state per sequence (vLLM's MambaSpec): its tensors' shapes per rank and their dtypes' bytes
    (GatedDeltaNet: conv rows x channels, value heads x value dim x key dim; Mamba2: conv rows x channels, heads x
    head dim x state size). `blocks_per_request` is how many pages one request holds: 1 + k in "none" mode, 2 + k in
    "align" mode (+ extra where FlashInfer prefill checkpoints need one), k = speculative tokens."""

    shapes: tuple[tuple[int, ...], ...]
    dtype_bytes: tuple[int, ...]
    blocks_per_request: int = 1
    page_size_padded: int | None = None  # vLLM pads the mamba page to the attention page

    @property
    def state_bytes(self) -> int:
        """Unpadded state of one sequence in one layer."""
        return sum(prod(shape) * b for shape, b in zip(self.shapes, self.dtype_bytes, strict=True))

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded or self.state_bytes

    def blocks_for(self, tokens: int) -> int:
        return self.blocks_per_request

    def memory_for(self, tokens: int) -> int:
        return self.blocks_per_request * self.page_size_bytes
