"""What every family reads the same way from a config.json: sizes, dtype, vocabulary, positions, quantization."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..model.arch import _count, config_header, config_text
from ..units import DTYPE_BYTES


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
        return _count(self.text, key, self.name, default=default, minimum=minimum)

    def common(self) -> dict[str, Any]:
        """ModelArch's keyword arguments every family fills the same way."""
        return dict(name=self.name, architecture=self.architecture, model_type=self.model_type, dtype=self.dtype,
                    hidden_size=self.hidden, num_layers=self.layers, vocab_size=self.vocab,
                    tie_word_embeddings=self.tie, num_attention_heads=self.heads, num_kv_heads=self.kv_heads,
                    head_dim=self.head_dim, max_position_embeddings=self.max_position, quantization=self.quantization)


def base(cfg: dict[str, Any], name: str, *, text_config: dict[str, Any] | None = None) -> Base:
    text = text_config if text_config is not None else config_text(cfg, name)
    quant, model_type, arch = config_header(cfg, name, text)
    heads = _count(text, "num_attention_heads", name)
    hidden = _count(text, "hidden_size", name)
    kv = _count(text, "num_key_value_heads", name, default=heads)
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
    return Base(cfg, text, name, str(arch), model_type, dtype, hidden, _count(text, "num_hidden_layers", name),
                _count(src, "vocab_size", name), heads, kv, _count(text, "head_dim", name, default=hidden // heads),
                bool(cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
                _count(pos, "max_position_embeddings", name, default=4096), quant)
