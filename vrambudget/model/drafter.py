"""External speculative drafters (DFlash): their attention layers in the KV plan and their weights, read from the
drafter's own config.json (pure arithmetic; loading a bundled or local config is `load_drafter`).

vLLM builds a DFlash drafter (`DFlashDraftModel`, model_executor/models/qwen3_dflash.py) as `num_hidden_layers`
Qwen3 decoder layers whose attention keeps K/V in the KV cache like the target's layers (context K/V projected from
the target's hidden states, then the drafted block). Each layer is its own KV-cache layer with the drafter's KV
heads and head dim. vLLM 0.20 makes them all full attention; 0.26 honours the config's `layer_types`
(sliding-window layers keep `sliding_window` tokens, `_resolve_layer_attention`). The drafter shares the target's
embedding and LM head when its checkpoint has none (spec_decode/llm_base_proposer.py `_maybe_share_embeddings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .arch import FULL, SLIDING
from ..errors import UserError
from ..units import cdiv

DFLASH_ARCHITECTURES = {"DFlashDraftModel"}


@dataclass(frozen=True)
class Drafter:
    """A DFlash drafter's shape (config.json fields), and where it came from."""

    name: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    layer_kinds: tuple[str, ...]  # FULL or SLIDING per layer, as the config states
    sliding_window: int | None
    fc_inputs: int  # target hidden states concatenated into the drafter's input projection
    source: str = ""
    # the rotary cache's length (transformers' Qwen3Config default where the config omits it)
    max_position_embeddings: int = 32768

    def kinds(self, honours_sliding: bool) -> tuple[str, ...]:
        """Layer kinds as a vLLM version builds them (0.20: every layer full attention)."""
        return self.layer_kinds if honours_sliding else (FULL,) * self.num_layers

    def weights_bytes(self, dtype_bytes: int, tp: int) -> int:
        """Bytes per rank of the drafter's own weights (bf16 as vLLM loads them; embedding and LM head shared with
        the target): attention and MLP are split across ranks, the input projection `fc` is replicated."""
        h, hd = self.hidden, self.head_dim
        attn = h * (self.num_heads + 2 * self.num_kv_heads) * hd + self.num_heads * hd * h
        mlp = 3 * h * self.intermediate
        norms = 2 * h + 2 * hd
        per_rank = self.num_layers * (cdiv(attn + mlp, tp) + norms)
        replicated = self.fc_inputs * h * h + 3 * h  # fc, hidden_norm, final norm, mask embedding
        # its own rotary cos/sin cache (max positions x head dim, model dtype), whole on every rank
        rotary = self.max_position_embeddings * hd
        return (per_rank + replicated + rotary) * dtype_bytes


def drafter_from_config(cfg: dict[str, Any], name: str, source: str = "") -> Drafter:
    """A drafter from its config.json; architectures other than DFlash, and layer types that are neither full nor
    sliding-window attention, are refused in one line."""
    archs = set(cfg.get("architectures") or [])
    if not archs & DFLASH_ARCHITECTURES:
        raise UserError(f"drafter {name}: architecture {sorted(archs) or 'unknown'} is not modelled "
                        f"(modelled: {', '.join(sorted(DFLASH_ARCHITECTURES))}); EAGLE / DFlash2 drafters are not yet")
    try:
        n = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
        hidden = int(cfg["hidden_size"])
        kinds = tuple(cfg.get("layer_types") or [FULL] * n)
        dflash = cfg.get("dflash_config") or {}
        d = Drafter(
            name=name, num_layers=n, num_heads=heads, num_kv_heads=int(cfg.get("num_key_value_heads", heads)),
            head_dim=int(cfg.get("head_dim") or hidden // heads), hidden=hidden,
            intermediate=int(cfg["intermediate_size"]), layer_kinds=kinds,
            sliding_window=dflash.get("swa_window_size") or cfg.get("sliding_window"),
            fc_inputs=len(dflash.get("target_layer_ids") or [None] * n), source=source,
            max_position_embeddings=int(cfg.get("max_position_embeddings") or 32768))
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"drafter {name}: config.json lacks or misstates {e}; it needs num_hidden_layers, "
                        "num_attention_heads, hidden_size and intermediate_size") from None
    bad = set(d.layer_kinds) - {FULL, SLIDING}
    if bad or len(d.layer_kinds) != d.num_layers:
        raise UserError(f"drafter {d.name}: layer_types {sorted(bad) or d.layer_kinds} do not describe its "
                        f"{d.num_layers} layers as full_attention / sliding_attention")
    if SLIDING in d.layer_kinds and not d.sliding_window:
        raise UserError(f"drafter {d.name}: sliding-window layers without a sliding_window")
    return d


def bundled_drafters() -> dict[str, Path]:
    from ..profiles import bundled_dir

    return {p.stem: p for p in sorted((bundled_dir() / "drafters").glob("*.json"))}


def load_drafter(ref: str) -> Drafter:
    """A bundled drafter (profiles/drafters/NAME.json) or a local directory / config.json of one."""
    from ..profiles import read_json

    bundled = bundled_drafters()
    if ref in bundled:
        prof = read_json(bundled[ref])
        return drafter_from_config(prof["config"], ref, f"{prof['hf_id']}: {prof['source']}")
    path = Path(ref).expanduser()
    cfg_path = path / "config.json" if path.is_dir() else path
    if not cfg_path.is_file():
        raise UserError(f"drafter {ref!r}: not a bundled drafter ({', '.join(bundled) or 'none'}) nor a folder "
                        "with a config.json; pass one of those as the speculative config's \"model\"")
    try:
        cfg = read_json(cfg_path, nonfinite=True)
    except UserError as e:
        raise UserError(f"drafter {ref!r}: {e}") from None
    return drafter_from_config(cfg, path.name or ref, str(cfg_path))
