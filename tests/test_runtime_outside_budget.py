"""What lies outside vLLM's budget (issue 23), against the lab's probe runs on a simulated RTX 4060 Ti (vLLM 0.20.2,
an H100, 9B AWQ layout, fp8 KV, MTP 2, CUDA graphs, expandable segments: lab-vllm-0.20.2-h100/outside) and the
real-card facts of the mission's deployment."""

import json

import pytest
from typer.testing import CliRunner

from vrambudget.cli import app
from vrambudget.commands.options import environment
from vrambudget.errors import UserError
from vrambudget.logparse import parse_log
from vrambudget.vllm_rules import cudagraph_mode

from .conftest import FIXTURES

OUT = FIXTURES / "lab-vllm-0.20.2-h100" / "outside"
GiB = 1 << 30
runner = CliRunner()
SIM = ["predict", "-m", str(FIXTURES / "models" / "qwen3.5-9b-awq"), "-g", "rtx4060ti", "--simulated-on", "h100",
       "--free-memory", "15.56GiB", "--gmu", "0.95", "--vllm-version", "0.20.2", "--kv-cache-dtype", "fp8", "--mtp", "2",
       "--max-num-seqs", "8", "--enable-prefix-caching", "--max-model-len", "185000", "--prompt-tokens", "120000"]


def records(run):
    recs = [json.loads(x) for x in (OUT / run / "records.jsonl").read_text().splitlines()]
    return [r for r in recs if r.get("kind") != "verify"], [r for r in recs if r.get("kind") == "verify"]


