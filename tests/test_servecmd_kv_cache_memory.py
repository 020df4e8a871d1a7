"""serve-cmd --kv-cache-memory (issue 47): vLLM's --kv-cache-memory from the same budget, checked against a real
vLLM 0.33.0 startup that used it (tests/fixtures/lab-vllm-0.33.0-h100/kv-cache-memory/kvmem-q8.log, made by
benchmarks/lab/kv_cache_memory.sh: Qwen3-8B at serve's defaults on an H100)."""

import json
import re
from pathlib import Path

from vrambudget import predict
from vrambudget.logparse import parse_log

from .cli_run import run

LOG = Path(__file__).resolve().parent / "fixtures" / "lab-vllm-0.33.0-h100" / "kv-cache-memory" / "kvmem-q8.log"
H100_TOTAL_MIB = 81559  # nvidia-smi's memory.total in the same log


def serve_json(capsys, *extra):
    code, out, _ = run(["serve-cmd", "--model", "qwen3-8b", "--gpu", "h100", "--vllm-version", "0.33.0",
                        "--format", "json", "--kv-cache-memory", *extra], capsys)
    assert code == 0
    return json.loads(out)


def test_the_bytes_are_the_budgets_kv_memory_and_replace_the_gmu(capsys):
    argv = serve_json(capsys, "--gmu", "0.9")["argv"]
    i = argv.index("--kv-cache-memory")
    assert int(argv[i + 1]) == predict(model="qwen3-8b", gpu="h100", vllm_version="0.33.0",
                                       gpu_memory_utilization=0.9).available_kv_bytes
    assert "--gpu-memory-utilization" not in argv  # vLLM ignores the GMU once --kv-cache-memory is given


def test_a_real_startup_with_it_reserves_that_and_stays_inside_the_gmu(capsys):
    text = LOG.read_text()
    given = int(re.search(r"'kv_cache_memory_bytes': (\d+)", text).group(1))
    assert given == 57_791_612_246  # what serve-cmd wrote on the day (its budget before the V2 graph refit)
    # what it writes now: within the refit's shift of Qwen3-8B's graph estimate (0.93 -> 0.95 GiB)
    assert abs(int(serve_json(capsys)["argv"][-1]) - given) <= 0.05 * 2**30
    assert "reserved 53.82 GiB memory for KV Cache" in text  # vLLM took exactly the bytes given
    # vLLM's KV plan for those bytes is the plan vrambudget makes of them
    assert parse_log(text).kv_cache_tokens == 391_920
    code, out, _ = run(["predict", "--model", "qwen3-8b", "--gpu", "h100", "--vllm-version", "0.33.0",
                        "--available-kv-gib", str(given / 2**30), "--json"], capsys)
    assert json.loads(out)["kv_cache_tokens"] == 391_920
    used = int(re.search(r"LAB nvidia-smi MiB used,total: (\d+), (\d+)", text).group(1))
    assert "Application startup complete" in text and "up 0" in text
    # everything the server holds once up fits the budget vLLM's default GMU (0.92) would have given it: the CUDA
    # graph memory is not counted twice (used 72,977 of 75,034 MiB)
    assert used <= 0.92 * H100_TOTAL_MIB


def test_no_kv_memory_left_is_one_line(capsys):
    code, _, err = run(["serve-cmd", "--model", "qwen3-8b", "--gpu", "rtx4060ti-8gb", "--kv-cache-memory"], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ")
