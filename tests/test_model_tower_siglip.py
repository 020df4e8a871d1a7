"""Gemma 3's SigLIP tower on vLLM 0.33.0 (towers/siglip.py): its weights, the encoder profiling batch and peak
traced in vLLM's source, and the PIECEWISE-only graphs of the prefix-LM backend, against real startups with the
tower (lab-vllm-0.33.0-h100/vision: 4B and 27B at serve defaults; lab-vllm-0.33.0-h200/vision: 4B at 16,384
batched tokens, where the tower's own peak decides: the trace was written after this log was read) and without it
(--language-model-only)."""

from pathlib import Path

import pytest

from vrambudget.budget import features
from vrambudget.comparison import compare_file
from vrambudget.deployment import Flags, resolve
from vrambudget.errors import UserError
from vrambudget.hardware import catalog as gpus
from vrambudget.logparse import parse_log
from vrambudget.model.checkpoint import resolve_model
from vrambudget.vllm_rules import rules_for

FIX = Path(__file__).parent / "fixtures"
H100 = FIX / "lab-vllm-0.33.0-h100" / "vision"
H200 = FIX / "lab-vllm-0.33.0-h200" / "vision"
G4B = str(FIX / "models" / "gemma-3-4b-it")


def _rows(path: Path) -> dict:
    model = FIX / "models" / Path(parse_log(path.read_text()).args["model"]).name  # the host's /tmp/mm/NAME
    return {r[0]: r for r in compare_file(path, model=str(model)).rows}


def test_the_tower_weighs_what_loading_it_added():
    """27 blocks of width 1,152 and MLP 4,304, a 4,096-patch position table and the projector to 2,560: 419,816,304
    parameters, 0.78 GiB; vLLM loaded 8.61 GiB with the tower and 7.82 without it."""
    a = resolve_model(G4B).arch
    assert sum(t.numel for t in a.vision.tensors()) == 419_816_304
    with_tower = parse_log((H100 / "g3-4b-vis.log").read_text()).weights_gib
    without = parse_log((H100 / "g3-4b-lmo.log").read_text()).weights_gib
    assert (with_tower, without) == (8.61, 7.82)
    assert abs(sum(t.numel for t in a.vision.tensors()) * 2 / 2**30 - (with_tower - without)) <= 0.01


def test_the_profiling_batch_is_the_encoder_budget_in_images():
    """'Encoder cache will be initialized with a budget of 8192 tokens, and profiled with 32 image items'."""
    tower = resolve_model(G4B).arch.vision
    assert "profiled with 32 image items" in (H100 / "g3-4b-vis.log").read_text()
    assert (tower.profile(8192).items, tower.profile(8192).patches) == (32, 131_072)
    assert (tower.profile(16_384).items, tower.profile(100).items) == (64, 1)


@pytest.mark.parametrize("path,activation,bound", [(H100 / "g3-4b-vis.log", 3.59, 0.05),
                                                   (H100 / "g3-27b-vis.log", 3.68, 0.12),
                                                   (H200 / "g3-4b-t16k.log", 6.74, 0.05)])
def test_startups_with_the_tower(path, activation, bound):
    """At 8,192 tokens the language model's peak + the held embeddings decides (4B: 3.55 without the tower); at
    16,384 the tower's own forward does (64 images: 6.45 GiB of blocks + 0.29 of pixels; traced in the source after
    the log was read, not held out).
    The encoder runner's inputs_embeds buffer (tokens x hidden) and the tower's load holes (0.03 GiB:
    model/allocator.load_holes_bytes) are kept: non-torch + kept within 0.03. The 27B's
    text model loads 0.09 GiB more than modelled with or without the tower (vision/g3-27b-lmo): +0.11 of KV."""
    rows = _rows(path)
    assert rows["activation peak"][1] == activation and abs(rows["activation peak"][3]) <= 0.01
    assert abs(rows["weights (incl. drafter)"][3]) <= 0.10
    assert abs(rows["non-torch + kept buffers"][3]) <= 0.03
    assert abs(rows["available KV cache"][3]) <= bound


def test_the_prefix_lm_backend_captures_piecewise_graphs_only():
    """With the tower vLLM 0.33.0 takes TRITON_FLASH_ATTN ('setting cudagraph_mode=PIECEWISE'): no FULL graphs;
    without it FlashAttention's FULL decode graphs too."""
    assert "setting cudagraph_mode=PIECEWISE" in (H100 / "g3-4b-vis.log").read_text()
    model, gpu = resolve_model(G4B), gpus.lookup("h100")
    sizes = {lmo: features(resolve(model, gpu, rules_for("0.33.0"), Flags(language_model_only=lmo))).graph_sizes
             for lmo in (True, False)}
    assert sizes[False][2] == 0 and sizes[True][2] > 0


def test_the_tower_where_its_backend_was_not_measured_is_refused():
    model, gpu = resolve_model(G4B), gpus.lookup("h100")
    with pytest.raises(UserError, match="not on vLLM 0.26: pass --language-model-only or --vllm-version 0.33"):
        resolve(model, gpu, rules_for("0.26.0"), Flags(language_model_only=False))
    resolve(model, gpu, rules_for("0.26.0"), Flags(language_model_only=True))


def test_a_damaged_vision_config_is_one_line(tmp_path):
    import json

    cfg = json.loads((FIX / "models" / "gemma-3-4b-it" / "config.json").read_text())
    cfg["vision_config"]["patch_size"] = "fourteen"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match="vision_config lacks a whole number"):
        resolve_model(str(tmp_path))
