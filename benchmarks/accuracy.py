"""Predicted vs logged figures for every real vLLM log this repository knows.

Run: python benchmarks/accuracy.py [LOG ...]   (default: every log under tests/fixtures)
For each log: the budget terms (GiB) predicted from the model config, the flags the log states
and the bundled coefficients, next to what vLLM logged, and the error; then the KV plan from the
logged available memory (block size, padding, KV cache tokens, auto-fit max_model_len).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tabulate import tabulate

from vrambudget.explain import compare_file
from vrambudget.planner import plan_kv
from vrambudget.predict import layout_for
from vrambudget.units import GiB

ROOT = Path(__file__).resolve().parent.parent


def main(paths: list[str]) -> int:
    # lab-*: simulated-card runtime experiments (the H100's total with a smaller card's budget); they are
    # checked by tests/test_runtime.py, not against a plain prediction for the H100
    logs = [Path(p) for p in paths] or sorted(p for p in (ROOT / "tests" / "fixtures").rglob("*.log")
                                              if not any(part.startswith("lab-") for part in p.parts))
    worst = 0.0
    rows = []
    for path in logs:
        cmp = compare_file(path)
        name = f"{path.parent.name}/{path.stem}"[-48:]
        f, d = cmp.facts, cmp.prediction.deployment
        for term, logged, pred, err in cmp.rows:
            if logged is None:
                continue
            rows.append([name, term, f"{logged:.2f}", f"{pred:.2f}", f"{err:+.2f}"])
            if term == "available KV cache":
                worst = max(worst, abs(err))
        if f.kv_cache_tokens is None or f.available_kv_gib is None:
            continue  # a refused startup: its budget rows above are still compared
        lay = layout_for(d)
        plan = plan_kv(lay, round(f.available_kv_gib * GiB), f.max_model_len or d.max_model_len, d.rules)
        rows.append([name, "KV plan: block / tokens / len",
                     f"{f.block_size or 16} / {f.kv_cache_tokens:,} / {f.max_model_len:,}",
                     f"{lay.block_size} / {plan.kv_cache_tokens:,} / {min(plan.ceiling, d.max_model_len):,}", ""])
    print(tabulate(rows, headers=["log", "term", "logged", "predicted", "error GiB"], tablefmt="simple",
                   disable_numparse=True))
    print(f"\nworst available-KV error: {worst:.3f} GiB over {len(logs)} logs (target 0.15)")
    return 0 if worst <= 0.15 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
