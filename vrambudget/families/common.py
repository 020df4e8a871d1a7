"""What every family reads the same way from a config.json: the language model's part, its header, whole-number
fields, sizes, dtype, vocabulary, positions, quantization; and the record a family returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..layers.base import DecoderLayer
from ..model.arch import ModelArch, ModelExtras
from ..towers.base import Tower
from ..units import DTYPE_BYTES


def count(d: dict[str, Any], key: str, name: str, default: int | None = None, minimum: int = 1) -> int:
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


@dataclass(frozen=True)
class Base:
    """A config's common keys, validated."""

    cfg: dict[str, Any]
    text: dict[str, Any]  # the language model's part (text_config where nested)
    name: str
    architecture: str
    model_type: str
    dtype: str
    hidden: int
    layers: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    tie: bool
    max_position: int
    quantization: dict[str, Any] | None

    def count(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        return count(self.text, key, self.name, default=default, minimum=minimum)

    def arch(self, layers: tuple[DecoderLayer, ...], *, tie: bool | None = None, mtp_layers: int = 0,
             mtp_layer: DecoderLayer | None = None, vision: Tower | None = None,
             **extras: Any) -> ModelArch:
        """The model record of these layers; `extras` are ModelExtras' fields (norms, rotary caches...)."""
        return ModelArch(self.name, self.architecture, self.model_type, self.dtype, self.hidden, self.vocab,
                         self.max_position, self.tie if tie is None else tie, tuple(layers), mtp_layers, mtp_layer,
                         vision, self.quantization, ModelExtras(**extras))


def base(cfg: dict[str, Any], name: str, *, text_config: dict[str, Any] | None = None) -> Base:
    text = text_config if text_config is not None else config_text(cfg, name)
    quant, model_type, arch = config_header(cfg, name, text)
    heads = count(text, "num_attention_heads", name)
    hidden = count(text, "hidden_size", name)
    kv = count(text, "num_key_value_heads", name, default=heads)
    if heads % kv:
        raise UserError(f"config.json of {name}: num_attention_heads {heads} is not a multiple of "
                        f"num_key_value_heads {kv}; the file is damaged")
    dtype = str(text.get("dtype") or text.get("torch_dtype") or cfg.get("torch_dtype") or cfg.get("dtype")
                or "bfloat16").replace("torch.", "")
    if dtype.lower() not in DTYPE_BYTES:
        raise UserError(f"config.json of {name}: dtype {dtype!r} is not one vrambudget knows "
                        f"({', '.join(sorted(DTYPE_BYTES))}); the file is damaged or from an unmodelled format")
    src = text if text.get("vocab_size") is not None else cfg
    pos = text if text.get("max_position_embeddings") is not None else cfg
    return Base(cfg, text, name, str(arch), model_type, dtype, hidden, count(text, "num_hidden_layers", name),
                count(src, "vocab_size", name), heads, kv, count(text, "head_dim", name, default=hidden // heads),
                bool(cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
                count(pos, "max_position_embeddings", name, default=4096), quant)
