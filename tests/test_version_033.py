"""vLLM 0.33.0 as users install it (torch 2.14.0): the lab's `vllm serve` startups (tests/fixtures/lab-vllm-0.33.0-*,
plans h200x4-0.33.0-lab and h100-0.33.0-probe) read and reproduced term by term. Figures are the logs' own."""

import re
from pathlib import Path

import pytest

from vrambudget.budget import features

from vrambudget.graphs import cudagraph_sizes
from vrambudget.comparison import compare_file, deployment_from_log
from vrambudget.logparse import parse_log
from vrambudget.profiles import read_jsonl

ROOT = Path(__file__).resolve().parent / "fixtures"
H200 = ROOT / "lab-vllm-0.33.0-h200"
H100 = ROOT / "lab-vllm-0.33.0-h100"
# the host's model folders (the plans' "models") and the checkpoints they were written from
MODELS = {"/tmp/models/qwen3-8b": "qwen3-8b", "/tmp/models/llama-3.1-8b": "llama-3.1-8b",
          "/tmp/models/qwen3-30b-a3b": "tests/fixtures/models/qwen3-30b-a3b",
          "/tmp/models/gpt-oss-20b": "tests/fixtures/models/gpt-oss-20b",
          "/tmp/models/deepseek-v3-5l": "tests/fixtures/models/lab-deepseek-v3-5l",
          "/tmp/models/qwen3.5-9b": "tests/fixtures/models/qwen3.5-9b",
          # issue 46's startups (plans h200x4-0.33.0-issue46c, -46d): models cut to fewer layers
          "/tmp/models/kimi-k2-2l": "tests/fixtures/models/lab-kimi-k2-2l",
          "/tmp/models/mimo-v2-flash-6l": "tests/fixtures/models/lab-mimo-v2-flash-6l",
          "/tmp/models/deepseek-v3.2-4l": "tests/fixtures/models/lab-deepseek-v3.2-4l",
          "/tmp/models/deepseek-v3.2-5l": "tests/fixtures/models/lab-deepseek-v3.2-5l",
          "/tmp/models/glm-5-4l": "tests/fixtures/models/lab-glm-5-4l"}
# sparse MLA (its own bounds: tests/test_family_sparse_mla_mimo.py) is checked on its own
OWN = ("dsv32", "glm5")
BOOTS = sorted(p for p in [*H200.rglob("*.log"), *H100.rglob("startup-01.log")]
               if p.parent.name != "vision" and not p.name.startswith(OWN)
               and parse_log(p.read_text()).available_kv_gib is not None)
# MLA's CUDA-graph estimate (graphs.mla_graph_estimate) leaves -0.039..+0.054 GiB on the startups it was not fitted on
MLA_BOUND = {"dsv3-s32.log": 0.07, "dsv3-s192.log": 0.07, "dsv3-s96.log": 0.06}
DEFAULTS = [p for p in BOOTS if p.parent.name == "defaults" and "-d-" in p.name]


def model_of(path: Path) -> str | None:
    return MODELS.get(str(parse_log(path.read_text()).args.get("model")))


def test_the_lab_is_what_the_issue_asks():
    assert len(BOOTS) >= 12 and len(DEFAULTS) >= 4
    from vrambudget.logparse import literal_args

    for p in DEFAULTS:  # `vllm serve` with its own batch defaults: nothing but the model, dummy weights, a port
        line = re.search(r"non-default args: (\{.*\})", p.read_text()).group(1)
        args = literal_args(line)
        assert set(args) <= {"model", "model_tag", "port", "skip_tokenizer_init", "load_format"}, (p.name, args)
        assert parse_log(p.read_text()).args["max_num_batched_tokens"] == 8192  # serve's default on an 80+ GB card
    smoke = (H200 / "smoke.log").read_text()
    assert "torch 2.14.0+cu130 nccl (2, 30, 7) triton 3.8.0 vllm 0.33.0" in smoke


