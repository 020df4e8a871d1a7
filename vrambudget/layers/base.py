"""What every layer kind shares: the tensor record weights are counted from, the context a cache spec is made in,
the kinds' names, and a decoder layer as a mixer (attention or state) plus a feed-forward block."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterator, Protocol


class LayerKind(str, Enum):
    """A decoder layer's token mixer. The values are the names configs use where they have one (layer_types); the
    order is the one vLLM's KV plan (and this tool's tables) list a model's kinds in: attention first, state last."""

    FULL = "full_attention"
    MLA = "mla"
    SLIDING = "sliding_attention"
    CHUNKED = "chunked_attention"
    GDN = "linear_attention"
    MAMBA2 = "mamba2"

    @property
    def order(self) -> int:
        return list(LayerKind).index(self)

    @property
    def label(self) -> str:
        """How the KV plan names the kind's layers ('9 attention in 1 group(s), 24 gdn in 3 group(s)')."""
        return {"full_attention": "attention", "sliding_attention": "sliding", "chunked_attention": "chunked",
                "mla": "mla", "linear_attention": "gdn", "mamba2": "mamba"}[self.value]

    @property
    def has_state(self) -> bool:
        """A fixed state per sequence (vLLM's MambaSpec) rather than a KV cache that grows with the tokens."""
        return self in (LayerKind.GDN, LayerKind.MAMBA2)


class Role(str, Enum):
    """What a weight is to vLLM: which decides whether a checkpoint's quantizer converts it and how it splits over
    tensor-parallel ranks (never read back from its name, which stays the checkpoint's for its ignore lists)."""

    PROJECTION = "projection"  # a Linear a weight-only quantizer converts
    EMBEDDING = "embedding"  # the token embedding (vocab-parallel: split over the ranks)
    LM_HEAD = "lm_head"  # quantized only where the checkpoint says so
    ROUTER = "router"  # an MoE's gate and routing bias: model dtype or fp32
    EXPERTS = "experts"  # routed experts (the only weights MXFP4 converts)
    STATE_GATE = "state_gate"  # GatedDeltaNet's b and a projections: kept in model dtype (vLLM's qwen3_next.py)
    SHARED_GATE = "shared_gate"  # the shared expert's one-output gate
    PARAM = "param"  # norms, convolutions, biases, sinks, state parameters: not Linear


# the Linears vLLM keeps in the model dtype whatever the checkpoint's quantizer
NEVER_QUANTIZED = frozenset({Role.EMBEDDING, Role.ROUTER, Role.STATE_GATE, Role.SHARED_GATE, Role.PARAM})


@dataclass(frozen=True)
class Tensor:
    """One weight (or `count` identical ones, e.g. MoE experts). Linear: numel = in_f * out_f."""

    name: str
    in_f: int
    out_f: int
    count: int = 1
    linear: bool = True
    bias: bool = False
    part: str = "model"  # "model", "mtp", "vision" or "buffers" (allocated at load, not in the checkpoint)
    dtype_bytes: int | None = None  # fixed whatever the model dtype (e.g. fp32 router biases); None: the model's
    replicated: bool = False  # a Linear vLLM keeps whole on every tensor-parallel rank (MLA's down projections)
    tp_split: bool = False  # a non-Linear that splits over the ranks all the same (a Mamba2 conv, its A and D)
    role: Role = Role.PROJECTION
    fuse: str = ""  # the fused tensor it is in vLLM's layout ('w13': the experts' gate and up; 'w2': their down)

    @property
    def numel(self) -> int:
        return self.count * (self.in_f * self.out_f + (self.out_f if self.bias else 0))

    def splits(self, replicated: frozenset[Role] = frozenset()) -> bool:
        """Whether tensor parallel splits it over the ranks: a Linear unless kept whole (itself, or its role in
        `replicated`), a non-Linear that splits all the same, the token embedding."""
        return ((self.linear and not self.replicated and self.role not in replicated) or self.tp_split
                or self.role is Role.EMBEDDING)


@dataclass(frozen=True)
class CacheContext:
    """What a layer's cache spec depends on beyond its shape (per deployment)."""

    kv_dtype_bytes: int  # the KV cache dtype (fp8 / int8 = 1, bf16 = 2)
    model_dtype: str  # dtype of a state's conv part (and of its recurrent part unless the layer names one)
    tp: int
    spec_tokens: int  # speculative tokens per step: a state's conv keeps that many more rows
    state_blocks: int  # blocks one request holds per state group (1 + k "none", 2 + k "align")
    in_flight_tokens: int  # tokens a sliding / chunked layer keeps beside its window (vllm_rules)
    kv_scale_bytes: int = 0  # per-token-head KV scales (fp32, for K and for V each)
    block_size: int = 16  # the attention backend's block
    mla_block_size: int = 16  # the MLA backend's block (gpu_facts.json mla_backends)
    mla_fp8_ds: bool = False  # the MLA cache in fp8_ds_mla (656 bytes a token; the sparse FlashMLA path)


class Mixer(Protocol):
    """A layer kind: its tensors, its cache spec per rank and whether a tensor-parallel size splits it."""

    kind: LayerKind

    def tensors(self, prefix: str, part: str) -> Iterator[Tensor]: ...

    def cache_spec(self, ctx: CacheContext) -> Any: ...

    def check_tp(self, tp: int, name: str) -> None: ...


@dataclass(frozen=True)
class DecoderLayer:
    """One decoder layer: a token mixer and a feed-forward block (None: the layer has none, as Nemotron-H's
    mixer-only layers)."""

    mixer: Any  # a Mixer
    ffn: Any = None  # ffn.DenseMLP or ffn.MoE

    @property
    def kind(self) -> LayerKind:
        return self.mixer.kind
