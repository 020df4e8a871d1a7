"""The Python API (vrambudget.predict / plan / explain): the CLI's figures, typed, without the CLI."""

import json
from pathlib import Path

import pytest

import vrambudget
from vrambudget.api import Prediction

from .cli_run import run

FIX = Path(__file__).resolve().parent / "fixtures"


def test_predict_is_the_clis_json_key_for_key(capsys):
    a = vrambudget.predict(model="qwen3-8b", gpu="h100", max_model_len=32768, gpu_memory_utilization=0.9,
                           vllm_version="0.33.0")
    code, out, _ = run(["predict", "--model", "qwen3-8b", "--gpu", "h100", "--max-model-len", "32768",
                        "--gpu-memory-utilization", "0.9", "--vllm-version", "0.33.0", "--json"], capsys)
    assert code == 0 and a.json == json.loads(out)
    assert isinstance(a, Prediction) and a.starts and a.max_model_len == 32768
    assert a.available_kv_bytes == a.json["available_kv_bytes"] and a.budget_bytes["weights_bytes"] > 15 * 2**30
    assert a.max_model_len_ceiling == a.json["max_model_len_ceiling"]


def test_vllm_flag_names_and_the_tools_own_are_both_taken():
    assert {"gpu_memory_utilization", "kv_cache_dtype", "tensor_parallel_size", "max_num_seqs",
            "vllm_version"} <= set(vrambudget.flag_names())
    tp = vrambudget.predict(model="qwen3-8b", gpu="h100", tensor_parallel_size=2, vllm_version="0.26.0")
    assert tp.json["inputs"]["tensor_parallel_size"] == 2


@pytest.mark.parametrize("kwargs, says", [({"max_modl_len": 4096}, "max_modl_len: not a vLLM flag"),
                                          ({"max_num_seqs": "many"}, "give a whole number"),
                                          ({"enforce_eager": "yes"}, "give True or False"),
                                          ({"gpu": "h1000"}, "h1000")])
def test_bad_input_is_one_user_error(kwargs, says):
    with pytest.raises(vrambudget.UserError, match=says):
        vrambudget.predict(**{"model": "qwen3-8b", "gpu": "h100", **kwargs})


def test_a_model_that_does_not_start_answers_no_with_vllms_reason():
    a = vrambudget.predict(model="qwen3-8b", gpu="rtx4060ti-8gb")
    assert not a.starts and a.max_model_len_ceiling == 0


def test_plan_and_explain():
    p = vrambudget.plan(32768, model="qwen3-8b", gpu="rtx-4090")
    assert p["best"] and p["target_context"] == 32768 and p["options"]
    log = FIX / "lab-vllm-0.33.0-h100" / "moe-tokens" / "q30-t2k.log"
    e = vrambudget.explain(log.read_text(), model=str(FIX / "models" / "qwen3-30b-a3b"))
    rows = {r["term"]: r for r in e["terms"]}
    assert e["outcome"] == "started" and rows["available KV cache"]["logged_gib"] == 11.85
    assert abs(rows["available KV cache"]["difference_gib"]) <= 0.03
    with pytest.raises(vrambudget.UserError):
        vrambudget.explain("not a vLLM log\n")


def test_no_module_of_the_package_shadows_an_api_function():
    import importlib
    import pkgutil

    for m in pkgutil.walk_packages(vrambudget.__path__, "vrambudget."):
        if not m.name.startswith(("vrambudget.probe.blocker",)):
            importlib.import_module(m.name)  # importing a submodule sets it as the package's attribute
    for name in ("predict", "plan", "explain", "flag_names"):
        assert callable(getattr(vrambudget, name)) and not isinstance(getattr(vrambudget, name), type(vrambudget))


def test_serve_command_is_serve_cmds(capsys):
    text = vrambudget.serve_command(model="qwen3-8b", gpu="h100", vllm_version="0.33.0", kv_cache_memory=True)
    code, out, _ = run(["serve-cmd", "--model", "qwen3-8b", "--gpu", "h100", "--vllm-version", "0.33.0",
                        "--kv-cache-memory"], capsys)
    assert code == 0 and text == out and "--kv-cache-memory " in text
    with pytest.raises(vrambudget.UserError, match="format"):
        vrambudget.serve_command(model="qwen3-8b", gpu="h100", format="yaml")


def test_several_workers_answer_with_the_clis_rank_table(capsys):
    a = vrambudget.predict(model="qwen3-8b", gpu="h200", pipeline_parallel_size=2, vllm_version="0.26.0")
    code, out, _ = run(["predict", "--model", "qwen3-8b", "--gpu", "h200", "-pp", "2", "--vllm-version", "0.26.0",
                        "--json"], capsys)
    assert code == 0 and a.json == json.loads(out) and len(a.json["ranks"]) == 2
