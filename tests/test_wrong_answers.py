"""Answers that were wrong with exit 0 in the held-out round of issue 44, each now right or refused."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.fit import load_samples, fit
from vrambudget import coefficients
from vrambudget.logparse import parse_log

FIX = Path(__file__).parent / "fixtures"


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_budget_above_the_free_memory_is_refused_with_the_gmu_that_starts():
    # RTX 3090 at GMU 1.0: vLLM's first check compares its budget with the free memory at start; the context estimate
    # (0.25 GiB, observed in public, -0.11 GiB at most smaller) cannot make up 0.25 GiB: refused, exit 1
    for version in ("0.26.0", "0.33.0"):
        r = run("predict", "--gpu", "RTX 3090", "-m", "qwen3-8b", "--gmu", "1.0", "--max-model-len", "16k",
                "--vllm-version", version)
        lines = r.output.splitlines()[1:]
        assert r.exit_code == 1, r.output
        assert lines[0].startswith('Does not start at any max_model_len: vLLM refuses: "Free memory on device '
                                   "(23.44/23.69 GiB) on startup is less than desired GPU memory utilization")
        assert lines[1].startswith("Fix: --gpu-memory-utilization 0.98 or lower")
        assert lines[2].startswith("With --gpu-memory-utilization 0.98: Longest context: 40,960")
        assert "pass --max-model-len 0" not in r.output
    j = json.loads(run("predict", "--gpu", "RTX 3090", "-m", "qwen3-8b", "--gmu", "1.0", "--json").output)
    assert j["start_refusals"][0]["check"] == "free_memory_below_budget"
    assert j["with_fix"]["gpu_memory_utilization"] == 0.98 and j["with_fix"]["starts_restart"]


def test_a_log_cut_mid_number_is_not_read_as_that_number(tmp_path):
    text = (FIX / "lab-vllm-0.33.0-h200" / "p16" / "startup-01.log").read_text()
    cut = text[: text.index("the estimated maximum model length is 28288") + len("the estimated maximum model length is 2")]
    f = parse_log(cut)
    assert f.estimated_max_model_len is None and f.cut_last_line.endswith("model length is 2")
    path = tmp_path / "cut.log"
    path.write_text(cut)
    r = run("explain", str(path))
    assert "ceiling at this GMU is 2" not in r.output and "the log ends mid-line" in r.output
    assert parse_log(text).estimated_max_model_len == 28288  # whole, it is read


def test_a_simulated_cards_context_is_not_fitted():
    """The p16 records ran an RTX 4060 Ti on an H200: the 'CUDA context' their logs state is the H200's total less
    what the blocker left (about 124 GiB), not a context; fit keeps the card's own."""
    samples = load_samples([FIX / "lab-vllm-0.33.0-h200" / "p16" / "records.jsonl"])
    assert samples and all(s.simulated for s in samples)
    assert all(s.cuda_context_gib is None or s.cuda_context_gib > 100 for s in samples)
    res = fit(samples, coefficients.load("0.33"))
    assert "cuda_context_bytes" not in res.changed
