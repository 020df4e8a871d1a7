"""DFlash drafters: their KV-cache layers per vLLM version, their weights from the config, the one-line refusals,
and the patch release whose KV-tokens log line differs (checked on public logs in test_public_logs.py)."""

import json
from pathlib import Path

import pytest

from vrambudget.hardware import catalog as gpus
from vrambudget.model.checkpoint import resolve_model
from vrambudget.deployment import Flags, parse_speculative_config, resolve
from vrambudget.model.drafter import drafter_from_config, load_drafter
from vrambudget.errors import UserError
from vrambudget.prediction import layout_for
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
    # club-3090 docs/KV_MATH.md: "~1.75 GB draft model (per card, FP16)" at TP=2; from the config: 1.93 GB
    # (1.86 GB of layers and fc, 0.07 GB of its own rotary cache over 262,144 positions)
    per_card = dr.weights_bytes(2, 2)
    assert 1.75e9 < per_card < 1.95e9


def test_vllm_0_26_builds_the_drafters_sliding_layers():
    """0.26 source (qwen3_dflash.py _resolve_layer_attention): the config's 4 sliding layers keep 2048 tokens."""
    lay = layout_for(deployment("0.26.0"))
    kinds = sorted((b.kind.label, b.num_layers) for b in lay.buckets)
    assert kinds == [("attention", 1), ("attention", 16), ("gdn", 48), ("sliding", 4)]
    sw = next(b for b in lay.buckets if b.kind.label == "sliding").spec
    assert sw.window == 2048 and sw.in_flight_tokens == 2 * 8192
    # 0.20 builds all five as full attention
    assert [(b.kind.label, b.num_layers) for b in layout_for(deployment("0.20.2")).buckets] == [
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


LAB26 = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h100" / "dflash"


def test_vllm_0_26_lab_startup_with_the_drafter():
    """A real vLLM 0.26.0 startup (H100, dummy weights, eager, fp8 KV, 8 seqs / 2048 tokens, 5 speculative tokens):
    0.26 forces its V2 model runner for a drafter of mixed sliding / full layers, builds the 4 sliding layers
    (block 1616: 69 groups of one layer, no padding) and logs 514,752 tokens for 262,144 (1.96x) from 18.64 GiB."""
    from vrambudget.comparison import compare_file
    from vrambudget.logparse import parse_log
    from vrambudget.kv.planner import tokens_within_rounding

    path = LAB26 / "d26-q36-dflash5.log"
    text = path.read_text()
    assert "Using V2 Model Runner" in text and "Setting attention block size to 1616 tokens" in text
    assert "padding layers" not in text
    cmp = compare_file(path, drafter="qwen3.6-27b-dflash")
    rows = {r[0]: r for r in cmp.rows}
    assert rows["weights (incl. drafter)"][1] == 53.55 and abs(rows["weights (incl. drafter)"][3]) <= 0.05
    assert rows["activation peak"][1] == 0.43 and abs(rows["activation peak"][3]) <= 0.03
    assert abs(rows["available KV cache"][3]) <= 0.05
    lay = layout_for(cmp.prediction.deployment)
    assert (lay.block_size, lay.num_groups, lay.group_size) == (1616, 69, 1)
    facts = parse_log(text)
    # 514,752 = int(6,046 blocks / 3,079 a request x 262,144); 6,046 blocks lie inside the logged 18.64 GiB
    assert tokens_within_rounding(lay, facts.available_kv_gib, 262_144, 514_752, cmp.prediction.deployment.rules)
    assert not tokens_within_rounding(lay, facts.available_kv_gib, 262_144, 514_752 + 1072,
                                      cmp.prediction.deployment.rules)
