"""The eager forward's peak traced tensor by tensor (activation.moe_attention_peak, activation.mlp_peak), against vLLM 0.26.0
on one H100 (benchmarks/lab/plans/h100-0.26.0-moe-forward.json): `vllm serve` with one sequence, so the dummy
sampler's peak is one logits row and the forward decides, and the allocator's own record of what is alive at that
peak (benchmarks/lab/peak_snapshot.py); then the multi-GPU logs the trace explains (pipeline stages, TP 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vrambudget import coefficients
from vrambudget.budget import features
from vrambudget.activation import mlp_peak, moe_attention_peak
from vrambudget.comparison import deployment_from_log
from vrambudget.hardware.catalog import lookup
from vrambudget.logparse import parse_log
from vrambudget.prediction import predict
from vrambudget.units import GiB, MiB

ROOT = Path(__file__).parent.parent
LAB = ROOT / "tests" / "fixtures" / "lab-vllm-0.26.0-h100" / "moe-forward"
Q30 = str(ROOT / "tests" / "fixtures" / "models" / "qwen3-30b-a3b")
MIXTRAL = str(ROOT / "tests" / "fixtures" / "models" / "lab-mixtral-8x7b-16l")


def _deployment(log: str, model: str | None):
    return deployment_from_log(parse_log((LAB / log).read_text()), model, lookup("h100"))


def _snapshot(log: str) -> tuple[float, list[tuple[float, str]]]:
    """The SNAP lines: the peak above the profile's start and each live block (MiB, where it was made)."""
    text = (LAB / log).read_text()
    peak = float(re.search(r"SNAP events \d+ peak_mib ([0-9.]+)", text).group(1))
    live = [(float(m.group(1)), m.group(2)) for m in re.finditer(r"SNAP live\s+([0-9.]+) (.*)", text)]
    return peak, live


@pytest.mark.parametrize("log, model, workspace_mib, attention_mib", [
    ("snap-q30-e-s1-8192.log", Q30, 512, 80 + 64 + 8 + 64 + 3 * 32),
    ("snap-mixtral-e-s1-8192.log", MIXTRAL, 1344, 96 + 64 + 3 * 64),
])
def test_the_peak_is_the_scratch_cublas_and_one_attention_layer(log, model, workspace_mib, attention_mib):
    """What the allocator held at the peak adds up to it, and each part is the model's: the fused-MoE scratch
    (budget.moe_workspace_bytes), cuBLAS's 32 MiB on Hopper, and the attention layer's own tensors at o_proj."""
    peak, live = _snapshot(log)
    assert sum(mib for mib, _ in live) == pytest.approx(peak, abs=1)
    scratch = [mib for mib, where in live if "workspace.py" in where]
    assert scratch == [workspace_mib]
    d = _deployment(log, model)
    c = coefficients.load(d.rules.version, d.gpu.key, d.model.ref)
    f = features(d)
    assert f.moe_workspace_bytes / MiB == pytest.approx(workspace_mib, abs=4)  # 256-byte alignment, rounding
    assert f.attention_forward_bytes / MiB == attention_mib
    assert moe_attention_peak(f, c) / MiB == pytest.approx(peak, abs=4)


@pytest.mark.parametrize("tokens, logged_peak", [(8192, 0.84), (4096, 0.43), (2048, 0.23)])
def test_the_forward_peak_scales_with_the_batched_tokens(tokens, logged_peak):
    """Qwen3-30B-A3B, one sequence, eager: the logged torch peak at each max_num_batched_tokens (0.60 GiB was
    modelled at 8192 before the attention beside the scratch was traced), and the available KV cache within 0.01."""
    log = f"q30-e-s1-{tokens}.log"
    f = parse_log((LAB / log).read_text())
    assert f.activation_gib == logged_peak and f.args["max_num_batched_tokens"] == tokens
    d = _deployment(log, Q30)
    b = predict(d, coefficients.load(d.rules.version, d.gpu.key, d.model.ref)).budget
    assert b.activation_bytes / GiB == pytest.approx(logged_peak, abs=0.01)
    assert b.available_kv_bytes / GiB == pytest.approx(f.available_kv_gib, abs=0.01)


def test_a_dense_peak_is_left_to_the_mlp_term():
    """Mixtral's own MLP term (activation.forward_peak: 1.72 GiB) stays the larger where the scratch and the attention
    come to 1.69 (the logged peak): the new term only ever raises a peak, and the KV cache stays within 0.04."""
    d = _deployment("mixtral-e-s1-8192.log", MIXTRAL)
    c = coefficients.load(d.rules.version, d.gpu.key, d.model.ref)
    b = predict(d, c).budget
    f = parse_log((LAB / "mixtral-e-s1-8192.log").read_text())
    assert moe_attention_peak(features(d), c) / GiB == pytest.approx(f.activation_gib, abs=0.01)
    assert b.available_kv_bytes / GiB == pytest.approx(f.available_kv_gib, abs=0.04)


def test_a_compile_range_gives_the_batched_tokens_a_log_does_not_state():
    """A public vLLM 0.26.1 boot (an H100, Qwen3-Coder-30B-A3B, 16 seqs) states no max_num_batched_tokens but its
    engine config's compile_ranges_endpoints [2048]: read as 2048, its 0.23 GiB peak is planned (0.26) where
    8192 gave 0.84, and its available KV within 0.05 GiB (-0.44 before)."""
    log = ROOT / "tests" / "fixtures" / "public-logs" / "c-h100-qwen3-coder-30b-a3b-v0.26.1.log"
    f = parse_log(log.read_text())
    assert f.args["max_num_batched_tokens"] == 2048
    d = deployment_from_log(f, str(ROOT / "tests" / "fixtures" / "models" / "qwen3-coder-30b-a3b"), lookup("h100"))
    b = predict(d, coefficients.load(d.rules.version, d.gpu.key, d.model.ref)).budget
    assert b.available_kv_bytes / GiB == pytest.approx(f.available_kv_gib, abs=0.05)


