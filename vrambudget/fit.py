"""`vrambudget fit`: refit the measured coefficients from probe records (or raw vLLM logs) with
scipy, and write them as a profile `predict` picks up for that GPU / model / vLLM version.

Each term is refitted only from records that measure it; what no record measures keeps its
previous value and source. The error of the predicted available KV memory is reported before
and after, per record.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .budget import available_kv, features

from .graphs import cudagraph_estimate

from .activation import language_model_peak, peaks_add, sampler_peak

from .features import Features
from .coefficients import Coefficient, Coefficients
from .errors import UserError
from .profiles import read_jsonl, read_text
from .units import GiB


@dataclass
class Sample:
    """One startup's features and what its log measured (GiB as logged)."""

    source: str
    f: Features
    weights_gib: float | None
    activation_gib: float | None
    non_torch_gib: float | None
    cudagraph_gib: float | None
    available_kv_gib: float | None
    cuda_context_gib: float | None
    runtime_growth_bytes: int | None = None
    prompt_tokens: int = 0  # of the verify request that measured runtime_growth_bytes
    gpu: str | None = None  # the card it ran on (a record's gpu_key, a log's GPU): one profile is one card's
    simulated: bool = False  # a smaller card simulated on a bigger GPU: its 'context' holds the blocker's memory


_FACT_KEYS = ("weights_gib", "activation_gib", "non_torch_gib", "cudagraph_estimate_gib", "available_kv_gib",
              "cuda_context_gib")


_TiB = 1 << 40


def _features(fe: Any) -> Features | None:
    """A record's features, typed (msgspec converts the JSON object into the Features dataclass, checking every
    field's type) and bounded: every count at least 0 (moe_workspace_bytes -1: not computed) and below 1 PiB."""
    import msgspec

    try:
        f = msgspec.convert(fe, Features, strict=False)
    except (msgspec.ValidationError, TypeError):
        return None
    numbers = [v for k, v in vars(f).items() if isinstance(v, int) and not isinstance(v, bool)
               and k != "moe_workspace_bytes"]
    numbers += list(f.graph_sizes)
    if any(not 0 <= v < 1024 * _TiB for v in numbers) or f.tp < 1 or not -1 <= f.moe_workspace_bytes < 1024 * _TiB:
        return None
    return f


def sample_from_record(rec: dict[str, Any], where: str = "a record") -> Sample | None:
    """A startup record's sample (None for a record without the probe's features and facts); `where` names it in
    an error ('runs/records.jsonl line 3'). Figures must be finite GiB from 0 to 1 PiB (the strict JSON reader has
    refused NaN and Infinity already)."""
    if "features" not in rec or "facts" not in rec:
        return None
    fx, fe = rec["facts"], rec["features"]
    bad = (not isinstance(fx, dict) or not isinstance(fe, dict)
           or any(not (fx.get(k) is None or (isinstance(fx.get(k), (int, float)) and not isinstance(fx.get(k), bool)
                                            and -1024 * 1024 <= fx[k] <= 1024 * 1024)) for k in _FACT_KEYS))
    feats = None if bad else _features(fe)
    if feats is None:
        raise UserError(f"{where}: a startup record whose features or facts vrambudget cannot read (a figure of the "
                        "wrong type or out of range); was it written by `vrambudget probe`? remove that line")
    inputs = rec.get("inputs") if isinstance(rec.get("inputs"), dict) else {}
    total = inputs.get("gpu_total_bytes")
    total_gib = total / GiB if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None
    sample = Sample(str(rec.get("log", "record")), feats, *(fx.get(k) for k in _FACT_KEYS),
                    gpu=next((v for v in (rec.get("gpu_name"), rec.get("gpu_key")) if isinstance(v, str) and v
                              and v != "auto"), None),
                    simulated=bool(rec.get("simulated")))
    check_physical(sample, total_gib, where)
    return sample


# what a CUDA context (and what else sits before vLLM's first snapshot) can hold on a card running vLLM alone
CONTEXT_LIMIT_GIB = 8.0


