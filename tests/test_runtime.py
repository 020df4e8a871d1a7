"""After startup (issue 9): the GDN prefill live set from vLLM's kernel sources against real OOM
lines, the lab's simulated-card startups, and what predict says for the mission's 4060 Ti."""

import json

from typer.testing import CliRunner

from vrambudget.arch import arch_from_config
from vrambudget.checkpoint import bundled_models
from vrambudget.cli import app
from vrambudget.logparse import parse_log
from vrambudget.probe import _stalled
from vrambudget.runtime import gdn_prefill_live_bytes, max_serving_gmu

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
    need = gdn_prefill_live_bytes(arch("qwen3.5-4b"), 2048)
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


def test_mission_predicts_the_gmu_above_which_a_long_prompt_ooms():
    r = runner.invoke(app, ["predict", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--mtp", "2", "--max-num-seqs", "8",
                            "--enable-prefix-caching", "--enforce-eager", "--vllm-version", "0.20.2", "--gmu", "0.97",
                            "--max-model-len", "auto", "--json"])
    out = json.loads(r.output)
    assert out["max_serving_gmu"] == 0.97 and out["runtime"]["serves"]
    names = [t["name"] for t in out["runtime"]["terms"]]
    assert names == ["GDN prefill live tensors", "MTP drafter chunk buffers", "allocator growth with the prompt"]
    hot = runner.invoke(app, ["predict", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--mtp", "2", "--max-num-seqs",
                              "8", "--enable-prefix-caching", "--enforce-eager", "--vllm-version", "0.20.2", "--gmu",
                              "0.99", "--max-model-len", "auto"])
    assert "MAY NOT SERVE" in hot.output and "highest GMU that serves it is 0.97" in hot.output


def test_max_serving_gmu_is_exact_to_the_byte():
    total, free, need = 16857746637, 16690000000, 150 * MiB
    g = max_serving_gmu(total, free, need)
    assert free - -(-total * g // 1) >= need and free - -(-total * (g + 0.01) // 1) < need
