"""After startup (issue 9): the GDN prefill live set from vLLM's kernel sources against real OOM
lines, the lab's simulated-card startups, and what predict says for the mission's 4060 Ti."""

import json

from typer.testing import CliRunner

from vrambudget.families import arch_from_config
from vrambudget.model.checkpoint import bundled_models
from vrambudget.cli import app
from vrambudget.logparse import parse_log
from vrambudget.probe.session import _stalled
from vrambudget.runtime import eager_warmup_bytes, gdn_prefill_live_bytes, max_serving_gmu

from .conftest import FIXTURES

MiB = 1 << 20
LAB = FIXTURES / "lab-vllm-0.20.2-h100"
runner = CliRunner()


def arch(name):
    return arch_from_config(bundled_models()[name]["config"], name)


def test_gdn_live_set_reproduces_club3090_oom_allocations():
    """Qwen3.6-27B has Qwen3.5-27B's GDN shape (48 value heads, 16 key heads, 128 x 128).
    club-3090 docs/CLIFFS.md: single 3090, 4128 batched tokens, OOM at chunk_o.py empty_like(v)
    'Tried to allocate 50.00 MiB'; issue #838 (TP=2, 8192 batched tokens): 'Tried to allocate 96.00 MiB'
    in chunk_gated_delta_rule_fwd_h (the h tensor)."""
    a = arch("qwen3.5-27b")
    o = 4128 * 48 * 128 * 2  # one T x H x V bf16 tensor, as the kernel allocates o
    assert 48 * MiB < o <= 50 * MiB and -(-o // (2 * MiB)) * 2 * MiB == 50 * MiB  # 2 MiB allocator rounding
    h_tp2 = (8192 // 64) * 24 * 128 * 128 * 2
    assert h_tp2 == 96 * MiB
    # the whole live set at 4128 tokens, TP=1: club-3090 sums its tensors to "~500 MiB"
    assert 380 * MiB < gdn_prefill_live_bytes(a, 4128, tp=1) < 500 * MiB
    assert gdn_prefill_live_bytes(a, 4128, tp=2) * 2 == gdn_prefill_live_bytes(a, 4128, tp=1)


def test_lab_margins_bracket_the_runtime_need():
    """H100 simulating a 4060 Ti, Qwen3.5-4B, 2048 batched tokens: with 16 and 64 MiB left outside the
    budget vLLM ran out of memory right after allocating the KV cache; with 300 MiB it started."""
    outcomes = {}
    for run, margin in (("sim4060", 16), ("sim4060b", 64), ("sim4060c", 300)):
        f = parse_log((LAB / run / "startup-02.log").read_text())
        outcomes[margin] = f.outcome
        assert f.available_kv_gib == 0.65 and f.requested_gib == 9.11  # the simulated card's budget
    assert outcomes == {16: "oom_graph_capture", 64: "oom_graph_capture", 300: "started"}
    need = eager_warmup_bytes(arch("qwen3.5-4b").mlp_width, 2048)  # the eager kernel warmup after the KV
    assert 64 * MiB < need <= 300 * MiB


def test_stall_at_the_align_mode_ceiling_is_detected():
    """The 300 MiB run started at 35,904 tokens (1.00x) with prefix caching, and its 35,169-token verify
    request was never scheduled ('Running: 0 reqs, Waiting: 1 reqs' for minutes)."""
    log = (LAB / "sim4060c" / "startup-02.log").read_text()
    first_wait = log.index("Waiting: 1 reqs")
    assert _stalled(log, 120) and not _stalled(log[: first_wait + 200], 120)


def test_in_process_runtime_growth_is_small():
    text = (LAB / "qwen3.5-4b_kv-fp8_eager_gmu0.3_prompt30000.log").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("LAB prompt 30000 ok"))
    v = line.split()
    before, peak = int(v[v.index("reserved_before") + 1]), int(v[v.index("max_reserved") + 1])
    assert peak - before == 2 * MiB


def test_mission_terms_on_the_real_4060ti():
    """The mission's 4060 Ti (9B AWQ, fp8 KV so FLASHINFER, eager, MTP 2, 2048 batched tokens): two FlashInfer
    workspaces at the first request (the target's attention group and the drafter's, as the lab measured: p5/, p6/);
    on Ada vLLM 0.20.2 runs no FlashInfer autotune after the KV cache (model_executor/warmup/kernel_warmup.py: compute
    capability >= 9.0), so the profiled peak is released before serving and a long prompt allocates a chunk's
    forward again; and no warning of an eager warmup failure, which only Hopper and Blackwell risk."""
    base = ["predict", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--mtp", "2", "--max-num-seqs", "8",
            "--enable-prefix-caching", "--enforce-eager", "--vllm-version", "0.20.2", "--max-model-len", "auto"]
    out = json.loads(runner.invoke(app, base + ["--gmu", "0.92", "--json"]).output)
    terms = {t["name"]: t for t in out["runtime"]["terms"]}
    assert list(terms) == ["FLASHINFER, 2 builders: workspace (first request)",
                           "a prefill chunk's forward (its peak was released)", "GDN prefill live tensors",
                           "MTP drafter chunk buffers", "allocator growth with the prompt"]
    assert terms["FLASHINFER, 2 builders: workspace (first request)"]["bytes"] == 2 * 394 * MiB
    assert terms["FLASHINFER, 2 builders: workspace (first request)"]["stage"] == "first"
    held = [t["name"] for t in out["runtime"]["held_after_startup"]]
    assert held == ["profiled peak released after startup", "sampler warmup kept after startup",
                    "kept by startup beyond the budget"]
    assert not [w for w in out["warnings"] if "kernel warmup" in w]
    hot = runner.invoke(app, base + ["--gmu", "0.97"]).output
    assert "First request: NO" in hot and "Way out where FlashInfer's workspaces decide it" in hot
    assert "--attention-backend TRITON_ATTN" in hot


def test_simulated_4060ti_mission_deployment_with_flashinfer():
    """probe --simulate-gpu rtx4060ti, 9B AWQ, fp8, eager, MTP 2, FLASHINFER forced: GMU 0.97 and 0.95
    started and then ran out of memory at the first request asking for one 394 MiB FlashInfer workspace;
    0.91 served 32,096 tokens (vLLM's NVML peak 0.93 GiB beyond its budget). predict: 0.95 GiB needed."""
    from vrambudget import coefficients
    from vrambudget.hardware import catalog as gpus
    from vrambudget.model.checkpoint import resolve_model
    from vrambudget.deployment import Flags, resolve
    from vrambudget.prediction import predict
    from vrambudget.vllm_rules import rules_for

    s5, v5 = _sim("p5")
    s6, v6 = _sim("p6")
    assert [s["outcome"] for s in s5 + s6] == ["started"] * 4
    assert not v5[0.97]["ok"] and not v5[0.95]["ok"] and v6[0.91]["ok"]
    for n in ("01", "02"):
        assert "Tried to allocate 394.00 MiB" in (LAB / "p5" / f"startup-{n}.log").read_text()

    def at(g):
        card = gpus.simulated(gpus.lookup("rtx4060ti"), gpus.lookup("h100"))  # what ran: the H100's chip
        d = resolve(resolve_model(str(FIXTURES / "models" / "qwen3.5-9b-awq")), card,
                    rules_for("0.20.2"), Flags(gpu_memory_utilization=g, kv_cache_dtype="fp8", enforce_eager=True,
                                                num_speculative_tokens=2, max_num_seqs=8, max_num_batched_tokens=2048,
                                                max_model_len=32768, enable_prefix_caching=True,
                                                attention_backend="FLASHINFER", free_at_start_bytes=s5[0]["simulated"]["free_bytes"]))
        return predict(d, coefficients.load("0.20"), prompt_tokens=32096)

    p95, p91 = at(0.95), at(0.91)
    assert not p95.runtime.serves and p91.runtime.serves and p91.max_serving_gmu in (0.91, 0.92, 0.93, 0.94)
    assert p95.verdicts["first request"].answer == "no" and p91.verdicts["prompt"].answer in ("yes", "at the edge")
    free_line = next(x for x in (LAB / "p6" / "probe.txt").read_text().splitlines() if x.startswith("simulating"))
    held_free = float(free_line.split("down to ")[1].split(" GiB")[0]) * 1024 * MiB
    vllm_peak = v6[0.91]["gpu_used_peak"] - (81559 * MiB - held_free)  # ctx.log: memory.total
    measured = vllm_peak - 552402944 - p91.budget.requested_bytes
    assert abs(p91.runtime.need_bytes - measured) <= 0.25 * 1024 * MiB
    assert p95.runtime.margin_bytes < p91.runtime.need_bytes <= p91.runtime.margin_bytes


def _lab_prompt(name, n):
    line = next(ln for ln in (LAB / name).read_text().splitlines() if ln.startswith(f"LAB prompt {n} ok"))
    v = line.split()
    return int(v[v.index("max_reserved") + 1]) - int(v[v.index("reserved_before") + 1])


def test_forced_backends_on_the_h100():
    """Qwen3.5-9B, fp8 KV, eager, 8192 batched tokens, FLA GDN prefill, one 60,000-token prompt, with
    FA3 (vLLM's pick), TRITON_ATTN and FLASHINFER forced: none adds to the profiled peak; FlashInfer's
    394 MiB workspace arrives with the first request, which the backend data carries."""
    from vrambudget.hardware.facts import backend_named

    avail = {b: parse_log((LAB / f"{b}.log").read_text()).available_kv_gib for b in ("e1", "e2", "e3")}
    assert avail == {"e1": 21.56, "e2": 21.56, "e3": 21.56}
    assert _lab_prompt("e1.log", 60000) == 0 and _lab_prompt("e3.log", 60000) == 2 * MiB
    fi = _lab_prompt("e2.log", 60000)
    assert abs(fi - backend_named("FLASHINFER").runtime_bytes(eager=True)) <= 4 * MiB
    assert backend_named("TRITON_ATTN").runtime_bytes(eager=True) == 0


def _sim(run):
    recs = [json.loads(x) for x in (LAB / run / "records.jsonl").read_text().splitlines()]
    starts = [r for r in recs if r.get("kind") != "verify"]
    verifies = {r["gmu"]: r["verify"] for r in recs if r.get("kind") == "verify"}
    return starts, verifies


def _lab_deployment(gmu, eager):
    from vrambudget.hardware import catalog as gpus
    from vrambudget.model.checkpoint import resolve_model
    from vrambudget.deployment import Flags, resolve
    from vrambudget.vllm_rules import rules_for

    # as the lab ran it: an RTX 3090's budget on an H100 (its chip: FA3, the FlashInfer autotune), vLLM seeing the
    # free memory the probe's blocker left (records: simulated.free_bytes)
    card = gpus.simulated(gpus.lookup("rtx3090"), gpus.lookup("h100"))
    return resolve(resolve_model(str(FIXTURES / "models" / "qwen3.5-9b")), card, rules_for("0.20.2"),
                   Flags(gpu_memory_utilization=gmu, kv_cache_dtype="fp8", enforce_eager=eager, max_num_seqs=4,
                         max_num_batched_tokens=8192, max_model_len=65536, attention_backend="FLASH_ATTN",
                         free_at_start_bytes=25082718647))


def test_simulated_3090_runtime_oom_that_startup_would_certify():
    """probe --simulate-gpu rtx3090 (eager, 64,209-token verify): GMU 0.97 started and then ran out of
    memory serving; the probe moved to 0.96, which served. predict says 0.97 starts and does not serve, and puts
    0.96 at the edge: its band holds the measured outcome (the model alone is one GMU step cautious there)."""
    from vrambudget import coefficients
    from vrambudget.prediction import predict

    starts, verifies = _sim("p4")
    assert [s["outcome"] for s in starts] == ["started", "started"]
    assert verifies[0.97]["runtime_oom"] and not verifies[0.97]["ok"] and verifies[0.96]["ok"]
    c = coefficients.load("0.20")
    hot, ok = (predict(_lab_deployment(g, True), c, prompt_tokens=64209) for g in (0.97, 0.96))
    assert hot.starts and not hot.runtime.serves and hot.verdicts["prompt"].answer == "no"
    assert ok.verdicts["prompt"].answer == "at the edge" and ok.verdicts["prompt"].margin_bytes + \
        ok.verdicts["prompt"].high_bytes >= 0
    assert hot.max_serving_gmu in (0.95, 0.96)


def test_simulated_3090_graphs_and_the_eager_warmup():
    """Graph mode at GMU 0.97 served the same prompt (NVML: vLLM's peak was 0.31 GiB beyond its budget): the
    measured margin lies inside the verdict's band. Eager at 0.98 failed in the kernel warmup after the KV cache was
    allocated (the FlashInfer autotune on the H100's chip), which predict warns of (and not at 0.97, which started)."""
    from vrambudget import coefficients
    from vrambudget.prediction import predict

    c = coefficients.load("0.20")
    _, verifies = _sim("p3")
    v = verifies[0.97]
    free_line = next(x for x in (LAB / "p3" / "probe.txt").read_text().splitlines() if x.startswith("simulating"))
    held_free = float(free_line.split("down to ")[1].split(" GiB")[0]) * 1024 * MiB  # free after the blocker
    nvml_total = 81559 * MiB  # ctx.log: memory.total
    p = predict(_lab_deployment(0.97, False).with_(compile_cache="warm"), c, prompt_tokens=64209)
    vllm_peak = v["gpu_used_peak"] - (nvml_total - held_free)
    measured = vllm_peak - 552402944 - p.budget.requested_bytes  # less the H100's CUDA context (ctx.log)
    assert v["ok"] and 0.2 * 1024 * MiB < measured < p.runtime.margin_bytes
    pv = p.verdicts["prompt"]
    truth = p.runtime.margin_bytes - measured  # what was left at the peak
    assert pv.answer in ("yes", "at the edge") and pv.margin_bytes + pv.low_bytes <= truth <= pv.margin_bytes + pv.high_bytes
    f = parse_log((LAB / "p2" / "startup-01.log").read_text())
    assert f.outcome == "oom_graph_capture" and "Tried to allocate 192.00 MiB" in (LAB / "p2" / "startup-01.log").read_text()
    warn = [w for w in predict(_lab_deployment(0.98, True), c).warnings if "kernel warmup" in w]
    assert warn and not [w for w in predict(_lab_deployment(0.97, True), c).warnings if "kernel warmup" in w]
