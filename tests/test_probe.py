"""The probe end to end against a simulated vLLM (tests/sim_vllm.py): real processes, real HTTP,
real-format logs from a hidden ground truth, and every fault the probe must classify."""

import json
import math
import os
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrambudget import coefficients
from vrambudget.hardware import catalog as gpus
from vrambudget.model.checkpoint import resolve_model
from vrambudget.cli import app
from vrambudget.deployment import Flags, resolve
from vrambudget.errors import UserError
from vrambudget.kv.planner import plan_kv
from vrambudget.prediction import layout_for
from vrambudget.output.render import probe_summary_text
from vrambudget.probe.session import ProbeOptions, Prober
from vrambudget.profiles import read_jsonl
from vrambudget.units import GiB
from vrambudget.vllm_rules import rules_for

SIM = [sys.executable, str(Path(__file__).parent / "sim_vllm.py"), "serve"]
BASE = {"total_gib": 79.18, "weights_gib": 16.80, "mtp_gib": 0.46, "activation_gib": 0.40, "non_torch_gib": 0.22,
        "cold_extra_gib": 1.6, "warm_extra_gib": 0.03, "cudagraph_gib": 0.12, "model_profile": "qwen3.5-9b"}


def deployment(gmu=0.25, eager=True, k=2, mnbt=2048):
    return resolve(resolve_model("qwen3.5-9b"), gpus.lookup("h100"), rules_for("0.20.2"),
                   Flags(gpu_memory_utilization=gmu, kv_cache_dtype="fp8", enforce_eager=eager,
                         num_speculative_tokens=k, max_num_seqs=8, max_num_batched_tokens=mnbt))


def truth_ceiling(truth, d, compile_state=None):
    act = truth["activation_gib"] + {"cold": truth["cold_extra_gib"], "warm": truth["warm_extra_gib"], None: 0}[compile_state]
    cg = 0 if d.enforce_eager else truth["cudagraph_gib"]
    weights = truth["weights_gib"] + (truth["mtp_gib"] if d.mtp else 0)
    avail = math.ceil(truth["total_gib"] * GiB * d.gmu) - int((weights + act + truth["non_torch_gib"]) * GiB) - cg * GiB
    return plan_kv(layout_for(d), int(avail), 1, d.rules).ceiling


@pytest.fixture
def sim(tmp_path, monkeypatch):
    def make(**changes):
        faults = changes.pop("faults", {})
        truth = {**BASE, **changes, "faults": faults, "state_dir": str(tmp_path / "state")}
        path = tmp_path / "truth.json"
        path.write_text(json.dumps(truth))
        monkeypatch.setenv("SIMVLLM_TRUTH", str(path))
        return truth
    return make


def prober(tmp_path, d, **opts):
    opts.setdefault("auto_fit", False)  # the fixed-length search; test_probe_auto_fit.py drives vLLM's own fit
    o = ProbeOptions(vllm_cmd=SIM, runs_dir=tmp_path / "runs", startup_timeout=opts.pop("timeout", 60),
                     poll_seconds=0.02, **opts)
    lines = []
    return Prober(d, coefficients.load("0.20"), o, report=lines.append), lines


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for init to reap it does not: it holds nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def starts(truth):
    return [json.loads(x) for x in (Path(truth["state_dir"]) / "starts.log").read_text().splitlines()]


def test_bisect_finds_the_true_ceiling_in_three_startups_and_verifies(sim, tmp_path):
    truth = sim()  # activation 0.40 GiB where the model predicts 0.27: the prediction is too high
    d = deployment()
    p, lines = prober(tmp_path, d)
    out = p.bisect()
    assert out["ceiling"] == truth_ceiling(truth, d) and out["ceiling"] < out["predicted"]
    assert out["startups"] <= 3
    assert [a["outcome"] for a in out["attempts"]][0] == "kv_too_small"
    assert out["attempts"][-1]["verify"] is True
    recs = read_jsonl(tmp_path / "runs" / "records.jsonl")
    assert [r["outcome"] for r in recs if r.get("kind") != "verify"] == [a["outcome"] for a in out["attempts"]]
    assert any("verify: completed" in x for x in lines)
    # every server and its child process are gone: the probe stopped the whole process group
    for s in starts(truth):
        for pid in (s["pid"], s["child"]):
            assert not running(pid)


