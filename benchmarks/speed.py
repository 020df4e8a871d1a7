"""Speed goals, measured (not asserted in tests): `vrambudget predict` end to end under 0.5 s on a
2-core machine, and a 100-cell ceiling table under 1 s.

Run: python benchmarks/speed.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time


# as installed by pip, a user's modules are byte-compiled: measure that way even where the environment
# turns byte-compiling off (PYTHONDONTWRITEBYTECODE), after one warm-up run that writes the caches
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str], n: int = 5) -> float:
    subprocess.run(cmd, check=False, capture_output=True, env=ENV)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, check=False, capture_output=True, env=ENV)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    exe = shutil.which("vrambudget")
    cmd = [exe] if exe else [sys.executable, "-m", "vrambudget.cli"]
    predict_s = wall(cmd + ["predict", "--gpu", "4060ti", "--mtp", "2", "--gmu", "0.95"])
    table_cmd = cmd + ["table", "--gpu", "4060ti", "--gmu-min", "0.75", "--gmu-max", "0.99", "--json"]
    table_s = wall(table_cmd)  # 25 GMU rows x 4 columns = 100 cells, process start included

    from vrambudget import coefficients
    from vrambudget.hardware import catalog as gpus
    from vrambudget.model.checkpoint import resolve_model
    from vrambudget.deployment import Flags, resolve
    from vrambudget.predict import ceiling_table
    from vrambudget.vllm_rules import rules_for

    d = resolve(resolve_model(None), gpus.lookup("4060ti"), rules_for(None), Flags())
    c = coefficients.load("0.33")
    t = time.perf_counter()
    ceiling_table(d, c, [round(0.75 + i / 100, 2) for i in range(25)])
    inproc = time.perf_counter() - t
    print(f"predict end to end (median of 5): {predict_s:.3f} s  (goal < 0.5 s)")
    print(f"100-cell table end to end:        {table_s:.3f} s  (goal < 1 s)")
    print(f"100-cell table in process:        {inproc:.3f} s")
    return 0 if predict_s < 0.5 and table_s < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
