#!/usr/bin/env python3
"""A simulated `vllm serve` for the probe's tests (no GPU, no vLLM).

It reads a hidden ground truth (JSON file named by $SIMVLLM_TRUTH), prints the real vLLM 0.20
log lines for it (the planner, verified on real logs, gives the KV figures), serves /health,
/v1/models and /v1/completions on --port, and can misbehave on request:
  faults.crash, faults.hang, faults.oom_profiling, faults.fail_first_cold_boot,
  faults.runtime_oom_above (prompt tokens), faults.phase_seconds (a pause in each startup phase), faults.runtime_oom_after_tokens (prompt tokens served in
  all, the multi-turn cliff), faults.runtime_need_gib (what a prompt needs beyond the budget: a
  request OOMs when free-at-start minus the budget is less), faults.insufficient_free, faults.not_http (the port
  answers with something that is not HTTP).
With --pipeline-parallel-size every stage prints its own profile (pp_activation_gib: each stage's peak) and the
engine's KV tokens are the fewest blocks any stage has. Like vLLM 0.20.2 it refuses a hybrid whose max_num_seqs exceeds its KV cache blocks with CUDA graphs.
It also starts a child process in its own process group, so tests can check the probe stops the
whole group. Every start is appended to $state_dir/starts.log. Faults of the process tree (each leaves
GPU processes behind a probe that stops only the process group):
  faults.ignore_sigterm: the server ignores SIGTERM (appending a line to $state_dir/sigterm.log for each);
  faults.setsid_child / faults.setpgid_child: it starts a child that calls setsid() / setpgid(0, 0) and
  forks a daemon (re-parented, out of the server's group), whose pid is appended to $state_dir/escaped.log
  before the first log line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vrambudget.hardware import catalog as gpus  # noqa: E402
from vrambudget.model.checkpoint import resolve_model  # noqa: E402
from vrambudget.deployment import Flags, resolve  # noqa: E402
from vrambudget.kv.planner import plan_kv  # noqa: E402
from vrambudget.prediction import layout_for  # noqa: E402
from vrambudget.units import GiB  # noqa: E402
from vrambudget.vllm_rules import rules_for  # noqa: E402

P = "INFO 11-21 05:32:30 [v1/worker/gpu_worker.py:440] "
D = "DEBUG 11-21 05:32:30 [v1/worker/gpu_worker.py:439] "


def say(line: str) -> None:
    print(line, flush=True)


ESCAPE = """import os, sys, time
os.setsid() if sys.argv[1] == "setsid" else os.setpgid(0, 0)
if os.fork():
    os._exit(0)
with open(sys.argv[2], "a") as f:
    f.write(f"{os.getpid()}\\n")
