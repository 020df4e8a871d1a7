"""Replay a vision tower's weight allocations on a GPU under vLLM's load-time max_split_size_mb=20 and read what the
caching allocator keeps reserved and unallocated (model/allocator.load_holes_bytes plans it without a GPU).

    python benchmarks/lab/alloc_replay.py write OUT.json        # here: the towers' allocations, in build order
    python3 benchmarks/lab/alloc_replay.py replay OUT.json      # on the host (torch only): one fresh process a tower
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TOWERS = ["qwen2.5-vl-7b-instruct", "qwen3-vl-8b-instruct", "gemma-3-27b-it", "gemma-3-4b-it",
          "lab-mistral-small-3.1-24b-instruct-2503", "gemma-4-26b-a4b", "lab-llama-4-scout-4l-vis"]


def write(out: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from vrambudget.families import arch_from_config
    from vrambudget.model.allocator import load_holes_bytes

    rows = {}
    for m in TOWERS:
        cfg = json.loads((ROOT / "tests" / "fixtures" / "models" / m / "config.json").read_text())
        sizes = list(arch_from_config(cfg, m).vision.allocations(1))
        rows[m] = {"sizes": sizes, "planned_holes": load_holes_bytes(sizes, 20 << 20)}
    out.write_text(json.dumps(rows))


def replay_one(sizes: list[int]) -> dict:
    import torch

    torch.cuda.init()
    before = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
    kept = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in sizes]
    torch.cuda.empty_cache()
    reserved, allocated = torch.cuda.memory_reserved() - before[0], torch.cuda.memory_allocated() - before[1]
    return {"reserved": reserved, "allocated": allocated, "requested": sum(sizes), "kept": len(kept),
            "torch": torch.__version__, "device": torch.cuda.get_device_name()}


def replay(path: Path) -> None:
    rows = json.loads(path.read_text())
    out = {}
    for m, row in rows.items():  # a fresh process each: an empty allocator, as vLLM's worker before its load
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:20")
        r = subprocess.run([sys.executable, __file__, "one"], input=json.dumps(row["sizes"]), env=env,
                           capture_output=True, text=True, check=True)
        got = json.loads(r.stdout)
        got["holes"] = got["reserved"] - got["allocated"]
        got["planned_holes"] = row["planned_holes"]
        out[m] = got
        print(m, got)
    Path(os.environ.get("OUT", ".")).joinpath("alloc-replay.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(Path(sys.argv[2]))
    elif sys.argv[1] == "replay":
        replay(Path(sys.argv[2]))
    else:
        print(json.dumps(replay_one(json.loads(sys.stdin.read()))))
