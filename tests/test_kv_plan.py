"""The KV plan against vLLM 0.20.2's own log lines: given the config, the flags and the logged
'Available KV cache memory', reproduce block size, padding, KV cache tokens and auto-fit."""

import pytest

from vrambudget.families import arch_from_config
from vrambudget.kv.planner import build_layout, group_size, hybrid_block_size, plan_kv
from vrambudget.units import GiB
from vrambudget.vllm_rules import rules_for

from .conftest import fixture_config

R20 = rules_for("0.20.2")


def layout(model, kv_bytes, k, mamba_extra=0):
    a = arch_from_config(fixture_config(model), model)
    return build_layout(a, kv_dtype_bytes=kv_bytes, spec_tokens=k, draft_attention_layers=a.mtp_layers if k else 0,
                        tp=1, mamba_blocks=1 + k + mamba_extra, block_multiple=16, max_num_batched_tokens=2048)


# (log, model, kv bytes, MTP k, logged available GiB, asked max_model_len, logged block, logged padding,
#  logged KV tokens, logged final max_model_len, logged concurrency)
LOGGED = [
    ("qwen3.5-9b_kv-fp8_eager_mtp0_gmu0.17", "qwen3.5-9b", 1, 0, 6.47, 262144, 1056, [], 417141, 262144, 1.59),
    ("qwen3.5-9b_kv-fp8_eager_mtp0_gmu0.15", "qwen3.5-9b", 1, 0, 3.67, 262144, 1056, [], 236544, 236544, 1.00),
    ("qwen3.5-9b_kv-fp8_eager_mtp2_gmu0.17", "qwen3.5-9b", 1, 2, 6.00, 262144, 1072, [(3, 12.5)], 336452, 262144, 1.28),
    ("qwen3.5-9b_kv-fp8_graphs_mtp2_gmu0.17", "qwen3.5-9b", 1, 2, 4.09, 262144, 1072, [(3, 12.5)], 228336, 228336, 1.00),
    ("qwen3.5-0.8b_kv-auto_eager_mtp2_gmu0.5", "qwen3.5-0.8b", 2, 2, 67.97, 262144, 544, [(3, 16.67)], 4996219, 262144, 19.06),
]


@pytest.mark.parametrize("log,model,kvb,k,avail,asked,block,pad,tokens,final_len,conc", LOGGED, ids=[r[0] for r in LOGGED])
def test_hybrid_plan_reproduces_log(log, model, kvb, k, avail, asked, block, pad, tokens, final_len, conc):
    lay = layout(model, kvb, k)
    assert lay.block_size == block
    assert lay.padding_warnings == pad
    first = plan_kv(lay, round(avail * GiB), asked, R20)
    final = min(first.ceiling, asked)  # vLLM's auto-fit (max_model_len -1)
    assert final == final_len
    plan = plan_kv(lay, round(avail * GiB), final, R20)
    assert plan.kv_cache_tokens == tokens
    assert round(plan.max_concurrency, 2) == conc


def test_dense_plan_qwen3_8b_within_rounding_of_logged_gib():
    # 'Available KV cache memory: 8.04 GiB' is rounded: 8.035..8.045 GiB spans 7313..7322 blocks.
    # vLLM logged 117,072 tokens = 7317 blocks x 16, which must be one of them, and 40960 fits.
    lay = layout("qwen3-8b", 1, 0)
    assert (lay.block_size, lay.group_size, lay.bytes_per_block) == (16, 36, 36 * 16 * 2048)
    lo = plan_kv(lay, round(8.035 * GiB), 40960, R20)
    hi = plan_kv(lay, round(8.045 * GiB), 40960, R20)
    assert lo.num_blocks <= 7317 <= hi.num_blocks
    assert plan_kv(lay, 7317 * lay.bytes_per_block, 40960, R20).kv_cache_tokens == 117072
    assert round(7317 / 2560, 2) == 2.86  # 'Maximum concurrency for 40,960 tokens per request: 2.86x'
    assert lo.ceiling >= 40960  # 'full model context length 40960 fits'


def test_spec_quoted_figures():
    lay = layout("qwen3.5-9b", 1, 0)
    assert plan_kv(lay, round(6.47 * GiB), 32768, R20).kv_cache_tokens == 375427  # 401 / 35 x 32768
    # 0.19-style: num_blocks // num_groups x B on a 24 GB card for 0.8B + MTP: 2381 // 4 x 544
    lay08 = layout("qwen3.5-0.8b", 2, 2)
    p19 = plan_kv(lay08, 2381 * lay08.bytes_per_block, 262144, rules_for("0.19"))
    assert p19.num_blocks == 2381 and lay08.num_groups == 4
    assert p19.kv_cache_tokens == 323680
    assert round(p19.max_concurrency, 2) == 4.85


def test_prefix_caching_align_mode_costs_three_blocks_of_ceiling():
    none = layout("qwen3.5-9b", 1, 2)
    align = layout("qwen3.5-9b", 1, 2, mamba_extra=1)  # m = 2 + k in align mode
    avail = round(4.09 * GiB)
    assert plan_kv(none, avail, 1, R20).ceiling - plan_kv(align, avail, 1, R20).ceiling == 3 * 1072


def test_mission_story_65536_needs_1_36_gib():
    # "1.36 GiB needed" for 65,536 tokens: Qwen3.5-9B, fp8, MTP 2, prefix caching (align, m = 4)
    lay = layout("qwen3.5-9b", 1, 2, mamba_extra=1)
    assert round(lay.bytes_per_request(65536) / GiB, 2) == 1.36


def test_block_size_and_group_rules():
    # 9B fp8: mamba page 2,146,304 B, attention 2048 B/token -> 66 x 16 = 1056
    assert hybrid_block_size(2048, 2146304, 16) == 1056
    assert group_size([9, 24]) == 9 and group_size([12, 13]) == 13


def test_033_reserves_one_null_block():
    lay = layout("qwen3.5-9b", 1, 0)
    avail = round(6.47 * GiB)
    assert plan_kv(lay, avail, 1, R20).ceiling - plan_kv(lay, avail, 1, rules_for("0.33")).ceiling == 1056


def test_sliding_window_layers_hold_window_plus_chunk():
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 1024, "num_hidden_layers": 8,
           "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 32000, "intermediate_size": 4096,
           "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 4, "max_position_embeddings": 131072}
    a = arch_from_config(cfg, "sw")
    lay = build_layout(a, kv_dtype_bytes=2, spec_tokens=0, draft_attention_layers=0, tp=1, mamba_blocks=1,
                       block_multiple=16, max_num_batched_tokens=2048)
    assert [(b.kind.label, b.num_layers) for b in lay.buckets] == [("attention", 4), ("sliding", 4)]
    # one full group: cdiv(L, 16); one sliding group: cdiv(min(4096 - 1 + 2048, L), 16) + 1
    assert lay.blocks_per_request(100_000) == 6250 + 385
    assert lay.blocks_per_request(1000) == 63 + 64


def test_mla_outside_the_deepseek_family_is_refused_clearly():
    """MLA is planned for the DeepSeek family (tests/test_family_readers.py); a GQA family's config with kv_lora_rank is
    not what its reader models: refused, naming MLA."""
    from vrambudget.errors import UserError

    with pytest.raises(UserError, match="MLA"):
        arch_from_config({"model_type": "llama", "hidden_size": 7168, "num_hidden_layers": 61,
                          "num_attention_heads": 128, "vocab_size": 129280, "kv_lora_rank": 512}, "ds")
