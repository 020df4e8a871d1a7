"""DFlash drafters: their KV-cache layers per vLLM version, their weights from the config, the one-line refusals,
and the patch release whose KV-tokens log line differs (checked on public logs in test_public_logs.py)."""

import json

import pytest

from vrambudget import gpus
from vrambudget.checkpoint import resolve_model
from vrambudget.deployment import Flags, parse_speculative_config, resolve
from vrambudget.drafter import drafter_from_config, load_drafter
from vrambudget.errors import UserError
from vrambudget.predict import layout_for
from vrambudget.vllm_rules import rules_for

SPEC = '{"method":"dflash","model":"qwen3.6-27b-dflash","num_speculative_tokens":5}'


def deployment(version: str, spec: str = SPEC, tp: int = 2):
    method, k, draft = parse_speculative_config(spec)
    f = Flags(tensor_parallel_size=tp, max_model_len=185_000, max_num_seqs=1, max_num_batched_tokens=8192,
              enable_prefix_caching=True, num_speculative_tokens=k, speculative_method=method, draft_model=draft)
    return resolve(resolve_model("qwen3.6-27b"), gpus.lookup("rtx3090"), rules_for(version), f)


def test_bundled_drafter_shape():
    dr = load_drafter("qwen3.6-27b-dflash")
    assert (dr.num_layers, dr.num_kv_heads, dr.head_dim, dr.sliding_window) == (5, 8, 128, 2048)
    assert dr.layer_kinds.count("sliding_attention") == 4 and dr.hidden == 5120
    # club-3090 docs/KV_MATH.md: "~1.75 GB draft model (per card, FP16)" at TP=2; from the config: 1.86 GB
    per_card = dr.weights_bytes(2, 2)
    assert 1.75e9 < per_card < 1.9e9


def test_vllm_0_26_builds_the_drafters_sliding_layers():
    """0.26 source (qwen3_dflash.py _resolve_layer_attention): the config's 4 sliding layers keep 2048 tokens."""
    lay = layout_for(deployment("0.26.0"))
    kinds = sorted((b.kind, b.num_layers) for b in lay.buckets)
    assert kinds == [("attention", 1), ("attention", 16), ("gdn", 48), ("sliding", 4)]
    sw = next(b for b in lay.buckets if b.kind == "sliding").spec
    assert sw.window == 2048 and sw.in_flight_tokens == 2 * 8192
    # 0.20 builds all five as full attention
    assert [(b.kind, b.num_layers) for b in layout_for(deployment("0.20.2")).buckets] == [
        ("attention", 16), ("attention", 5), ("gdn", 48)]


def test_serve_flags_name_the_drafter():
    d = deployment("0.20.2")
    assert json.loads(d.speculative_config()) == {"method": "dflash", "model": "qwen3.6-27b-dflash",
                                                  "num_speculative_tokens": 5}


def test_refusals_are_one_line():
    with pytest.raises(UserError, match="needs its drafter"):
        deployment("0.20.2", '{"method":"dflash","num_speculative_tokens":5}')
    with pytest.raises(UserError, match="not modelled"):
        deployment("0.20.2", '{"method":"eagle3","model":"x","num_speculative_tokens":3}')
    with pytest.raises(UserError, match="not a bundled drafter"):
        deployment("0.20.2", '{"method":"dflash","model":"/nowhere/drafter","num_speculative_tokens":5}')
    with pytest.raises(UserError, match="DFlash2DraftModel"):
        drafter_from_config({"architectures": ["DFlash2DraftModel"], "num_hidden_layers": 5}, "incoai-dflash2")


def test_patch_rules_for_the_kv_tokens_line():
    assert rules_for("0.20.1rc1.dev16+g7a1eb8ac2").kv_tokens_formula == "groups"
    assert rules_for("0.20.2rc1.dev9+g01d4d1ad3").kv_tokens_formula == "concurrency"
    assert rules_for("0.20.2").kv_tokens_formula == "concurrency"
