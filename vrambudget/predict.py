"""Prediction = budget + KV plan + a verdict; the inverse (smallest GMU for a context) and the
ceiling table over GMU x graphs/eager x MTP on/off. Pure: no I/O, no printing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .budget import Budget, budget, weight_bytes
from .coefficients import Coefficients
from .deployment import Deployment
from .planner import KVLayout, KVPlan, build_layout, kv_needed_bytes, plan_startup
from .units import GiB
from .weights import WeightBytes


def layout_for(d: Deployment) -> KVLayout:
    a = d.model.arch
    hopper_align = d.mamba_mode == "align" and d.gpu.is_hopper
    mamba_blocks = 1 + d.spec_tokens
    if d.mamba_mode == "align":
        mamba_blocks = 2 + d.spec_tokens + (d.rules.align_hopper_extra_blocks if d.gpu.is_hopper else 0)
    return build_layout(
        a, kv_dtype_bytes=d.kv_dtype_bytes, spec_tokens=d.spec_tokens,
        draft_attention_layers=a.mtp_layers if d.mtp else 0, tp=d.tp, mamba_blocks=mamba_blocks,
        block_multiple=d.rules.align_block_multiple_hopper if hopper_align else d.rules.hybrid_block_multiple,
        max_num_batched_tokens=d.max_num_batched_tokens)


@dataclass
class Prediction:
    deployment: Deployment
    budget: Budget
    plan: KVPlan
    starts: bool  # vLLM gets through startup with these flags
    reasons: list[str] = field(default_factory=list)  # why it does not start
    warnings: list[str] = field(default_factory=list)

    @property
    def ceiling(self) -> int:
        """Longest max_model_len that starts: the KV ceiling, capped at the model's own maximum."""
        return min(self.plan.ceiling, self.deployment.model.arch.max_position_embeddings)

    @property
    def max_model_len(self) -> int:
        """The max_model_len vLLM ends up with (auto-fit lowers it to the ceiling)."""
        return self.plan.max_model_len

    def to_json(self) -> dict[str, Any]:
        b, p = self.budget, self.plan
        return {
            "requested_bytes": b.requested_bytes, "weights_bytes": b.weights_bytes,
            "mtp_weights_bytes": b.mtp_weights_bytes, "activation_bytes": b.activation_bytes,
            "non_torch_bytes": b.non_torch_bytes, "cudagraph_bytes": b.cudagraph_bytes,
            "cudagraph_in_budget": b.cudagraph_in_budget, "num_cudagraphs": b.num_cudagraphs,
            "non_kv_bytes": b.non_kv_bytes, "available_kv_bytes": b.available_kv_bytes,
            "cuda_context_bytes": b.cuda_context_bytes, "free_at_start_bytes": b.free_at_start_bytes,
            "runtime_growth_bytes": b.runtime_growth_bytes, "runtime_margin_bytes": b.runtime_margin_bytes,
            "weights_source": b.weights_source,
            "block_size": p.layout.block_size, "group_size": p.layout.group_size,
            "num_kv_groups": p.layout.num_groups, "padding_layers": p.layout.padding_layers,
            "padding_warnings": p.layout.padding_warnings, "bytes_per_block": p.layout.bytes_per_block,
            "num_blocks": p.num_blocks, "blocks_per_request": p.blocks_per_request,
            "max_model_len": p.max_model_len, "kv_cache_tokens": p.kv_cache_tokens,
            "max_concurrency": round(p.max_concurrency, 4), "max_model_len_ceiling": self.ceiling,
            "kv_ceiling_tokens": p.ceiling,
            "fits": self.starts, "reasons": self.reasons, "warnings": self.warnings,
            "inputs": self.deployment.inputs(),
        }


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def min_gmu_for_bytes(d: Deployment, non_kv: int, kv_needed: int) -> float | None:
    """Smallest GMU (0.01 steps) whose budget leaves `kv_needed` bytes after `non_kv`, and that
    still passes the free-memory check; None if even 1.00 does not."""
    g = math.ceil((non_kv + kv_needed) / d.gpu.total_bytes * 100 - 1e-9) / 100
    while g <= 1.0 + 1e-9:
        if math.ceil(d.gpu.total_bytes * g) - non_kv >= kv_needed:
            return round(g, 2)
        g = round(g + 0.01, 2)
    return None


def max_gmu_for_free(d: Deployment, b: Budget) -> float:
    """Largest GMU (0.01 steps) that the free memory at start allows."""
    return math.floor(b.free_at_start_bytes / d.gpu.total_bytes * 100) / 100


