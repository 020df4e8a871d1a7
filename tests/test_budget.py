"""The budget against the logs: weights, requested memory and available KV within tolerance."""

import pytest

from vrambudget.comparison import compare_file
from vrambudget.units import GiB

from .conftest import FIXTURES, LOGS

ALL = sorted(p.name for p in LOGS.glob("*.log"))


@pytest.mark.parametrize("name", ALL)
def test_predicted_available_kv_within_0_15_gib(name):
    cmp = compare_file(LOGS / name)
    errs = {term: err for term, logged, pred, err in cmp.rows if err is not None}
    assert abs(errs["available KV cache"]) <= 0.15
    assert abs(errs["requested (GMU budget)"]) <= 0.005  # ceil(total x GMU) is exact
    assert abs(errs["weights (incl. drafter)"]) <= 0.05


def test_graph_mode_log_is_recovered_as_cold_compile_with_graph_estimate():
    cmp = compare_file(LOGS / "qwen3.5-9b_kv-fp8_graphs_mtp2_gmu0.17.log")
    d, b = cmp.prediction.deployment, cmp.prediction.budget
    assert d.compile_cache == "cold" and not d.enforce_eager and d.spec_tokens == 2
    assert b.num_cudagraphs == 13  # 'PIECEWISE=8 (largest=48), FULL=5 (largest=24)'
    assert b.requested_bytes == -(-150109880320 * 17 // 100)


def test_mission_deployment_on_4060ti():
    """The story: 9B AWQ, fp8, prefix caching, 8 seqs, MTP 2, graphs, GMU 0.90 on a 4060 Ti:
    vLLM said '1.36 GiB needed, 1.02 GiB available' for 65,536 tokens."""
    from vrambudget import coefficients
    from vrambudget.hardware import catalog as gpus
    from vrambudget.model.checkpoint import resolve_model
    from vrambudget.deployment import Flags, resolve
    from vrambudget.prediction import predict
    from vrambudget.vllm_rules import rules_for

    d = resolve(resolve_model("qwen3.5-9b-awq"), gpus.lookup("4060ti"), rules_for("0.20.2"),
                Flags(gpu_memory_utilization=0.90, kv_cache_dtype="fp8", num_speculative_tokens=2, max_num_seqs=8,
                      max_model_len=65536, enable_prefix_caching=True))
    p = predict(d, coefficients.load("0.20"))
    assert abs(p.budget.available_kv_bytes / GiB - 1.02) <= 0.15
    assert not p.starts and "needs 1.36 GiB" in p.reasons[0]


PROBE_LOGS = sorted((FIXTURES / "probe-vllm-0.20.2-h200").rglob("*.log"))


@pytest.mark.parametrize("path", PROBE_LOGS, ids=[f"{p.parent.name}/{p.stem}" for p in PROBE_LOGS])
def test_out_of_sample_real_logs_within_0_05_gib(path):
    """The probe's real startups were not used to fit the bundled coefficients: 0.8B with fp8 KV
    (block 1088), 9B at other GMUs, graph mode cold and warm."""
    cmp = compare_file(path)
    err = {t: e for t, _, _, e in cmp.rows}["available KV cache"]
    assert abs(err) <= 0.05
