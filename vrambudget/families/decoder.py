"""The decoder most families share: full and sliding-window GQA attention or GatedDeltaNet layers, each with a dense
MLP or a mixture of experts, an optional MTP head and a Qwen-style vision tower, read from the config keys
transformers' Llama / Qwen2 / Qwen3 / Qwen3.5 / Qwen3-Next / Gemma 4 configs use (families gqa, qwen_hybrid and
gemma4 read with it)."""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..layers.attention import FullAttention
from ..layers.base import DecoderLayer
from ..layers.ffn import DenseMLP, MoE
from ..layers.gdn import GatedDeltaNet
from ..layers.sliding import SlidingAttention
from ..model.arch import FULL, LINEAR, SLIDING, ModelArch
from ..towers.qwen_vit import Qwen3VLViT, QwenViT
from .common import base, config_text, count

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
    interval = count(text, "full_attention_interval", "the model", default=0, minimum=0)
    if interval:
        return tuple(FULL if (i + 1) % interval == 0 else LINEAR for i in range(n_layers))
    window, max_window = text.get("sliding_window"), text.get("max_window_layers")
    if window and text.get("use_sliding_window") and max_window is not None:
        return tuple(SLIDING if i >= max_window else FULL for i in range(n_layers))
    return (FULL,) * n_layers


def _moe(text: dict[str, Any], hidden: int) -> MoE | None:
    n_exp = text.get("num_experts") or text.get("num_local_experts") or 0
    if not n_exp:
        return None
    return MoE(hidden, int(n_exp), int(text.get("num_experts_per_tok") or text.get("top_k_experts") or 1),
               int(text.get("moe_intermediate_size") or text["intermediate_size"]),
               # Gemma 4's MoE block runs beside a dense MLP of intermediate_size: a shared expert in all but the gate
               int(text.get("shared_expert_intermediate_size")
                   or (text["intermediate_size"] if text.get("enable_moe_block") else 0)))


def _sparse_layers(text: dict[str, Any], n_layers: int) -> set[int]:
    step = text.get("decoder_sparse_step", 1) or 1
    mlp_only = set(text.get("mlp_only_layers") or [])
    return {i for i in range(n_layers) if i not in mlp_only and (i + 1) % step == 0}


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


def _vision(cfg: dict[str, Any]) -> QwenViT | None:
    v = cfg.get("vision_config")
    if not v or "depth" not in v:
        return None
    shape = dict(
        depth=int(v["depth"]), hidden=int(v["hidden_size"]), intermediate=int(v["intermediate_size"]),
        out_hidden=int(v.get("out_hidden_size", v["hidden_size"])), patch=int(v.get("patch_size", 16)),
        temporal_patch=int(v.get("temporal_patch_size", 2)), in_channels=int(v.get("in_channels", 3)),
        spatial_merge=int(v.get("spatial_merge_size", 2)),
        num_position_embeddings=int(v.get("num_position_embeddings", 0)),
        deepstack=len(v.get("deepstack_visual_indexes") or ()),
    )
    if shape["deepstack"]:  # Qwen3-VL
        return Qwen3VLViT(**shape, heads=int(v.get("num_heads", 16)))
    return QwenViT(**shape)


def _gdn(cfg: dict[str, Any], text: dict[str, Any], name: str, hidden: int, model_type: str) -> GatedDeltaNet:
    return GatedDeltaNet(
        hidden=hidden, num_key_heads=count(text, "linear_num_key_heads", name),
        num_value_heads=count(text, "linear_num_value_heads", name),
        key_head_dim=count(text, "linear_key_head_dim", name),
        value_head_dim=count(text, "linear_value_head_dim", name),
        conv_kernel=count(text, "linear_conv_kernel_dim", name, default=4),
        ssm_dtype=str(text.get("mamba_ssm_dtype") or ("float32" if model_type.startswith("qwen3_5") else
                                                       text.get("dtype") or text.get("torch_dtype")
                                                       or cfg.get("torch_dtype") or "bfloat16")))


