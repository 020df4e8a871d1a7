"""Mistral Small 3.x with its vision tower (Mistral3ForConditionalGeneration, Hugging Face format): a Mistral
decoder (text_config) beside a Pixtral tower (towers/pixtral.py), vLLM 0.33 mistral3.py. A repository that also
ships Mistral's own files (params.json and consolidated weights) is loaded by `vllm serve` in Mistral's format
unless --config-format hf is given: that tower's code is another (not traced), said in the answer."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import UserError
from ..model.arch import ModelArch
from ..towers.pixtral import Pixtral
from . import Family
from .decoder import read_decoder


def read(cfg: dict[str, Any], name: str) -> ModelArch:
    a = read_decoder(cfg, name)
    return replace(a, vision=_tower(cfg, name, a.hidden_size))


def _tower(cfg: dict[str, Any], name: str, text_hidden: int) -> Pixtral | None:
    v = cfg.get("vision_config")
    if v is None:
        return None
    if not isinstance(v, dict) or v.get("model_type", "pixtral") != "pixtral":
        raise UserError(f"{name}: vision_config is not a Pixtral tower's (model_type "
                        f"{v.get('model_type') if isinstance(v, dict) else v!r})")
    try:
        depth, feature = int(v["num_hidden_layers"]), cfg.get("vision_feature_layer", -1)
        if isinstance(feature, bool) or not isinstance(feature, int):
            raise UserError(f"{name}: vision_feature_layer {feature!r} (a list of layers) is not modelled")
        layers = depth + feature + 1 if feature < 0 else feature + 1  # vLLM's get_layer_index
        heads = int(v["num_attention_heads"])
        tower = Pixtral(layers=layers, hidden=int(v["hidden_size"]), intermediate=int(v["intermediate_size"]),
                        head_dim=int(v.get("head_dim") or int(v["hidden_size"]) // heads),
                        patch=int(v["patch_size"]), image_size=int(v["image_size"]),
                        merge=int(cfg.get("spatial_merge_size", 1)), text_hidden=text_hidden)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        raise UserError(f"{name}: vision_config lacks a whole number for {e}; the file is damaged") from None
    if not 0 < tower.layers <= depth or min(tower.hidden, tower.intermediate, tower.head_dim, tower.patch,
                                            tower.merge) <= 0 or tower.image_size < tower.patch:
        raise UserError(f"{name}: vision_config of the Pixtral tower has a size out of range (layers "
                        f"{tower.layers} of {depth})")
    return tower


FAMILY = Family(
    name="Mistral Small 3.x (Mistral decoder, Pixtral vision tower)",
    architectures=("Mistral3ForConditionalGeneration",),
    model_types=("mistral3",),
    read=read,
    evidence="vLLM 0.33.0 source (mistral3.py, pixtral.py); the text model is the GQA family's Mistral decoder; the "
             "config is a content copy of Mistral-Small-3.1-24B-Instruct-2503's (tests/fixtures/models/"
             "mistral-small-3.1-24b-instruct-2503/SOURCE.md); vLLM 0.33.0 startups with the tower (H100, dummy "
             "weights: available KV -0.07 at 8,192 and 32,768 batched tokens; the Pixtral tower's own peak deciding, "
             "eager at 1,024 tokens on an H200: +0.01) and without (--language-model-only, H200: -0.07 at 8,192 and "
             "32,768, -0.02 eager)",
)
