"""vLLM's start checks that refuse a deployment at any max_model_len (issue 34), against the lab's refusals:
vLLM 0.26.0 on the H100 with vLLM's own batch defaults (tests/fixtures/lab-vllm-0.26.0-h100/defaults), each log
naming the Mamba cache blocks it found; and what predict, table, plan and serve-cmd answer about them."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrambudget.cli import _mtp_default, app
from vrambudget.units import GiB

runner = CliRunner()
LAB = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h100" / "defaults"
REFUSED = re.compile(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks \((\d+)\)")
AVAILABLE = re.compile(r"Available KV cache memory: ([0-9.]+) GiB")


def run(*a):
    return runner.invoke(app, _mtp_default(list(a)))


def predict_json(*a):
    r = run("predict", *a, "--json")
    return json.loads(r.output), r.exit_code


# (log, the predict flags that reproduce its startup): each was refused by vLLM's Mamba-block check
REFUSALS = {
    "awq16-g-mtp2.log": ["-m", "qwen3.5-9b-awq", "--gmu", "0.188371", "--mtp", "2", "--max-num-seqs", "256",
                         "--max-num-batched-tokens", "2048"],
    "q9-g24.log": ["-m", "qwen3.5-9b", "--gmu", "0.27468", "--max-num-seqs", "256", "--max-num-batched-tokens", "2048"],
    "q27-g-h100.log": ["-m", "qwen3.5-27b", "--gmu", "0.92", "--max-num-seqs", "1024",
                       "--max-num-batched-tokens", "8192"],
}


@pytest.mark.parametrize("log", sorted(REFUSALS))
def test_every_lab_refusal_is_predicted_with_its_blocks_within_the_band(log):
    text = (LAB / log).read_text()
    seqs, blocks = map(int, REFUSED.search(text).groups())
    avail = float(AVAILABLE.search(text).group(1))
    out, code = predict_json(*REFUSALS[log], "--gpu", "h100", "--vllm-version", "0.26.0", "--max-model-len", "auto",
                             "--compile-cache", "cold")
    chk = next(c for c in out["start_checks"] if c["check"] == "mamba_cache_blocks")
    assert code == 1 and not out["fits"] and not chk["passes"] and chk["value"] == seqs
    # vLLM's blocks are what its available memory holds; that memory lies inside the band the verdict states (the
    # activation peak's and the graph estimate's measured spreads), and the verdict is a clear no
    v = out["verdicts"]["starts"]
    assert blocks == int(avail * GiB) // out["bytes_per_block"] or abs(blocks - int(avail * GiB) // out[
        "bytes_per_block"]) <= 1  # the log's 0.01 GiB rounding
    truth_margin = avail * GiB - seqs * out["bytes_per_block"]
    lo, hi = v["band_bytes"]
    assert lo - 0.005 * GiB <= truth_margin <= hi + 0.005 * GiB, (lo / GiB, truth_margin / GiB, hi / GiB)
    assert v["answer"] == "no" and hi < 0
    assert chk["max_num_seqs_that_starts"] and f"--max-num-seqs {chk['max_num_seqs_that_starts']}" in chk["fix"]


def test_the_readme_main_command_is_refused_and_answered_with_the_fix():
    r = run("predict", "--gpu", "4060ti", "--mtp", "--gmu", "0.95")
    lines = r.output.splitlines()[1:]  # after the line naming the model, GPU and version
    assert r.exit_code == 1
    assert lines[0].startswith("Does not start at any max_model_len: vLLM refuses: \"max_num_seqs (256) exceeds")
    assert lines[1].startswith("Fix: --max-num-seqs ") and "--enforce-eager" in lines[1]
    n = int(re.search(r"--max-num-seqs (\d+)", lines[1]).group(1))
    assert lines[2].startswith(f"With --max-num-seqs {n}: Longest context: ")
    out, _ = predict_json("--gpu", "4060ti", "--mtp", "--gmu", "0.95")
    assert out["start_refusals"][0]["check"] == "mamba_cache_blocks" and out["with_fix"]["max_num_seqs"] == n
    assert out["max_model_len_ceiling_restart"] == 0 < out["with_fix"]["max_model_len_ceiling_restart"]
    # fewer seqs shrink the graphs and the sampler, so more blocks than the refusal's (vLLM 0.33: 21 at 256 seqs, the
    # sampler's 14 B a logit over 256 rows and 116 graphs); the fix is the most that still leaves one block each
    assert n > out["start_refusals"][0]["limit"]
    fixed, _ = predict_json("--gpu", "4060ti", "--mtp", "--gmu", "0.95", "--max-num-seqs", str(n))
    assert not fixed["start_refusals"] and fixed["num_blocks"] >= n


def test_no_check_where_vllm_makes_none():
    eager, _ = predict_json("--gpu", "4060ti", "--mtp", "--gmu", "0.95", "--enforce-eager")
    dense, _ = predict_json("-m", "qwen3-8b", "--gpu", "rtx4090", "--gmu", "0.92")
    old, _ = predict_json("--gpu", "4060ti", "--mtp", "--gmu", "0.95", "--vllm-version", "0.19.1")
    # FlashInfer without TRT-LLM decode resolves to PIECEWISE with a drafter: no FULL graphs, no check
    fi, _ = predict_json("--gpu", "4060ti", "--mtp", "--gmu", "0.95", "--attention-backend", "FLASHINFER",
                         "--vllm-version", "0.26.0")
    for out in (eager, dense, old, fi):
        assert not [c for c in out["start_checks"] if c["check"] == "mamba_cache_blocks"]


def test_the_fix_starts_by_the_model_on_both_boots():
    fix = predict_json("--gpu", "4060ti", "--mtp", "--gmu", "0.95")[0]["with_fix"]["max_num_seqs"]
    out, code = predict_json("--gpu", "4060ti", "--mtp", "--gmu", "0.95", "--max-model-len", "auto",
                             "--max-num-seqs", str(fix))
    assert code == 0 and out["starts_first_boot"] and out["starts_restart"] and not out["start_refusals"]


def test_batched_tokens_below_seqs_and_the_lowered_default():
    out, code = predict_json("-m", "qwen3-8b", "--gpu", "h100", "--max-num-seqs", "512", "--max-num-batched-tokens",
                             "256", "--max-model-len", "4096")
    assert code == 1 and out["start_refusals"][0]["check"] == "batched_tokens_below_seqs"
    assert "must be greater than or equal to max_num_seqs (512)" in out["start_refusals"][0]["vllm_message"]
    low, _ = predict_json("-m", "qwen3-8b", "--gpu", "h100", "--max-num-batched-tokens", "256", "--max-model-len", "4096")
    assert low["inputs"]["max_num_seqs"] == 256 and not low["start_refusals"]  # vLLM lowers a defaulted one


def test_align_mode_block_above_the_batched_tokens_is_refused_before_0_27():
    args = ["-m", "qwen3.5-27b", "--gpu", "h100", "--enable-prefix-caching", "--max-num-batched-tokens", "512",
            "--max-num-seqs", "8", "--max-model-len", "4096"]
    old, _ = predict_json(*args, "--vllm-version", "0.26.0")
    new, _ = predict_json(*args, "--vllm-version", "0.27.1")
    assert old["start_refusals"][0]["check"] == "align_block_size" and "block_size (" in old["start_refusals"][0][
        "vllm_message"]
    assert not [c for c in new["start_checks"] if c["check"] == "align_block_size"]


def test_table_plan_and_serve_cmd_lower_the_default_and_say_so():
    t = json.loads(run("table", "--gpu", "4060ti", "--gmu-min", "0.95", "--gmu-max", "0.95", "--json").output)
    row = t["rows"][0]
    assert row["max_num_seqs"]["graphs+MTP2"] < 256 and row["ceilings"]["graphs+MTP2"] > 0
    assert row["max_num_seqs"]["eager"] == 256
    text = run("table", "--gpu", "4060ti", "--gmu-min", "0.95", "--gmu-max", "0.95").output
    assert "@" in text and "exceeds the Mamba cache blocks" in text
    s = run("serve-cmd", "--gpu", "4060ti", "--mtp", "--gmu", "0.95")
    n = int(re.search(r"--max-num-seqs (\d+)", s.stdout).group(1))
    assert s.exit_code == 0 and n < 256 and "vLLM's default 256 exceeds the Mamba cache blocks" in s.output
    given = run("serve-cmd", "--gpu", "4060ti", "--mtp", "--gmu", "0.95", "--max-num-seqs", "256")
    assert given.exit_code != 0 or "--max-num-seqs 256" not in given.stdout  # a refused given value is not written
    p = json.loads(run("plan", "--gpu", "4060ti", "--target-context", "32k", "--json").output)
    chosen = next(o for o in p["options"] if o["label"] == p["chosen"])
    assert chosen["max_num_seqs"] is not None and str(chosen["max_num_seqs"]) in p["command"]["argv"]


def test_public_vllm_0_29_refusal_on_an_rtx_pro_6000_and_the_start_beside_it():
    """Two boots of Qwen3.8-27B on one RTX PRO 6000 with vLLM 0.29.0 (at0rp1d0i-cell/peephole, public logs):
    vLLM's default 1024 seqs refused with 635 blocks, 256 seqs started with 652. predict, from each log's own flags,
    refuses the first with vLLM's message, a limit within 5 blocks and a fix that starts there (at most 635), and
    plans the second's 652 blocks within 3: its consumed memory (weights + non-torch + the V2 runner's buffers, the
    encoder runner's inputs_embeds among them) 51.65 GiB as logged; its peak + graphs 0.21 GiB below the log's."""
    from vrambudget import coefficients
    from vrambudget.comparison import deployment_from_log
    from vrambudget.hardware import catalog as gpus
    from vrambudget.logparse import parse_log
    from vrambudget.prediction import predict

    public = Path(__file__).parent / "fixtures" / "public-logs"
    refused = parse_log((public / "c-rtxpro6000-qwen3.8-27b-seqs1024-v0.29.0.log").read_text())
    started = parse_log((public / "c-rtxpro6000-qwen3.8-27b-v0.29.0.log").read_text())
    assert refused.outcome == "mamba_blocks" and refused.mamba_blocks == 635 and started.outcome == "started"
    card = gpus.lookup("rtx-pro-6000")  # 94.97 GiB, as the started boot's log states it
    d = deployment_from_log(refused, model="qwen3.8-27b", gpu=card)
    assert d.max_num_seqs == 1024 and d.runner == "v2" and d.with_vision
    p = predict(d, coefficients.load(d.rules.version))
    (chk,) = p.refusals
    assert chk.value == 1024 and abs(chk.limit - 635) <= 5 and p.ceiling == 0
    assert 600 <= chk.max_num_seqs_that_starts <= 635
    d = deployment_from_log(started, model="qwen3.8-27b", gpu=card)
    p = predict(d, coefficients.load(d.rules.version))
    assert p.starts and abs(p.plan.num_blocks - 652) <= 3
    b = p.budget
    assert abs((b.weights_bytes + b.non_torch_bytes + b.runner_buffers_bytes) / GiB - 51.65) <= 0.02
    assert abs(b.available_kv_bytes / GiB - started.available_kv_gib) < 0.11


@pytest.mark.parametrize("log", sorted(str(p.relative_to(LAB.parent)) for p in [*LAB.glob("*.log"),
                                                                              *(LAB.parent / "families").glob("*.log")]))
def test_every_default_flag_startup_gets_the_right_start_verdict(log):
    """The 23 startups of the defaults / families session (vLLM 0.26.0, H100, vLLM's own batch defaults): predict,
    from each log's flags, says it starts exactly where vLLM started, and NO where vLLM refused (the Mamba-block
    check) or ran out of memory allocating the KV cache (Llama 4's block tables)."""
    import sys

    from vrambudget.comparison import compare_file

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    import accuracy

    path = LAB.parent / log
    cmp = compare_file(path, model=accuracy.lab_model(path))
    assert cmp.prediction.starts == (cmp.facts.outcome == "started"), (log, cmp.facts.outcome, cmp.prediction.reasons)
