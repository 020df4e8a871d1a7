"""Startup lines other people published on their own cards (tests/fixtures/public-logs, sources.json): the corpus
covers four non-Hopper GPU kinds; where a log states enough (available memory, tokens, flags), the KV plan from the
logged available memory must give vLLM's logged KV cache size; the card's total and the weights of bundled
checkpoints are checked where logged. Terms the tool cannot predict are named per log, never guessed."""

import json

import pytest

from vrambudget import coefficients as coeffs
from vrambudget.hardware import catalog as gpus
from vrambudget.comparison import deployment_from_log
from vrambudget.logparse import parse_log
from vrambudget.kv.planner import plan_kv, rounding_band_blocks, tokens_within_rounding
from vrambudget.prediction import layout_for, predict
from vrambudget.units import GiB

from .conftest import FIXTURES

PUBLIC = FIXTURES / "public-logs"
SOURCES = {k: v for k, v in json.loads((PUBLIC / "sources.json").read_text()).items() if not k.startswith("_")}


def model_path(ref: str) -> str:
    """A sources.json model: a bundled profile name, or a config folder under tests/ (as a path from here)."""
    return str(FIXTURES.parent.parent / ref) if ref.startswith("tests/") else ref


def facts(name: str):
    """A public log's facts with what sources.json adds (args the checkpoint sets, the rules a version is planned
    with), and its sources.json entry."""
    f = parse_log((PUBLIC / name).read_text(errors="replace"))
    src = SOURCES[name]
    f.args = {**src.get("args", {}), **f.args}
    f.vllm_version = src.get("plan_rules") or f.vllm_version
    return f, src


def test_corpus_spans_four_non_hopper_kinds_with_sources():
    partial = {k: s for k, s in SOURCES.items() if s.get("partial")}
    kinds = {gpus.lookup(s["gpu"]).key for s in partial.values()}
    assert len(partial) >= 15 and len(kinds - {"h100", "h200"}) >= 4
    for name, s in SOURCES.items():
        assert (PUBLIC / name).is_file() and s["source"].startswith("https://github.com/") and s["unknown_terms"]
        assert s.get("partial") != s.get("complete")  # one or the other


COMPLETE = {k: s for k, s in SOURCES.items() if s.get("complete")}


def test_complete_logs_state_what_a_prediction_needs_and_where_they_come_from():
    """issue 22: a complete log states its vLLM version, its flags, the weights and the KV memory (or vLLM's refusal
    with its estimate) itself; it is kept verbatim from a repository snapshot named by its commit, with the evidence
    for its GPU. The corpus as it stands: 50 complete logs (45 distinct configurations: 'repeat_of' marks another boot
    of one already counted), 14 named GPU kinds (6 consumer or workstation, 5 non-Hopper datacenter, the GB10)."""
    from vrambudget.hardware.catalog import catalog

    for name, s in COMPLETE.items():
        f = parse_log((PUBLIC / name).read_text(errors="replace"))
        assert f.vllm_version and f.args and f.weights_gib is not None, name
        assert f.available_kv_gib is not None and (f.kv_cache_tokens or f.estimated_max_model_len), name
        assert "/blob/" in s["source"] and len(s["source"].split("/blob/")[1].split("/")[0]) == 40, name
        assert s["gpu_evidence"] and s["kept"], name
    named = {s["gpu"] for s in COMPLETE.values() if s["gpu"]}
    assert len(COMPLETE) == 50 and len(named) == 14
    assert len([s for s in COMPLETE.values() if not s.get("repeat_of")]) == 45
    for s in COMPLETE.values():
        assert not s.get("repeat_of") or (s["repeat_of"] in COMPLETE and not COMPLETE[s["repeat_of"]].get("repeat_of"))
    assert {"rtx3090", "rtx4080", "rtx4090", "rtx-a5000", "rtx6000-ada", "rtx-pro-6000"} <= named and {"a100-40gb", "a100-80gb", "l4", "l40s", "t4"} <= named
    assert named <= set(catalog())  # every named card is in the catalog (the GB10's unified total: 121.69 GiB)


def test_complete_logs_kv_plans_reproduce_vllms_tokens():
    """Where the checkpoint's config is in hand, vLLM's 'GPU KV cache size' follows from the logged memory."""
    checked = 0
    for name, s in COMPLETE.items():
        if not s.get("model") or s.get("plan_unknown"):
            continue
        f, _ = facts(name)
        model = model_path(s["model"])
        d = deployment_from_log(f, model, gpus.lookup(s["gpu"] or s["gpu_candidates"][0]))  # the plan: any of them
        # vLLM's tokens from whole blocks of the logged (0.01 GiB-rounded) memory, as this version counts them
        assert tokens_within_rounding(layout_for(d), f.available_kv_gib, f.max_model_len, f.kv_cache_tokens,
                                      d.rules), name
        checked += 1
    assert checked == 41