def predict(d: Deployment, c: Coefficients, w: WeightBytes | None = None) -> Prediction:
    b = budget(d, c, w)
    layout = layout_for(d)
    avail = b.available_kv_bytes
    plan = plan_startup(layout, avail, d.max_model_len, d.auto_fit, d.rules)
    reasons: list[str] = []
    warnings: list[str] = []
    if not b.startup_memory_ok:
        reasons.append(
            f"free memory at start ({_gib(b.free_at_start_bytes)} of {_gib(d.gpu.total_bytes)}) is less than "
            f"the GMU {d.gmu:.2f} budget ({_gib(b.requested_bytes)}): lower --gpu-memory-utilization to "
            f"{max_gmu_for_free(d, b):.2f} or free the GPU")
    if avail <= 0:
        reasons.append(f"weights and activations need {_gib(b.non_kv_bytes)}, the GMU {d.gmu:.2f} budget is "
                       f"{_gib(b.requested_bytes)}: over by {_gib(-avail)}, no memory left for the KV cache")
    elif plan.ceiling == 0:
        need = kv_needed_bytes(layout, 1, d.rules)
        reasons.append(f"not even one token fits: one request needs {_gib(need)} of KV cache, "
                       f"{_gib(avail)} is available")
    elif not d.auto_fit and plan.ceiling < d.max_model_len:
        need = kv_needed_bytes(layout, d.max_model_len, d.rules)
        g = min_gmu_for_bytes(d, b.non_kv_bytes, need)
        hint = f"raise GMU to {g:.2f}" if g else "even GMU 1.00 is not enough"
        what = "max_model_len" if d.max_model_len_given else "vLLM's default max_model_len (the model's maximum)"
        reasons.append(f"{what} {d.max_model_len:,} needs {_gib(need)} of KV cache, {_gib(avail)} is "
                       f"available: the ceiling at GMU {d.gmu:.2f} is {plan.ceiling:,}; {hint}, "
                       f"or pass --max-model-len {plan.ceiling} (or auto)")
    if d.model.arch.is_hybrid and b.runtime_growth_bytes > b.runtime_margin_bytes and b.startup_memory_ok:
        warnings.append(f"GDN prefill buffers can grow by ~{_gib(b.runtime_growth_bytes)} after startup "
                        f"(max_num_batched_tokens {d.max_num_batched_tokens}); only {_gib(b.runtime_margin_bytes)} "
                        "is left outside the budget: a long prompt may OOM; lower GMU or max_num_batched_tokens")
    if d.spec_tokens and d.speculative_method == "ngram" and d.model.arch.is_hybrid:
        warnings.append("ngram speculative decoding on a GDN hybrid: rejected draft tokens corrupt the recurrent "
                        "state; use MTP instead (--mtp 2)")
    if not d.enforce_eager and d.compile_cache == "cold":
        key = (" (in this vLLM a new max_model_len is a new compile-cache key, so each new length boots cold "
               "once)") if d.rules.compile_key_has_max_model_len else ""
        warnings.append("cold torch.compile cache: the first boot profiles a larger peak; a second boot "
                        f"(--compile-cache warm) gets more KV cache{key}")
    if plan.ceiling and 0 <= plan.ceiling - plan.max_model_len < layout.block_size and not d.auto_fit and not reasons:
        warnings.append(f"max_model_len is within one block ({layout.block_size} tokens) of the ceiling")
    return Prediction(d, b, plan, starts=not reasons, reasons=reasons, warnings=warnings)


def cannot_start_at_all(p: Prediction) -> bool:
    """True when no max_model_len starts (as opposed to only the asked-for one being too long)."""
    return not p.starts and (p.plan.ceiling == 0 or not p.budget.startup_memory_ok
                             or p.budget.available_kv_bytes <= 0 or p.deployment.max_model_len_given)


def min_gmu_for_context(d: Deployment, c: Coefficients, tokens: int, w: WeightBytes | None = None) -> float | None:
    """Smallest GMU (to 0.01) at which a max_model_len of `tokens` starts; None if none does."""
    w = w or weight_bytes(d)
    d = d.with_(max_model_len=tokens, auto_fit=False)
    b = budget(d, c, w)
    layout = layout_for(d)
    need = kv_needed_bytes(layout, tokens, d.rules)
    g = min_gmu_for_bytes(d, b.non_kv_bytes, need)
    if g is None:
        return None
    if g > max_gmu_for_free(d, b):
        return None
    return g


@dataclass(frozen=True)
class Column:
    label: str
    enforce_eager: bool
    spec_tokens: int


def table_columns(d: Deployment, mtp_tokens: int) -> list[Column]:
    cols = [Column("graphs", False, 0), Column("eager", True, 0)]
    if d.model.arch.mtp_layers:
        cols += [Column(f"graphs+MTP{mtp_tokens}", False, mtp_tokens), Column(f"eager+MTP{mtp_tokens}", True, mtp_tokens)]
    return cols


def ceiling_table(d: Deployment, c: Coefficients, gmus: list[float], mtp_tokens: int = 2) -> dict[str, Any]:
    """Ceilings (max_model_len that starts; 0 = does not start) per GMU x column."""
    w = weight_bytes(d)
    cols = table_columns(d, mtp_tokens)
    rows = []
    for g in gmus:
        cells = {}
        for col in cols:
            dd = d.with_(gmu=g, enforce_eager=col.enforce_eager, spec_tokens=col.spec_tokens, auto_fit=True)
            p = predict(dd, c, w)
            cells[col.label] = p.ceiling if p.starts else 0
        rows.append({"gmu": g, "ceilings": cells})
    return {"columns": [col.label for col in cols], "rows": rows}


def target_row(d: Deployment, c: Coefficients, tokens: int, mtp_tokens: int = 2) -> dict[str, float | None]:
    w = weight_bytes(d)
    return {col.label: min_gmu_for_context(d.with_(enforce_eager=col.enforce_eager, spec_tokens=col.spec_tokens),
                                           c, tokens, w)
            for col in table_columns(d, mtp_tokens)}
