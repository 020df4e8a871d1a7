"""The real probe runs (vLLM 0.20.2, H200, dummy weights, fp8 KV, MTP 2, eager), kept as fixtures:
parsers on their logs, the search they took, and the refit against them."""

import json
from pathlib import Path

import pytest

from vrambudget import coefficients
from vrambudget.budget import available_kv
from vrambudget.features import Features
from vrambudget.fit import fit, load_samples
from vrambudget.logparse import parse_log
from vrambudget.profiles import read_jsonl
from vrambudget.units import GiB

from .conftest import FIXTURES

RUNS = FIXTURES / "probe-vllm-0.20.2-h200"
CASES = {"p08": (119680, 0.87), "p9b": (95408, 1.81)}


@pytest.mark.parametrize("run", sorted(CASES))
def test_probe_found_vllms_own_autofit_within_three_startups(run):
    recs = read_jsonl(RUNS / run / "records.jsonl")
    startups = [r for r in recs if r.get("kind") != "verify"]
    verify = [r for r in recs if r.get("kind") == "verify"]
    ceiling, avail = CASES[run]
    assert len(startups) <= 3
    assert startups[-1]["outcome"] == "started" and startups[-1]["inputs"]["max_model_len"] == ceiling
    assert verify and verify[-1]["verify"]["ok"] and verify[-1]["verify"]["prompt_tokens"] > 0.97 * ceiling - 20
    # vLLM's own auto-fit on the same flags (separate startup with --max-model-len -1)
    model = "qwen3.5-0.8b" if run == "p08" else "qwen3.5-9b"
    auto = parse_log((RUNS / f"autofit-{model}.log").read_text())
    assert auto.auto_fit_to == ceiling and auto.available_kv_gib == avail


def test_parsers_on_vllm_serve_logs():
    f = parse_log((RUNS / "p9b" / "startup-01.log").read_text())
    assert f.outcome == "kv_too_small" and f.estimated_max_model_len == 95408
    assert f.vllm_version == "0.20.2" and f.block_size == 1072 and f.padding == [(3, 12.5)]
    assert f.args["max_model_len"] == 96480 and f.args["speculative_config"]["num_speculative_tokens"] == 2
    ok = parse_log((RUNS / "p9b" / "startup-02.log").read_text())
    assert ok.outcome == "started" and ok.kv_cache_tokens == 95408 and ok.concurrency == 1.0
    assert (ok.weights_gib, ok.activation_gib, ok.non_torch_gib, ok.available_kv_gib) == (17.26, 0.28, 0.22, 1.81)


def test_refit_brings_available_kv_within_0_05_gib():
    paths = [RUNS / "p08" / "records.jsonl", RUNS / "p9b" / "records.jsonl"]
    samples = load_samples(paths)
    assert len(samples) == 2 and all(s.available_kv_gib for s in samples)
    res = fit(samples, coefficients.load("0.20"))
    assert max(abs(e) for _, e in res.after) <= 0.05
    assert "activation_base_bytes" in res.changed and "runtime_growth_per_prompt_token_bytes" in res.changed
    # and the refitted coefficients reproduce each record from its stored features alone
    c = coefficients.Coefficients(res.coefficients, ["fit"])
    for p in paths:
        for r in read_jsonl(p):
            if r.get("outcome") == "started":
                pred = available_kv(Features(**r["features"]), c) / GiB
                assert abs(pred - r["facts"]["available_kv_gib"]) <= 0.05


def test_records_are_one_json_object_per_line():
    for p in RUNS.rglob("records.jsonl"):
        for line in p.read_text().splitlines():
            rec = json.loads(line)
            assert rec["schema"] == 1
            if rec.get("kind") != "verify":
                assert {"inputs", "vllm_version", "driver_version", "gpu_name", "facts", "outcome", "log"} <= set(rec)


