"""What is alive at the peak of vLLM's memory profile: one in-process engine startup (a startup.py JSON config)
with torch's allocator history recorded around GPUModelRunner.profile_run, then the allocations alive at its
highest point, largest first, each with the vLLM frames that made it (the lab's way to trace a term of the
activation peak instead of fitting it).
  PYTHONPATH=/tmp/site26 python3 peak_snapshot.py '{"model": DIR, "gmu": 0.9, "eager": true, "max_num_seqs": 1,
                                                   "mnbt": 8192, "max_model_len": 8192}'   (startup.py's keys)
Lines starting with SNAP are this script's: the peak above the profile's start (MiB), then one line per live
allocation of 1 MiB or more (MiB, then its innermost vLLM frames), then the rest summed. With "phase": "load" it
records load_model instead: what the blocks alive after loading hold beyond what was asked for them (the caching
allocator's rest of segment), in all and by the vLLM frame that allocated them."""
import json
import os
import sys

MiB = 1 << 20


def vllm_frames(frames: list[dict], n: int = 4) -> str:
    """The innermost n frames inside vLLM's own files (site-packages path cut), innermost first."""
    out = []
    for f in frames:
        name = f.get("filename", "")
        if "/vllm/" in name and "/vllm/utils/" not in name:
            out.append(f"{name.split('/vllm/', 1)[1]}:{f.get('line')}:{f.get('name')}")
        if len(out) == n:
            break
    return " < ".join(out) or "(outside vLLM)"


def live_at_peak(trace: list[dict]) -> tuple[int, list[dict]]:
    """Replay the allocator's trace: the highest allocated total above the start, and the blocks alive then."""
    free_kind = "free_requested" if any(e["action"] == "free_requested" for e in trace) else "free_completed"
    cur = peak = peak_at = 0
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            cur += e["size"]
            if cur > peak:
                peak, peak_at = cur, i
        elif e["action"] == free_kind:
            cur -= e["size"]
    live: dict[int, dict] = {}
    for e in trace[: peak_at + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == free_kind:
            live.pop(e["addr"], None)
    return peak, sorted(live.values(), key=lambda e: -e["size"])


def report_slack(snap: dict) -> None:
    """The active blocks after loading: their size against what was requested, in all and by allocating frame."""
    import collections

    frames: dict[int, str] = {}
    device = snap["device_traces"][0] if snap.get("device_traces") else []
    for e in device:
        if e["action"] == "alloc":
            frames[e["addr"]] = vllm_frames(e.get("frames", []), 2)
    size = asked = n = 0
    by = collections.Counter()
    count = collections.Counter()
    for seg in snap["segments"]:
        addr = seg["address"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                n += 1
                size += b["size"]
                asked += b["requested_size"]
                slack = b["size"] - b["requested_size"]
                if slack:
                    key = frames.get(addr, "(before the record)")
                    by[key] += slack
                    count[key] += 1
            addr += b["size"]
    print(f"SNAP load blocks {n} allocated_mib {size / MiB:.1f} requested_mib {asked / MiB:.1f} "
          f"slack_mib {(size - asked) / MiB:.2f}", flush=True)
    for key, slack in by.most_common(12):
        print(f"SNAP slack {slack / MiB:8.2f} x{count[key]} {key}", flush=True)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import torch
    from vllm import LLM

    from startup import engine_kwargs

    def recording(original, report):
        """`original` run with torch's allocator history recorded, then `report(snapshot)`."""
        def recorded(self, *a, **kw):
            torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
            try:
                return original(self, *a, **kw)
            finally:
                snap = torch.cuda.memory._snapshot()
                torch.cuda.memory._record_memory_history(enabled=None)
                report(snap)
        return recorded

    def report_peak(snap: dict) -> None:
        trace = snap["device_traces"][torch.cuda.current_device()]
        peak, live = live_at_peak(trace)
        print(f"SNAP events {len(trace)} peak_mib {peak / MiB:.1f}", flush=True)
        small = 0
        for e in live:
            if e["size"] >= MiB:
                print(f"SNAP live {e['size'] / MiB:9.1f} {vllm_frames(e.get('frames', []))}", flush=True)
            else:
                small += e["size"]
        print(f"SNAP small_mib {small / MiB:.1f} blocks {sum(1 for e in live if e['size'] < MiB)}", flush=True)

    from vllm.v1.worker import gpu_model_runner  # Model Runner V1
    from vllm.v1.worker.gpu import model_runner as v2  # Model Runner V2

    phase = cfg.pop("phase", "profile")
    for runner in (gpu_model_runner.GPUModelRunner, v2.GPUModelRunner):
        if phase == "load":
            runner.load_model = recording(runner.load_model, report_slack)
        else:
            runner.profile_run = recording(runner.profile_run, report_peak)
    LLM(**engine_kwargs({"max_model_len": 8192, "max_num_seqs": 1, "mnbt": 8192, **cfg}))
    print("SNAP done", flush=True)


if __name__ == "__main__":
    main()