def check_physical(s: Sample, total_gib: float | None, where: str) -> None:
    """A startup's figures against what its card can hold: each term from 0 to the card's memory (what stayed beyond
    the weights a little below 0 at most, the log's rounding), the KV memory within +-the card, the CUDA context
    below CONTEXT_LIMIT_GIB (a simulated card's is the blocker's too and is not fitted), the budget no more than the
    card. One line naming the figure, where one is not."""
    total = total_gib if total_gib is not None else (s.f.requested_bytes / GiB or None)
    if total is None:
        return
    checks = [("weights", s.weights_gib, 0.0, total), ("activation peak", s.activation_gib, 0.0, total),
              ("non-torch memory", s.non_torch_gib, -0.05, total), ("CUDA graph estimate", s.cudagraph_gib, 0.0, total),
              ("available KV memory", s.available_kv_gib, -total, total),
              ("budget", s.f.requested_bytes / GiB, 0.0, total * 1.0001 + 0.01)]
    if not s.simulated:
        checks.append(("CUDA context", s.cuda_context_gib, 0.0, min(CONTEXT_LIMIT_GIB, total)))
    for name, value, low, high in checks:
        if value is not None and not low <= value <= high:
            raise UserError(f"{where}: its {name} is {value:.4g} GiB, not what a card of {total:.2f} GiB can hold "
                            f"({low:g} to {high:.2f}); remove that record or log")


def sample_from_log(path: Path, model: str | None = None) -> Sample:
    from .comparison import deployment_from_log
    from .logparse import parse_log, require_vllm

    facts = require_vllm(parse_log(read_text(path)), str(path))
    d = deployment_from_log(facts, model)
    s = Sample(str(path), features(d), facts.weights_gib, facts.activation_gib, facts.non_torch_gib,
               facts.cudagraph_estimate_gib, facts.available_kv_gib, facts.cuda_context_gib, gpu=d.gpu.name)
    check_physical(s, d.gpu.total_gib, str(path))
    return s


def _records(path: Path) -> list[Sample]:
    """The started startups of a records file, with the runtime growth their verify lines measured."""
    out: list[Sample] = []
    by_attempt: dict[Any, Sample] = {}
    for i, r in enumerate(read_jsonl(path), 1):
        if r.get("kind") == "verify":
            s, v = by_attempt.get(r.get("attempt", -1)), r.get("verify") or {}
            if s and isinstance(v, dict) and v.get("ok") and v.get("gpu_used_peak") and v.get("gpu_used_before"):
                s.runtime_growth_bytes = max(0, v["gpu_used_peak"] - v["gpu_used_before"])
                s.prompt_tokens = int(v.get("prompt_tokens") or 0)
            continue
        s = sample_from_record(r, f"{path} record {i}")
        if s and r.get("outcome") == "started":
            by_attempt[r.get("attempt", len(by_attempt))] = s
            out.append(s)
    return out


def _records_file(p: Path) -> Path:
    """A records file, or a probe's runs folder's records.jsonl."""
    if p.is_dir():
        if not (p / "records.jsonl").is_file():
            raise UserError(f"{p} is a folder with no probe records (records.jsonl): give the records or the logs")
        return p / "records.jsonl"
    return p


def record_scope(paths: list[Path]) -> dict[str, str | None]:
    """The vLLM version, GPU key and model the first probe record among `paths` was measured with (None each where
    no record says; logs say theirs themselves)."""
    for p in paths:
        p = _records_file(p) if p.exists() else p
        if p.suffix != ".jsonl" or not p.is_file():
            continue
        for i, r in enumerate(read_jsonl(p), 1):
            if "inputs" not in r:
                continue
            inputs = r["inputs"]
            scope = {"vllm_version": r.get("vllm_version"), "gpu_key": r.get("gpu_key"),
                     "model": inputs.get("model") if isinstance(inputs, dict) else "?"}
            if not all(v is None or isinstance(v, str) for v in scope.values()) or scope["model"] == "?":
                raise UserError(f"{p} record {i}: its inputs, GPU or vLLM version are not what `vrambudget probe` "
                                "writes; remove that line, or give --gpu, --model and --vllm-version")
            return scope
    return {"vllm_version": None, "gpu_key": None, "model": None}


def load_samples(paths: list[Path], model: str | None = None) -> list[Sample]:
    """Startup records (*.jsonl, or a probe's runs folder holding records.jsonl) and vLLM logs (anything else);
    verify lines attach runtime growth."""
    out: list[Sample] = []
    for p in paths:
        if not p.exists():
            raise UserError(f"{p} does not exist")
        p = _records_file(p)
        out.extend(_records(p) if p.suffix == ".jsonl" else [sample_from_log(p, model)])
    if not out:
        raise UserError(f"{', '.join(map(str, paths))}: no started vLLM startup (a probe record with outcome "
                        "'started', or a startup log): nothing to fit")
    cards = sorted({s.gpu for s in out if s.gpu})
    if len(cards) > 1:  # a profile is one card's: another card's figures would move this one's coefficients
        raise UserError(f"startups of {len(cards)} cards ({', '.join(cards[:4])}): fit one card's records or logs at a "
                        "time (each gets its own profile)")
    return out


