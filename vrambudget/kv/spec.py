"""One small spec per layer kind, the way vLLM's `v1/kv_cache_interface.py` models them: each
answers its page size (bytes of one block) and how many blocks a request of L tokens holds.
All sizes are bytes per rank; lengths are tokens."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.arch import GDNConfig
from ..units import cdiv, dtype_bytes


@dataclass(frozen=True)
class AttentionSpec:
    """Full attention: K and V of every token, `block_size` tokens per block."""

    num_kv_heads: int  # per rank
    head_dim: int
    dtype_bytes: int  # fp8 / int8 = 1, bf16 = 2
    block_size: int = 16
    scale_bytes: int = 0  # per-token-head KV: one fp32 scale per head and token, for K and for V

    @property
    def bytes_per_token(self) -> int:
        return 2 * self.num_kv_heads * (self.head_dim * self.dtype_bytes + self.scale_bytes)

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
class MambaSpec:
    """A GatedDeltaNet layer's fixed state per sequence: conv rows + recurrent matrix.

    `blocks_per_request` is how many pages one request holds: 1 + k in "none" mode, 2 + k in
    "align" mode (+ extra where FlashInfer prefill checkpoints need one), k = speculative tokens.
    """

    conv_rows: int  # conv kernel - 1 + speculative tokens
    conv_channels: int  # per rank
    conv_dtype_bytes: int
    value_heads: int  # per rank
    value_head_dim: int
    key_head_dim: int
    ssm_dtype_bytes: int
    blocks_per_request: int = 1
    page_size_padded: int | None = None  # vLLM pads the mamba page to the attention page

    @property
    def conv_bytes(self) -> int:
        return self.conv_rows * self.conv_channels * self.conv_dtype_bytes

    @property
    def recurrent_bytes(self) -> int:
        return self.value_heads * self.value_head_dim * self.key_head_dim * self.ssm_dtype_bytes

    @property
    def state_bytes(self) -> int:
        """Unpadded state of one sequence in one layer."""
        return self.conv_bytes + self.recurrent_bytes

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded or self.state_bytes

    def blocks_for(self, tokens: int) -> int:
        return self.blocks_per_request

    def memory_for(self, tokens: int) -> int:
        return self.blocks_per_request * self.page_size_bytes


def mamba_spec(g: GDNConfig, *, model_dtype: str, spec_tokens: int, tp: int, blocks_per_request: int) -> MambaSpec:
    """The GDN state spec per rank (the FP8 KV cache dtype does not touch it)."""
    return MambaSpec(
        conv_rows=g.conv_kernel - 1 + spec_tokens,
        conv_channels=g.conv_dim // tp,
        conv_dtype_bytes=dtype_bytes(model_dtype),
        value_heads=max(1, g.num_value_heads // tp),
        value_head_dim=g.value_head_dim,
        key_head_dim=g.key_head_dim,
        ssm_dtype_bytes=dtype_bytes(g.ssm_dtype),
        blocks_per_request=blocks_per_request,
    )