time.sleep(600)
"""


def escape(how: str, log: Path) -> None:
    """A child that leaves the server's process group (setsid or setpgid) and leaves a daemon behind; returns once
    the daemon wrote its pid to `log`."""
    n = len(log.read_text().splitlines()) if log.exists() else 0
    subprocess.run([sys.executable, "-c", ESCAPE, how, str(log)], check=True)
    end = time.monotonic() + 10
    while time.monotonic() < end and (len(log.read_text().splitlines()) if log.exists() else 0) <= n:
        time.sleep(0.005)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", nargs="?")
    ap.add_argument("model")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    ap.add_argument("--max-model-len", default=None)
    ap.add_argument("--max-num-seqs", type=int)
    ap.add_argument("--max-num-batched-tokens", type=int)
    ap.add_argument("--kv-cache-dtype", default="auto")
    ap.add_argument("--enforce-eager", action="store_true")
    ap.add_argument("--speculative-config")
    ap.add_argument("--enable-prefix-caching", action="store_true")
    ap.add_argument("--language-model-only", action="store_true")
    ap.add_argument("--load-format")
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--pipeline-parallel-size", type=int, default=1)
    args, _unknown = ap.parse_known_args()
    truth = json.loads(Path(os.environ["SIMVLLM_TRUTH"]).read_text())
    faults = truth.get("faults", {})
    state = Path(truth["state_dir"])
    state.mkdir(parents=True, exist_ok=True)
    if faults.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, lambda *_: (state / "sigterm.log").open("a").write(f"{os.getpid()}\n"))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(state / "starts.log", "a") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "child": child.pid, "argv": sys.argv[1:]}) + "\n")
    for how in ("setsid", "setpgid"):
        if faults.get(f"{how}_child"):
            escape(how, state / "escaped.log")

    spec = json.loads(args.speculative_config) if args.speculative_config else {}
    mml_arg = args.max_model_len
    flags = Flags(gpu_memory_utilization=args.gpu_memory_utilization, kv_cache_dtype=args.kv_cache_dtype,
                  enforce_eager=args.enforce_eager, num_speculative_tokens=int(spec.get("num_speculative_tokens", 0)),
                  max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                  max_model_len=None if mml_arg in (None, "auto", "-1") else int(mml_arg),
                  enable_prefix_caching=args.enable_prefix_caching, language_model_only=True)
    src = resolve_model(truth.get("model_profile") or args.model)
    gpu = gpus.from_memory(int(truth["total_gib"] * GiB), "8.9")
    d = resolve(src, gpu, rules_for("0.20.2"), flags)
    non_default = {"model": args.model, "gpu_memory_utilization": args.gpu_memory_utilization,
                   "max_model_len": -1 if flags.max_model_len is None else flags.max_model_len,
                   "kv_cache_dtype": args.kv_cache_dtype, "max_num_seqs": d.max_num_seqs,
                   "max_num_batched_tokens": d.max_num_batched_tokens}
    if args.enforce_eager:
        non_default["enforce_eager"] = True
    if spec:
        non_default["speculative_config"] = spec
    say(f"INFO 11-21 05:32:21 [entrypoints/utils.py:233] non-default args: {non_default!r}")
    say(f"INFO 11-21 05:32:21 [config/model.py:1680] Using max model len {src.arch.max_position_embeddings}")
    say("INFO 11-21 05:32:21 [v1/engine/core.py:109] Initializing a V1 LLM engine (v0.20.2) with config: sim")
    pause = float(faults.get("phase_seconds", 0))
    time.sleep(pause)
    total = truth["total_gib"] * GiB
    context = truth.get("context_gib", 0.51) * GiB
    free = total - context - (truth.get("other_gib", 0) * GiB)
    requested = math.ceil(total * args.gpu_memory_utilization)
    say(f"DEBUG 11-21 05:32:25 [v1/worker/gpu_worker.py:284] worker init memory snapshot: torch_peak=0.0GiB, "
        f"free_memory={free / GiB:.2f}GiB, total_memory={total / GiB:.2f}GiB, cuda_memory={context / GiB:.2f}GiB, "
        f"torch_memory=0.0GiB, non_torch_memory={context / GiB:.2f}GiB, timestamp=0, auto_measure=True")
    say(f"DEBUG 11-21 05:32:25 [v1/worker/gpu_worker.py:285] worker requested memory: {requested / GiB:.2f}GiB")
    if faults.get("insufficient_free") or requested > free:
        say(f"ERROR 11-21 05:32:25 [v1/engine/core.py:1349] ValueError: Free memory on device "
            f"({free / GiB:.2f}/{total / GiB:.2f} GiB) on startup is less than desired GPU memory utilization "
            f"({args.gpu_memory_utilization}, {requested / GiB:.2f} GiB). Decrease GPU memory utilization")
        return 1
    if faults.get("crash"):
        say("Traceback (most recent call last):\n  File \"sim\", line 1\nRuntimeError: simulated crash")
        return 1
    if faults.get("hang"):
        time.sleep(3600)
    weights = truth["weights_gib"] + (truth.get("mtp_gib", 0.0) if spec else 0.0)
    say(f"INFO 11-21 05:32:26 [v1/worker/gpu_model_runner.py:4879] Model loading took {weights:.2f} GiB memory and 0.5 seconds")
    time.sleep(pause)
    lay = layout_for(d)
    if lay.hybrid:
        say(f"INFO 11-21 05:32:26 [platforms/interface.py:606] Setting attention block size to {lay.block_size} "
            "tokens to ensure that attention page size is >= mamba page size.")
    act = truth["activation_gib"]
    if not args.enforce_eager:
        # as measured on vLLM 0.20.2: the compile cache key includes max_model_len (a new length is cold)
        key = state / f"compiled-{bool(spec)}-{mml_arg}"
        if key.exists():
            say("INFO 11-21 05:35:39 [compilation/backends.py:300] Directly load the compiled graph(s) for compile range (1, 2048) from the cache, took 1.2 s")
            act += truth.get("warm_extra_gib", 0.02)
        else:
            say("INFO 11-21 05:35:39 [compilation/backends.py:391] Compiling a graph for compile range (1, 2048) takes 17.80 s")
            act += truth.get("cold_extra_gib", 1.5)
            first_fail = state / "failed-first-cold"
            if faults.get("fail_first_cold_boot") and not first_fail.exists():
                first_fail.touch()
                key.touch()  # the compile cache was written before the profiling peak OOMed
                say("ERROR 11-21 05:35:58 [v1/engine/core.py:1349] torch.OutOfMemoryError: CUDA out of memory. "
                    "Tried to allocate 1.00 GiB (simulated cold compile peak)")
                return 1
            key.touch()
        say("INFO 11-21 05:35:40 [compilation/monitor.py:53] torch.compile took 18.10 s in total")
        time.sleep(pause)
    if faults.get("oom_profiling"):
        say("ERROR 11-21 05:35:58 [v1/engine/core.py:1349] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
        return 1
    cg = 0.0 if args.enforce_eager else truth.get("cudagraph_gib", 0.1)
    if cg:
        say(f"INFO 11-21 05:36:16 [v1/worker/gpu_model_runner.py:6042] Estimated CUDA graph memory: {cg:.2f} GiB total")
    non_torch = truth["non_torch_gib"]
    if args.pipeline_parallel_size > 1:
        L = pipeline_stages(args, truth, d, src, requested, weights, non_torch, flags)
        return 1 if L is None else serve(args, faults, free, requested, L)
    non_kv = (weights + act + non_torch) * GiB
    avail = requested - non_kv - cg * GiB
    say(f"{D}Memory profiling takes 3.93 seconds. Total non KV cache memory: {non_kv / GiB:.2f}GiB; torch peak memory "
        f"increase: {act:.2f}GiB; non-torch forward increase memory: {non_torch:.2f}GiB; weights memory: {weights:.2f}GiB.")
    say(f"{P}Available KV cache memory: {avail / GiB:.2f} GiB")
    for n, pct in lay.padding_warnings:
        say(f"WARNING 11-21 05:32:30 [v1/core/kv_cache_utils.py:1152] Add {n} padding layers, may waste at most {pct:.2f}% KV cache memory")
    probe = plan_kv(lay, int(avail), d.max_model_len, d.rules)
    if flags.max_model_len is None:
        L = min(probe.ceiling, src.arch.max_position_embeddings)
        say(f"INFO 11-21 05:32:30 [v1/core/kv_cache_utils.py:1869] Auto-fit max_model_len: reduced from "
            f"{src.arch.max_position_embeddings} to {L} to fit in available GPU memory ({avail / GiB:.2f} GiB available for KV cache)")
    else:
        L = flags.max_model_len
        if probe.ceiling < L:
            need = lay.bytes_per_request(L) / GiB
            say(f"ERROR 11-21 05:32:30 [v1/engine/core.py:1349] ValueError: To serve at least one request with the "
                f"models's max seq len ({L}), ({need:.2f} GiB KV cache is needed, which is larger than the available KV "
                f"cache memory ({avail / GiB:.2f} GiB). Based on the available memory, the estimated maximum model "
                f"length is {probe.ceiling}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
                "when initializing the engine.")
            return 1
    plan = plan_kv(lay, int(avail), L, d.rules)
    say(f"INFO 11-21 05:32:30 [v1/core/kv_cache_utils.py:1708] GPU KV cache size: {plan.kv_cache_tokens:,} tokens")
    say(f"INFO 11-21 05:32:30 [v1/core/kv_cache_utils.py:1709] Maximum concurrency for {L:,} tokens per request: "
        f"{plan.max_concurrency:.2f}x")
    if lay.hybrid and not args.enforce_eager and d.max_num_seqs > plan.num_blocks:
        # vLLM 0.20.2+ (config/compilation.py): FULL CUDA graphs need one Mamba cache block per decode sequence
        say(f"[rank0]: ValueError: max_num_seqs ({d.max_num_seqs}) exceeds available Mamba cache blocks "
            f"({plan.num_blocks}). Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot "
            f"proceed. Please lower max_num_seqs to at most {plan.num_blocks} or increase gpu_memory_utilization.")
        return 1
    time.sleep(pause)
    if cg:
        say("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 9/9")
        time.sleep(pause)
        say(f"INFO 11-21 05:36:19 [v1/worker/gpu_model_runner.py:6133] Graph capturing finished in 2 secs, took {cg:.2f} GiB")
    return serve(args, faults, free, requested, L)


def serve(args, faults: dict, free: float, requested: int, L: int) -> int:
    """The engine's last line, then the API server (until the probe stops it)."""
    say("INFO 11-21 05:32:36 [v1/engine/core.py:306] init engine (profile, create kv cache, warmup model) took 9.64 s")
    oom_above = faults.get("runtime_oom_above")
    oom_after = faults.get("runtime_oom_after_tokens")  # allocator growth across requests (multi-turn cliff)
    need = faults.get("runtime_need_gib")
    margin = free - requested
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # keep the log vLLM-like
            pass

        def _send(self, code: int, body: dict) -> None:
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                self._send(200, {"data": [{"id": args.model}]})
            else:
                self._send(404, {})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n = len(body["prompt"])
            if n + body.get("max_tokens", 16) > L:
                self._send(400, {"error": f"prompt of {n} tokens exceeds max_model_len {L}"})
                return
            served[0] += n
            short = need is not None and margin < need * GiB
            if (oom_above is not None and n > oom_above) or (oom_after is not None and served[0] > oom_after) or short:
                say("ERROR 11-21 05:40:00 [v1/engine/core.py:900] torch.OutOfMemoryError: CUDA out of memory. "
                    "Tried to allocate 512.00 MiB (simulated GDN prefill buffers)")
                os._exit(1)
            self._send(200, {"choices": [{"text": ""}], "usage": {"prompt_tokens": n, "completion_tokens": 16}})

    if faults.get("not_http"):  # something on the port that is not HTTP: every connection gets a line of noise
        import socket

        with socket.socket() as srv:
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("127.0.0.1", args.port))
            srv.listen()
            while True:
                conn, _ = srv.accept()
                conn.sendall(b"SSH-2.0-OpenSSH_9.6 not a web server\r\n")
                conn.close()
    say("INFO 11-21 05:32:37 [entrypoints/launcher.py:46] Application startup complete.")
    HTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
    return 0