def predict_json(*extra):
    r = runner.invoke(app, SIM + list(extra) + ["--json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.output)


def test_cudagraph_mode_resolves_as_the_logs_say():
    """FlashInfer without TRT-LLM captures only single-token decode, so MTP's 3-token decode falls back to PIECEWISE
    (the log's own warning, and 9 PIECEWISE graphs captured); Triton attention keeps FULL_AND_PIECEWISE (8 + 5)."""
    fi = (OUT / "fi-graphs" / "startup-02.log").read_text()
    tri = (OUT / "triton-graphs" / "startup-02.log").read_text()
    assert "setting cudagraph_mode=PIECEWISE" in fi and "Profiling CUDA graph memory: PIECEWISE=9 (largest=48)" in fi
    assert "Profiling CUDA graph memory: PIECEWISE=8 (largest=48), FULL=5 (largest=24)" in tri
    assert cudagraph_mode(False, 2, "UNIFORM_SINGLE_TOKEN_DECODE") == "PIECEWISE"
    assert cudagraph_mode(False, 0, "UNIFORM_SINGLE_TOKEN_DECODE") == "FULL_AND_PIECEWISE"
    assert cudagraph_mode(False, 2, "ALWAYS") == "FULL_AND_PIECEWISE" and cudagraph_mode(True, 2, "ALWAYS") == "NONE"


@pytest.mark.parametrize("log,state,logged", [("fi-graphs/startup-01.log", "cold", 1.85),
                                              ("fi-graphs/startup-02.log", "warm-jit", 3.53),
                                              ("triton-graphs/startup-01.log", "cold", 1.85),
                                              ("triton-graphs/startup-02.log", "warm", 3.62),
                                              ("triton-warm-jit/startup-01.log", "warm-jit", 3.53)])
def test_three_boot_states_within_0_05(log, state, logged):
    """A host's first boot (torch.compile and Triton caches cold: 2.07 GiB peak), a boot that loads the compiled
    graphs but compiles their Triton kernels again (0.38: the warm retry of a fresh boot, and a boot after
    ~/.triton was removed), and a fully warm boot (0.30): explain reads each state from the log and predicts the
    available KV memory within 0.05 GiB."""
    from vrambudget.comparison import compare, deployment_from_log

    f = parse_log((OUT / log).read_text())
    d = deployment_from_log(f)
    assert d.compile_cache == state and f.available_kv_gib == logged
    row = dict((t, (lg, pr)) for t, lg, pr, _ in compare(f, d).rows)["available KV cache"]
    assert abs(row[1] - logged) <= 0.05


def test_the_flashinfer_state_is_not_a_plain_serves():
    """The simulated 4060 Ti with FLASHINFER: two 394 MiB workspaces arrive with the first request (measured +0.764
    GiB of NVML memory); on a fully warm restart that does not fit (the run the issue describes ran out of memory on
    the second buffer), on the warm-jit restart the lab ran it just fits (0.014 GiB to spare: served), and a
    120,000-token prompt does not fit either way (it ran out of memory)."""
    _, verifies = records("fi-graphs")
    v = verifies[0]["verify"]
    first, long_ = v["stages"][0], v["stages"][1]
    assert first["ok"] and not long_["ok"] and v["failed_stage"] == "long_prompt"
    assert abs((first["gpu_used_peak"] - first["gpu_used_before"]) / GiB - 0.764) < 0.001
    warm = predict_json("--attention-backend", "FLASHINFER", "--compile-cache", "warm")
    jit = predict_json("--attention-backend", "FLASHINFER", "--compile-cache", "warm-jit")
    terms = {t["name"]: t for t in warm["runtime"]["terms"]}
    assert terms["FLASHINFER, 2 builders: workspace (first request)"]["bytes"] == 2 * 394 << 20
    assert warm["verdicts_restart"]["first request"]["answer"] == "no"
    assert jit["verdicts_restart"]["first request"]["answer"] in ("at the edge", "yes")
    assert jit["verdicts_restart"]["first request"]["margin_bytes"] >= 0
    for p in (warm, jit):
        assert p["verdicts_restart"]["prompt"]["answer"] == "no"
    text = runner.invoke(app, SIM + ["--attention-backend", "FLASHINFER"]).output
    assert "First request: NO" in text and "A 120,000-token prompt: NO" in text
    assert "--attention-backend TRITON_ATTN" in text and "VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE=" in text


def test_triton_attention_serves_the_long_prompt():
    """The same state with TRITON_ATTN served the first request, the 120,000-token prompt (+0.234 GiB) and a request
    after it; predict says yes to each."""
    _, verifies = records("triton-graphs")
    v = verifies[0]["verify"]
    assert v["ok"] and [s["kind"] for s in v["stages"]] == ["first_request", "long_prompt", "after"]
    p = predict_json("--attention-backend", "TRITON_ATTN")
    assert [p["verdicts_restart"][k]["answer"] for k in ("starts", "first request", "prompt")] == ["yes"] * 3


def test_the_eager_autotune_is_a_hopper_and_blackwell_fact():
    from vrambudget.hardware.catalog import lookup
    from vrambudget.hardware.facts import flashinfer_autotunes

    assert [flashinfer_autotunes(lookup(g)).value for g in ("h100", "rtx5090", "rtx4060ti", "rtx3090")] == [1, 1, 0, 0]


def test_real_card_facts_are_reproduced_or_at_the_edge():
    """The real RTX 4060 Ti 16 GB (vLLM 0.20.2, 9B AWQ, fp8, prefix caching, 8 seqs, FLASHINFER by vLLM's rules):
    (1) GMU 0.95, graphs, MTP 2, 108,768: crashed on the first boot, started on the restart and served 250-token
    requests; (2) eager, no MTP, 239,616 at GMU 0.98: served; (3) the same at 0.99: started. predict gets (1)'s two
    boots right and never says 'no' to what the card did: where it says 'at the edge', it names the unknown (the
    card's CUDA context, or what vLLM keeps after startup there, measured on an H100 only)."""
    base = ["predict", "--gpu", "4060ti", "--vllm-version", "0.20.2", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8",
            "--enable-prefix-caching", "--prompt-tokens", "250", "--json"]
    one = json.loads(runner.invoke(app, base + ["--gmu", "0.95", "--mtp", "2", "--max-model-len", "108768"]).output)
    assert not one["starts_first_boot"] and one["starts_restart"]
    two = json.loads(runner.invoke(app, base + ["--gmu", "0.98", "--enforce-eager", "--max-model-len", "239616"]).output)
    three = json.loads(runner.invoke(app, base + ["--gmu", "0.99", "--enforce-eager", "--max-model-len", "239616"]).output)
    for verdict in (one["verdicts_restart"]["first request"], two["verdicts"]["first request"],
                    three["verdicts"]["starts"]):
        assert verdict["answer"] != "no"
        assert verdict["answer"] == "yes" or verdict["deciding"]


def test_environment_values_are_read_and_checked():
    assert environment({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128"}) == \
        {"expandable_segments": True}
    assert environment({"VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE": "268435456"}) == {"flashinfer_workspace_bytes": 268435456}
    for bad in ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments"}, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:yes"},
                {"VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE": "256MiB"}):
        with pytest.raises(UserError):
            environment(bad)
