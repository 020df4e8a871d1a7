"""A vLLM log next to the prediction for the same inputs: recover the deployment a log describes,
then compare term by term (used by `vrambudget explain`, the accuracy benchmark and `fit`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import coefficients as coeffs
from .checkpoint import bundled_models, resolve_model
from .coefficients import Coefficients
from .deployment import Deployment, Flags, resolve
from .errors import UserError
from .gpus import GPU, catalog, from_memory
from .logparse import LogFacts, flags_from_args, parse_log
from .predict import Prediction, predict
from .units import GiB
from .vllm_rules import rules_for


def model_ref_from_log(facts: LogFacts, override: str | None = None) -> str:
    """--model override, else the log's model if it names a bundled profile or an existing path."""
    if override:
        return override
    ref = str(facts.args.get("model") or facts.args.get("model_tag") or "")
    if not ref:
        raise UserError("the log does not state its model; pass --model")
    if Path(ref).exists():
        return ref
    base = ref.rstrip("/").split("/")[-1].lower()
    if base in bundled_models():
        return base
    return ref


def gpu_from_log(facts: LogFacts, override: GPU | None = None) -> GPU:
    """The catalog GPU whose CUDA total matches the log's (to 0.01 GiB), else a custom one."""
    if override:
        return override
    if facts.total_gib is None:
        raise UserError("the log does not state the GPU's total memory; pass --gpu")
    for g in catalog().values():
        if abs(g.total_bytes / GiB - facts.total_gib) < 0.006:
            return g
    return from_memory(int(facts.total_gib * GiB))


def deployment_from_log(facts: LogFacts, model: str | None = None, gpu: GPU | None = None) -> Deployment:
    flags = Flags(**flags_from_args(facts.args))
    if facts.compile in ("cold", "warm"):
        flags = Flags(**{**flags.__dict__, "compile_cache": facts.compile})
    src = resolve_model(model_ref_from_log(facts, model))
    return resolve(src, gpu_from_log(facts, gpu), rules_for(facts.vllm_version), flags)


@dataclass
class Comparison:
    facts: LogFacts
    prediction: Prediction
    rows: list[tuple[str, float | None, float, float | None]]  # term, logged GiB, predicted GiB, error


def compare(facts: LogFacts, d: Deployment, c: Coefficients | None = None) -> Comparison:
    c = c or coeffs.load(d.rules.version, d.gpu.key, d.model.ref)
    p = predict(d, c)
    b = p.budget

    def row(name: str, logged: float | None, predicted_bytes: float) -> tuple[str, float | None, float, float | None]:
        pred = predicted_bytes / GiB
        return name, logged, pred, None if logged is None else pred - logged

    rows = [
        row("requested (GMU budget)", facts.requested_gib, b.requested_bytes),
        row("weights (incl. drafter)", facts.weights_gib, b.weights_bytes + b.mtp_weights_bytes),
        row("activation peak", facts.activation_gib, b.activation_bytes),
        row("non-torch", facts.non_torch_gib, b.non_torch_bytes),
        row("CUDA graph estimate", facts.cudagraph_estimate_gib if not d.enforce_eager else None, b.cudagraph_bytes),
        row("available KV cache", facts.available_kv_gib, b.available_kv_bytes),
    ]
    return Comparison(facts, p, rows)


def compare_file(path: Path, model: str | None = None, gpu: GPU | None = None,
                 c: Coefficients | None = None) -> Comparison:
    facts = parse_log(path.read_text(errors="replace"))
    return compare(facts, deployment_from_log(facts, model, gpu), c)
