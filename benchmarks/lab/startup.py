"""One real vLLM engine startup in-process, from a JSON description, printing the memory figures
(the lab runs behind tests/fixtures/*-h100). Offline API, dummy weights: only config.json is needed.
  PYTHONPATH=/tmp/site VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_LOGGING_LEVEL=DEBUG \
  python3 startup.py '{"model": DIR, "gmu": 0.3, "kv": "fp8", "mtp": 0, "eager": true, "lmo": true,
                       "backend": "FLASHINFER", "compilation": {...}, "prompts": [60000, 120000],
                       "tokenizer": true (load one: multimodal profiling needs it), "mm_limit": {"video": 0},
                       "spec": {"method": "dflash", "model": DIR, "num_speculative_tokens": 5},
                       "requests": [[200, 250], [120000, 16]] (prompt tokens, generated tokens; after "prompts")}'
Lines starting with LAB are this script's own readings (bytes unless named otherwise): per request, torch's
reserved memory before and at most during it, and NVML's used memory before and at its peak (sampled every 50 ms),
so what serving allocates outside torch (the CUDA context's growth, loaded kernels) shows as the difference."""
import json, os, subprocess, sys, time


def engine_kwargs(cfg: dict) -> dict:
    """vLLM's LLM(...) arguments for a startup config (the keys in this file's docstring)."""
    kw = dict(model=cfg["model"], load_format="dummy", skip_tokenizer_init=not cfg.get("tokenizer"),
              gpu_memory_utilization=cfg["gmu"], max_model_len=cfg.get("max_model_len", -1),
              kv_cache_dtype=cfg.get("kv", "auto"), enforce_eager=cfg.get("eager", True),
              seed=0, enable_prefix_caching=cfg.get("prefix_caching", None))
    if not cfg.get("defaults"):  # "defaults": true leaves vLLM's own max_num_seqs / max_num_batched_tokens
        kw.update(max_num_seqs=cfg.get("max_num_seqs", 8), max_num_batched_tokens=cfg.get("mnbt", 2048))
    if cfg.get("tp"):
        kw["tensor_parallel_size"] = cfg["tp"]
    if cfg.get("lmo", True):
        kw["language_model_only"] = True
    if cfg.get("mtp"):
        kw["speculative_config"] = {"method": "mtp", "num_speculative_tokens": cfg["mtp"]}
    if cfg.get("spec"):  # any speculative config, e.g. {"method": "dflash", "model": DIR, "num_speculative_tokens": 5}
        kw["speculative_config"] = cfg["spec"]
    if cfg.get("gdn"):
        kw["gdn_prefill_backend"] = cfg["gdn"]  # "triton": the FLA path every non-Hopper GPU takes
    if cfg.get("backend"):
        kw["attention_config"] = {"backend": cfg["backend"]}
    if cfg.get("mm_limit") is not None:  # e.g. {"image": 1, "video": 0}
        kw["limit_mm_per_prompt"] = cfg["mm_limit"]
    if cfg.get("compilation"):  # e.g. {"pass_config": {"fuse_allreduce_rms": false}}
        kw["compilation_config"] = cfg["compilation"]
    return kw


def main() -> None:  # guarded: tensor parallel workers are spawned and re-import this file
    cfg = json.loads(sys.argv[1])
    from vllm import LLM, SamplingParams

    kw = engine_kwargs(cfg)
    import torch

    free0, total = torch.cuda.mem_get_info()
    print("LAB before_engine free", free0, "total", total, flush=True)
    t0 = time.time()
    llm = LLM(**kw)
    print("LAB startup_s", round(time.time() - t0, 1), flush=True)

    def smi():
        return subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True).stdout.strip()


    free, _ = torch.cuda.mem_get_info()
    print("LAB after_init free", free, "reserved", torch.cuda.memory_reserved(), "smi_used_mib", smi(), flush=True)
    mml = llm.llm_engine.model_config.max_model_len
    print("LAB max_model_len", mml, flush=True)
    import random

    from vllm.inputs import TokensPrompt

    nvml = None
    try:
        import pynvml

        pynvml.nvmlInit()
        nvml = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:
        pass

    def used():
        return pynvml.nvmlDeviceGetMemoryInfo(nvml).used if nvml else -1

    import threading

    for n, gen in [(p, 16) for p in cfg.get("prompts", [])] + [tuple(r) for r in cfg.get("requests", [])]:
        n = min(int(n), mml - int(gen) - 16)
        peak, stop = [used()], threading.Event()

        def sample():
            while not stop.wait(0.05):
                peak[0] = max(peak[0], used())

        watcher = threading.Thread(target=sample, daemon=True)
        u0 = used()
        watcher.start()
        rng = random.Random(n)
        ids = [rng.randrange(1000, 100000) for _ in range(n)]
        torch.cuda.reset_peak_memory_stats()
        r0 = torch.cuda.memory_reserved()
        t1 = time.time()
        try:
            out = llm.generate([TokensPrompt(prompt_token_ids=ids)], SamplingParams(max_tokens=int(gen), ignore_eos=True,
                                                                                    detokenize=False))
            status = "ok"
        except Exception as e:  # a runtime OOM is the measurement
            status = f"error {type(e).__name__}: {str(e)[:300]}"
        stop.set()
        watcher.join(timeout=1)
        free2, _ = torch.cuda.mem_get_info()
        print("LAB prompt", n, status, "s", round(time.time() - t1, 1), "reserved_before", r0, "max_reserved",
              torch.cuda.max_memory_reserved(), "max_allocated", torch.cuda.max_memory_allocated(), "free_after", free2,
              "smi_used_mib", smi(), "generated", gen, "nvml_used_before", u0, "nvml_used_peak", peak[0],
              "reserved_after", torch.cuda.memory_reserved(), flush=True)
        if status != "ok":
            break
    print("LAB done", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
