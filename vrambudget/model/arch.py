"""The model as vLLM builds it: its decoder layers (layer kinds, vrambudget/layers) and the few model-level facts
beside them. Every per-layer scalar (heads, head dims, widths, the MoE's shape) is read off the layers, never stored
twice. The families (vrambudget/families) read config.json into this record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer, LayerKind, Tensor
from ..layers.ffn import DenseMLP, MoE
from ..layers.gdn import GatedDeltaNet
from ..layers.mla import MLA
from ..layers.sparse_mla import SparseMLA
from ..towers.base import Tower

FULL = LayerKind.FULL.value
LINEAR = LayerKind.GDN.value
SLIDING = LayerKind.SLIDING.value


@dataclass(frozen=True)
class ModelExtras:
    """What a family states about its model file beyond the layers' own tensors."""

    norms_per_layer: int = 2  # RMSNorm weight vectors of width hidden per decoder layer
    # one cos/sin cache per rotary embedding as (rows, width, bytes per value; 0 or None: the model dtype)
    rotary_caches: tuple[tuple[int, int, int | None], ...] = ()
    tensors: tuple[Tensor, ...] = ()  # model-level weights the layers do not hold
    # vLLM runs this model's (1 + w) RMSNorm through its IR's native fused add, whose sum and normed copy are new
    # tensors: one more hidden-size tensor alive at the MLP's peak (Qwen3.5 / Qwen3-Next; lab allocator history)
    norm_allocates: bool = False
    # the largest CUDA-graph batch the model's vLLM config sets when the user sets none (gpt-oss: 1024, vLLM 0.26-0.33
    # model_executor/models/config.py 'Overriding max cuda graph capture size'); None: vLLM's default rule
    cudagraph_capture_max: int | None = None
    tower_unmodelled: str = ""  # a vision tower vLLM loads that is not modelled: --language-model-only is required
    # the coefficient of this model's own V2 CUDA-graph estimate, where its kind's (MoE, prefix LM) was measured not
    # to hold ('' : its kind's)
    graph_factor: str = ""


@dataclass(frozen=True)
class StageShare:
    """A pipeline stage's share of the model (parallel.stage_deployment): its layers are `ModelArch.layers`; vLLM
    groups the whole model's layers for the KV cache before each stage takes its own."""

    first_layer: int
    whole_layers: tuple[DecoderLayer, ...] = field(compare=False)
    holds_embedding: bool
    holds_lm_head: bool


