"""Llama 4's and Pixtral's vision towers from vLLM 0.33.0's source (towers/llama4_vit.py, towers/pixtral.py): their
parameter counts (the transformers modules built from the same configs on the meta device agree), the dummy items
vLLM profiles them with (transformers 5.17's processors with the lab's stand-in settings gave the same) and the
traced peaks, per patch."""

import json
from pathlib import Path

import pytest

from vrambudget.errors import UserError
from vrambudget.families import arch_from_config

MODELS = Path(__file__).resolve().parent / "fixtures" / "models"


def tower(model: str, **changes):
    cfg = json.loads((MODELS / model / "config.json").read_text())
    for key, value in changes.items():
        cfg["vision_config"][key] = value
    return arch_from_config(cfg, model).vision


def test_llama4_tower_weights_and_profile():
    t = tower("llama-4-scout-17b-16e-instruct")
    assert sum(x.numel for x in t.tensors()) == 871_932_416  # vision 811,115,008 + adapter 39,845,888 + projector
    assert (t.tokens_per_tile, t.embeds_per_tile) == (577, 144)
    for tokens, items in ((2048, 1), (8192, 3), (16384, 6)):
        p = t.profile(tokens)
        assert (p.items, p.tokens_per_item, p.patches) == (items, 2448, items * 17 * 577)
    p = t.profile(8192)
    assert t.forward_bytes(p, 1) == 51 * (577 * 33_792 + 677_376)  # tiles x (577 x the MLP's 33,792 B + bf16 pixels)
    assert t.held_bytes(p, 5120) == 3 * 2448 * 5120 * 2


def test_pixtral_tower_weights_and_profile():
    t = tower("mistral-small-3.1-24b-instruct-2503")
    assert t.layers == 24 and sum(x.numel for x in t.tensors()) == 438_958_080
    assert (t.patches_per_image, t.tokens_per_image) == (12100, 3025)
    for tokens, items in ((2048, 1), (8192, 2), (16384, 5)):
        assert t.profile(tokens).items == items
    p = t.profile(8192)
    assert t.forward_bytes(p, 1) == 24200 * 39_772  # (14 x hidden + 6 x intermediate + 860) a patch
    assert t.forward_bytes(p, 2) == 24200 * 27_484


@pytest.mark.parametrize("model, changes, said", [
    ("llama-4-scout-17b-16e-instruct", {"pixel_shuffle_ratio": 0}, "out of range"),
    ("llama-4-scout-17b-16e-instruct", {"hidden_size": None}, "lacks a readable"),
    ("mistral-small-3.1-24b-instruct-2503", {"patch_size": "x"}, "lacks a whole number"),
    ("mistral-small-3.1-24b-instruct-2503", {"model_type": "siglip_vision_model"}, "is not a Pixtral tower's"),
])
def test_damaged_tower_configs_are_one_line(model, changes, said):
    with pytest.raises(UserError, match=said):
        tower(model, **changes)


def test_gemma4_tower_weights_profile_and_chunked_peak():
    # every Linear replicated (transformers' Gemma4VisionModel, vLLM's ReplicatedLinear): 569,548,080 + the embedder
    t = tower("gemma-4-26b-a4b")
    assert sum(x.numel for x in t.tensors()) == 572_792_112
    p = t.profile(8192)  # three 32-frame videos: 96 frames of 630 padded patches, 64 embeddings a frame
    assert (p.items, p.tokens_per_item, p.patches, p.modality) == (3, 2048, 60480, "video")
    img = t.profile(8192, off=frozenset({"video"}))  # 29 images of 2,520 padded patches, 256 embeddings
    assert (img.items, img.tokens_per_item, img.patches) == (29, 256, 73080)
    assert t.item_budget() == 2496 and t.item_budget(frozenset({"video"})) == 280
    from dataclasses import replace
    # chunks of card / 10 / (630 x 4 x 10,240 x 8 B) frames: 72 on an H200 (72 + 24), 41 on an H100
    h200 = replace(p, card_bytes=150_109_880_320, free_bytes=90 * 2**30)
    assert t.forward_bytes(h200, 1) == 1_725_993_360
    h100 = replace(p, card_bytes=85_017_493_504, free_bytes=29 * 2**30)
    assert t.forward_bytes(h100, 1) == 1_083_226_410
    assert t.forward_bytes(h100, 2) == t.forward_bytes(h100, 1)  # replicated: TP does not split it


def test_gemma4_with_its_tower_needs_a_video_per_step(capsys):
    # a prefix LM never splits an item: vLLM raises its own default to the 2,496-token video and refuses a smaller
    # given --max-num-batched-tokens
    from .cli_run import run

    m = str(MODELS / "gemma-4-26b-a4b")
    code, _, err = run(["predict", "--model", m, "--gpu", "h200", "--with-vision", "--max-num-batched-tokens", "2048"],
                       capsys)
    assert code == 2 and err.count("\n") == 1 and "2,496 tokens" in err
    code, out, _ = run(["predict", "--model", m, "--gpu", "rtx4090", "--with-vision", "--json"], capsys)
    assert code == 1 and json.loads(out)["inputs"]["max_num_batched_tokens"] == 2496  # 48 GiB: it does not start
    code, out, _ = run(["predict", "--model", m, "--gpu", "h200", "--json"], capsys)  # the tower planned: off by default
    assert code == 0 and json.loads(out)["inputs"]["language_model_only"] is True