def test_fit_cli_writes_a_profile_that_predict_then_uses():
    from typer.testing import CliRunner

    from vrambudget.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["fit", str(RUNS / "p9b" / "records.jsonl"), "--gpu", "h200", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert Path(out["profile"]).is_file() and out["worst_error_after_gib"] <= 0.05
    args = ["--model", "tests/fixtures/models/qwen3.5-9b", "--gpu", "h200", "--gmu", "0.14", "--kv-cache-dtype", "fp8",
            "--mtp", "2", "--enforce-eager", "--max-num-seqs", "8", "--max-num-batched-tokens", "2048",
            "--vllm-version", "0.20.2", "--max-model-len", "auto", "--json"]
    pred = json.loads(runner.invoke(app, ["predict", *args]).output)
    assert abs(pred["available_kv_bytes"] / GiB - 1.81) <= 0.05
    assert pred["max_model_len_ceiling"] == 95408  # the probed (and vLLM auto-fit) ceiling


def test_graph_mode_probe_found_the_warm_ceiling_vllm_auto_fits_to():
    recs = [r for r in read_jsonl(RUNS / "g3" / "records.jsonl") if r.get("kind") != "verify"]
    assert [(r["outcome"], r["facts"]["compile"], r["retry_of_cold_compile"]) for r in recs] == \
        [("kv_too_small", "cold", False), ("started", "warm", True)]
    assert recs[1]["inputs"]["max_model_len"] == 169376
    verify = [r for r in read_jsonl(RUNS / "g3" / "records.jsonl") if r.get("kind") == "verify"]
    assert verify[0]["verify"]["ok"] and verify[0]["verify"]["prompt_tokens"] == 165972
    cold = parse_log((RUNS / "autofit-graphs-boot1.log").read_text())
    warm = parse_log((RUNS / "autofit-graphs-boot2.log").read_text())
    assert (cold.compile, cold.auto_fit_to) == ("cold", 65392) and (warm.compile, warm.auto_fit_to) == ("warm", 169376)


def test_compile_cache_key_follows_max_model_len():
    g1 = parse_log((RUNS / "g1" / "startup-01.log").read_text())
    g2a = parse_log((RUNS / "g2" / "startup-01.log").read_text())
    g2b = parse_log((RUNS / "g2" / "startup-02.log").read_text())
    assert g1.args["max_model_len"] == g2b.args["max_model_len"] == 65392 != g2a.args["max_model_len"]
    assert g2a.compile_key != g1.compile_key == g2b.compile_key
    assert (g2a.compile, g2b.compile) == ("cold", "warm")
    assert (g2a.activation_gib, g2b.activation_gib) == (2.08, 0.3)


@pytest.mark.parametrize("cache,logged", [("cold", 1.29), ("warm", 3.08)])
def test_bundled_prediction_of_graph_mode_cold_and_warm(cache, logged):
    from vrambudget.hardware import catalog as gpus
    from vrambudget.model.checkpoint import resolve_model
    from vrambudget.deployment import Flags, resolve
    from vrambudget.prediction import predict
    from vrambudget.vllm_rules import rules_for

    d = resolve(resolve_model("qwen3.5-9b"), gpus.lookup("h200"), rules_for("0.20.2"),
                Flags(gpu_memory_utilization=0.15, kv_cache_dtype="fp8", num_speculative_tokens=2, max_num_seqs=8,
                      max_num_batched_tokens=2048, max_model_len=-1, compile_cache=cache))
    p = predict(d, coefficients.load("0.20"))
    assert abs(p.budget.available_kv_bytes / GiB - logged) <= 0.02
    # the logged ceilings (cold 65,392 = 61 blocks of 1072, warm 169,376 = 158): a prediction within 0.02 GiB
    # may land one 1072-token block either side (a block is 0.02 GiB here); the plan from the logged
    # available memory is exact (test_compile_cache_key_follows_max_model_len, tests/test_kv_plan.py)
    assert abs(p.ceiling - {"cold": 65392, "warm": 169376}[cache]) <= 1072


def test_refit_on_every_real_record_stays_within_0_05_gib():
    samples = load_samples(sorted(RUNS.glob("*/records.jsonl")))
    res = fit(samples, coefficients.load("0.20"))
    assert len(res.after) == 5 and max(abs(e) for _, e in res.after) <= 0.05
    assert {"cold_compile_vocab_hidden_factor", "warm_compile_per_token_hidden_bytes"} <= set(res.changed)


def test_a_second_fit_keeps_the_first_and_a_copy(tmp_path):
    from typer.testing import CliRunner

    from vrambudget.cli import app

    out = tmp_path / "profile.json"
    r1 = CliRunner().invoke(app, ["fit", str(RUNS / "p9b" / "records.jsonl"), "--gpu", "h200", "--out", str(out)])
    assert r1.exit_code == 0, r1.output
    first = json.loads(out.read_text())
    r2 = CliRunner().invoke(app, ["fit", str(RUNS / "g3" / "records.jsonl"), "--gpu", "h200", "--out", str(out)])
    assert r2.exit_code == 0, r2.output
    second = json.loads(out.read_text())
    assert "non_torch_eager_bytes" in first["coefficients"]  # only the eager run measures it
    assert second["coefficients"]["non_torch_eager_bytes"] == first["coefficients"]["non_torch_eager_bytes"]
    assert "warm_compile_per_token_hidden_bytes" in second["coefficients"] and len(second["fitted_from"]) == 2
    assert json.loads((tmp_path / "profile.previous.json").read_text()) == first
