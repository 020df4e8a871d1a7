"""The model's architecture as vLLM sees it, read from a Hugging Face config.json (pure: no I/O).

Handles Qwen3.5 dense and MoE (nested `text_config`, optional `vision_config`), Qwen3-Next (flat,
`full_attention_interval`), dense GQA transformers (Qwen3, Llama 3, sliding-window layers) and Gemma 4
(sliding-window + full layers whose KV heads and head dims differ, K=V tied full layers, MoE beside a dense MLP).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.ffn import DenseMLP, MoE
from ..layers.gdn import GatedDeltaNet
from ..layers.sliding import SlidingAttention
from ..units import DTYPE_BYTES

FULL = "full_attention"
LINEAR = "linear_attention"  # GatedDeltaNet (GDN)
SLIDING = "sliding_attention"

# architectures whose vLLM model file drops the gate-up output before down_proj (LlamaMLP in llama.py, which Phi-3
# and Llama 4 import; MistralMLP in mistral.py)
FREES_GATE_UP = {"LlamaForCausalLM", "MistralForCausalLM", "Phi3ForCausalLM"}
HYBRID_MODEL_TYPES = {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_next"}
GEMMA4_MODEL_TYPES = {"gemma4", "gemma4_text"}
# config keys that change what vLLM allocates and that the memory model does not read yet: a config with
# any of them set is refused in one line rather than planned as if they were absent
UNMODELLED_KEYS = {
    "num_kv_shared_layers": "KV cache shared across layers",
    "hidden_size_per_layer_input": "per-layer input embeddings",
    "q_lora_rank": "MLA (latent attention)",
    "use_mla": "MLA (latent attention)",
}


GDNConfig = GatedDeltaNet  # a GatedDeltaNet layer's shape (layers/gdn.py)


@dataclass(frozen=True)
class MoEConfig:
    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_expert_intermediate: int  # 0 when the model has no shared expert
    sparse_layers: tuple[int, ...]  # decoder layer indices whose MLP is the MoE block
    gated: bool = True  # gate + up projections per expert (False: Nemotron-H's squared ReLU, up only)


@dataclass(frozen=True)
class VisionConfig:
    """Qwen3.5 / Qwen3-VL style vision tower (only loaded without --language-model-only)."""

    depth: int
    hidden: int
    intermediate: int
    out_hidden: int
    patch: int
    temporal_patch: int
    in_channels: int
    spatial_merge: int
    num_position_embeddings: int


@dataclass(frozen=True)
class ModelArch:
    """Everything the memory model needs to know about a checkpoint."""

    name: str
    architecture: str
    model_type: str
    dtype: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    intermediate_size: int
    tie_word_embeddings: bool
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    layer_types: tuple[str, ...]
    max_position_embeddings: int
    attn_output_gate: bool = False
    qk_norm: bool = False
    attention_bias: bool = False
    sliding_window: int | None = None
    gdn: GDNConfig | None = None
    moe: MoEConfig | None = None
    mtp_layers: int = 0
    vision: VisionConfig | None = None
    quantization: dict[str, Any] | None = field(default=None, compare=False)
    assumptions: tuple[str, ...] = ()  # what was assumed for a model type nobody checked (said in every output)
    # full-attention layers whose KV heads / head dim differ from the other layers' (Gemma 4: 4 global KV heads
    # of dim 512 beside sliding layers' 16 of 256); None: the same
    full_num_kv_heads: int | None = None
    full_head_dim: int | None = None
    norms_per_layer: int = 2  # RMSNorm weight vectors of width hidden per decoder layer
    rotary_dims: tuple[int, ...] = ()  # one cos/sin cache of max_position x dim per distinct rotary embedding
    # one cos/sin cache per rotary embedding as (rows, width, bytes per value) where a family states them (YaRN and
    # linear-scaled ropes cache more rows than max_position; gpt-oss keeps fp32); () : rotary_dims x max_position
    rotary_caches: tuple[tuple[int, int, int], ...] = ()
    extra_tensors: tuple = ()  # model-level weights a family adds (layers.base.Tensor)
    tower_unmodelled: str = ""  # a vision tower vLLM loads that is not modelled: --language-model-only is required
    # the largest CUDA-graph batch the model's vLLM config sets when the user sets none (gpt-oss: 1024, vLLM 0.26-0.33
    # model_executor/models/config.py 'Overriding max cuda graph capture size'); None: vLLM's default rule
    cudagraph_capture_max: int | None = None
    # the decoder layers as layer kinds (vrambudget/layers): what the planner and the weights loop over
    layers: tuple[DecoderLayer, ...] = field(default=(), compare=False)
    mtp_layer: DecoderLayer | None = field(default=None, compare=False)  # one MTP drafter decoder layer
    # vLLM runs this model's (1 + w) RMSNorm through its IR's native fused add, whose sum and normed copy are new
    # tensors: one more hidden-size tensor alive at the MLP's peak (Qwen3.5 / Qwen3-Next; lab allocator history)
    norm_allocates: bool = False
    # a pipeline stage's share (parallel.stage_arch): the token embedding and the lm_head on this rank or not
    holds_embedding: bool = True
    holds_lm_head: bool = True
    # a pipeline stage: (its first layer, its layers) and the whole model's decoder layers, which vLLM groups for
    # the KV cache before each stage takes its own (parallel.stage_deployment); None: the whole model
    stage: tuple[int, int] | None = field(default=None, compare=False)
    whole_layers: tuple[DecoderLayer, ...] = field(default=(), compare=False)

    def attention_shape(self, kind: str) -> tuple[int, int]:
        """(KV heads, head dim) of an attention layer of this kind (FULL or SLIDING), whole model."""
        if kind == FULL:
            return self.full_num_kv_heads or self.num_kv_heads, self.full_head_dim or self.head_dim
        return self.num_kv_heads, self.head_dim

    def residual_stream_bytes(self, tokens: int, act_bytes: int, first_stage: bool = True, tp: int = 1) -> int:
        """The hidden-size tensors a layer's forward keeps beside its own, bytes (whole on every rank): the layer's
        input and the residual (a pipeline stage after the first keeps the residual in the intermediate tensors it
        received), one more where the norm allocates, and under tensor parallel the all-reduce's output beside the
        rank's partial sum (vLLM's all_reduce is out of place). vLLM 0.26.0's allocator: 2 x 32 MiB beside
        Qwen3-30B-A3B's attention; Qwen3-8B's last pipeline stage peaks 64 MiB below its first (0.78 / 0.84);
        Qwen3.8-27B AutoRound at TP 2, 8192 tokens: 0.98 GiB a rank, one 80 MiB tensor above the rest."""
        return tokens * act_bytes * self.hidden_size * (1 + first_stage + self.norm_allocates + (tp > 1))

    def attention_forward_bytes(self, tokens: int, tp: int, act_bytes: int, first_stage: bool = True) -> int:
        """The largest attention layer's eager peak at its o_proj (layers.attention.forward_bytes) with the
        residual stream, bytes per rank; 0 without such a layer (MLA answers with its own coefficient)."""
        own = max((layer.mixer.forward_bytes(tokens, tp, act_bytes) for layer in self.layers
                   if layer.mixer is not None and hasattr(layer.mixer, "forward_bytes")), default=0)
        return own + self.residual_stream_bytes(tokens, act_bytes, first_stage, tp) if own else 0

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

    @property
    def is_hybrid(self) -> bool:
        """Some layers keep a fixed state (GatedDeltaNet, Mamba2) beside attention layers with a KV cache."""
        if self.layers:
            return any(layer.mixer is not None and layer.kind.has_state for layer in self.layers)
        return self.gdn is not None and LINEAR in self.layer_types

    @property
    def uses_mla(self) -> bool:
        """Latent attention: vLLM picks an MLA backend, whose block size the plan takes."""
        return any(layer.mixer is not None and layer.kind.value == "mla" for layer in self.layers)

    @property
    def num_full_attention(self) -> int:
        return self.layer_types.count(FULL)

    @property
    def num_gdn(self) -> int:
        return self.layer_types.count(LINEAR)

    @property
    def is_multimodal(self) -> bool:
        return self.vision is not None


def _layer_types(text: dict[str, Any], n_layers: int) -> tuple[str, ...]:
    if text.get("layer_types"):
        raw = text["layer_types"]
        if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
            raise UserError(f"config.json: layer_types is {str(raw)[:60]!r}, not a list of names; the file is damaged")
        types = tuple(raw)
        if len(types) != n_layers:
            raise UserError(f"config.json has {len(types)} layer_types for {n_layers} layers (num_hidden_layers); "
                            "the file is damaged")
        return types
    interval = _count(text, "full_attention_interval", "the model", default=0, minimum=0)
    if interval:
        return tuple(FULL if (i + 1) % interval == 0 else LINEAR for i in range(n_layers))
    window, max_window = text.get("sliding_window"), text.get("max_window_layers")
    if window and text.get("use_sliding_window") and max_window is not None:
        return tuple(SLIDING if i >= max_window else FULL for i in range(n_layers))
    return (FULL,) * n_layers


def _moe(text: dict[str, Any], n_layers: int) -> MoEConfig | None:
    n_exp = text.get("num_experts") or text.get("num_local_experts") or 0
    if not n_exp:
        return None
    step = text.get("decoder_sparse_step", 1) or 1
    mlp_only = set(text.get("mlp_only_layers") or [])
    sparse = tuple(i for i in range(n_layers) if i not in mlp_only and (i + 1) % step == 0)
    return MoEConfig(
        num_experts=int(n_exp),
        top_k=int(text.get("num_experts_per_tok") or text.get("top_k_experts") or 1),
        expert_intermediate=int(text.get("moe_intermediate_size") or text["intermediate_size"]),
        # Gemma 4's MoE block runs beside a dense MLP of intermediate_size: a shared expert in all but the gate
        shared_expert_intermediate=int(text.get("shared_expert_intermediate_size")
                                       or (text["intermediate_size"] if text.get("enable_moe_block") else 0)),
        sparse_layers=sparse,
    )


def _full_attention_shape(text: dict[str, Any]) -> tuple[int | None, int | None]:
    """Gemma 4's full-attention layers as vLLM 0.26 reads them: `global_head_dim` (else head_dim) and, with
    attention_k_eq_v, `num_global_key_value_heads` (else num_key_value_heads). vLLM still keeps a K and a V
    cache for K=V layers (it loads K's weights into both slots), so K=V changes neither weights nor KV bytes."""
    dim = text.get("global_head_dim")
    heads = text.get("num_global_key_value_heads") if text.get("attention_k_eq_v") else None
    return (int(heads) if heads else None), (int(dim) if dim else None)


def _rotary_dims(text: dict[str, Any], head_dim: int, full_dim: int | None, gemma4: bool) -> tuple[int, ...]:
    """The rotary width of each distinct rotary embedding (vLLM keeps one cos/sin cache per embedding, of
    max_position x width in the model dtype). Gemma 4: the sliding layers' default rope over head_dim and the
    full layers' proportional rope over their whole head dim; others: head_dim x partial_rotary_factor."""
    if gemma4:
        return head_dim, full_dim or head_dim
    rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
    factor = text.get("partial_rotary_factor") or (rope.get("partial_rotary_factor") if isinstance(rope, dict) else None)
    return (int(head_dim * float(factor or 1.0)),)


def _vision(cfg: dict[str, Any]) -> VisionConfig | None:
    v = cfg.get("vision_config")
    if not v or "depth" not in v:
        return None
    return VisionConfig(
        depth=int(v["depth"]), hidden=int(v["hidden_size"]), intermediate=int(v["intermediate_size"]),
        out_hidden=int(v.get("out_hidden_size", v["hidden_size"])), patch=int(v.get("patch_size", 16)),
        temporal_patch=int(v.get("temporal_patch_size", 2)), in_channels=int(v.get("in_channels", 3)),
        spatial_merge=int(v.get("spatial_merge_size", 2)),
        num_position_embeddings=int(v.get("num_position_embeddings", 0)),
    )


def _count(d: dict[str, Any], key: str, name: str, default: int | None = None, minimum: int = 1) -> int:
    """A whole-number field of a config (a missing one: `default`, else an error naming it)."""
    v = d.get(key)
    if v is None:
        if default is not None:
            return default
        raise UserError(f"config.json of {name} lacks {key!r}; is it a decoder-only LLM config?")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or int(v) < minimum:
        raise UserError(f"config.json of {name}: {key} is {v!r}, not a whole number >= {minimum}; the file is "
                        "damaged or not a model's config")
    return int(v)


def arch_from_config(cfg: dict[str, Any], name: str = "model") -> ModelArch:
    """A ModelArch from a parsed config.json, read by the model family its architecture belongs to (families/:
    an allow-list; anything else is refused in one line)."""
    from ..families import read_config

    return read_config(cfg, name)


def config_text(cfg: Any, name: str) -> dict[str, Any]:
    """The language model's part of a config: `text_config` where the config nests one, else the config."""
    if not isinstance(cfg, dict):
        raise UserError(f"config.json of {name} is not a JSON object ({type(cfg).__name__}); is it a model's config?")
    nested = cfg.get("text_config")
    if nested is not None and not isinstance(nested, dict):
        raise UserError(f"config.json of {name}: text_config is {nested!r}, not an object; the file is damaged")
    return dict(nested or cfg)


def config_header(cfg: dict[str, Any], name: str, text: dict[str, Any]) -> tuple[dict[str, Any] | None, str, str]:
    """A config's quantization_config (checked to be an object), model_type and architectures[0]."""
    quant = cfg.get("quantization_config") or text.get("quantization_config")
    if quant is not None and not isinstance(quant, dict):
        raise UserError(f"config.json of {name}: quantization_config is {quant!r}, not an object; the file is damaged")
    model_type = str(cfg.get("model_type") or text.get("model_type") or "")
    return quant, model_type, (cfg.get("architectures") or text.get("architectures") or [model_type or "unknown"])[0]


def read_decoder(cfg: dict[str, Any], name: str = "model") -> ModelArch:
    """The decoder of a family whose layers are full / sliding-window GQA attention or GatedDeltaNet, with a dense
    MLP or a mixture of experts (families/gqa.py, qwen_hybrid.py, gemma4.py use it)."""
    text = config_text(cfg, name)
    quant, model_type, arch_name = config_header(cfg, name, text)
    n_layers = _count(text, "num_hidden_layers", name)
    hidden = _count(text, "hidden_size", name)
    n_heads = _count(text, "num_attention_heads", name)
    vocab = _count(text if text.get("vocab_size") is not None else cfg, "vocab_size", name)
    n_kv = _count(text, "num_key_value_heads", name, default=n_heads)
    if n_heads % n_kv:
        raise UserError(f"config.json of {name}: num_attention_heads {n_heads} is not a multiple of "
                        f"num_key_value_heads {n_kv}; the file is damaged")
    if text.get("kv_lora_rank"):
        raise UserError(f"{name}: MLA (latent attention, DeepSeek style) is not modelled; supported: GQA, "
                        "sliding window and GatedDeltaNet hybrids")
    unmodelled = sorted({why for key, why in UNMODELLED_KEYS.items() if text.get(key) or cfg.get(key)})
    if unmodelled:
        raise UserError(f"{name} ({model_type or arch_name}): not modelled yet: {'; '.join(unmodelled)}; "
                        "vrambudget plans GQA, sliding-window, MoE and GatedDeltaNet-hybrid configs")
    head_dim = _count(text, "head_dim", name, default=hidden // n_heads)
    layer_types = _layer_types(text, n_layers)
    unknown = set(layer_types) - {FULL, LINEAR, SLIDING}
    if unknown:
        raise UserError(f"{name}: layer types {sorted(unknown)} are not modelled (supported: full, "
                        "sliding-window and GatedDeltaNet linear attention)")
    gdn = None
    if LINEAR in layer_types:
        is_qwen35 = model_type.startswith("qwen3_5")
        gdn = GDNConfig(
            hidden=hidden, num_key_heads=_count(text, "linear_num_key_heads", name),
            num_value_heads=_count(text, "linear_num_value_heads", name),
            key_head_dim=_count(text, "linear_key_head_dim", name),
            value_head_dim=_count(text, "linear_value_head_dim", name),
            conv_kernel=_count(text, "linear_conv_kernel_dim", name, default=4),
            ssm_dtype=str(text.get("mamba_ssm_dtype") or ("float32" if is_qwen35 else
                                                           text.get("dtype") or text.get("torch_dtype")
                                                           or cfg.get("torch_dtype") or "bfloat16")),
        )
    dtype = str(text.get("dtype") or text.get("torch_dtype") or cfg.get("torch_dtype")
                or cfg.get("dtype") or "bfloat16").replace("torch.", "")
    if dtype.lower() not in DTYPE_BYTES:
        raise UserError(f"config.json of {name}: dtype {dtype!r} is not one vrambudget knows "
                        f"({', '.join(sorted(DTYPE_BYTES))}); the file is damaged or from an unmodelled format")
    tie = bool(cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))
    mtp = _count(text, "mtp_num_hidden_layers" if "mtp_num_hidden_layers" in text else "num_nextn_predict_layers",
                 name, default=0, minimum=0)
    window = text.get("sliding_window") if SLIDING in layer_types else None
    gemma4 = model_type in GEMMA4_MODEL_TYPES
    qk_norm = model_type.startswith(("qwen3",)) or gemma4
    full_kv, full_dim = _full_attention_shape(text) if gemma4 else (None, None)
    max_pos = _count(text if text.get("max_position_embeddings") is not None else cfg, "max_position_embeddings", name,
                     default=4096)
    moe = _moe(text, n_layers)
    arch = ModelArch(
        name=name, architecture=str(arch_name), model_type=model_type, dtype=dtype,
        hidden_size=hidden, num_layers=n_layers, vocab_size=vocab,
        intermediate_size=_count(text, "intermediate_size", name, default=0, minimum=0), tie_word_embeddings=tie,
        num_attention_heads=n_heads, num_kv_heads=n_kv,
        head_dim=head_dim, layer_types=layer_types,
        max_position_embeddings=max_pos,
        attn_output_gate=bool(text.get("attn_output_gate", model_type in HYBRID_MODEL_TYPES)),
        qk_norm=qk_norm, attention_bias=bool(text.get("attention_bias", False)),
        norm_allocates=model_type in HYBRID_MODEL_TYPES,
        sliding_window=int(window) if window else None, gdn=gdn, moe=moe,
        mtp_layers=mtp, vision=_vision(cfg), full_num_kv_heads=full_kv, full_head_dim=full_dim,
        norms_per_layer=(4 + (3 if text.get("enable_moe_block") else 0)) if gemma4 else 2,
        rotary_dims=_rotary_dims(text, head_dim, full_dim, gemma4),
        quantization=quant,
        assumptions=(),  # every family is checked (families/: an allow-list)
    )
    return with_layers(arch)


def _mixer(a: ModelArch, kind: str):
    """The token mixer of a layer of this kind, in the shape the config gives it."""
    if kind == LINEAR:
        assert a.gdn is not None
        return a.gdn
    heads, dim = a.attention_shape(kind)
    shape = dict(hidden=a.hidden_size, num_heads=a.num_attention_heads, num_kv_heads=heads, head_dim=dim,
                 output_gate=a.attn_output_gate, qk_norm=a.qk_norm, qkv_bias=a.attention_bias)
    if kind == SLIDING:
        return SlidingAttention(**shape, window=a.sliding_window or 4096)
    return FullAttention(**shape)


def _ffn(a: ModelArch, moe: bool):
    if moe and a.moe:
        m = a.moe
        return MoE(a.hidden_size, m.num_experts, m.top_k, m.expert_intermediate, m.shared_expert_intermediate,
                   gated=m.gated)
    return DenseMLP(a.hidden_size, a.intermediate_size, holds_gate_up=a.architecture not in FREES_GATE_UP)


def with_layers(a: ModelArch) -> ModelArch:
    """The architecture with its decoder layers (and its MTP drafter's) as layer kinds."""
    from dataclasses import replace

    sparse = set(a.moe.sparse_layers) if a.moe else set()
    layers = tuple(DecoderLayer(_mixer(a, kind), _ffn(a, i in sparse)) for i, kind in enumerate(a.layer_types))
    mtp = DecoderLayer(_mixer(a, FULL), _ffn(a, a.moe is not None)) if a.mtp_layers else None
    return replace(a, layers=layers, mtp_layer=mtp)