@pytest.mark.parametrize("path", BOOTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_startup_is_reproduced_within_a_few_hundredths(path):
    c = compare_file(path, model=model_of(path))
    rows = {r[0]: r for r in c.rows}
    # the V2 graph estimator, fitted over 28 to 62 layers (benchmarks/fit_vllm033.py), leaves -0.053..+0.041 GiB
    bound = MLA_BOUND.get(path.name, 0.055)
    for name, logged, _, err in c.rows:
        if logged is not None and name != "requested (GMU budget)":
            assert abs(err) <= bound, (name, logged, err)
    assert abs(rows["available KV cache"][3]) <= bound


@pytest.mark.parametrize("seqs, logged, m, n", [(96, 2.39, 2, 1), (128, 3.23, 2, 1), (152, 3.82, 2, 1),
                                                (192, 4.77, 1, 2), (64, 1.14, 1, 1)])
def test_mla_split_buffers_counted_as_the_allocator_keeps_them(seqs, logged, m, n):
    """FA3's split buffer of the largest FULL batch counted twice from 74 to 160 seqs (the batch's hidden-size
    tensors out of the small pool, its absorbed query inside a 20 MiB segment), the second's twice past 160: 128
    seqs logged 1 GiB above the rule before it (m = 1); 96 and 152 held out (plan h200x4-0.33.0-issue46i)."""
    from vrambudget.graphs import mla_graph_estimate

    path = H200 / "moe-tokens" / f"dsv3-s{seqs}.log"
    c = compare_file(path, model=model_of(path))
    rows = {r[0]: r for r in c.rows}
    f = c.prediction.budget.features
    k = c.prediction.coefficients
    _, _, n_full, largest = f.graph_sizes
    est, _ = mla_graph_estimate(f, k)
    one = f.mla_split_bytes_per_seq
    rest = (k["cudagraph_v2_mla_base_bytes"] + (n_full - 1) * 2**20
            + k["cudagraph_v2_mla_per_full_token_head_bytes"] * (largest + f.second_full) * f.mla_heads)
    assert abs(est - rest - m * one * largest - n * one * f.second_full) < 1
    assert rows["CUDA graph estimate"][1] == logged and abs(rows["CUDA graph estimate"][3]) <= 0.06


def test_a_033_log_states_its_terms_the_new_way():
    f = parse_log((H200 / "defaults" / "q8-d-cold.log").read_text())
    # 'total consumed (from mem_get_info): 15.98GiB' beside 'Total non KV cache memory: 18.08GiB'
    assert (f.weights_gib, f.consumed_gib, f.non_kv_gib) == (15.27, 15.98, 18.08)
    assert f.activation_gib == 2.10 and f.non_torch_gib == 0.71  # the transient peak, what stayed beyond the weights
    # Model Runner V2 logs no 'Estimated CUDA graph memory': its estimate is the GMU line's (0.9200 -> 0.9133 of
    # 139.8 GiB) and the pool line's '0.45 GiB (actual), 0.94 GiB (estimated)'; the throwaway capture before the
    # budget ('took 0.63 GiB') is not the pool the graphs keep
    assert f.cudagraph_estimate_gib == 0.94 and f.cudagraph_actual_gib == 0.45
    assert f.vllm_version == "0.33.0" and f.compile == "cold" and f.outcome == "started"
    refused = parse_log((H200 / "p16" / "startup-01.log").read_text())  # no pool line: the GMU line alone
    assert refused.outcome == "kv_too_small" and refused.cudagraph_estimate_gib == 0.94
    assert refused.cudagraph_actual_gib is None and refused.estimated_max_model_len == 28288


def test_cold_and_warm_boots_differ_where_the_compile_peak_decides():
    cold, warm = (parse_log((H200 / "p16" / f"startup-0{n}.log").read_text()) for n in (1, 2))
    assert (cold.compile, warm.compile) == ("cold", "warm") and (cold.activation_gib, warm.activation_gib) == (2.01, 0.25)
    # at 1024 seqs the dummy sampler's peak (14 B a logit) is above the compile's: the same either way
    c8, w8 = (parse_log((H200 / "defaults" / f"q8-d-{k}.log").read_text()) for k in ("cold", "warm"))
    assert c8.available_kv_gib == w8.available_kv_gib == 109.6


def _captured(text: str) -> dict[str, int]:
    """The graphs each capture bar of a log counts (the real capture after the KV cache: the larger total)."""
    out: dict[str, int] = {}
    for label, total in re.findall(r"Capturing ((?:prefill |decode )?CUDA graphs \((?:FULL|PIECEWISE)\)):[^\n|]*\|"
                                   r"[^|]*\| *\d+/(\d+)", text):
        out[label] = max(out.get(label, 0), int(total))
    return out


@pytest.mark.parametrize("name", ["defaults/q8-d-cold.log", "defaults/q8-s64-cold.log", "graphs/q8-s256-cold.log",
                                  "graphs/q8-ngram-cold.log", "graphs/q9-s256-mtp2-cold.log", "p16/startup-04.log",
                                  "defaults/gptoss20-d-cold.log"])
def test_capture_sizes_are_vllm_033s(name):
    path = H200 / name
    d = deployment_from_log(parse_log(path.read_text()), model_of(path))
    n_pw, _, n_full, _ = features(d).graph_sizes
    bars = _captured(path.read_text())
    assert (bars["CUDA graphs (PIECEWISE)"], bars["CUDA graphs (FULL)"]) == (n_pw, n_full)
    if d.spec_tokens and d.speculative_method == "mtp":  # the drafter's prefill graphs: as many as the target's
        assert (bars["prefill CUDA graphs (PIECEWISE)"], bars["prefill CUDA graphs (FULL)"]) == (n_pw, n_full)


def test_v1_keeps_its_rounded_sizes():
    # Model Runner V1 (0.26.0's hybrids): 256 seqs + MTP 2 capture 49 sizes to 498, FULL the same
    # (lab-vllm-0.26.0-h100/defaults/awq16-g-mtp2.log 'PIECEWISE=49 (largest=498), FULL=49 (largest=498)')
    pw, full = cudagraph_sizes(256, 2, 2048)
    assert (len(pw), max(pw), len(full), max(full)) == (49, 498, 49, 498)
    pw, full = cudagraph_sizes(64, 2, 2048)  # awq16-g-mtp2-s64: PIECEWISE=42 (largest=384), FULL=26 (largest=192)
    assert (len(pw), max(pw), len(full), max(full)) == (42, 384, 26, 192)


def test_the_main_commands_probe_verifies_within_two_percent_of_the_prediction():
    """The README's main command on a simulated RTX 4060 Ti (H100), probed with vLLM's own fit: the first boot
    (cold) fitted 29,376 tokens, where the plan for its logged budget says 29,376; the restart (warm) fitted 81,056,
    verified with a 79,418-token prompt, where predict said 82,144 (+1.3 %)."""
    first = [r for r in read_jsonl(H100 / "p16auto" / "records.jsonl") if r.get("kind") != "verify"]
    assert first[0]["facts"]["compile"] == "cold" and first[0]["facts"]["max_model_len"] == 29376
    warm = read_jsonl(H100 / "p16auto-warm" / "records.jsonl")
    start = [r for r in warm if r.get("kind") != "verify"][0]
    verify = [r for r in warm if r.get("kind") == "verify"][0]
    assert start["facts"]["compile"] == "warm" and start["facts"]["max_model_len"] == 81056
    assert verify["verify"]["ok"] and verify["max_model_len"] == 81056
    text = (H100 / "p16auto-warm" / "probe.txt").read_text()
    predicted = int(re.search(r"predicted ([\d,]+)\)", text).group(1).replace(",", ""))
    assert abs(predicted - 81056) / 81056 <= 0.02
    for n, fitted in ((1, 29376), (1, 81056)):
        log = H100 / ("p16auto" if fitted == 29376 else "p16auto-warm") / f"startup-0{n}.log"
        cmp = compare_file(log)
        assert abs(cmp.prediction.ceiling - fitted) / fitted <= 0.02