def pipeline_stages(args, truth: dict, d, src, requested: int, weights: float, non_torch: float, flags) -> int | None:
    """Pipeline parallel (the 0.26 lines every worker prints): each stage's budget on its own layers (weights split
    evenly, truth's pp_activation_gib per stage), the engine's KV tokens from the fewest blocks of any stage; the
    max_model_len that plan admits, or None after vLLM's refusal."""
    from vrambudget.parallel import ranks, stage_deployment

    pp = args.pipeline_parallel_size
    dp = d.with_(pp=pp)
    acts = truth.get("pp_activation_gib") or [truth["activation_gib"]] * pp
    blocks, avail0 = [], None
    for r in ranks(dp, pp, [d.gpu]):
        sd = stage_deployment(dp, r, pp)
        act = acts[r.pp_rank]
        avail = requested - (weights / pp + act + non_torch) * GiB
        who = f"(Worker_PP{r.pp_rank} pid={100 + r.pp_rank}) "
        say(f"{who}{D}Memory profiling takes 3.93 seconds. Total non KV cache memory: "
            f"{weights / pp + act + non_torch:.2f}GiB; torch peak memory increase: {act:.2f}GiB; non-torch forward "
            f"increase memory: {non_torch:.2f}GiB; weights memory: {weights / pp:.2f}GiB.")
        if r.pp_rank == 0:
            avail0 = avail
            say(f"{who}{P}Available KV cache memory: {avail / GiB:.2f} GiB")
        blocks.append(plan_kv(layout_for(sd), int(avail), 1, sd.rules).num_blocks)
    block = layout_for(d).block_size
    tokens = min(blocks) * block
    if flags.max_model_len is None:
        L = min(tokens, src.arch.max_position_embeddings)
    else:
        L = flags.max_model_len
        if tokens < L:
            say(f"ERROR 11-21 05:32:30 [v1/engine/core.py:1349] ValueError: To serve at least one request with the "
                f"models's max seq len ({L}), (more KV cache is needed than the available KV cache memory "
                f"({avail0 / GiB:.2f} GiB). Based on the available memory, the estimated maximum model length is "
                f"{tokens}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
                "the engine.")
            return None
    say(f"INFO 11-21 05:32:30 [v1/core/kv_cache_utils.py:1708] GPU KV cache size: {tokens:,} tokens")
    say(f"INFO 11-21 05:32:30 [v1/core/kv_cache_utils.py:1709] Maximum concurrency for {L:,} tokens per request: "
        f"{tokens / L:.2f}x")
    return L

if __name__ == "__main__":
    sys.exit(main())