@dataclass
class FitResult:
    coefficients: dict[str, Coefficient]
    changed: list[str]
    before: list[tuple[str, float]]  # (source, predicted - logged available KV, GiB)
    after: list[tuple[str, float]]


def _errors(samples: list[Sample], c: Coefficients) -> list[tuple[str, float]]:
    return [(s.source, available_kv(s.f, c) / GiB - s.available_kv_gib) for s in samples
            if s.available_kv_gib is not None]


class _Refit:
    """The coefficients as a fit changes them, one named figure at a time."""

    def __init__(self, base: Coefficients):
        self.base = base
        self.items = dict(base.items)
        self.changed: list[str] = []

    def put(self, name: str, value: float, how: str) -> None:
        old = self.items[name]
        self.items[name] = Coefficient(name, float(value), old.unit, f"fitted by `vrambudget fit` on {how}")
        self.changed.append(name)

    @property
    def now(self) -> Coefficients:
        return Coefficients(self.items, self.base.origins)


def fit(samples: list[Sample], base: Coefficients) -> FitResult:
    r = _Refit(base)
    for step in (_fit_load_and_non_torch, _fit_eager_activation, _fit_compile_peaks, _fit_graphs, _fit_growth):
        step(samples, r)
    return FitResult(r.items, sorted(set(r.changed)), _errors(samples, base), _errors(samples, r.now))


def _fit_load_and_non_torch(samples: list[Sample], r: _Refit) -> None:
    """The load overhead (logged weights, drafter included, minus computed), non-torch memory, the CUDA context."""
    for hybrid, name in ((True, "weights_overhead_hybrid_bytes"), (False, "weights_overhead_dense_bytes")):
        diffs = [s.weights_gib * GiB - s.f.weights_bytes - s.f.mtp_weights_bytes for s in samples
                 if s.weights_gib is not None and s.f.hybrid == hybrid and s.f.weights_include_buffers]
        if diffs:
            r.put(name, max(0.0, statistics.mean(diffs)), f"{len(diffs)} logged 'Model loading took' figures")
    for eager, name in ((True, "non_torch_eager_bytes"), (False, "non_torch_graphs_bytes")):
        vals = [s.non_torch_gib * GiB for s in samples if s.non_torch_gib is not None and s.f.eager == eager]
        if vals:
            r.put(name, statistics.mean(vals), f"{len(vals)} logged non-torch increases")
    # a simulated card's 'context' is the real GPU's total less what the blocker left: not a context
    ctx = [s.cuda_context_gib * GiB for s in samples if s.cuda_context_gib is not None and not s.simulated]
    if ctx:
        r.put("cuda_context_bytes", statistics.mean(ctx), f"{len(ctx)} worker init snapshots")


def _fit_eager_activation(samples: list[Sample], r: _Refit) -> None:
    """Eager activation: base + per token x width + sampler; the full model only from 3+ distinct points."""
    from scipy.optimize import nnls

    eager = [s for s in samples if s.f.eager and s.activation_gib is not None and not s.f.with_encoder]
    cur = r.now
    if not eager:
        return
    rows = {(s.f.tokens * s.f.mlp_width / s.f.tp, s.f.seqs * s.f.vocab * 4.0) for s in eager}
    # the three-term least squares assumes the forward and sampler peaks add; where they do not
    # (activation_peaks_overlap = 0: vLLM 0.20.2 and 0.26 logs) only the base is shifted
    if len(rows) >= 3 and peaks_add(cur):
        import numpy as np

        A = np.array([[1.0, s.f.tokens * s.f.mlp_width / s.f.tp, s.f.seqs * s.f.vocab * 4.0] for s in eager])
        y = np.array([s.activation_gib * GiB for s in eager])
        x, _ = nnls(A, y)
        r.put("activation_base_bytes", x[0], f"nnls over {len(eager)} eager profiling peaks")
        r.put("activation_per_token_width_bytes", x[1], f"nnls over {len(eager)} eager profiling peaks")
        r.put("activation_sampler_factor", x[2], f"nnls over {len(eager)} eager profiling peaks")
    else:
        resid = [s.activation_gib * GiB - language_model_peak(s.f, cur) for s in eager]
        r.put("activation_base_bytes", max(0.0, cur["activation_base_bytes"] + statistics.mean(resid)),
              f"{len(eager)} eager profiling peaks (base shifted, slopes kept)")


