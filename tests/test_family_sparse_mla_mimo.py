"""DeepSeek V3.2 / GLM-5 (sparse MLA with a lightning indexer, layers/sparse_mla.py) and MiMo-V2-Flash (full and
sliding layers of their own head shapes, K and V heads of different dims), against vLLM 0.33.0 startups on an H200
(tests/fixtures/lab-vllm-0.33.0-h200/families, plan h200x4-0.33.0-issue46c: each model cut to 4 or 6 layers, bf16
linears, dummy weights; configs in tests/fixtures/models/lab-*)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.comparison import compare_file
from vrambudget.deployment import Flags, resolve
from vrambudget.errors import UserError
from vrambudget.hardware import catalog as gpus
from vrambudget.model.checkpoint import resolve_model
from vrambudget.vllm_rules import rules_for
from vrambudget.kv.planner import plan_kv
from vrambudget.logparse import parse_log
from vrambudget.prediction import layout_for
from vrambudget.units import GiB

FIX = Path(__file__).parent / "fixtures"
LAB = FIX / "lab-vllm-0.33.0-h200" / "families"
MODELS = FIX / "models"
runner = CliRunner()


def _rows(log: str, model: str) -> dict:
    return {r[0]: r for r in compare_file(LAB / log, model=str(MODELS / model)).rows}


def _logged_plan_tokens(log: str, model: str) -> tuple[int, set[int]]:
    """vLLM's KV tokens and the ones this plan gives from the logged available memory (within its 0.01 rounding),
    with the layout planned as an eager deployment of the log's flags (graphs do not change the layout)."""
    f = parse_log((LAB / log).read_text())
    d = resolve(resolve_model(str(MODELS / model)), gpus.lookup("h200"), rules_for("0.33.0"),
                Flags(enforce_eager=True, kv_cache_dtype=f.args.get("kv_cache_dtype") or "auto"))
    lay = layout_for(d)
    tokens = {plan_kv(lay, int((f.available_kv_gib + dx) * GiB), f.max_model_len, d.rules).kv_cache_tokens
              for dx in (-0.005, 0, 0.005)}
    return f.kv_cache_tokens, tokens


def test_sparse_mla_eager_startup():
    """DeepSeek-V3.2 cut to 4 layers (3 dense + 1 MoE), eager: the indexer's weights and top-k buffers in the load
    (28.43 GiB), its workspace shared with the MoE scratch, the sampler's peak deciding (1.86)."""
    rows = _rows("dsv32-e.log", "lab-deepseek-v3.2-4l")
    assert rows["weights (incl. drafter)"][1] == 28.43 and abs(rows["weights (incl. drafter)"][3]) <= 0.01
    assert abs(rows["activation peak"][3]) <= 0.02
    assert abs(rows["available KV cache"][3]) <= 0.08


@pytest.mark.parametrize("log,model", [("dsv32-e.log", "lab-deepseek-v3.2-4l"), ("dsv32-d.log", "lab-deepseek-v3.2-4l"),
                                       ("dsv32-fp8.log", "lab-deepseek-v3.2-4l"), ("glm5-d.log", "lab-glm-5-4l")])
def test_sparse_mla_kv_plan_from_the_logged_memory(log, model):
    """One page of 64 tokens holds every layer's latent (576 x 2 B, or fp8_ds_mla's 656) and indexer key (132 B)."""
    logged, tokens = _logged_plan_tokens(log, model)
    assert min(tokens) <= logged <= max(tokens), (logged, tokens)


def test_sparse_mla_pages_and_fp8_workspace():
    out = {}
    for kv in ("auto", "fp8"):
        r = runner.invoke(app, ["predict", "-m", str(MODELS / "lab-deepseek-v3.2-4l"), "--gpu", "h200", "--enforce-eager",
                                "--kv-cache-dtype", kv, "--json"])
        assert r.exit_code == 0, r.output
        out[kv] = json.loads(r.output)
    assert out["auto"]["block_size"] == out["fp8"]["block_size"] == 64
    assert out["auto"]["bytes_per_block"] == 4 * 64 * (1152 + 132) and out["fp8"]["bytes_per_block"] == 4 * 64 * (656 + 132)
    # FLASHMLA_SPARSE reserves its 5,507,121,152-byte workspace as it is built: 28.43 -> 33.56 GiB logged
    assert out["fp8"]["weights_bytes"] - out["auto"]["weights_bytes"] == 5_507_121_152 - 4 * 8193 * 4
    assert parse_log((LAB / "dsv32-fp8.log").read_text()).weights_gib == 33.56
    assert abs(out["fp8"]["weights_bytes"] / GiB - 33.56) <= 0.01