@pytest.mark.parametrize("name,tokens,concurrency", [
    ("club3090-612-rtx5090-qwen3.6-35b-a3b.log", 567_978, 4.33),
    ("club3090-652-rtx5090-qwen3.6-35b-a3b.log", 569_878, 4.35),
    ("club3090-46-2x4090-qwen3.6-27b-dflash.log", 67_728, 1.06),  # vLLM 0.20.1rc1: blocks // groups x block
])
def test_kv_plan_from_logged_available_is_exact(name, tokens, concurrency):
    f, src = facts(name)
    d = deployment_from_log(f, src["model"], gpus.lookup(src["gpu"]), drafter=src.get("drafter"))
    plan = plan_kv(layout_for(d), round(f.available_kv_gib * GiB), f.max_model_len, d.rules)
    assert (f.kv_cache_tokens, f.concurrency) == (tokens, concurrency)
    assert plan.kv_cache_tokens == tokens and round(plan.max_concurrency, 2) == concurrency


def test_dflash_drafter_layers_in_the_kv_plan_on_vllm_0_20():
    """club-3090 issue 75 (2x RTX 3090, vLLM 0.20.2rc1, Qwen3.6-27B + z-lab DFlash, 5 tokens): the drafter's 5 layers
    of 8 KV heads x 128 are their own KV spec (not the target's 4 x 256), so vLLM groups by 5: the 16 attention
    layers in 4 groups, the drafter in 1, the 48 GDN layers in 10; 1,230 blocks of the logged 9.58 GiB give
    vLLM's 188,838 tokens."""
    f, src = facts("club3090-75-2x3090-qwen3.6-27b-dflash.log")
    d = deployment_from_log(f, src["model"], gpus.lookup(src["gpu"]), drafter=src["drafter"])
    lay = layout_for(d)
    assert (lay.block_size, lay.group_size, lay.num_groups) == (816, 5, 15)
    assert [(b.kind.label, b.num_layers) for b in lay.buckets] == [("attention", 16), ("attention", 5), ("gdn", 48)]
    assert plan_kv(lay, 1230 * lay.bytes_per_block, 185_000, d.rules).kv_cache_tokens == 188_838
    assert tokens_within_rounding(lay, f.available_kv_gib, f.max_model_len, f.kv_cache_tokens, d.rules)
    assert round(plan_kv(lay, 1230 * lay.bytes_per_block, 185_000, d.rules).max_concurrency, 2) == f.concurrency


def test_v0_llama_on_a_3090_weights_total_and_blocks():
    """vLLM issue 10517 (RTX 3090, V0 engine): Llama-3.1-8B bf16 weights 14.9888 GiB, the card's total 23.58 GiB
    (this user's; the catalog's public figure is 23.69), and '# GPU blocks' inside the logged KV memory's rounding."""
    for name, blocks in (("vllm10517-rtx3090-llama3.1-8b-20k.log", 1952), ("vllm10517-rtx3090-llama3.1-8b-29k.log", 1478)):
        f, src = facts(name)
        d = deployment_from_log(f, src["model"], gpus.lookup(src["gpu"]))
        b = predict(d, coeffs.load(d.rules.version, "rtx3090", d.model.ref)).budget
        assert abs(b.weights_bytes / GiB - f.weights_gib) < 0.06 and f.weights_gib == 14.9888
        assert f.gpu_blocks == blocks and blocks in rounding_band_blocks(layout_for(d), f.available_kv_gib)
        assert f.total_gib == 23.58
    f, _ = facts("vllm10517-rtx3090-llama3.1-8b-29k.log")
    assert (f.outcome, f.kv_cache_tokens, f.max_model_len) == ("kv_too_small", 1478 * 16, 29_000)


def test_cards_total_where_logged():
    """The catalog's totals against the cards' own logs: RTX 5090 31.4 GiB (club-3090 issue 1087), RTX 4060 8.00."""
    for name, key in (("club3090-1087-2x5090-qwen3.8-27b-fp8.log", "rtx5090"), ("vllm13882-rtx4060-qwen2.5-7b.log",
                                                                                 "rtx4060")):
        f, _ = facts(name)
        assert round(gpus.lookup(key).total_bytes / GiB, 2) == round(f.total_gib, 2)