def test_prediction_too_low_jumps_up_with_the_logged_kv_memory(sim, tmp_path):
    truth = sim(activation_gib=0.10, weights_gib=16.5)
    d = deployment()
    p, _ = prober(tmp_path, d)
    out = p.bisect()
    assert out["ceiling"] == truth_ceiling(truth, d) > out["predicted"]
    assert out["startups"] <= 3 and all(a["outcome"] == "started" for a in out["attempts"])


def test_cold_compile_failure_is_retried_once_and_recorded(sim, tmp_path):
    truth = sim(faults={"fail_first_cold_boot": True})
    d = deployment(eager=False)
    p, lines = prober(tmp_path, d)
    out = p.bisect()
    recs = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") != "verify"]
    assert recs[0]["outcome"] == "oom_profiling" and recs[0]["facts"]["compile"] == "cold"
    assert recs[1]["retry_of_cold_compile"] is True
    assert out["ceiling"] == truth_ceiling(truth, d, "warm")
    assert any("retrying once" in x for x in lines)


def test_graph_mode_every_new_length_boots_cold_and_is_retried_warm(sim, tmp_path):
    truth = sim()
    d = deployment(gmu=0.27, eager=False)
    p, _ = prober(tmp_path, d)
    out = p.bisect()
    assert out["ceiling"] == truth_ceiling(truth, d, "warm") > truth_ceiling(truth, d, "cold")
    recs = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") != "verify"]
    assert recs[0]["facts"]["compile"] == "cold" and recs[0]["outcome"] == "kv_too_small"
    assert recs[1]["retry_of_cold_compile"] and recs[1]["facts"]["compile"] == "warm"
    assert recs[-1]["outcome"] == "started" and len(recs) <= 4


def test_runtime_oom_lowers_the_ceiling(sim, tmp_path):
    d = deployment()
    limit = 60000
    truth = sim(faults={"runtime_oom_above": limit})
    p, _ = prober(tmp_path, d, max_startups=10)
    out = p.bisect()
    assert truth_ceiling(truth, d) > limit
    assert 0 < out["ceiling"] and out["ceiling"] * 0.98 - 16 <= limit
    verifies = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") == "verify"]
    assert verifies[0]["verify"]["ok"] is False and verifies[0]["verify"]["server_died"]
    assert any(v["verify"]["ok"] and v["max_model_len"] == out["ceiling"] for v in verifies)
    failed = [v["max_model_len"] for v in verifies if not v["verify"]["ok"]]
    assert min(failed) - out["ceiling"] <= 1072  # the ceiling is within one block of what failed


def test_runtime_oom_of_the_margin_lowers_the_gmu(sim, tmp_path):
    """A length that starts at GMU 0.99 but whose prompt needs more than the 0.28 GiB left outside the
    budget: the probe records the runtime OOM and moves to the highest GMU predict says serves."""
    from vrambudget.prediction import predict

    d = deployment(gmu=0.99, mnbt=8192)
    sim(faults={"runtime_need_gib": 0.6})
    p, lines = prober(tmp_path, d, max_startups=6, max_model_len=32768)
    out = p.bisect()
    pred = predict(d.with_(max_model_len=32768), coefficients.load("0.20"), prompt_tokens=32096)
    assert pred.starts and not pred.runtime.serves and pred.max_serving_gmu == 0.98
    assert out["runtime_oom_gmus"] == [0.99] and out["gmu"] == 0.98 and out["ceiling"] == 32768
    verifies = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") == "verify"]
    assert [(v["gmu"], v["verify"]["ok"]) for v in verifies] == [(0.99, False), (0.98, True)]
    assert verifies[0]["verify"]["server_died"] and any("runtime OOM at GMU 0.99" in x for x in lines)
    # the record says which stage failed and why: here the very first request (a short prompt, as a user's
    # benchmark sends it) already needs more than is left outside the budget
    assert verifies[0]["verify"]["failed_stage"] == "first_request"
    assert "out of memory" in verifies[0]["verify"]["failed_why"] or verifies[0]["verify"]["runtime_oom"]
    assert verifies[1]["verify"]["failed_stage"] is None


def test_target_stops_on_a_runtime_oom(sim, tmp_path):
    d = deployment(gmu=0.99, mnbt=8192)
    sim(faults={"runtime_need_gib": 200.0})  # no GMU leaves that much outside the budget
    p, _ = prober(tmp_path, d, max_startups=4)
    out = p.target(20000)
    assert out["failed"] == "runtime_oom" and len(out["runtime_oom_gmus"]) == 1 and out["startups"] == 1


