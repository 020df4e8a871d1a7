"""Qwen3.8-27B, measured: real vLLM 0.26.0 startups with the bundled Qwen3.8 profiles' own configs, five at tensor
parallel 2 on two H200s (tests/fixtures/lab-vllm-0.26.0-h200x2/q38*, README there; the flags of vllm-project/recipes
PR 810's 2x RTX 5090 FP8 row and of club-3090 #104's 2x 3090 AutoRound boot) and two on one H100
(tests/fixtures/lab-vllm-0.26.0-h100/quant/q38*)."""

from pathlib import Path

import pytest

from vrambudget.model.checkpoint import resolve_model
from vrambudget.comparison import compare_file
from vrambudget.kv.planner import plan_kv, tokens_within_rounding
from vrambudget.prediction import layout_for
from vrambudget.units import GiB
from vrambudget.vllm_rules import RULES
from vrambudget.layers.base import Role
from vrambudget.model.weights import (model_tensors, mtp_tensors, replicated_on_ranks,
                                weights_from_config)

TP2 = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h200x2"
ONE = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h100" / "quant"
LOGS = ["q38bf-tp2-e-fp8-mtp3-lmo.log", "q38ar-tp2-e-fp8-mtp3-lmo.log", "q38ar-tp2-e-fp8-mtp3-vis.log",
        "q38ar-tp2-g-fp8-mtp3-vis.log", "q38fp8-tp2-e-auto-mtp3-vis.log"]


def _rows(name: str, folder: Path = TP2) -> dict:
    return {r[0]: r for r in compare_file(folder / name).rows}


def test_logs_resolve_to_the_bundled_qwen38_profiles():
    """The lab wrote each model folder from the profile and named it so: `explain` plans the profile itself."""
    refs = {n: compare_file(TP2 / n).prediction.deployment.model.ref for n in LOGS}
    assert refs["q38bf-tp2-e-fp8-mtp3-lmo.log"].endswith("qwen3.8-27b")
    assert refs["q38fp8-tp2-e-auto-mtp3-vis.log"].endswith("qwen3.8-27b-fp8")
    assert refs["q38ar-tp2-g-fp8-mtp3-vis.log"].endswith("qwen3.8-27b-int4-autoround")


def test_encoder_peak_splits_over_tensor_parallel_ranks():
    """The same 1152-wide tower peaks at 1.92 GiB on one GPU (the 9B, lab-vllm-0.26.0-h100/vision) and at 1.50 per
    rank at TP 2: its MLP activations split. Text only, the same startup peaks at 0.98, below the encoder's."""
    vis, lmo = _rows("q38ar-tp2-e-fp8-mtp3-vis.log"), _rows("q38ar-tp2-e-fp8-mtp3-lmo.log")
    assert vis["activation peak"][1] == 1.50 and abs(vis["activation peak"][3]) <= 0.02
    assert lmo["activation peak"][1] == 0.98 and abs(lmo["activation peak"][3]) <= 0.01  # activation.mlp_peak
    assert vis["weights (incl. drafter)"][1] - lmo["weights (incl. drafter)"][1] == pytest.approx(0.44)


@pytest.mark.parametrize("name,bound", [("q38bf-tp2-e-fp8-mtp3-lmo.log", 0.10),
                                        ("q38ar-tp2-e-fp8-mtp3-lmo.log", 0.06),
                                        ("q38ar-tp2-e-fp8-mtp3-vis.log", 0.10),
                                        ("q38ar-tp2-g-fp8-mtp3-vis.log", 0.10),
                                        # FP8: 0.11 GiB a rank left of its weights (model/allocator.py took 0.14)
                                        ("q38fp8-tp2-e-auto-mtp3-vis.log", 0.12)])
def test_available_kv_per_rank(name, bound):
    assert abs(_rows(name)["available KV cache"][3]) <= bound


@pytest.mark.parametrize("path", [TP2 / n for n in LOGS] + [ONE / "q38fp8-e-auto-mtp3-vis.log",
                                                             ONE / "q38bf-e-fp8-mtp3-lmo-8k.log"], ids=lambda p: p.stem)
