"""Gemma 4 and Qwen3.6 on vLLM 0.26.0, measured: real dummy-weight startups on an H100
(tests/fixtures/lab-vllm-0.26.0-h100/README.md has each command and figure).

Gemma 4 is planned the way vLLM 0.26.0 plans it: sliding-window layers (16 KV heads of 256) and full layers
(K=V, 4 global KV heads of 512) have unequal pages, so the smaller page's block grows (full 32, sliding 16),
layers group by 10 (5 sliding groups + 1 full), and a sliding layer keeps its window plus two batches in flight
(async scheduling). The logged available memory is rounded to 0.01 GiB (a few blocks), so the KV plan must
reproduce vLLM's tokens and max_model_len exactly for an available memory inside that rounding."""

import json
from pathlib import Path

import pytest

from vrambudget.families import arch_from_config
from vrambudget.model.arch import FULL, SLIDING
from vrambudget.comparison import compare_file
from vrambudget.hardware.catalog import lookup
from vrambudget.hardware.facts import attention_backend
from vrambudget.kv.planner import reproduces_within_rounding
from vrambudget.prediction import layout_for
from vrambudget.vllm_rules import RULES

LAB = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h100"
MODELS = Path(__file__).parent / "fixtures" / "models"

# log -> (model folder it is planned with, bound on |predicted - logged available KV| in GiB)
LOGS = {
    # Gemma 4 31B loads 0.15 GiB more than its shapes + rotary caches (not modelled): the whole error, its activation
    # exact since the forward is traced (0.36 GiB logged and planned; the fitted term gave 0.40, hiding 0.04 of it)
    "g31t-e-bf16.log": (None, 0.16),
    "g31t-e-fp8.log": (None, 0.19),  # the same, fp8 KV (TRITON_ATTN): 0.18 GiB more weights than modelled
    "g26t-e-bf16.log": (None, 0.11),  # Gemma 4 26B-A4B (MoE): its forward peaks 0.10 GiB above the terms
    "q36-27b-e-fp8-mtp2.log": (None, 0.05),  # Qwen3.6-27B, a fresh boot (123 s of profiling: Triton JIT)
    # Qwen3.6-35B-A3B (MoE), a fresh boot: the MoE term is now the fused-MoE scratch vLLM keeps (budget.
    # moe_workspace_bytes, checked on five more MoE startups), 0.125 GiB where the figure once fitted on this log
    # was 0.099: +0.07 here
    "q36-35b-e-fp8.log": (None, 0.08),
    # the first Gemma logs ran transformers 5.17, which hid global_head_dim from vLLM (fixtures/models/*-tf517)
    "g31-e-bf16.log": (MODELS / "gemma-4-31b-text-tf517", 0.16),  # the weights' 0.14 GiB, as above
    "g26-e-bf16.log": (MODELS / "gemma-4-26b-a4b-text-tf517", 0.08),
}


def _compare(name: str):
    model, _ = LOGS[name]
    return compare_file(LAB / name, model=str(model) if model else None)


def plan_matches_within_rounding(layout, facts, rules) -> bool:
    return reproduces_within_rounding(layout, facts.available_kv_gib, facts.max_model_len, facts.kv_cache_tokens,
                                      rules, 262_144)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_kv_plan_reproduces_log(name):
    cmp = _compare(name)
    f, d = cmp.facts, cmp.prediction.deployment
    assert plan_matches_within_rounding(layout_for(d), f, d.rules), (f.kv_cache_tokens, f.max_model_len)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_available_kv_within_bound(name):
    rows = {r[0]: r for r in _compare(name).rows}
    assert abs(rows["available KV cache"][3]) <= LOGS[name][1]


def test_logged_figures():
    """The figures the tests above reproduce, as the logs print them."""
    want = {"g31t-e-bf16.log": (57.91, 14.35, 136_736, 136_736), "g31t-e-fp8.log": (57.94, 14.32, 313_893, 262_144),
            "g26t-e-bf16.log": (47.47, 24.81, 1_087_508, 262_144), "g31-e-bf16.log": (56.55, 15.71, 77_248, 77_248),
            "q36-27b-e-fp8-mtp2.log": (51.05, 21.15, 616_720, 262_144),
            "q36-35b-e-fp8.log": (64.72, 9.91, 1_005_901, 262_144)}
    for name, (w, avail, tokens, mml) in want.items():
        f = _compare(name).facts
        assert (f.weights_gib, f.available_kv_gib, f.kv_cache_tokens, f.max_model_len) == (w, avail, tokens, mml)


def test_gemma4_layout():
    """Unequal pages unified as vLLM does: full-attention block 32, sliding 16, groups of 10 layers."""
    lay = layout_for(_compare("g31t-e-bf16.log").prediction.deployment)
    blocks = {b.kind.label: (b.spec.block_size, b.spec.page_size_bytes, b.num_layers) for b in lay.buckets}
    assert blocks == {"attention": (32, 262_144, 10), "sliding": (16, 262_144, 50)}
    assert (lay.group_size, lay.num_groups, lay.padding_layers) == (10, 6, 0)


def test_gemma4_shapes_as_vllm_reads_them():
    cfg = json.loads((MODELS / "gemma-4-31b-text" / "config.json").read_text())
    a = arch_from_config(cfg, "g31")
    assert (a.attention_shape(FULL), a.attention_shape(SLIDING)) == ((4, 512), (16, 256))
    hidden = {k: v for k, v in cfg.items() if k not in ("global_head_dim", "num_global_key_value_heads")}
    assert arch_from_config(hidden, "g31").attention_shape(FULL) == (16, 256)  # vLLM's getattr fallback


def test_sliding_window_keeps_two_batches_in_flight_on_026():
    """The transformers-5.17 log's 77,248 tokens need 0.26's two in-flight batches (0.20: one batch)."""
    cmp = _compare("g31-e-bf16.log")
    f, d = cmp.facts, cmp.prediction.deployment
    assert plan_matches_within_rounding(layout_for(d), f, d.rules)
    d20 = d.with_(rules=RULES["0.20"])
    assert not plan_matches_within_rounding(layout_for(d20), f, d20.rules)


def test_gemma4_attention_backend():
    """Head dim 512: FA4 on Hopper for bf16 KV (seen), TRITON_ATTN for fp8 KV (seen) and below Hopper (source)."""
    assert attention_backend(lookup("h100"), "bf16", 512).label.startswith("FLASH_ATTN (FA4")
    assert attention_backend(lookup("h100"), "fp8", 512).label.startswith("TRITON_ATTN")
    assert attention_backend(lookup("rtx3090"), "bf16", 512).label.startswith("TRITON_ATTN")
    assert attention_backend(lookup("h100"), "bf16", 256).label.startswith("FLASH_ATTN (FA3")


def test_gemma4_31b_misses_by_its_weights_alone():
    """Where Gemma 4 31B's available KV is off, the weights are (0.14-0.18 GiB more loaded than modelled); its
    activation is within 0.01 (the traced dense MLP) and its non-torch memory exact."""
    for name in ("g31t-e-bf16.log", "g31t-e-fp8.log", "g31-e-bf16.log"):
        rows = {r[0]: r for r in _compare(name).rows}
        assert abs(rows["activation peak"][3]) <= 0.01 and abs(rows["non-torch"][3]) <= 0.01
        assert rows["available KV cache"][3] == pytest.approx(-rows["weights (incl. drafter)"][3], abs=0.01)