@pytest.mark.parametrize("fault,outcome", [({"crash": True}, "crashed"), ({"oom_profiling": True}, "oom_profiling"),
                                           ({"insufficient_free": True}, "insufficient_free_memory")])
def test_failures_are_classified(sim, tmp_path, fault, outcome):
    sim(faults=fault)
    p, _ = prober(tmp_path, deployment())
    out = p.bisect()
    assert out["failed"] == outcome and out["startups"] == 1


def test_hang_times_out_and_is_stopped(sim, tmp_path):
    truth = sim(faults={"hang": True})
    p, _ = prober(tmp_path, deployment(), timeout=0.8)
    out = p.bisect()
    assert out["failed"] == "timed_out"
    for s in starts(truth):
        assert not running(s["pid"]) and not running(s["child"])


def test_target_mode_finds_smallest_gmu(sim, tmp_path):
    truth = sim()
    d = deployment()
    p, _ = prober(tmp_path, d, verify=False)
    out = p.target(65536)
    g = out["min_gmu"]
    assert truth_ceiling(truth, d.with_(gmu=g)) >= 65536 > truth_ceiling(truth, d.with_(gmu=round(g - 0.01, 2)))


def test_port_in_use_and_missing_vllm_are_one_line_errors(sim, tmp_path):
    sim()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        p, _ = prober(tmp_path, deployment(), port=s.getsockname()[1])
        with pytest.raises(UserError, match="port .* is in use"):
            p.bisect()
    o = ProbeOptions(vllm_cmd=["definitely-not-vllm-xyz", "serve"], runs_dir=tmp_path / "r2")
    with pytest.raises(UserError, match="is vLLM installed"):
        Prober(deployment(), coefficients.load("0.20"), o, report=lambda _: None).bisect()