def _fit_compile_peaks(samples: list[Sample], r: _Refit) -> None:
    """A cold compile's peak (where it is above the sampler's) and what a warm compiled graph adds."""
    cur = r.now
    cold = [s for s in samples if not s.f.eager and s.f.compile_cache in ("cold", "fresh")
            and s.activation_gib is not None and not s.f.with_encoder]
    cold = [s for s in cold if s.activation_gib * GiB - cur["activation_base_bytes"] > sampler_peak(s.f, cur)]
    if cold:
        r.put("cold_compile_vocab_hidden_factor", statistics.mean(
            (s.activation_gib * GiB - cur["activation_base_bytes"]) / (s.f.vocab * s.f.hidden * 2 / s.f.tp)
            for s in cold), f"{len(cold)} cold-compile profiling peaks")
    warm = [s for s in samples if not s.f.eager and s.f.compile_cache == "warm" and s.activation_gib is not None
            and not s.f.with_encoder]
    if warm:
        eager_peak = [language_model_peak(replace(s.f, eager=True), cur) for s in warm]
        r.put("warm_compile_per_token_hidden_bytes", max(0.0, statistics.mean(
            (s.activation_gib * GiB - e) / (s.f.tokens * s.f.hidden / s.f.tp) for s, e in zip(warm, eager_peak, strict=True))),
            f"{len(warm)} warm-compile profiling peaks")


def _fit_graphs(samples: list[Sample], r: _Refit) -> None:
    """The CUDA-graph estimate's level (its shape kept)."""
    cur = r.now
    cg = [s for s in samples if not s.f.eager and s.cudagraph_gib is not None]
    old = [s for s in cg if not s.f.graph_sizes[0]]  # records without their capture sizes: the older form
    if old:
        per = cur["cudagraph_per_graph_bytes"]
        r.put("cudagraph_base_bytes", max(0.0, statistics.mean(s.cudagraph_gib * GiB - per * s.f.num_cudagraphs
                                                               for s in old)),
              f"{len(old)} CUDA graph estimates (per-graph slope kept)")
    new = [s for s in cg if s.f.graph_sizes[0]]
    if new and "cudagraph_pw_first_bytes" in cur.items:
        base = Coefficients({k: v for k, v in cur.items.items() if k != "cudagraph_offset_bytes"}, cur.origins)
        r.put("cudagraph_offset_bytes", statistics.mean(s.cudagraph_gib * GiB - cudagraph_estimate(s.f, base)
                                                         for s in new),
              f"{len(new)} CUDA graph estimates (the estimator's shape kept, its level refitted)")


def _fit_growth(samples: list[Sample], r: _Refit) -> None:
    """What serving a prompt grows by, per prompt token (the worst verify request)."""
    growth = [s for s in samples if s.runtime_growth_bytes is not None and s.prompt_tokens]
    if growth:
        r.put("runtime_growth_per_prompt_token_bytes", max(s.runtime_growth_bytes / s.prompt_tokens for s in growth),
              f"{len(growth)} verify requests (NVML peak during the request minus before, per prompt token; worst)")


def profile_json(result: FitResult, version: str, gpu: str | None, model: str | None,
                 sources: list[str]) -> dict[str, Any]:
    return {
        "_about": "Coefficients refitted by `vrambudget fit`; predict uses them for this GPU/model/vLLM version.",
        "vllm": version, "scope": {"gpu": gpu, "model": model}, "fitted_from": sources,
        "coefficients": {k: {"value": v.value, "unit": v.unit, "source": v.source}
                         for k, v in result.coefficients.items() if k in result.changed},
    }


def fit_and_write(paths: list[str], version: str, gpu_key: str | None, model_ref: str | None,
                  out: str | None = None) -> tuple[FitResult, Path]:
    """Refit from `paths` (records and/or logs) and write the profile atomically where `predict` reads it (or
    `out`). A profile already there is merged (what this fit did not refit is kept) and kept as *.previous.json."""
    from . import coefficients as cf
    from .profiles import write_profile

    samples = load_samples([Path(p) for p in paths], None)
    res = fit(samples, cf.load(version, gpu_key, model_ref))
    dest = Path(out) if out else cf.fitted_profile_path(gpu_key or "any", model_ref, version)
    data = profile_json(res, version, gpu_key, model_ref, [str(p) for p in paths])
    write_profile(dest, data, "--out" if out else None)  # merged under a lock: concurrent fits lose nothing
    return res, dest


def worst_error(errors: list[tuple[str, float]]) -> float:
    """The largest |available-KV error| (GiB) of a fit's before or after list."""
    return max((abs(e) for _, e in errors), default=0.0)
