"""The command line as a user runs it: exit codes, JSON keys, one-line errors."""

import json

from typer.testing import CliRunner

from vrambudget.cli import _mtp_default, app

runner = CliRunner()
KEYS = {"requested_bytes", "weights_bytes", "mtp_weights_bytes", "activation_bytes", "non_torch_bytes",
        "cudagraph_bytes", "available_kv_bytes", "block_size", "padding_layers", "num_blocks", "kv_cache_tokens",
        "max_concurrency", "max_model_len_ceiling", "fits", "inputs"}


def run(*args):
    return runner.invoke(app, list(args))


def test_main_command_out_of_the_box():
    """The README's main command: vLLM's default 256 seqs exceed the KV blocks its CUDA graphs need on this card, so
    it answers NO (exit 1) with vLLM's refusal, the fix and the ceilings with it (tests/test_start_checks.py)."""
    r = run("predict", *_mtp_default(["--gpu", "4060ti", "--mtp", "--gmu", "0.95"]))
    assert r.exit_code == 1, r.output
    assert "qwen3.5-9b-awq" in r.output and "CEILING max_model_len" in r.output and "With --max-num-seqs" in r.output
    assert "padding layers" in r.output and "3 (12.50%)" in r.output  # 9 attention vs 24 GDN


def test_json_has_every_key_and_resolved_defaults():
    r = run("predict", "--gpu", "4060ti", "--mtp", "2", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8",
            "--max-model-len", "32768", "--json")
    out = json.loads(r.output)
    assert KEYS <= set(out)
    assert out["fits"] is True and out["block_size"] == 1072 and out["padding_layers"] == 3
    i = out["inputs"]
    assert i["max_num_batched_tokens"] == 2048 and i["gpu_memory_utilization"] == 0.92  # 0.33 defaults
    assert out["available_kv_bytes"] == out["requested_bytes"] - out["weights_bytes"] - out["mtp_weights_bytes"] \
        - out["activation_bytes"] - out["non_torch_bytes"] - out["cudagraph_bytes"] - out["runner_buffers_bytes"]


def test_target_context_gives_smallest_gmu_that_starts():
    r = run("predict", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8", "--target-context", "64k",
            "--json")
    g = json.loads(r.output)["min_gmu"]
    ok = json.loads(run("predict", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8",
                        "--max-model-len", "65536", "--gmu", f"{g:.2f}", "--json").output)
    below = json.loads(run("predict", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8",
                           "--max-model-len", "65536", "--gmu", f"{g - 0.01:.2f}", "--json").output)
    assert ok["fits"] and not below["fits"]


def test_unknown_gpu_lists_catalog_in_one_line():
    r = run("predict", "--gpu", "rtx9999")
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "`vrambudget gpus` lists the" in r.output and "Traceback" not in r.output
    r = run("predict", "--gpu", "rtx 4090x")  # a typo: the closest cards
    assert r.exit_code == 2 and "did you mean rtx4090 (NVIDIA GeForce RTX 4090, 23.64 GiB)" in r.output


def test_model_that_cannot_fit_says_by_how_much():
    r = run("predict", "--model", "qwen3.5-27b", "--gpu", "4060ti")
    assert r.exit_code == 1 and "over by" in r.output


def test_free_memory_on_16gb_at_gmu_099_is_a_warning_on_an_estimated_context():
    """spec/mission.md: vLLM 0.20.2 started at GMU 0.99 on the 4060 Ti; the context there is estimated."""
    r = run("predict", "--gpu", "4060ti", "--gmu", "0.995", "--max-model-len", "4096", "--max-num-seqs", "8", "--json")
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["fits"] and any("free memory at start" in w for w in out["warnings"])


def test_available_kv_only_explains_a_log_line():
    r = run("predict", "--model", "qwen3.5-9b", "--kv-cache-dtype", "fp8", "--mtp", "2", "--available-kv-gib", "4.09",
            "--max-model-len", "auto", "--vllm-version", "0.20.2")
    assert "GPU KV cache size: 228,336 tokens" in r.output and "Add 3 padding layers" in r.output


def test_table_json_and_target():
    r = run("table", "--gpu", "4060ti", "--kv-cache-dtype", "fp8", "--max-num-seqs", "8", "--target-context", "32k",
            "--json")
    t = json.loads(r.output)
    assert t["columns"] == ["graphs", "eager", "graphs+MTP2", "eager+MTP2"] and len(t["rows"]) == 20
    assert all(row["ceilings"]["eager"] >= row["ceilings"]["graphs"] for row in t["rows"])
    assert t["min_gmu"]["eager"] <= t["min_gmu"]["graphs"]


def test_bad_speculative_config_and_ngram_on_hybrid():
    assert "not valid JSON" in run("predict", "--speculative-config", "{method: mtp}").output
    r = run("predict", "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}', "--json")
    out = json.loads(r.output)
    assert out["mtp_weights_bytes"] == 0 and any("corrupt the recurrent state" in w for w in out["warnings"])
    assert "not modelled" in run("predict", "--speculative-config", '{"method":"eagle3"}').output


def test_gpus_and_models_listings():
    assert "rtx4060ti" in run("gpus").output
    models = json.loads(run("models", "--json").output)
    for name in ("qwen3.5-0.8b", "qwen3.5-2b", "qwen3.5-4b", "qwen3.5-9b", "qwen3.5-27b", "qwen3.5-35b-a3b",
                 "qwen3.5-9b-awq", "qwen3-next-80b-a3b", "qwen3-8b", "llama-3.1-8b"):
        assert name in models
    assert models["qwen3.5-35b-a3b"]["params"] > 30e9


def test_every_bundled_model_predicts_on_h200():
    models = json.loads(run("models", "--json").output)
    big = run("predict", "--model", "qwen3-next-80b-a3b", "--gpu", "h200", "--max-model-len", "auto")
    assert big.exit_code == 1 and "over by" in big.output  # 148 GiB of bf16 weights on one 139.8 GiB GPU
    for name in models:
        tp = "2" if name == "qwen3-next-80b-a3b" else "1"
        r = run("predict", "--model", name, "--gpu", "h200", "--max-model-len", "auto", "-tp", tp, "--json")
        out = json.loads(r.output)
        assert r.exit_code == 0 and out["fits"] and out["max_model_len_ceiling"] > 0, name
        hybrid = "GDN" in models[name]["layers"]
        assert (out["block_size"] > 16) == hybrid, name  # hybrids raise the block to hold a GDN state


def test_gpu_auto_without_a_driver_is_one_line(monkeypatch):
    class NoDriver:
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setitem(__import__("sys").modules, "pynvml", NoDriver())
    r = run("predict", "--gpu", "auto")
    assert r.exit_code == 2 and "NVML" in r.output and r.output.count("\n") == 1
