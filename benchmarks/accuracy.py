"""Predicted vs logged figures for every real vLLM log this repository knows.

Run: python benchmarks/accuracy.py [LOG ...]   (default: every log under tests/fixtures)
For each log: the budget terms (GiB) predicted from the model config, the flags the log states
and the bundled coefficients, next to what vLLM logged, and the error; then the KV plan from the
logged available memory (block size, padding, KV cache tokens, auto-fit max_model_len).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

from vrambudget import gpus
from vrambudget.errors import UserError
from vrambudget.explain import compare_file, deployment_from_log
from vrambudget.logparse import parse_log
from vrambudget.planner import plan_kv, reproduces_within_rounding
from vrambudget.predict import layout_for
from vrambudget.units import GiB

ROOT = Path(__file__).resolve().parent.parent
# logs whose vLLM read the config differently from its file (transformers 5.17 hid Gemma 4's global head dims):
# planned with the config as that vLLM read it (tests/fixtures/models/*-tf517/SOURCE.md)
AS_READ = {"g31-e-bf16.log": "gemma-4-31b-text-tf517", "g26-e-bf16.log": "gemma-4-26b-a4b-text-tf517"}


def group(f, d) -> str:
    """The summary row a log counts in: its vLLM version and GPU kind."""
    return f"vLLM {f.vllm_version or d.rules.version} | {d.gpu.name}"


def public_rows(by_gpu: dict[str, dict]) -> list[list[str]]:
    """Logs other people published (tests/fixtures/public-logs): the KV plan from their logged available
    memory, and the budget terms this tool cannot predict for them, named instead of guessed."""
    pub = ROOT / "tests" / "fixtures" / "public-logs"
    srcs = {k: v for k, v in json.loads((pub / "sources.json").read_text()).items() if not k.startswith("_")}
    rows = []
    for name, src in sorted(srcs.items()):
        f = parse_log((pub / name).read_text())
        d = deployment_from_log(f, src["model"], gpus.lookup(src["gpu"]))
        plan = plan_kv(layout_for(d), round(f.available_kv_gib * GiB), f.max_model_len, d.rules)
        exact = plan.kv_cache_tokens == f.kv_cache_tokens
        label = f"public/{Path(name).stem}"[-48:]
        rows.append([label, "KV plan: tokens (from logged available)", f"{f.kv_cache_tokens:,}",
                     f"{plan.kv_cache_tokens:,}", "exact" if exact else "DIFFERS"])
        rows.append([label, "available KV cache", f"{f.available_kv_gib:.2f}", "unknown term",
                     "; ".join(src["unknown_terms"])])
        g = by_gpu[group(f, d)]
        g["logs"] += 1
        g["plans"].append(exact)
        g["unknown"].update(src["unknown_terms"])
    return rows


def main(paths: list[str]) -> int:
    # lab-*: simulated-card runtime experiments (the H100's total with a smaller card's budget); they are
    # checked by tests/test_runtime.py, not against a plain prediction for the H100. public-logs: below.
    # lab-vllm-0.26.0-*: real 0.26.0 startups on the lab's own H100 / 2x H200 (their README).
    fx = ROOT / "tests" / "fixtures"
    logs = [Path(p) for p in paths] or sorted(
        p for p in fx.rglob("*.log")
        if not any(part.startswith(("lab-", "public-")) for part in p.parts) or "lab-vllm-0.26.0" in str(p))
    worst = 0.0
    rows = []
    by_gpu: dict[str, dict] = defaultdict(lambda: {"logs": 0, "errors": [], "plans": [], "unknown": set()})
    for path in logs:
        name = f"{path.parent.name}/{path.stem}"[-48:]
        try:
            model = ROOT / "tests" / "fixtures" / "models" / AS_READ[path.name] if path.name in AS_READ else None
            cmp = compare_file(path, model=str(model) if model else None)
        except UserError as e:  # a model the tool refuses (Gemma 4): said, not guessed
            rows.append([name, "not modelled", "", "", str(e)[:90]])
            continue
        f, d = cmp.facts, cmp.prediction.deployment
        key = group(f, d)
        by_gpu[key]["logs"] += 1
        for term, logged, pred, err in cmp.rows:
            if logged is None:
                continue
            rows.append([name, term, f"{logged:.2f}", f"{pred:.2f}", f"{err:+.2f}"])
            if term == "available KV cache":
                worst = max(worst, abs(err))
                by_gpu[key]["errors"].append(abs(err))
        if f.kv_cache_tokens is None or f.available_kv_gib is None:
            continue  # a refused startup: its budget rows above are still compared
        lay = layout_for(d)
        mml = f.max_model_len or d.max_model_len
        plan = plan_kv(lay, round(f.available_kv_gib * GiB), mml, d.rules)
        exact = plan.kv_cache_tokens == f.kv_cache_tokens
        rounding = not exact and reproduces_within_rounding(lay, f.available_kv_gib, mml, f.kv_cache_tokens, d.rules,
                                                            d.model.arch.max_position_embeddings)
        by_gpu[key]["plans"].append(exact or rounding)
        rows.append([name, "KV plan: block / tokens / len",
                     f"{f.block_size or 16} / {f.kv_cache_tokens:,} / {f.max_model_len:,}",
                     f"{lay.block_size} / {plan.kv_cache_tokens:,} / {min(plan.ceiling, d.max_model_len):,}",
                     "exact" if exact else "within the logged rounding" if rounding else "DIFFERS"])
    if not paths:
        rows += public_rows(by_gpu)
    print(tabulate(rows, headers=["log", "term", "logged", "predicted", "error GiB"], tablefmt="simple",
                   disable_numparse=True))
    summary = [[gpu, g["logs"],
                f"{statistics.median(g['errors']):.3f}" if g["errors"] else "unknown: " + "; ".join(sorted(g["unknown"])),
                f"{sum(g['plans'])}/{len(g['plans'])}"] for gpu, g in sorted(by_gpu.items())]
    print("\nper vLLM version and GPU kind (0.20.2 and 0.26.0 measured here; 0.33: rules from source, no log)")
    print(tabulate(summary, headers=["vLLM | GPU", "logs", "median |available KV error| GiB", "KV plan exact"],
                   tablefmt="simple", disable_numparse=True))
    print("(KV plan exact: vLLM's tokens and length from the logged available memory, or from a whole number of blocks\n"
          " inside its 0.01 GiB rounding, marked 'within the logged rounding' above)")
    print(f"\nworst available-KV error: {worst:.3f} GiB over {len(logs)} logs (target 0.15)")
    return 0 if worst <= 0.15 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