@dataclass(frozen=True)
class ModelArch:
    """Everything the memory model needs to know about a checkpoint."""

    name: str
    architecture: str  # config.json's architectures[0]
    model_type: str
    dtype: str
    hidden_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    layers: tuple[DecoderLayer, ...] = field(compare=False)
    mtp_layers: int = 0  # MTP drafter layers in the checkpoint (each a `mtp_layer`)
    mtp_layer: DecoderLayer | None = field(default=None, compare=False)
    vision: Tower | None = None
    quantization: dict[str, Any] | None = field(default=None, compare=False)
    extras: ModelExtras = ModelExtras()
    share: StageShare | None = field(default=None, compare=False)  # None: the whole model

    # -- what the layers say ------------------------------------------------------------------------------------

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's kind (a mixer-less layer: 'moe' or 'mlp', as Nemotron-H's pattern)."""
        return tuple(layer.kind.value if layer.mixer is not None else "moe" if isinstance(layer.ffn, MoE) else "mlp"
                     for layer in self.layers)

    def _attention(self) -> list[FullAttention]:
        return [layer.mixer for layer in self.layers if isinstance(layer.mixer, FullAttention)]

    def attention_shape(self, kind: str) -> tuple[int, int]:
        """(KV heads, head dim) of the first attention layer of this kind (else of any), whole model."""
        attn = self._attention()
        m = next((x for x in attn if x.kind.value == kind), attn[0] if attn else None)
        return (m.num_kv_heads, m.head_dim) if m else (0, 0)

    @property
    def num_attention_heads(self) -> int:
        """Query heads of the attention (or MLA) layers; 0 without any."""
        m = next((layer.mixer for layer in self.layers if isinstance(layer.mixer, (FullAttention, MLA))), None)
        return m.num_heads if m else 0

    @property
    def head_dim(self) -> int:
        """The widest attention head (what picks the attention backend); 0 without attention."""
        return max((m.head_dim for m in self._attention()), default=0)

    @property
    def num_kv_heads(self) -> int:
        """KV heads of the first attention layer (Gemma 4: its sliding layers'); 0 without attention."""
        attn = self._attention()
        return attn[0].num_kv_heads if attn else 0

    @property
    def two_attention_shapes(self) -> bool:
        """Attention layers of two shapes, or a gated attention output (Gemma 4, Qwen3.5)."""
        attn = self._attention()
        return len({(m.num_kv_heads, m.head_dim) for m in attn}) > 1 or any(m.output_gate for m in attn)

    @property
    def moe(self) -> MoE | None:
        """The mixture-of-experts block (every MoE layer of a model has the same one)."""
        return next((layer.ffn for layer in self.layers if isinstance(layer.ffn, MoE)), None)

    @property
    def moe_layers(self) -> int:
        return sum(isinstance(layer.ffn, MoE) for layer in self.layers)

    @property
    def dense_mlp(self) -> DenseMLP | None:
        return next((layer.ffn for layer in self.layers if isinstance(layer.ffn, DenseMLP)), None)

    @property
    def mlp_width(self) -> int:
        """The intermediate width a token goes through: the MoE's (top-k experts and the shared one) where the
        model has one, else the dense MLP's."""
        ffn = self.moe or self.dense_mlp
        return ffn.width if ffn else 0

    @property
    def gdn(self) -> GatedDeltaNet | None:
        return next((layer.mixer for layer in self.layers if isinstance(layer.mixer, GatedDeltaNet)), None)

    @property
    def is_hybrid(self) -> bool:
        """Some layers keep a fixed state (GatedDeltaNet, Mamba2) beside attention layers with a KV cache."""
        return any(layer.mixer is not None and layer.kind.has_state for layer in self.layers)

    @property
    def diffkv(self) -> bool:
        """Attention whose V head dim differs from its K one: vLLM runs it with FLASH_ATTN_DIFFKV (0.33 mimo_v2.py)."""
        return any(isinstance(layer.mixer, FullAttention) and layer.mixer.v_dim != layer.mixer.head_dim
                   for layer in self.layers)

    @property
    def mla(self) -> MLA | None:
        """The latent-attention mixer (every MLA layer of a model has the same one; a SparseMLA is one too)."""
        return next((layer.mixer for layer in self.layers if isinstance(layer.mixer, MLA)), None)

    @property
    def uses_sparse_mla(self) -> bool:
        """Sparse MLA with a lightning indexer (DeepSeek V3.2, GLM-5): vLLM's sparse MLA backends."""
        return isinstance(self.mla, SparseMLA)

    @property
    def uses_mla(self) -> bool:
        """Latent attention: vLLM picks an MLA backend, whose block size the plan takes."""
        return any(layer.mixer is not None and layer.kind is LayerKind.MLA for layer in self.layers)

    @property
    def num_full_attention(self) -> int:
        return self.layer_types.count(FULL)

    @property
    def num_gdn(self) -> int:
        return self.layer_types.count(LINEAR)

    @property
    def is_multimodal(self) -> bool:
        return self.vision is not None

    # -- a pipeline stage's share ---------------------------------------------------------------------------------

    @property
    def holds_embedding(self) -> bool:
        return self.share is None or self.share.holds_embedding

    @property
    def holds_lm_head(self) -> bool:
        return self.share is None or self.share.holds_lm_head

    # -- the forward's tensors ------------------------------------------------------------------------------------

    def residual_stream_bytes(self, tokens: int, act_bytes: int, first_stage: bool = True, tp: int = 1) -> int:
        """The hidden-size tensors a layer's forward keeps beside its own, bytes (whole on every rank): the layer's
        input and the residual (a pipeline stage after the first keeps the residual in the intermediate tensors it
        received), one more where the norm allocates, and under tensor parallel the all-reduce's output beside the
        rank's partial sum (vLLM's all_reduce is out of place). vLLM 0.26.0's allocator: 2 x 32 MiB beside
        Qwen3-30B-A3B's attention; Qwen3-8B's last pipeline stage peaks 64 MiB below its first (0.78 / 0.84);
        Qwen3.8-27B AutoRound at TP 2, 8192 tokens: 0.98 GiB a rank, one 80 MiB tensor above the rest."""
        return tokens * act_bytes * self.hidden_size * (1 + first_stage + self.extras.norm_allocates + (tp > 1))

    def attention_forward_bytes(self, tokens: int, tp: int, act_bytes: int, first_stage: bool = True) -> int:
        """The largest attention layer's eager peak at its o_proj (layers.attention.forward_bytes) with the
        residual stream, bytes per rank; 0 without such a layer (MLA answers with its own coefficient)."""
        own = max((layer.mixer.forward_bytes(tokens, tp, act_bytes) for layer in self.layers
                   if layer.mixer is not None and hasattr(layer.mixer, "forward_bytes")), default=0)
        return own + self.residual_stream_bytes(tokens, act_bytes, first_stage, tp) if own else 0

    def compiled_forward_bytes(self, tokens: int, tp: int, act_bytes: int, first_stage: bool = True) -> int:
        """The compiled forward's peak at a dense MLP's activation, one GPU (vLLM 0.33's piecewise graphs, read in
        its source: helper note qwen3vl-video.md): the attention's output (heads x head dim), which the piece after
        the attention op holds; the residual the layer received and the new one of the native fused add-norm; the
        MLP's gate-up and activation outputs. Bytes; 0 where not traced: layers other than attention beside a dense
        MLP with two norms (Gemma's four), tensor parallel. Mistral Small 3.1 at 32,768 tokens: 6.875 GiB, logged
        6.88 (lab-vllm-0.33.0-h200/vision/m3-lmo-t32k); Qwen3-VL-8B 3.000 + its videos' 0.750, logged 3.75."""
        if tp > 1 or self.extras.norms_per_layer != 2 or not self.layers:
            return 0
        best = 0
        for layer in self.layers:
            if not isinstance(layer.mixer, FullAttention) or not isinstance(layer.ffn, DenseMLP):
                return 0
            att = layer.mixer.num_heads * layer.mixer.v_dim
            best = max(best, layer.ffn.compiled_forward_bytes(tokens, 1, act_bytes)
                       + tokens * act_bytes * (att + (1 + first_stage) * self.hidden_size))
        return best

    def mlp_forward_bytes(self, tokens: int, tp: int, act_bytes: int, first_stage: bool = True) -> int:
        """The largest dense MLP's eager peak (layers.ffn.DenseMLP.forward_bytes), with its input (the attention's
        output, normed in place) and the residual stream, bytes per rank; 0 without a dense MLP. vLLM 0.26.0's
        allocator at 8192 tokens: Qwen3-8B 640 + 64 + 2 x 64 MiB (+ cuBLAS's 32), Qwen3.5-9B 640 + 64 + 3 x 64."""
        own = max((layer.ffn.forward_bytes(tokens, tp, act_bytes) for layer in self.layers
                   if hasattr(layer.ffn, "forward_bytes")), default=0)
        if not own:
            return 0
        return (own + tokens * act_bytes * self.hidden_size
                + self.residual_stream_bytes(tokens, act_bytes, first_stage, tp))
