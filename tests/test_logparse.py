"""Log parsing on the real 0.20.2 fixture logs and on lines in the newer (0.2x-0.33) format."""

import pytest

from vrambudget.logparse import flags_from_args, parse_log

from .conftest import LOGS

EXPECTED = {  # log: (weights, activation, non-torch, available, block, padding, KV tokens, final len, compile)
    "qwen3-8b_kv-fp8_eager_mtp0_gmu0.17.log": (15.27, 0.23, 0.22, 8.04, None, [], 117072, 40960, None),
    "qwen3.5-0.8b_kv-auto_eager_mtp2_gmu0.5.log": (1.57, 0.13, 0.22, 67.97, 544, [(3, 16.67)], 4996219, 262144, None),
    "qwen3.5-9b_kv-fp8_eager_mtp0_gmu0.15.log": (16.8, 0.27, 0.22, 3.67, 1056, [], 236544, 236544, None),
    "qwen3.5-9b_kv-fp8_eager_mtp0_gmu0.17.log": (16.8, 0.27, 0.22, 6.47, 1056, [], 417141, 262144, None),
    "qwen3.5-9b_kv-fp8_eager_mtp2_gmu0.17.log": (17.26, 0.28, 0.22, 6.0, 1072, [(3, 12.5)], 336452, 262144, None),
    "qwen3.5-9b_kv-fp8_graphs_mtp2_gmu0.17.log": (17.26, 2.08, 0.24, 4.09, 1072, [(3, 12.5)], 228336, 228336, "cold"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_logs(name):
    f = parse_log((LOGS / name).read_text())
    got = (f.weights_gib, f.activation_gib, f.non_torch_gib, f.available_kv_gib, f.block_size, f.padding,
           f.kv_cache_tokens, f.max_model_len, f.compile)
    assert got == EXPECTED[name]
    assert f.outcome == "started" and f.vllm_version == "0.20.2"
    assert (f.total_gib, f.cuda_context_gib) == (139.8, 0.51)


def test_flags_recovered_from_non_default_args():
    f = parse_log((LOGS / "qwen3.5-9b_kv-fp8_graphs_mtp2_gmu0.17.log").read_text())
    flags = flags_from_args(f.args)
    assert flags == {"gpu_memory_utilization": 0.17, "kv_cache_dtype": "fp8", "speculative_method": "mtp",
                     "num_speculative_tokens": 2, "max_num_seqs": 8, "max_num_batched_tokens": 2048,
                     "max_model_len": -1, "language_model_only": True}
    assert f.cudagraph_estimate_gib == 0.11 and f.cudagraph_actual_gib == 0.1


def test_newer_format_lines():
    # one-line KV summary and the INFO "Actual usage" line of newer vLLM (as public logs print them)
    text = "\n".join([
        "(EngineCore pid=1) INFO 08-17 02:57:00 [kv_cache_utils.py:1869] GPU KV cache size: 313,650 tokens, "
        "Maximum concurrency for 262,144 tokens per request: 1.20x",
        "(EngineCore pid=1) INFO 08-17 02:54:36 [gpu_model_runner.py:5515] Model loading took 51.1 GiB memory and 41.9 seconds",
        "(EngineCore pid=1) INFO 08-17 02:57:58 [gpu_worker.py:804] Free memory on device (79.99/80.0 GiB) on startup. "
        "Desired GPU memory utilization is (0.92, 73.6 GiB). Actual usage is 51.66 GiB for consumed memory "
        "(weights + non-torch), 2.4 GiB for peak activation, and 0.71 GiB for CUDAGraph memory.",
        "(EngineCore pid=1) INFO 08-17 02:57:59 [core.py:347] init engine (profile, create kv cache, warmup model) took 203.23 s",
    ])
    f = parse_log(text)
    assert (f.kv_cache_tokens, f.concurrency_len, f.concurrency) == (313650, 262144, 1.2)
    assert (f.total_gib, f.requested_gib, f.activation_gib, f.cudagraph_actual_gib) == (80.0, 73.6, 2.4, 0.71)
    assert f.outcome == "started"


def test_failures():
    too_small = ("ERROR [core.py] ValueError: To serve at least one request with the models's max seq len (131072), "
                 "(2.40 GiB KV cache is needed, which is larger than the available KV cache memory (1.71 GiB). Based on "
                 "the available memory, the estimated maximum model length is 93808. Try increasing "
                 "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
    f = parse_log(too_small)
    assert (f.outcome, f.estimated_max_model_len, f.needed_kv_gib, f.available_kv_gib) == ("kv_too_small", 93808, 2.4, 1.71)
    free = parse_log("ERROR ValueError: Free memory on device (14.1/15.7 GiB) on startup is less than desired GPU "
                     "memory utilization (0.99, 15.54 GiB). Decrease GPU memory utilization")
    assert free.outcome == "insufficient_free_memory"
    oom = parse_log("INFO Model loading took 7.2 GiB memory\nERROR torch.OutOfMemoryError: CUDA out of memory.")
    assert oom.outcome == "oom_profiling"
    cap = parse_log("INFO Model loading took 7.2 GiB memory\nINFO Available KV cache memory: 1.0 GiB\n"
                    "INFO GPU KV cache size: 10,000 tokens\nERROR torch.OutOfMemoryError: CUDA out of memory.")
    assert cap.outcome == "oom_graph_capture"
    assert parse_log("Traceback (most recent call last):\nRuntimeError: boom").outcome == "crashed"
