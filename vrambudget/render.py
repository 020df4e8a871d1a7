"""Tables for people (tabulate). Every row names the formula or coefficient it comes from."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from .predict import Prediction
from .units import GiB, MiB


def g(n: float) -> str:
    return f"{n / GiB:.2f}"


def header(p: Prediction) -> str:
    d = p.deployment
    a = d.model.arch
    mode = "eager" if d.enforce_eager else f"CUDA graphs ({d.compile_cache} compile cache)"
    mtp = f"{d.speculative_method.upper()} {d.spec_tokens} tokens" if d.spec_tokens else "no speculative decoding"
    return (f"{d.model.ref} ({d.model.description}) on {d.gpu.name} ({d.gpu.total_gib:.2f} GiB as CUDA reports it)\n"
            f"vLLM {d.rules.version} | GMU {d.gmu:.2f} | KV {d.kv_cache_dtype} | {mode} | {mtp} | "
            f"max_num_seqs {d.max_num_seqs} | max_num_batched_tokens {d.max_num_batched_tokens} | TP {d.tp}"
            + (" | prefix caching" if d.enable_prefix_caching else "")
            + (" | language model only" if a.is_multimodal and d.language_model_only else ""))


def budget_table(p: Prediction) -> str:
    b, d = p.budget, p.deployment
    q = d.model.arch.quantization
    wsrc = ("safetensors headers (exact)" if b.weights_source == "safetensors" else
            f"config shapes{' + ' + str(q.get('quant_method')) + ' ' + str(q.get('bits', '')) + '-bit' if q else ' x ' + d.model.arch.dtype}")
    rows: list[list[Any]] = [
        ["budget = ceil(total x GMU)", g(b.requested_bytes), f"{d.gpu.total_bytes:,} B x {d.gmu:.2f}"],
        ["weights (target)", g(b.weights_bytes), f"{wsrc} + load overhead"],
        ["MTP drafter weights", g(b.mtp_weights_bytes), "fc + decoder layer(s); shares embed/lm_head" if d.mtp else "off"],
        ["activation peak (profile_run)", g(b.activation_bytes),
         "base + tokens x MLP width + sampler" + ("" if d.enforce_eager else f" + {d.compile_cache} compile")],
        ["non-torch memory", g(b.non_torch_bytes), "measured (NCCL, cuBLAS workspaces)"],
        ["CUDA graphs (estimate)", g(b.cudagraph_bytes),
         f"{b.num_cudagraphs} graphs" + ("" if b.cudagraph_in_budget else ", not subtracted by this version")
         if not d.enforce_eager else "eager: none"],
        ["= non-KV total", g(b.non_kv_bytes), ""],
        ["KV cache available", g(b.available_kv_bytes), "budget - non-KV"],
        ["CUDA context (outside budget)", g(b.cuda_context_bytes), "must leave free >= budget"],
        ["left outside budget at runtime", g(b.runtime_margin_bytes),
         f"GDN prefill growth ~{g(b.runtime_growth_bytes)}" if b.runtime_growth_bytes else ""],
    ]
    return tabulate(rows, headers=["term", "GiB", "from"], tablefmt="simple", disable_numparse=True)


def plan_table(p: Prediction) -> str:
    pl, lay, d = p.plan, p.plan.layout, p.deployment
    kinds = ", ".join(f"{b.num_layers} {b.kind} in {lay.groups(b)} group(s)" for b in lay.buckets)
    pads = "; ".join(f"{n} ({pct:.2f}%)" for n, pct in lay.padding_warnings) or "0"
    rows = [
        ["block size", f"{lay.block_size} tokens", "hybrid: attention page >= GDN state" if lay.hybrid else "backend default"],
        ["KV groups", f"{lay.num_groups} x {lay.group_size} layers", kinds],
        ["padding layers", pads, "vLLM: 'Add P padding layers'"],
        ["bytes per block", f"{lay.bytes_per_block / MiB:.2f} MiB", "group size x page"],
        ["KV blocks", f"{pl.num_blocks:,}", "available // bytes per block"],
        ["blocks per request", f"{pl.blocks_per_request:,}", f"at max_model_len {pl.max_model_len:,}"
         + (f" (mamba mode {d.mamba_mode})" if lay.hybrid else "")],
        ["GPU KV cache size", f"{pl.kv_cache_tokens:,} tokens", "as vLLM logs it"],
        ["max concurrency", f"{pl.max_concurrency:.2f}x", f"requests of {pl.max_model_len:,} tokens"],
        ["CEILING max_model_len", f"{p.ceiling:,} tokens", "longest that starts"
         + (" (capped at the model's maximum)" if p.ceiling < pl.ceiling else "")],
    ]
    return tabulate(rows, headers=["KV plan", "value", "how"], tablefmt="simple", disable_numparse=True)


def prediction_text(p: Prediction) -> str:
    parts = [header(p), "", budget_table(p), "", plan_table(p), ""]
    if p.starts:
        parts.append(f"STARTS: max_model_len {p.max_model_len:,} fits; the ceiling at GMU {p.deployment.gmu:.2f} "
                     f"is {p.ceiling:,} tokens.")
    else:
        parts.append("DOES NOT START: " + " | ".join(p.reasons))
    parts += [f"warning: {w}" for w in p.warnings]
    return "\n".join(parts)


def table_text(t: dict[str, Any], target: dict[str, float | None] | None, tokens: int | None) -> str:
    cols = t["columns"]
    rows = [[f"{r['gmu']:.2f}"] + [f"{r['ceilings'][c]:,}" if r["ceilings"][c] else "-" for c in cols] for r in t["rows"]]
    out = tabulate(rows, headers=["GMU"] + cols, tablefmt="simple", disable_numparse=True, stralign="right")
    if target is not None:
        cells = [f"{v:.2f}" if v is not None else "none" for v in target.values()]
        out += "\n\n" + tabulate([[f"{tokens:,}"] + cells], headers=["smallest GMU for"] + cols,
                                 tablefmt="simple", disable_numparse=True, stralign="right")
    return out + "\n(ceiling = longest max_model_len that starts; '-' = does not start)"
