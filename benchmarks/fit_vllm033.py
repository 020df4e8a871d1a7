"""Where profiles/coefficients/vllm-0.33.json's figures come from: the vLLM 0.33.0 lab startups
(tests/fixtures/lab-vllm-0.33.0-h200, plan benchmarks/lab/plans/h200x4-0.33.0-lab.json), each term from the lines
that state it. Run from the repository root: `python benchmarks/fit_vllm033.py` prints every figure, the logs it
comes from and its residuals (leave-one-out where several logs share one)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vrambudget.budget import features, v2_runner_buffers  # noqa: E402
from vrambudget.comparison import deployment_from_log  # noqa: E402
from vrambudget.logparse import parse_log  # noqa: E402
from vrambudget.units import GiB, MiB  # noqa: E402

LAB = ROOT / "tests" / "fixtures" / "lab-vllm-0.33.0-h200"
# the host's model folders (the plan's "models") and the checkpoint each was written from
MODELS = {"/tmp/models/qwen3-8b": "qwen3-8b", "/tmp/models/llama-3.1-8b": "llama-3.1-8b",
          "/tmp/models/qwen3-30b-a3b": "tests/fixtures/models/qwen3-30b-a3b",
          "/tmp/models/gpt-oss-20b": "tests/fixtures/models/gpt-oss-20b",
          "/tmp/models/deepseek-v3-5l": "tests/fixtures/models/lab-deepseek-v3-5l",
          "/tmp/models/qwen3.5-9b": "tests/fixtures/models/qwen3.5-9b"}


def lab_logs() -> list[tuple[str, object, object]]:
    """(name, facts, deployment) of every 0.33.0 startup log that reached its budget line."""
    out = []
    for path in sorted(LAB.rglob("*.log")):
        if path.parent.name in ("vision", "moe-tokens"):  # issue 46's later startups (plans h200x4-0.33.0-issue46b-d)
            continue
        facts = parse_log(path.read_text())
        model = MODELS.get(str(facts.args.get("model")))
        if facts.available_kv_gib is None or (model is None and path.parent.name == "families"):  # issue 46's too
            continue
        out.append((str(path.relative_to(LAB)), facts, deployment_from_log(facts, model)))
    return out


# the vision families' text models (plan h200x4-0.33.0-issue46b): more layer counts for the graph estimate's fit
VISION = {"/tmp/mm/gemma-3-27b-it": "tests/fixtures/models/gemma-3-27b-it",
          "/tmp/mm/qwen3-vl-8b-instruct": "tests/fixtures/models/qwen3-vl-8b-instruct",
          "/tmp/mm/qwen2.5-vl-7b-instruct": "tests/fixtures/models/qwen2.5-vl-7b-instruct"}


def graph_logs() -> list[tuple[str, object, object]]:
    """lab_logs and the vision families' language-model-only startups (0.33.0, H200): the graph estimate's sample."""
    out = lab_logs()
    for path in sorted((LAB / "vision").glob("*-lmo.log")):  # language-model-only (plan h200x4-0.33.0-issue46b)
        facts = parse_log(path.read_text())
        model = VISION.get(str(facts.args.get("model")))
        if facts.available_kv_gib is not None and model:
            out.append((str(path.relative_to(LAB)), facts, deployment_from_log(facts, model)))
    return out


def kind(d) -> str:
    a = d.model.arch
    return ("tp" if d.tp > 1 else "mla" if a.uses_mla else "mxfp4" if (a.quantization or {}).get("quant_method")
            == "mxfp4" else "moe" if a.moe else "hybrid" if a.is_hybrid else "dense")


def loo(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    out = []
    for i in range(len(y)):
        m = np.ones(len(y), bool)
        m[i] = False
        c2, *_ = np.linalg.lstsq(X[m], y[m], rcond=None)
        out.append(X[i] @ c2 - y[i])
    return coef, X @ coef - y, np.array(out)


def main() -> None:
    logs = lab_logs()
    # one row per distinct configuration (a warm log repeats its cold twin's graphs and kept buffers)
    print("== kept beyond the weights: consumed - weights - V2's request state - a kept fused-MoE scratch")
    rest: dict[str, list[float]] = {}
    for name, f, d in logs:
        feats = features(d)
        r = (f.consumed_gib - f.weights_gib) * GiB - v2_runner_buffers(d) - max(feats.moe_workspace_bytes, 0)
        rest.setdefault(kind(d), []).append(r / GiB)
        print(f"  {name:30} {kind(d):6} {r / GiB:+.3f} GiB")
    for k, v in rest.items():
        print(f"  {k:6} mean {statistics.mean(v):.4f} GiB over {len(v)} logs")

    print("== the sampler's peak per logit (Model Runner V2, 0.33: both dummy passes), logs where it decides")
    per = []
    for name, f, d in logs:
        feats = features(d)
        rows = min(feats.seqs, feats.tokens)
        if rows < 512 or kind(d) == "mla":
            continue
        held = feats.tokens * feats.hidden * 2
        per.append(((f.activation_gib * GiB - held) / (rows * feats.vocab), name))
        print(f"  {name:30} {per[-1][0]:.3f} B per logit")
    print(f"  mean {statistics.mean(p for p, _ in per):.3f}")

    print("== a cold compile's peak: factor x vocab x hidden x 2 B + per token x hidden + a drafter's")
    rows_, ys, names = [], [], []
    for name, f, d in logs:
        feats = features(d)
        if f.compile != "cold" or min(feats.seqs, feats.tokens) >= 512 or d.tp > 1 or kind(d) not in ("dense", "hybrid"):
            continue
        rows_.append([feats.vocab * feats.hidden * 2, feats.tokens * feats.hidden, 1.0 if feats.drafter_graphs else 0.0])
        ys.append(f.activation_gib * GiB)
        names.append(name)
    coef, res, _ = loo(np.array(rows_, float), np.array(ys))
    print(f"  factor {coef[0]:.4f}, per token x hidden {coef[1]:.3f} B, drafter {coef[2] / GiB:.4f} GiB")
    for n, r in zip(names, res):
        print(f"    {n:30} residual {r / GiB:+.3f} GiB")

    print("== Model Runner V2's CUDA-graph estimate (dense and hybrid, one GPU): a PIECEWISE graph's memory grows with "
          "the pieces it captures, one a layer")
    X, others = [], []
    seen = set()
    for name, f, d in graph_logs():
        feats = features(d)
        n_pw, _, n_full, s_full = feats.graph_sizes
        row = [n_pw * feats.layers, n_full * s_full * feats.hidden, (n_pw + n_full) if feats.drafter_graphs else 0.0]
        key = (tuple(row), kind(d), f.cudagraph_estimate_gib)
        if key in seen:
            continue
        seen.add(key)
        (X if kind(d) in ("dense", "hybrid") else others).append((name, row, f.cudagraph_estimate_gib * GiB, kind(d)))
    A = np.array([r for _, r, _, _ in X], float)
    b = np.array([e for _, _, e, _ in X])
    coef, res, lo = loo(A, b)
    print(f"  per PIECEWISE graph and layer {coef[0] / MiB:.4f} MiB, per FULL graph x largest FULL x hidden {coef[1]:.4f} B, "
          f"per drafter graph {coef[2] / MiB:.3f} MiB")
    for (n, _, e, _), r, l in zip(X, res, lo):
        print(f"    {n:30} logged {e / GiB:.2f} residual {r / GiB:+.3f} leave-one-out {l / GiB:+.3f} GiB")
    print(f"  leave-one-out from {lo.min() / GiB:+.3f} to {lo.max() / GiB:+.3f} GiB ({lo.min():.0f} .. {lo.max():.0f} B)")
    for n, row, e, k in others:
        dense = float(np.array(row) @ coef)
        print(f"  {k:6} {n:30} logged {e / GiB:.2f} GiB, the dense estimate {dense / GiB:.2f}: ratio {e / dense:.3f}")

    mla_graphs()
    sparse_mla_graphs()
    tower_graph_factors()


FIT = ("dsv3-s64.log", "dsv3-t8k-mml4k.log", "dsv3-s512.log", "dsv3-d-cold.log")


def mla_graphs() -> None:
    """MLA on FLASH_ATTN_MLA (graphs.mla_graph_estimate): logged estimate - the split buffers - (N_FULL - 1) MiB
    = base + per token and head x (F + B2) x heads, least squares over DeepSeek-V3 cut to 5 layers at 64, 256 (H100)
    and 512 / 1024 seqs, where the allocator's multiplicity m is 1 (graphs.mla_graph_estimate's rule); the 128-seq
    log (m = 2) and the later startups (32 and 192 seqs, Kimi K2 cut to 2 layers: plan h200x4-0.33.0-issue46d; 96 and
    152 seqs: -46i) are printed against it."""
    from vrambudget.graphs import mla_graph_estimate

    print("== MLA's V2 graph estimate (FLASH_ATTN_MLA): base + per FULL-batch token and head x (F + B2) x heads beside the split buffers")
    h100 = ROOT / "tests" / "fixtures" / "lab-vllm-0.33.0-h100" / "moe-tokens" / "dsv3-t8k-mml4k.log"
    paths = [LAB / "moe-tokens" / "dsv3-s64.log", h100, LAB / "moe-tokens" / "dsv3-s512.log",
             LAB / "families" / "dsv3-d-cold.log", LAB / "moe-tokens" / "dsv3-s128.log",
             LAB / "moe-tokens" / "dsv3-s32.log", LAB / "moe-tokens" / "dsv3-s192.log", LAB / "families" / "kimi2l-d.log",
             LAB / "moe-tokens" / "dsv3-s96.log", LAB / "moe-tokens" / "dsv3-s152.log"]
    models = {"kimi2l-d.log": "tests/fixtures/models/lab-kimi-k2-2l"}
    class Zero:  # mla_graph_estimate with no fitted part: its split buffers and (N_FULL - 1) MiB alone
        items = {"cudagraph_v2_mla_base_bytes": 0.0, "cudagraph_v2_mla_per_full_token_head_bytes": 0.0}

        def __getitem__(self, k):
            return self.items[k]

    rows, ys, names, probe = [], [], [], []
    for path in paths:
        facts = parse_log(path.read_text())
        d = deployment_from_log(facts, models.get(path.name, "tests/fixtures/models/lab-deepseek-v3-5l"))
        feats = features(d)
        _, _, _, largest = feats.graph_sizes
        second = feats.second_full
        split = mla_graph_estimate(feats, Zero())[0]
        probe.append((path.name, feats, facts.cudagraph_estimate_gib * GiB))
        if path.name in FIT:
            rows.append([1.0, (largest + second) * feats.mla_heads])
            ys.append(facts.cudagraph_estimate_gib * GiB - split)
            names.append(path.name)
    coef, res, lo = loo(np.array(rows), np.array(ys))
    print(f"  base {coef[0]:.0f} B ({coef[0] / GiB:.4f} GiB), per FULL-batch token and head {coef[1]:.1f} B")
    c = {"cudagraph_v2_mla_base_bytes": coef[0], "cudagraph_v2_mla_per_full_token_head_bytes": coef[1]}

    class C:  # the two fitted figures as a Coefficients stand-in
        items = c

        def __getitem__(self, k):
            return c[k]

    for name, feats, logged in probe:
        est, top = mla_graph_estimate(feats, C())
        print(f"    {name:24} logged {logged / GiB:.3f} estimate {est / GiB:.3f} (band {est / GiB:.3f} .. {top / GiB:.3f}) "
              f"residual {(est - logged) / GiB:+.3f} GiB")


def sparse_mla_graphs() -> None:
    """Sparse MLA (graphs.sparse_mla_graph_estimate): the base = the logged estimate less the decode buffers of the two
    largest FULL batches and (N_FULL - 1) MiB, its mean over the three graph-mode startups (all in sample)."""
    print("== sparse MLA's V2 graph estimate: base beside the per-sequence decode buffers")
    models = {"dsv32-d.log": "lab-deepseek-v3.2-4l", "dsv32-fp8.log": "lab-deepseek-v3.2-4l", "glm5-d.log": "lab-glm-5-4l"}
    bases = []
    for name, model in models.items():
        facts = parse_log((LAB / "families" / name).read_text())
        feats = features(deployment_from_log(facts, f"tests/fixtures/models/{model}"))
        _, _, n_full, largest = feats.graph_sizes
        bases.append(facts.cudagraph_estimate_gib * GiB - feats.sparse_mla_bytes_per_seq * (largest + feats.second_full)
                     - (n_full - 1) * MiB)
        print(f"  {name:16} logged {facts.cudagraph_estimate_gib:.2f} GiB, base {bases[-1]:.0f} B")
    mean = statistics.mean(bases)
    print(f"  base {mean:.0f} B ({mean / GiB:.3f} GiB), residuals "
          + ", ".join(f"{(mean - b) / GiB:+.3f}" for b in bases) + " GiB")


# the logs behind the vision models' V2 graph factors (vllm-0.33.json: tower embeds, prefix LM, Gemma 4 26B-A4B)
FACTOR_LOGS = [("lab-vllm-0.33.0-h100/vision/q3vl-8b-vis", "qwen3-vl-8b-instruct"),
               ("lab-vllm-0.33.0-h200/vision/q3vl-8b-lmo", "qwen3-vl-8b-instruct"),
               ("lab-vllm-0.33.0-h100/vision/q25vl-7b-vis", "qwen2.5-vl-7b-instruct"),
               ("lab-vllm-0.33.0-h200/vision/q25vl-7b-lmo", "qwen2.5-vl-7b-instruct"),
               ("lab-vllm-0.33.0-h100/vision/m3-vis", "lab-mistral-small-3.1-24b-instruct-2503"),
               ("lab-vllm-0.33.0-h200/vision/m3-lmo", "lab-mistral-small-3.1-24b-instruct-2503"),
               ("lab-vllm-0.33.0-h100/vision/g3-27b-vis", "gemma-3-27b-it"),
               ("lab-vllm-0.33.0-h100/vision/g3-4b-vis", "gemma-3-4b-it"),
               ("lab-vllm-0.33.0-h100/vision/g4-vis", "gemma-4-26b-a4b"),
               ("lab-vllm-0.33.0-h200/vision/g4-lmo", "gemma-4-26b-a4b"),
               ("lab-vllm-0.33.0-h200/vision/g4-lmo-s128", "gemma-4-26b-a4b")]


def tower_graph_factors() -> None:
    """The vision models' logged V2 graph estimate over the dense figures (graphs.cudagraph_estimate_v2 without a
    kind's factor), with their tower and without: where the factors in vllm-0.33.json come from."""
    from dataclasses import replace

    from vrambudget.coefficients import load
    from vrambudget.graphs import cudagraph_estimate_v2

    print("== the vision models' V2 graph estimate over the dense figures")
    c = load("0.33")
    for log, model in FACTOR_LOGS:
        facts = parse_log((ROOT / "tests" / "fixtures" / f"{log}.log").read_text())
        feats = features(deployment_from_log(facts, f"tests/fixtures/models/{model}"))
        dense = cudagraph_estimate_v2(replace(feats, embeds_tower=False, prefix_lm_tower=False, moe=False,
                                              model_graph_factor=""), c)
        print(f"  {log:44} logged {facts.cudagraph_estimate_gib:.2f} GiB, the dense figures {dense / GiB:.3f}: "
              f"x{facts.cudagraph_estimate_gib * GiB / dense:.3f}")


if __name__ == "__main__":
    main()