@pytest.mark.parametrize("log, model, parts_mib", [
    # gate-up 2 x 12288 wide, the activation, down_proj's output, its input and the residual stream (embedding-
    # made residual, layer input): 4 x 64 MiB; cuBLAS 32
    ("snap-q8-e-s1-8192.log", "qwen3-8b", [384, 192, 64, 64, 64, 64, 32]),
    # Qwen3.5's norm allocates: one more hidden-size tensor (its record lost one 64 MiB block: the peak is 928)
    ("snap-q9-e-s4-8192.log", str(ROOT / "tests" / "fixtures" / "models" / "qwen3.5-9b"),
     [384, 192, 64, 64, 64, 64, 64, 32]),
    # Qwen3.8-27B with MTP 3: the target's hidden states held through the drafter's dummy run, 6 x 80 MiB
    ("snap-q38bf-e-fp8-mtp3-lmo-8k.log", "qwen3.8-27b", [544, 272] + [80] * 6 + [32]),
])
def test_a_dense_mlp_peak_is_its_tensors_and_the_residual_stream(log, model, parts_mib):
    """The eager dense peak at 8192 tokens: the model's traced parts add to what the allocator held and vLLM
    logged, where the fitted per-width term (7.443 B x tokens x intermediate + base) gave 0.79, 0.80 and 1.08 GiB."""
    peak, live = _snapshot(log)
    assert peak == sum(parts_mib)
    d = _deployment(log, model)
    c = coefficients.load(d.rules.version, d.gpu.key, d.model.ref)
    assert mlp_peak(features(d), c) / MiB == pytest.approx(peak, abs=1)
    logged = parse_log((LAB / log).read_text()).activation_gib
    assert predict(d, c).budget.activation_bytes / GiB == pytest.approx(logged, abs=0.04)


PP = ROOT / "tests" / "fixtures" / "lab-vllm-0.26.0-h200x2" / "pp"


@pytest.mark.parametrize("log, model, partition, logged", [
    ("pp2-q8-e.log", "qwen3-8b", None, (0.84, 0.78)),  # the last stage keeps the residual in what it received
    ("pp2-l8-e-part.log", "llama-3.1-8b", "12,20", (0.88, 0.81)),  # llama.py drops the gate-up output first
])
def test_every_pipeline_stage_peaks_as_traced(log, model, partition, logged):
    """Each worker's own 'peak activation' (0.26.0, two H200s, eager, 8192 tokens) within 0.04 GiB: the first stage
    with the embedding-made residual, the last one hidden-size tensor fewer (Model Runner V2 keeps the received
    tensors from load, outside the profile) and with the sampler (1024 rows) on top of its forward. Llama's first
    stage traces to 0.875 (llama.py drops the gate-up output first), but the fitted per-width term stays the larger
    (0.91): the traced peaks only ever raise a figure."""
    from vrambudget.logparse import worker_budgets
    from vrambudget.parallel import plan_ranks

    text = (PP / log).read_text()
    d = deployment_from_log(parse_log(text), model)
    plans = plan_ranks(d, coefficients.load(d.rules.version, d.gpu.key, d.model.ref), d.pp, [d.gpu], partition)
    assert tuple(w.activation_gib for w in worker_budgets(text)) == logged
    for p, want in zip(plans, logged):
        assert p.prediction.budget.activation_bytes / GiB == pytest.approx(want, abs=0.04), p.rank.name
    first = plans[0].prediction.deployment
    traced = mlp_peak(features(first), coefficients.load(first.rules.version, first.gpu.key, first.model.ref))
    assert traced / GiB == pytest.approx(logged[0], abs=0.01)


@pytest.mark.parametrize("log, slack_mib, model", [
    ("load-q8.log", 2.09, "qwen3-8b"),
    ("load-q30.log", 1.13, Q30),
    ("load-nano.log", 102.82, str(ROOT / "tests" / "fixtures" / "models" / "nemotron-3-nano-30b-a3b")),
])
def test_what_the_allocator_holds_beyond_the_weights(log, slack_mib, model):
    """load_model recorded (benchmarks/lab/peak_snapshot.py, "phase": "load"): the blocks alive after loading hold
    this much beyond what was asked for them, the rest of segment model/allocator.py plans. Qwen3-8B's 2 MiB (its
    embedding and lm_head, 1,187 MiB each) and Qwen3-30B-A3B's 1 MiB leave their weights as logged; Nemotron-3 Nano's
    103 MiB are its 52 column- and 52 row-parallel projections (about 1 MiB each): with them its weights are planned
    0.07 GiB above the log, so its tensors are counted 0.09 GiB above the 58.83 GiB its parameters asked for (not
    traced yet)."""
    text = (LAB / log).read_text()
    m = re.search(r"SNAP load blocks \d+ allocated_mib ([0-9.]+) requested_mib ([0-9.]+) slack_mib ([0-9.]+)", text)
    allocated, requested, slack = map(float, m.groups())
    assert slack == slack_mib and allocated - requested == pytest.approx(slack, abs=0.05)  # each rounded to 0.1
    d = _deployment(log, model)
    weights = predict(d, coefficients.load(d.rules.version, d.gpu.key, d.model.ref)).budget.weights_bytes / GiB
    logged = parse_log(text).weights_gib
    if "nano" in log:
        assert weights - logged == pytest.approx(0.07, abs=0.01)
        assert requested / 1024 == pytest.approx(58.83, abs=0.01)
    else:
        assert weights == pytest.approx(logged, abs=0.01)