def test_cli_probe_records_and_refits_a_profile_predict_then_uses(sim, tmp_path):
    truth = sim()
    runs = tmp_path / "cli-runs"
    cmd = " ".join(SIM)
    args = ["--model", "qwen3.5-9b", "--gpu", "h100", "--gmu", "0.25", "--kv-cache-dtype", "fp8", "--mtp", "2",
            "--enforce-eager", "--max-num-seqs", "8", "--max-num-batched-tokens", "2048", "--vllm-version", "0.20.2"]
    r = CliRunner().invoke(app, ["probe", *args, "--vllm-cmd", cmd, "--runs-dir", str(runs), "--json",
                                      "--poll-seconds", "0.02"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)  # --json: the object alone, no progress lines on either stream
    assert r.stderr == ""
    assert out["fit"]["worst_error_after_gib"] <= 0.05 < out["fit"]["worst_error_before_gib"]
    pred = json.loads(CliRunner().invoke(app, ["predict", *args, "--max-model-len", "auto", "--json"]).stdout)
    assert pred["max_model_len_ceiling"] == out["ceiling"] == truth_ceiling(truth, deployment())


def test_max_startups_stops_with_a_summary(sim, tmp_path):
    sim(activation_gib=0.10, weights_gib=16.5)  # prediction too low: needs a second startup
    p, _ = prober(tmp_path, deployment(), max_startups=1)
    out = p.bisect()
    assert out["failed"] == "max_startups_reached" and out["startups"] == 1


def test_target_mode_steps_down_when_the_prediction_is_conservative(sim, tmp_path):
    truth = sim(activation_gib=0.05, weights_gib=16.3)  # ~0.7 GiB less than predicted: spare KV memory
    d = deployment()
    p, _ = prober(tmp_path, d)
    out = p.target(131072)
    g = out["min_gmu"]
    assert truth_ceiling(truth, d.with_(gmu=g)) >= 131072 > truth_ceiling(truth, d.with_(gmu=round(g - 0.01, 2)))
    assert out["startups"] <= 4 and out["attempts"][0]["outcome"] == "started"


def test_a_reused_runs_dir_keeps_every_earlier_log_and_record(sim, tmp_path):
    sim()
    for _ in range(2):
        p, _ = prober(tmp_path, deployment(), verify=False)
        p.bisect()
    logs = sorted((tmp_path / "runs").glob("startup-*.log"))
    recs = read_jsonl(tmp_path / "runs" / "records.jsonl")
    assert len(logs) == len(recs) == len({r["log"] for r in recs}) >= 4


FAKE_BLOCKER = ("import sys\nprint('READY', int(sys.argv[1]), 85017493504, flush=True)\n"
                "open(sys.argv[1] and __import__('os').environ['BLOCKER_PIDFILE'], 'w').write(str(__import__('os').getpid()))\n"
                "sys.stdin.read()\n")


def test_simulated_card_and_multi_turn_verify(sim, tmp_path, monkeypatch):
    """--simulate-gpu: a blocker (here a stand-in that holds nothing) is started before the first vLLM,
    vLLM gets the GMU that gives the small card's budget on the big GPU, the verify runs a long prompt
    then a multi-turn session, every record says it was simulated, and the blocker is gone at the end."""
    truth = sim(total_gib=79.18)
    script = tmp_path / "blocker.py"
    script.write_text(FAKE_BLOCKER)
    pidfile = tmp_path / "blocker.pid"
    monkeypatch.setenv("BLOCKER_PIDFILE", str(pidfile))
    card = gpus.lookup("3090")
    d = resolve(resolve_model("qwen3.5-9b"), gpus.lookup("h100"), rules_for("0.20.2"),
                Flags(gpu_memory_utilization=0.95, kv_cache_dtype="fp8", enforce_eager=True, max_num_seqs=8,
                      max_num_batched_tokens=2048))
    d = d.with_(gpu=card)
    p, lines = prober(tmp_path, d, simulate_free_bytes=card.total_bytes - 300 * 2**20, real_total_bytes=85017493504,
                      real_context_bytes=552402944, blocker_cmd=[sys.executable, str(script)], turn_tokens=20000,
                      max_turns=3)
    out = p.bisect()
    assert out["ceiling"] > 0 and any("simulating" in ln for ln in lines)
    gmu_arg = starts(truth)[0]["argv"][starts(truth)[0]["argv"].index("--gpu-memory-utilization") + 1]
    assert abs(math.ceil(85017493504 * float(gmu_arg)) - math.ceil(card.total_bytes * 0.95)) < 64  # the card's budget
    recs = read_jsonl(tmp_path / "runs" / "records.jsonl")
    assert all(r["simulated"]["free_bytes"] == card.total_bytes - 300 * 2**20 for r in recs if "simulated" in r)
    verify = [r for r in recs if r.get("kind") == "verify"][-1]["verify"]
    kinds = [s["kind"] for s in verify["stages"]]
    assert kinds == ["first_request", "long_prompt", "after", "multi_turn"] and verify["ok"]
    first = verify["stages"][0]
    assert first["prompt_tokens"] == 200 and first["max_tokens"] == 250  # as a user's benchmark sends it
    turns = verify["stages"][3]["turns"]
    assert [t["prompt_tokens"] for t in turns][:2] == [20000, 40000]  # the context grows turn by turn
    pid = int(pidfile.read_text())
    assert not running(pid)


def test_multi_turn_runtime_oom_fails_the_verify(sim, tmp_path):
    """A session that OOMs once 50,000 prompt tokens were served in all (the long prompt passes, a later
    turn dies): the verify fails in its multi-turn stage and the ceiling comes down."""
    truth = sim(faults={"runtime_oom_after_tokens": 50000})
    d = deployment()
    p, lines = prober(tmp_path, d, max_startups=10, turn_tokens=10000, max_turns=6, verify_fraction=0.3)
    out = p.bisect()
    verifies = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") == "verify"]
    failed = [v["verify"] for v in verifies if not v["verify"]["ok"]]
    assert failed and failed[0]["stages"][0]["ok"] and failed[0]["stages"][-1]["kind"] == "multi_turn"
    assert failed[0]["runtime_oom"] and failed[0]["stages"][-1]["turns"][-1]["runtime_oom"]
    assert any("verify turn" in ln for ln in lines)
    assert truth_ceiling(truth, d) > out.get("ceiling", 0)


def test_mamba_block_refusal_is_retried_with_the_blocks_vllm_names(sim, tmp_path):
    # vLLM's default max_num_seqs (1024 on an H100) on a hybrid: lowered up front to what the model predicts
    # starts (253); the simulated vLLM profiles a larger peak (2.7 GiB, not 0.40), has fewer blocks, refuses with
    # their number, and the probe goes on with exactly that many
    truth = sim(activation_gib=2.7)
    d = resolve(resolve_model("qwen3.5-9b"), gpus.lookup("h100"), rules_for("0.20.2"),
                Flags(gpu_memory_utilization=0.3, kv_cache_dtype="fp8", max_num_batched_tokens=2048))
    assert d.max_num_seqs == 1024 and not d.max_num_seqs_given
    p, lines = prober(tmp_path, d, verify=False)
    assert p.d.max_num_seqs == 253 and "--max-num-seqs 253" in lines[0]
    out = p.bisect()
    recs = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") != "verify"]
    i = next(i for i, r in enumerate(recs) if r["outcome"] == "mamba_blocks")
    blocks = recs[i]["facts"]["mamba_blocks"]
    assert 0 < blocks < 253 and recs[i + 1]["retry_of_mamba_blocks"] is True
    argv = starts(truth)[i + 1]["argv"]
    assert argv[argv.index("--max-num-seqs") + 1] == str(blocks)
    assert out["max_num_seqs"] == blocks and out["max_num_seqs_asked"] == 1024
    assert [a["outcome"] for a in out["attempts"]].count("mamba_blocks") == 1
    assert out["attempts"][i + 1]["outcome"] == "started" and out["ceiling"] >= out["attempts"][i + 1]["max_model_len"]
    assert any(f"retrying with --max-num-seqs {blocks}" in x for x in lines)
    assert f"start vLLM with --max-num-seqs {blocks}" in probe_summary_text(out)


def test_pipeline_stages_are_probed_as_one_engine(sim, tmp_path, monkeypatch):
    """Qwen3-8B over two pipeline stages on the simulated vLLM: the last stage's peak (2.5 GiB, its sampler) leaves
    it fewer KV blocks than the first, and the engine takes the fewest. The probe finds that engine's ceiling from
    the log's KV cache tokens (the first worker's 'Available KV cache memory' alone would say 40,960), and records
    the first worker's share (18 layers of 36, 2 workers): the worker whose figures the log prints."""
    from vrambudget.parallel import ranks, stage_deployment

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    truth = sim(model_profile="qwen3-8b", weights_gib=15.27, mtp_gib=0.0, activation_gib=0.84,
                pp_activation_gib=[0.84, 2.5], non_torch_gib=0.07)
    d = resolve(resolve_model("qwen3-8b"), gpus.lookup("h100"), rules_for("0.20.2"),
                Flags(gpu_memory_utilization=0.15, enforce_eager=True, max_num_seqs=8,
                      max_num_batched_tokens=2048)).with_(pp=2)
    requested = math.ceil(truth["total_gib"] * GiB * 0.15)
    blocks = []
    for r in ranks(d, 2, [d.gpu]):
        sd = stage_deployment(d, r, 2)
        avail = requested - (truth["weights_gib"] / 2 + truth["pp_activation_gib"][r.pp_rank] + 0.07) * GiB
        blocks.append(plan_kv(layout_for(sd), int(avail), 1, sd.rules).num_blocks)
    engine = min(blocks) * layout_for(d).block_size
    assert blocks[1] < blocks[0] and engine < 40_960
    p, _ = prober(tmp_path, d)
    out = p.bisect()
    assert out["ceiling"] == engine
    assert all("--pipeline-parallel-size" in s["argv"] for s in starts(truth))
    recs = [r for r in read_jsonl(tmp_path / "runs" / "records.jsonl") if r.get("kind") != "verify"]
    assert {(r["features"]["layers"], r["features"]["workers"]) for r in recs} == {(18, 2)}


def test_probe_refuses_what_it_cannot_run_on_several_workers(tmp_path):
    r = CliRunner().invoke(app, ["probe", "-m", "qwen3-8b", "-g", "h100", "-pp", "2", "--nodes", "2",
                                 "--runs-dir", str(tmp_path / "r")])
    assert r.exit_code == 2 and "this host only" in r.output
    r = CliRunner().invoke(app, ["probe", "-m", "qwen3-8b", "-pp", "2", "--simulate-gpu", "rtx4090",
                                 "--runs-dir", str(tmp_path / "r")])
    assert r.exit_code == 2 and "the blocker holds one GPU" in r.output
    r = CliRunner().invoke(app, ["probe", "-m", "qwen3-8b", "-g", "h100", "-pp", "2", "--target-context", "32k",
                                 "--runs-dir", str(tmp_path / "r")])
    assert r.exit_code == 2 and "--target-context with pipeline stages" in r.output