@pytest.mark.parametrize("args,said", [(["--gpu", "H100 PCIe"], "--enforce-eager"),
                                       (["--enforce-eager", "--gpu", "4090"], "Hopper only"),
                                       (["--gpu", "h200", "--vllm-version", "0.26.0"], "--vllm-version 0.33")])
def test_sparse_mla_refusals_are_one_line(args, said):
    r = runner.invoke(app, ["predict", "-m", str(MODELS / "deepseek-v3.2"), *args])
    assert r.exit_code == 2 and said in r.output and r.output.strip().count("\n") == 0, r.output


@pytest.mark.parametrize("log,model", [("dsv32-d.log", "lab-deepseek-v3.2-4l"), ("dsv32-fp8.log", "lab-deepseek-v3.2-4l"),
                                       ("glm5-d.log", "lab-glm-5-4l")])
def test_sparse_mla_under_cuda_graphs(log, model):
    """At vLLM's defaults (FULL graphs that run the indexer and the attention): the estimate is the decode buffers of
    the two largest FULL batches (FA3's 28 split buffers, or FlashMLA's, and the indexer's logits) + a base fitted on
    these three startups (in sample: 8.01 / 1.12 / 4.63 GiB within 0.03)."""
    rows = _rows(log, model)
    assert abs(rows["CUDA graph estimate"][3]) <= 0.03
    assert abs(rows["available KV cache"][3]) <= 0.10


@pytest.mark.parametrize("log,bound", [("mimo-e.log", 0.03), ("mimo-d.log", 0.01)])
def test_mimo_startups(log, bound):
    """Weights 63.82 GiB (two rope caches, the sliding layers' sinks, an fp32 router); at the defaults the graph
    estimate is this log's own (the DiffKV factor, measured on it: in sample)."""
    rows = _rows(log, "lab-mimo-v2-flash-6l")
    assert rows["weights (incl. drafter)"][1] == 63.82 and abs(rows["weights (incl. drafter)"][3]) <= 0.01
    assert abs(rows["available KV cache"][3]) <= bound


@pytest.mark.parametrize("log", ["mimo-e.log", "mimo-d.log"])
def test_mimo_kv_plan_from_the_logged_memory(log):
    """Full layers 4 x (192 + 128) x 2 B a token, sliding ones 8 x 320 x 2: the full layers' block raised to 32
    tokens so both pages hold 81,920 B; groups (32, 16, 16); the sliding layers hold their window + 2 x 8,192."""
    logged, tokens = _logged_plan_tokens(log, "lab-mimo-v2-flash-6l")
    assert min(tokens) <= logged <= max(tokens), (logged, tokens)


def test_the_whole_mimo_pads_its_groups():
    """48 layers, 9 full and 39 sliding: groups of 9, one full and five sliding (6 padding layers, 15.38 %)."""
    r = runner.invoke(app, ["predict", "-m", str(MODELS / "mimo-v2-flash"), "--gpu", "h200", "-tp", "4", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["bytes_per_block"] == 9 * 16 * 8 // 4 * 320 * 2 or out["bytes_per_block"] == 9 * 81_920 // 4


def test_a_damaged_mimo_pattern_is_one_line(tmp_path):
    cfg = json.loads((MODELS / "mimo-v2-flash" / "config.json").read_text())
    cfg["hybrid_layer_pattern"] = cfg["hybrid_layer_pattern"][:10]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match="hybrid_layer_pattern must list 0 or 1 for each of the 48 layers"):
        resolve_model(str(tmp_path))