def test_kv_plan_from_logged_available(path):
    cmp = compare_file(path)
    f, d = cmp.facts, cmp.prediction.deployment
    lay = layout_for(d)
    assert lay.block_size == f.block_size  # 800 with bf16 KV, 1600 with fp8
    plan = plan_kv(lay, round(f.available_kv_gib * GiB), f.max_model_len, d.rules)
    assert plan.kv_cache_tokens == f.kv_cache_tokens or \
        tokens_within_rounding(lay, f.available_kv_gib, f.max_model_len, f.kv_cache_tokens, d.rules)


def test_gdn_ba_projection_whole_on_every_rank_under_int4():
    """vLLM 0.26 keeps a Qwen3.5-layout GDN layer's in_proj_b/a whole on each rank under AWQ, GPTQ and AutoRound
    (Marlin needs 64 outputs per rank); 0.20 and the FP8 / bf16 checkpoints shard it."""
    ar, fp8 = resolve_model("qwen3.8-27b-int4-autoround").arch, resolve_model("qwen3.8-27b-fp8").arch
    assert replicated_on_ranks(ar, RULES["0.26"].gdn_ba_replicated_int4) == {Role.STATE_GATE}
    assert replicated_on_ranks(ar, RULES["0.20"].gdn_ba_replicated_int4) == frozenset()
    assert replicated_on_ranks(fp8, RULES["0.26"].gdn_ba_replicated_int4) == frozenset()
    whole = weights_from_config(ar, with_vision=False, tp=2, replicated=frozenset({Role.STATE_GATE})).model
    split = weights_from_config(ar, with_vision=False, tp=2).model
    # 48 GDN layers x 2 projections x 5120 x 48 x 2 B, half of it more per rank
    assert whole - split == 48 * 2 * 5120 * 48 * 2 // 2


def test_fp8_checkpoint_on_one_gpu_with_the_tower():
    """Qwen3.8-27B-FP8 with the tower on one H100: weights 28.88 predicted vs 28.96 logged, available KV within 0.10."""
    rows = _rows("q38fp8-e-auto-mtp3-vis.log", ONE)
    assert rows["weights (incl. drafter)"][1] == 28.96 and abs(rows["weights (incl. drafter)"][3]) <= 0.10
    assert abs(rows["available KV cache"][3]) <= 0.10


@pytest.mark.parametrize("path", [ONE / "q38fp8-e-auto-mtp3-vis.log", TP2 / "q38fp8-tp2-e-auto-mtp3-vis.log"],
                         ids=["one-gpu", "tp2"])
def test_rejection_sampler_peak(path):
    """256 seqs with MTP 3: the rejection sampler's dummy run (2 rows a request, logits whole on every rank) peaks at
    2.30 GiB on one GPU and per rank at TP 2, at its own factor (3.886 x rows x vocab x 4 B; 0.20.2: 3.885), not the
    plain sampler's (3.580): 2.16 predicted before."""
    rows = {r[0]: r for r in compare_file(path).rows}
    assert rows["activation peak"][1] == 2.30 and abs(rows["activation peak"][3]) <= 0.01


def test_bf16_shapes_equal_the_uploads_bytes():
    """The qwen3.8-27b profile's config (Qwen3.6-27B's sizing fields) against the real upload: its shapes in bf16,
    vision tower and MTP layer included, give 55,562,855,904 B; Qwen/Qwen3.8-27B holds 55,563,006,776 B on disk
    (vllm-project/recipes models/Qwen/Qwen3.8-27B.yaml): 0.0003 % apart, the files' headers."""
    a = resolve_model("qwen3.8-27b").arch
    shapes = sum(t.numel for t in [*model_tensors(a), *mtp_tensors(a), *(a.vision.tensors() if a.vision else ())]) * 2
    assert shapes == 55_562_855_904
    assert abs(shapes - 55_563_006_776) / 55_563_006_776 < 1e-5
