"""What the CUDA context holds, term by term, on the GPU this runs on (torch only, no vLLM).

Each measurement runs in a fresh Python process so that nothing one loads is seen by the next:
  init          torch.cuda.init() and a 1-element tensor: total - free (bytes), the context vLLM's first snapshot sees
  attrs         SM count, max resident threads per SM, and the context's limits (stack, printf FIFO, malloc heap)
  stack         the same process after cuCtxSetLimit(CU_LIMIT_STACK_SIZE, n) for several n: what one more byte of
                per-thread stack costs the card (the local-memory reservation: SMs x threads/SM x stack, if CUDA
                reserves it per resident thread)
  eager         CUDA_MODULE_LOADING=EAGER (every kernel of every loaded library resident at init)
  oom_*         an allocation far above the card's memory right after init, after a matmul, after SDPA: the OOM
                message's 'this process has X GiB in use. Of the allocated memory Y GiB is allocated by PyTorch,
                and Z MiB is reserved by PyTorch but unallocated' next to total - free, so that the public OOM
                messages used as evidence (profiles/gpu_facts.json cuda_context.evidence) can be read against a
                measurement
Writes one JSON object to the path given (stdout if none).

    python benchmarks/lab/context_probe.py OUT.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r'''
import ctypes, json, os, sys
import torch
what = sys.argv[1]
torch.cuda.init()
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
cu = ctypes.CDLL("libcuda.so.1")

def used():
    free, total = torch.cuda.mem_get_info()
    return total - free

def limit(n):
    v = ctypes.c_size_t()
    rc = cu.cuCtxGetLimit(ctypes.byref(v), n)
    return v.value if rc == 0 else None

def attr(n):
    v = ctypes.c_int()
    cu.cuDeviceGetAttribute(ctypes.byref(v), n, 0)
    return v.value

out = {"what": what, "used_bytes": used(), "total_bytes": torch.cuda.mem_get_info()[1],
       "name": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
       "module_loading": os.environ.get("CUDA_MODULE_LOADING", "(default)")}
if what == "attrs":
    out.update(sms=attr(16), max_threads_per_sm=attr(39), cc=[attr(75), attr(76)],
               stack_bytes=limit(0), printf_fifo_bytes=limit(1), malloc_heap_bytes=limit(2))
elif what == "stack":
    rows = []
    for n in (1024, 2048, 4096, 8192, 1024, 512, 256):
        rc = cu.cuCtxSetLimit(0, ctypes.c_size_t(n))
        torch.cuda.synchronize()
        rows.append({"set": n, "rc": rc, "stack_bytes": limit(0), "used_bytes": used()})
    out["rows"] = rows
elif what.startswith("oom"):
    if what in ("oom_matmul", "oom_sdpa"):
        a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        (a @ a).sum().item()
    if what == "oom_sdpa":
        q = torch.randn(1, 8, 512, 128, device="cuda", dtype=torch.bfloat16)
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().item()
    torch.cuda.synchronize()
    out["used_before_oom_bytes"] = used()
    out["torch_allocated_bytes"] = torch.cuda.memory_allocated()
    out["torch_reserved_bytes"] = torch.cuda.memory_reserved()
    try:
        torch.empty(out["total_bytes"] * 2, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as e:
        out["message"] = str(e).splitlines()[0][:600]
print("RESULT " + json.dumps(out))
'''


def run(what: str, env: dict[str, str] | None = None) -> dict:
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-c", CHILD, what], capture_output=True, text=True, env=e, timeout=300)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"what": what, "error": (p.stderr or p.stdout)[-2000:]}


def main() -> int:
    results = [run("init"), run("init"), run("attrs"), run("stack"),
               dict(run("init", {"CUDA_MODULE_LOADING": "EAGER"}), what="eager"),
               run("oom_init"), run("oom_matmul"), run("oom_sdpa")]
    text = json.dumps(results, indent=1)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
