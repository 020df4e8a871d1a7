"""The vision tower, measured (vLLM 0.26.0 on an H100, tests/fixtures/lab-vllm-0.26.0-h100/vision, README there):
its weights from the config, and vLLM's encoder profiling (one maximum-size image of 65,536 patches through the
tower) whose peak replaces the language model's when larger."""

from pathlib import Path

import pytest

from vrambudget.model.checkpoint import resolve_model
from vrambudget.comparison import compare_file

VIS = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h100" / "vision"


def _rows(name: str) -> dict:
    return {r[0]: r for r in compare_file(VIS / name).rows}


@pytest.mark.parametrize("name,weights,peak", [("v08-vis-img.log", 1.72, 1.35), ("v9-vis-img.log", 17.66, 1.92),
                                               ("v08-vis.log", 1.72, 1.35), ("v9-vis.log", 17.66, 1.92)])
def test_tower_weights_and_encoder_peak(name, weights, peak):
    rows = _rows(name)
    assert rows["weights (incl. drafter)"][1] == weights and abs(rows["weights (incl. drafter)"][3]) <= 0.01
    assert rows["activation peak"][1] == peak and abs(rows["activation peak"][3]) <= 0.06
    assert abs(rows["available KV cache"][3]) <= 0.05


def test_a_log_without_language_model_only_loaded_the_tower():
    """vLLM loads the tower unless told otherwise: the same 9B config loads 16.80 GiB with
    language_model_only and 17.66 without (0.86 GiB of ViT)."""
    assert compare_file(VIS / "v9-vis.log").prediction.deployment.language_model_only is False
    assert compare_file(VIS / "v9-lmo.log").prediction.deployment.language_model_only is True
    assert _rows("v9-lmo.log")["weights (incl. drafter)"][1] == 16.80


def test_encoder_budget_images():
    """One 65,536-patch image (16,384 tokens) while max_num_batched_tokens is below that, more above it."""
    a = resolve_model("qwen3.5-9b").arch
    assert a.vision.profile(2048).patches == a.vision.profile(8192).patches == 65_536
    assert a.vision.profile(32_768).patches == 2 * 65_536
