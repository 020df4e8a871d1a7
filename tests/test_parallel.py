"""Several GPUs (issue 38): vLLM's pipeline split, one budget per worker, the fewest KV blocks decide, mixed cards,
and what is refused. Checked against vLLM's source (distributed/utils.py get_pp_indices; kv_cache_utils.py
get_kv_cache_configs) and a public PP=3 log (Qwen3-32B-AWQ on three RTX 2080 Ti 22 GB, vLLM 0.21.0)."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vrambudget import coefficients
from vrambudget.cli import app
from vrambudget.deployment import Flags, resolve
from vrambudget.errors import UserError
from vrambudget.hardware.catalog import from_memory, lookup
from vrambudget.kv.planner import plan_kv
from vrambudget.model.checkpoint import resolve_model
from vrambudget.parallel import plan_ranks, pp_partition, ranks, stage_deployment, worst
from vrambudget.prediction import layout_for
from vrambudget.units import GiB
from vrambudget.vllm_rules import rules_for

PUBLIC = Path(__file__).parent / "fixtures" / "public-logs" / "multigpu"
runner = CliRunner()


@pytest.mark.parametrize("layers, pp, split", [(61, 4, [15, 15, 16, 15]), (64, 3, [21, 22, 21]),
                                               (94, 4, [23, 24, 24, 23]), (80, 3, [27, 27, 26]),
                                               (36, 5, [7, 7, 7, 8, 7]), (3, 4, [1, 1, 1, 0]), (36, 2, [18, 18])])
def test_vllms_pipeline_split(layers, pp, split):
    assert pp_partition(layers, pp) == split


def test_the_public_pp3_log_splits_and_plans_as_vllm_did():
    log = (PUBLIC / "pp3-qwen3-32b-awq-2080ti22g-v0.21.0.log").read_text()
    logged = json.loads(re.search(r"Hidden layers were unevenly partitioned: (\[[\d,]+\])", log).group(1))
    assert pp_partition(64, 3) == logged == [21, 22, 21]
    # PP0's own 10.85 GiB over its 21 layers' pages (Qwen3-32B: 8 KV heads x 128, fp16, block 16) is the engine's
    # KV cache: vLLM logged 135,440 tokens, the fewest blocks of the three workers
    available = float(re.search(r"Available KV cache memory: ([\d.]+) GiB", log).group(1))
    tokens = int(re.search(r"GPU KV cache size: ([\d,]+) tokens", log).group(1).replace(",", ""))
    d = resolve(resolve_model("qwen3-8b"), from_memory(int(21.48 * GiB), "7.5"), rules_for("0.21.0"),
                Flags(max_model_len=16384, gpu_memory_utilization=0.9))
    from dataclasses import replace

    a = d.model.arch  # Qwen3-8B has Qwen3-32B's KV shape (8 x 128): its layer, 64 times, stands in for the 32B
    d = d.with_(model=replace(d.model, arch=replace(a, layers=a.layers[:1] * 64)))
    stage = stage_deployment(d, ranks(d, 3, [d.gpu])[0], 3)
    assert stage.model.arch.num_layers == 21 and layout_for(stage).pool_layers == 21
    plan = plan_kv(layout_for(stage), int(available * GiB), 16384, stage.rules)
    assert plan.num_blocks * 16 == pytest.approx(tokens, abs=16)


def _d(model="qwen3-8b", gpu="h200", **flags):
    return resolve(resolve_model(model), lookup(gpu), rules_for("0.26.0"),
                   Flags(**{"gpu_memory_utilization": 0.5, "max_model_len": 32768, "enforce_eager": True, **flags}))


def test_each_stage_holds_its_layers_the_embedding_first_the_lm_head_last():
    d = _d()
    first, last = (stage_deployment(d, r, 2) for r in ranks(d, 2, [d.gpu]))
    assert first.model.arch.num_layers == last.model.arch.num_layers == 18
    assert first.model.arch.holds_embedding and not first.model.arch.holds_lm_head and first.pp_first
    assert last.model.arch.holds_lm_head and not last.model.arch.holds_embedding and last.pp_last
    c = coefficients.load("0.26")
    plans = plan_ranks(d, c, 2, [d.gpu])
    one = plan_ranks(d, c, 1, [d.gpu])[0]
    # two stages hold the whole model's weights between them (each its own half of the layers)
    assert sum(p.prediction.budget.weights_bytes for p in plans) == pytest.approx(
        one.prediction.budget.weights_bytes, rel=0.02)
    # the last stage runs the sampler; the first has the token embedding in its compiled graph
    from vrambudget.budget import features
    f0, f1 = (features(p.prediction.deployment) for p in plans)
    assert (f0.sampler_runs, f1.sampler_runs, f0.embeds_in_graph, f1.embeds_in_graph) == (False, True, True, False)
    assert f0.workers == f1.workers == 2 and f1.intermediate_bytes == 0  # V2 on 0.26: kept from load, not counted


def test_mixed_cards_the_smaller_decides():
    out = runner.invoke(app, ["predict", "-m", "qwen3-8b", "--gpu", "rtx5090,rtx5070ti", "-pp", "2",
                              "--max-model-len", "16k", "--vllm-version", "0.26.0", "--json"])
    assert out.exit_code == 0, out.output
    j = json.loads(out.stdout)
    assert [r["gpu"] for r in j["ranks"]] == ["rtx5090", "rtx5070ti"] and j["worst_rank"] == "PP1 TP0"
    five090, ti = j["ranks"]
    assert ti["num_blocks"] < five090["num_blocks"] and ti["budget_bytes"] < five090["budget_bytes"]


def test_tensor_parallel_on_two_different_cards():
    d = _d("qwen3-8b", "rtx4090", tensor_parallel_size=2, max_model_len=8192)
    plans = plan_ranks(d, coefficients.load("0.26"), 1, [lookup("rtx4090"), lookup("rtx3090")])
    assert [p.rank.name for p in plans] == ["PP0 TP0", "PP0 TP1"]
    assert plans[0].prediction.budget.weights_bytes == plans[1].prediction.budget.weights_bytes
    assert worst(plans).rank.gpu.key == "rtx4090"  # 23.64 GiB: less than the RTX 3090's 23.69


@pytest.mark.parametrize("args, says", [
    (["-m", "qwen3-8b", "--gpu", "h200,h200,h200", "-pp", "2"], "--gpu lists 3 cards"),
    (["-m", "qwen3.5-35b-a3b", "--gpu", "h200", "-dp", "2"], "mixture-of-experts"),
    (["-m", "qwen3-8b", "--gpu", "h200", "--enable-expert-parallel"], "has no experts"),
    (["-m", "qwen3-8b", "--gpu", "h200", "-pp", "2", "--mtp", "1"], None),
])
def test_what_is_not_modelled_is_refused_in_one_line(args, says):
    r = runner.invoke(app, ["predict", *args])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
    if says:
        assert says in r.stderr


def test_a_layer_partition_vllm_would_refuse_is_refused(monkeypatch):
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", "10,10")
    r = runner.invoke(app, ["predict", "-m", "qwen3-8b", "--gpu", "h200", "-pp", "2"])
    assert r.exit_code == 2 and "VLLM_PP_LAYER_PARTITION" in r.stderr
    assert pp_partition(32, 2, "12,20") == [12, 20]
    with pytest.raises(UserError):
        pp_partition(32, 2, "12,x")


LAB = Path(__file__).parent / "fixtures" / "lab-vllm-0.26.0-h200x2" / "pp"
# (log, the model where the log's /tmp path is not here, VLLM_PP_LAYER_PARTITION as the step set it)
LAB_RUNS = [("pp2-q8-e", None, None), ("pp2-q8-g", None, None), ("pp2-l8-e-part", None, "12,20"),
            ("pp2-l8-defaults", None, None), ("pp2-q30-e", "tests/fixtures/models/qwen3-30b-a3b", None),
            ("tp2-q30-ep-e", "tests/fixtures/models/qwen3-30b-a3b", None), ("dp2-q8-e", None, None)]


@pytest.mark.parametrize("name, model, partition", LAB_RUNS, ids=[r[0] for r in LAB_RUNS])
def test_every_worker_of_the_lab_runs_within_its_bound(name, model, partition):
    """vLLM 0.26.0 on two H200s (benchmarks/lab/plans/h200x2-0.26.0-pp.json): each worker prints its own budget
    ('Free memory on device ... Current kv cache memory in use'); every worker's available KV within 0.15 GiB of
    it (the first stage of Qwen3-30B-A3B, whose peak is its attention beside the kept fused-MoE scratch, within
    0.01: 0.84 GiB logged and modelled), and the engine's KV cache tokens (the fewest blocks of the workers) as
    vLLM logged them."""
    from vrambudget.comparison import deployment_from_log
    from vrambudget.logparse import parse_log, worker_budgets

    text = (LAB / f"{name}.log").read_text()
    f = parse_log(text)
    d = deployment_from_log(f, str(Path(__file__).parent.parent / model) if model else None)
    plans = plan_ranks(d, coefficients.load(d.rules.version, d.gpu.key, d.model.ref), d.pp, [d.gpu], partition)
    logged = worker_budgets(text)
    assert len(logged) == len(plans) == d.pp * d.tp
    for p, w in zip(plans, logged):
        err = p.prediction.budget.available_kv_bytes / GiB - w.kv_gib
        assert abs(err) <= (0.01 if (name, w.pp) == ("pp2-q30-e", 0) else 0.15), (p.rank.name, err)
        assert p.prediction.budget.weights_bytes / GiB == pytest.approx(w.weights_gib, abs=0.03)
    deciding = worst(plans).prediction.plan.layout
    tokens = min(p.num_blocks for p in plans) * deciding.block_size
    # the engine's tokens, as near as the deciding worker's available memory (0.15 GiB of blocks)
    assert abs(tokens - f.kv_cache_tokens) <= 0.15 * GiB / deciding.bytes_per_block * deciding.block_size


def test_explain_compares_every_worker_of_a_pipeline_log():
    r = runner.invoke(app, ["explain", str(LAB / "pp2-q8-g.log"), "--json"])
    assert r.exit_code == 0, r.output
    j = json.loads(r.stdout)
    assert [w["rank"] for w in j["workers"]] == ["PP0 TP0", "PP1 TP0"]
    assert [w["worker"] for w in j["workers"]] == ["Worker_PP0", "Worker_PP1"]
    assert all(abs(w["kv_error_gib"]) <= 0.15 for w in j["workers"])
    # the first stage compiles the token embedding cold, the last does not: their logged peaks say so
    assert j["workers"][0]["activation_logged_gib"] > j["workers"][1]["activation_logged_gib"] + 0.3


def test_a_hybrid_stage_sizes_its_pools_by_the_whole_models_groups():
    """vLLM 0.26.0 (kv_cache_utils.get_kv_cache_configs): the whole model's layers are grouped (Qwen3.5-27B: 16
    attention layers in one group, 48 GDN layers in three of 16, in layer order), each group projected onto a
    stage's layers, and the stage's pools hold its largest projection; every group still takes its blocks for a
    request. Over 4 stages of 16 layers: GDN group 0 (layers 0-20) gives stage 0 twelve layers, stage 1 four, group
    1 (21-41) eight to stages 1 and 2, group 2 (42-62) four to stage 2 and twelve to stage 3: pools of 12, 8, 8, 12
    layers (a stage planned alone would group its own 4 attention and 12 GDN layers four at a time)."""
    d = _d("qwen3.5-27b")
    whole = layout_for(d)
    assert (whole.group_size, whole.num_groups) == (16, 4)
    pools = [layout_for(stage_deployment(d, r, 4)).pool_layers for r in ranks(d, 4, [d.gpu])]
    assert pools == [12, 8, 8, 12]
    assert [layout_for(stage_deployment(d, r, 2)).pool_layers for r in ranks(d, 2, [d.gpu])] == [16, 16]
    s1 = layout_for(stage_deployment(d, ranks(d, 4, [d.gpu])[1], 4))
    assert s1.num_groups == 4 and s1.bytes_per_block == 8 * whole.page_size_bytes
    assert s1.blocks_per_request(32768) == whole.blocks_per_request(32768)  # the scheduler's groups are global


def test_pipeline_stages_of_a_hybrid_are_planned():
    r = runner.invoke(app, ["predict", "-m", "qwen3.6-27b-int4-autoround", "--gpu", "rtx3090", "-pp", "2",
                            "--max-model-len", "32k", "--max-num-seqs", "64", "--vllm-version", "0.26.0", "--json"])
    assert r.exit_code in (0, 1), r.output
    j = json.loads(r.stdout)
    assert [x["layers"] for x in j["ranks"]] == [32, 32] and j["num_kv_groups"] == 4