def _refuse_unmodelled(cfg: dict[str, Any], text: dict[str, Any], name: str, model_type: str, arch_name: str) -> None:
    """The keys of a config this reader does not plan (MLA, shared KV, per-layer inputs): refused in one line."""
    if text.get("kv_lora_rank"):
        raise UserError(f"{name}: MLA (latent attention, DeepSeek style) is not modelled; supported: GQA, "
                        "sliding window and GatedDeltaNet hybrids")
    unmodelled = sorted({why for key, why in UNMODELLED_KEYS.items() if text.get(key) or cfg.get(key)})
    if unmodelled:
        raise UserError(f"{name} ({model_type or arch_name}): not modelled yet: {'; '.join(unmodelled)}; "
                        "vrambudget plans GQA, sliding-window, MoE and GatedDeltaNet-hybrid configs")


def read_decoder(cfg: dict[str, Any], name: str = "model") -> ModelArch:
    """The decoder of a family whose layers are full / sliding-window GQA attention or GatedDeltaNet, with a dense
    MLP or a mixture of experts."""
    text = config_text(cfg, name)
    b = base(cfg, name, text_config=text)  # the counts every family checks
    model_type = b.model_type
    _refuse_unmodelled(cfg, text, name, b.model_type, b.architecture)
    layer_types = _layer_types(text, b.layers)
    unknown = set(layer_types) - {FULL, LINEAR, SLIDING}
    if unknown:
        raise UserError(f"{name}: layer types {sorted(unknown)} are not modelled (supported: full, "
                        "sliding-window and GatedDeltaNet linear attention)")
    gdn = _gdn(cfg, text, name, b.hidden, model_type) if LINEAR in layer_types else None
    gemma4 = model_type in GEMMA4_MODEL_TYPES
    full_kv, full_dim = _full_attention_shape(text) if gemma4 else (None, None)
    shape = dict(hidden=b.hidden, num_heads=b.heads,
                 output_gate=bool(text.get("attn_output_gate", model_type in HYBRID_MODEL_TYPES)),
                 qk_norm=model_type.startswith("qwen3") or gemma4, qkv_bias=bool(text.get("attention_bias", False)))
    full = FullAttention(**shape, num_kv_heads=full_kv or b.kv_heads, head_dim=full_dim or b.head_dim)
    window = text.get("sliding_window") if SLIDING in layer_types else None
    sliding = SlidingAttention(**shape, num_kv_heads=b.kv_heads, head_dim=b.head_dim, window=int(window or 4096))
    moe = _moe(text, b.hidden)
    dense = DenseMLP(b.hidden, count(text, "intermediate_size", name, default=0, minimum=0),
                     holds_gate_up=b.architecture not in FREES_GATE_UP)
    sparse = _sparse_layers(text, b.layers) if moe else set()
    mixers = {FULL: full, SLIDING: sliding, LINEAR: gdn}
    layers = tuple(DecoderLayer(mixers[kind], moe if i in sparse else dense) for i, kind in enumerate(layer_types))
    mtp = count(text, "mtp_num_hidden_layers" if "mtp_num_hidden_layers" in text else "num_nextn_predict_layers",
                name, default=0, minimum=0)
    return b.arch(layers, mtp_layers=mtp, mtp_layer=DecoderLayer(full, moe or dense) if mtp else None,
                  vision=_vision(cfg), norm_allocates=model_type in HYBRID_MODEL_TYPES,
                  norms_per_layer=(4 + (3 if text.get("enable_moe_block") else 0)) if gemma4 else 2,
                  rotary_caches=tuple((b.max_position, dim, None)
                                      for dim in _rotary_dims(text, b.head_dim, full_dim, gemma4)))


def reader_with_tower_unmodelled(tower: str):
    """read_decoder for a family whose vision tower is not modelled: the text model, with the tower said (a startup
    with it is refused until --language-model-only is given)."""
    from dataclasses import replace

    def read(cfg: dict[str, Any], name: str) -> ModelArch:
        a = read_decoder(cfg, name)
        return replace(a, extras=replace(a.extras, tower_unmodelled=tower if a.vision is not None else ""))

    return read
