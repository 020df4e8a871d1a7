"""vLLM 0.26.0, measured: the real startups of tests/fixtures/lab-vllm-0.26.0-h100 (H100) and -h200x2 (two H200s,
tensor parallel 2); commands and figures in the README there. The KV plan must equal vLLM's; the available KV
memory must be predicted within 0.05 GiB, except where the README names the term that is off and by how much."""

from pathlib import Path

import pytest

from vrambudget.explain import compare_file
from vrambudget.planner import plan_kv
from vrambudget.predict import layout_for
from vrambudget.units import GiB

H100 = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h100"
TP2 = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h200x2"

# log -> bound on |predicted - logged available KV| (GiB)
BOUNDS = {
    H100 / "q9-e-fp8-mtp2.log": 0.05,
    H100 / "q9-e-bf16-mtp0.log": 0.05,
    H100 / "q9-g-fp8-mtp2-32k-warm.log": 0.05,  # warm compile cache
    H100 / "q9-g-fp8-mtp2-40k.log": 0.05,  # a new max_model_len compiles cold
    H100 / "v26p1" / "startup-01.log": 0.05,  # `vllm serve` defaults: 8192 tokens / 1024 seqs
    TP2 / "tp2-q9-e-fp8.log": 0.05,  # per rank, tensor parallel 2
    # known gaps (README): the first boot on a fresh host JIT-compiles the FLA kernels inside the profile
    # (peak 0.38 vs 0.27 GiB); the AWQ profile's layout is 0.10 GiB lighter than this config loads; the LLM
    # class's 16,384-token default peaks 0.06 GiB above the sampler term
    H100 / "q9-e-fp8-mtp0.log": 0.16,
    H100 / "awq-e-fp8-mtp2-pc.log": 0.11,
    H100 / "q9-e-fp8-defaults.log": 0.11,
}


def _err(path: Path) -> float:
    cmp = compare_file(path)
    return dict((r[0], r[3]) for r in cmp.rows)["available KV cache"]


@pytest.mark.parametrize("path", sorted(BOUNDS), ids=lambda p: p.stem if p.stem != "startup-01" else p.parent.name)
def test_available_kv_on_vllm_026_logs(path):
    assert abs(_err(path)) <= BOUNDS[path]


@pytest.mark.parametrize("path", sorted(BOUNDS) + [H100 / "q9-g-fp8-mtp2-32k-cold.log"],
                         ids=lambda p: p.stem if p.stem != "startup-01" else p.parent.name)
def test_kv_plan_reproduces_vllm_026_logs(path):
    """Block size, KV cache tokens and the (auto-fitted) max_model_len, from the logged available memory."""
    cmp = compare_file(path)
    f, d = cmp.facts, cmp.prediction.deployment
    lay = layout_for(d)
    plan = plan_kv(lay, round(f.available_kv_gib * GiB), f.max_model_len, d.rules)
    assert lay.block_size == f.block_size
    if path.name == "q9-e-bf16-mtp0.log":  # bf16 KV: 528-token blocks; 6.48 GiB is logged to 0.005 GiB = 1 block
        assert abs(plan.kv_cache_tokens - f.kv_cache_tokens) <= lay.block_size
    else:
        assert plan.kv_cache_tokens == f.kv_cache_tokens
        assert min(plan.ceiling, d.max_model_len if d.max_model_len > 0 else plan.ceiling) >= f.max_model_len


def test_tp2_rank_terms():
    """Per rank: half the weights, KV heads split (block 1056 as on one GPU: heads and GDN state halve together)."""
    cmp = compare_file(TP2 / "tp2-q9-e-fp8.log")
    f = cmp.facts
    assert (f.weights_gib, f.available_kv_gib, f.kv_cache_tokens, f.block_size) == (8.5, 1.57, 201_696, 1056)
    rows = dict((r[0], r) for r in cmp.rows)
    assert abs(rows["weights (incl. drafter)"][3]) <= 0.05


def test_default_gmu_and_version_label():
    from vrambudget.vllm_rules import choose_version

    v = choose_version("0.26.0")
    assert v.rules.default_gmu == 0.92 and v.measured
    assert compare_file(H100 / "q9-e-fp8-mtp2.log").prediction.deployment.rules.version == "0.26"


def test_fit_on_vllm_026_logs_improves_them(tmp_path):
    """`fit` reads 0.26.0 logs and probe records; with the non-adding peaks it shifts the base only."""
    import json

    from typer.testing import CliRunner

    from vrambudget.cli import app

    out = tmp_path / "p.json"
    r = CliRunner().invoke(app, ["fit", str(H100 / "v26p1" / "records.jsonl"), str(H100 / "q9-e-fp8-mtp2.log"),
                                 str(H100 / "q9-e-fp8-defaults.log"), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout if hasattr(r, "stdout") else r.output)
    assert res["worst_error_after_gib"] < res["worst_error_before_gib"] <= 0.1
    assert "activation_sampler_factor" not in res["changed"] and out.is_file()
