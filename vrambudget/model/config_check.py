"""A config.json checked once, before any family reads it: the header's types (architectures, model_type,
text_config, quantization_config, layer_types) and every count-like number (layers, heads, sizes, experts, ranks)
whole, finite and in range. A damaged or hostile config is refused in one line naming the field; floats that size
nothing (rope_theta, time_step_limit's Infinity, as real Mamba configs write it) are left alone."""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import UserError

# keys whose numbers are counts or sizes the plan multiplies by
_COUNT = re.compile(r"^(num|n)_|(_size|_dim|_dims|_heads|_layers|_experts|_rank|_group|_groups|_per_tok|_kernel|"
                    r"_embeddings|_state|_chunk|_window|_head)$|^(vocab_size|head_dim|sliding_window|topk_group|"
                    r"top_k|moe_topk|chunk_size)$")
_LAYERS = re.compile(r"_layers$")
LAYER_LIMIT = 10_000  # the deepest public decoder has under 200
COUNT_LIMIT = 1 << 40  # a context of a trillion tokens, a trillion-wide vocabulary: past any real model
_MINUS_ONE_OK = ("group_size", "sliding_window", "max_window_layers")  # -1: per-channel GPTQ, "off"


def _bad(name: str, path: str, value: Any, why: str) -> UserError:
    return UserError(f"config.json of {name}: {path} is {str(value)[:40]}, {why}; the file is damaged or not a "
                     "model's config")


def _check_number(name: str, path: str, key: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return
    if not _COUNT.search(key):
        return
    if isinstance(v, float) and not math.isfinite(v):
        raise _bad(name, path, v, "not a finite number")
    if v != int(v):
        raise _bad(name, path, v, "not a whole number")
    low = -1 if key in _MINUS_ONE_OK else 0
    high = LAYER_LIMIT if _LAYERS.search(key) and key != "max_window_layers" else COUNT_LIMIT
    if not low <= v <= high:
        raise _bad(name, path, v, f"outside {low}..{high:,}")


def _check_types(cfg: dict[str, Any], name: str, where: str) -> None:
    arch = cfg.get("architectures")
    if arch is not None and not (isinstance(arch, list) and all(isinstance(a, str) for a in arch)):
        raise _bad(name, f"{where}architectures", arch, "not a list of names")
    for key in ("model_type", "torch_dtype", "dtype"):
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise _bad(name, where + key, cfg[key], "not a name")
    for key in ("text_config", "quantization_config", "vision_config", "rope_scaling", "rope_parameters"):
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            raise _bad(name, where + key, cfg[key], "not an object")
    types = cfg.get("layer_types")
    if types is not None and not (isinstance(types, list) and all(isinstance(t, str) for t in types)):
        raise _bad(name, f"{where}layer_types", types, "not a list of layer kinds")


def check_config(cfg: Any, name: str) -> dict[str, Any]:
    """`cfg` if its header has the right types and every count in it (at any depth) is a whole number in range."""
    if not isinstance(cfg, dict):
        raise UserError(f"config.json of {name} is not a JSON object ({type(cfg).__name__}); is it a model's config?")
    _check_types(cfg, name, "")
    if isinstance(cfg.get("text_config"), dict):
        _check_types(cfg["text_config"], name, "text_config.")
    stack: list[tuple[str, Any]] = [("", cfg)]
    while stack:
        path, obj = stack.pop()
        if isinstance(obj, dict):
            for k, v in obj.items():
                p = f"{path}{k}"
                if str(k).startswith("rope_"):  # scaling factors, not counts
                    continue
                if isinstance(v, (dict, list)):
                    stack.append((p + ".", v))
                else:
                    _check_number(name, p, str(k), v)
        elif isinstance(obj, list):
            key = path.rstrip(".").rsplit(".", 1)[-1]
            for i, v in enumerate(obj[:100_000]):
                if isinstance(v, (dict, list)):
                    stack.append((f"{path.rstrip('.')}[{i}].", v))
                else:
                    _check_number(name, f"{path.rstrip('.')}[{i}]", key, v)
    return cfg
