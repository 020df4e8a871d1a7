"""The probe's memory blocker: a helper process that holds GPU memory so that the free memory a
vLLM startup sees matches a smaller card (`probe --simulate-gpu` / `--free-memory`).

Run as `python -m vrambudget.probe.blocker TARGET_FREE_BYTES [DEVICE]`: it allocates plain device memory
(torch, cudaMalloc underneath) until `torch.cuda.mem_get_info()` reports TARGET_FREE_BYTES free (to
the allocator's 2 MiB granularity), prints `READY <free> <total>` and holds it until it is sent
SIGTERM or its stdin closes (the probe holds the other end: it closes when the probe ends, however it ends,
also while the memory is still being taken). The probe's supervisor (reaper.py) ends it too. Only the probe
machine needs torch; this module is never imported by `predict`.
"""

from __future__ import annotations

import signal
import sys
import threading

CHUNK = 256 << 20
GRAIN = 2 << 20


def hold(target_free: int, device: int = 0) -> None:
    done = threading.Event()  # SIGTERM ends it at once until READY, then through `done`
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    import torch

    torch.cuda.set_device(device)
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    held = []
    while free - target_free >= GRAIN and not done.is_set():
        n = min(CHUNK, (free - target_free) // GRAIN * GRAIN)
        held.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        free = torch.cuda.mem_get_info()[0]
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    if done.is_set():
        return
    print(f"READY {free} {total}", flush=True)
    done.wait()


if __name__ == "__main__":
    hold(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
