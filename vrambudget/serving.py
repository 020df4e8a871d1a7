"""A deployment's runtime inputs and its verdicts: how CUDA graphs resolve for its attention backend, which
buffers its first request allocates, what vLLM holds once started on this GPU, and the answers to "starts",
"starts after a restart" and "serves a prompt of N tokens" with the band measured around each. Pure: the
deployment, its budget and the coefficients in; runtime.py does the arithmetic."""

from __future__ import annotations

from dataclasses import replace

from .budget import Budget, features

from .graphs import mla_graph_estimate, v2_graph_kind

from .activation import forward_peak, sampler_peak

from .features import Features
from .graphs import graph_mode as budget_graph_mode
from .coefficients import Coefficients
from .deployment import Deployment
from .hardware.facts import flashinfer_autotunes, gdn_prefill_path, unified_memory_band, unified_memory_host_share
from .kv.planner import KVLayout
from .runtime import Coef, RuntimeInputs, RuntimeNeed, Term, Verdict, runtime_need, verdict
from .units import GiB


def graph_mode(d: Deployment, b: Budget) -> str:
    """vLLM's resolved cudagraph_mode for this deployment: NONE (eager), PIECEWISE or FULL_AND_PIECEWISE."""
    return budget_graph_mode(d, b.backend)


def attention_builders(d: Deployment, lay: KVLayout) -> int:
    """Attention metadata builders: one per attention KV-cache group (vLLM 0.20.2 gpu_model_runner.py
    initialize_attn_backend) and one for the MTP drafter (spec_decode/llm_base_proposer.py draft_attn_groups)."""
    return (sum(lay.groups(k) for k in lay.buckets if not k.kind.has_state) or 1) + (1 if d.mtp else 0)


def first_request_buffers(d: Deployment, b: Budget, lay: KVLayout) -> tuple[str, int, str, int, int]:
    """The attention backend's buffers the first request allocates (label, bytes, source, and truth - model low and
    high in bytes): every
    builder's own workspace (FlashInfer: v1/attention/backends/flashinfer.py _get_workspace_buffer, not shared),
    lazily, in eager mode and where graphs resolve to PIECEWISE (attention outside the graphs); with FULL decode
    graphs the capture allocates it, inside the CUDA graph estimate."""
    n = attention_builders(d, lay)
    lazy = d.enforce_eager or graph_mode(d, b) == "PIECEWISE"
    each = b.backend.runtime_bytes(eager=True) if lazy else 0
    if each and b.backend.name == "FLASHINFER" and d.flashinfer_workspace_bytes is not None:
        each = d.flashinfer_workspace_bytes  # VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE
    # measured per builder against the 394 MiB: 0.382 GiB (two, by NVML through `vllm serve`: outside/fi-graphs) to
    # 0.411 (in-process, torch reserved: outside/fi-need.log), so -0.003 to +0.026 GiB
    low, high = (-int(0.003 * GiB) * n, int(0.026 * GiB) * n) if each else (0, 0)
    return f"{b.backend.name}, {n} builder{'s' if n > 1 else ''}", each * n, b.backend.runtime_source, low, high


def _coef(c: Coefficients, name: str) -> Coef:
    item = c.items.get(name)
    if item is None:
        return Coef(0.0, 0.0, 0.0, "")
    return Coef(item.value, item.low, item.high, item.source)


def context_term(b: Budget) -> Term:
    """The CUDA context outside the budget, with its spread where it is an estimate (truth - estimate, bytes)."""
    ctx = b.cuda_context
    return Term("CUDA context", ctx.value, ctx.source, ctx.measured, ctx.low, ctx.high, ctx.source.split(";")[0])


def runtime_for(d: Deployment, c: Coefficients, b: Budget, layout: KVLayout, prompt_tokens: int,
                f: Features | None = None) -> RuntimeNeed:
    """What serving a prompt of `prompt_tokens` needs beyond what vLLM holds after startup, against what is left."""
    f = f or features(d)
    chunk = max(1, min(prompt_tokens, d.max_num_batched_tokens))  # a prompt is prefilled in chunks of at most this
    warm = replace(f, compile_cache="warm", tokens=chunk)  # it runs the compiled (or eager) forward: no compile peak
    eager = d.enforce_eager
    growth = _coef(c, "runtime_growth_per_prompt_token_bytes")
    held = _coef(c, "runtime_held_graphs_bytes")
    if d.gpu.architecture != "hopper":  # measured on an H100 only: on another card it may keep as little as nothing
        held = Coef(held.value, 0.0, held.high, held.source + "; measured on an H100 only")
    i = RuntimeInputs(
        arch=d.model.arch, tokens=chunk, tp=d.tp, mtp=d.mtp, eager=eager,
        autotune=bool(flashinfer_autotunes(d.gpu).value), activation=b.activation_bytes,
        chunk_forward=int(forward_peak(warm, c)), gdn_path=gdn_prefill_path(d.gpu, d.gdn_prefill_backend), prompt_tokens=prompt_tokens,
        sampler_warmup=int(sampler_peak(replace(f, tokens=min(f.seqs, f.tokens)), c)),
        margin=b.runtime_margin_bytes, backend=first_request_buffers(d, b, layout),
        growth=Coef(growth.value, growth.value, growth.value, growth.source),
        held_graphs=held,
        held_eager_autotune=_coef(c, "runtime_held_eager_autotune_bytes"),
        prompt_error=_coef(c, "runtime_prompt_error_eager_bytes" if eager and flashinfer_autotunes(d.gpu).value
                           else "runtime_prompt_error_released_bytes"),
        activation_error=activation_error(c, d.max_num_batched_tokens),
        graphs_outside=graphs_outside_budget(d, b, c))
    return runtime_need(i, context_term(b))


def graphs_outside_budget(d: Deployment, b: Budget, c: Coefficients) -> Coef:
    """The CUDA graphs a version captures after the KV cache without budgeting them (bytes, with their spread):
    Model Runner V2 before 0.29 (its profile_cudagraph_memory returns 0), V1 before 0.20 (the estimate is not
    subtracted). V2's capture takes more than V1's estimator gives for the same sizes: by the measured factor
    (v2_graph_capture_factor). Zero in eager mode or where the budget holds them."""
    if d.enforce_eager or b.cudagraph_in_budget or not b.cudagraph_bytes:
        return Coef(0.0, 0.0, 0.0, "")
    err = _coef(c, "cudagraph_estimate_error_bytes")
    if d.runner == "v2":
        f = _coef(c, "v2_graph_capture_factor")
        factor = f.value or 1.0
        return Coef(b.cudagraph_bytes * factor, b.cudagraph_bytes * (f.low or factor) + err.low,
                    b.cudagraph_bytes * (f.high or factor) + err.high,
                    f"Model Runner V2 captures its CUDA graphs after the KV cache and before 0.29 leaves them out "
                    f"of its budget (v1/worker/gpu/model_runner.py profile_cudagraph_memory returns 0): V1's estimator "
                    f"x {factor:.2f} ({f.source or 'not measured'})")
    return Coef(float(b.cudagraph_bytes), b.cudagraph_bytes + err.low, b.cudagraph_bytes + err.high,
                "this version captures its CUDA graphs after the KV cache without subtracting their estimate")


def activation_error(c: Coefficients, tokens: int) -> Coef:
    """Truth - model of the profiled activation peak (bytes) as the lab measured it at about this many batched
    tokens (the model is tighter at 2048 than at 8192)."""
    return _coef(c, "activation_error_2048_bytes" if tokens <= 4096 else "activation_error_8192_bytes")


def budget_error(c: Coefficients, d: Deployment, b: Budget) -> Coef:
    """Truth - model of what the budget leaves for the KV cache, as a need (bytes: a larger truth leaves less): the
    activation peak's measured spread at about this batch size and, where the version subtracts its CUDA graph
    estimate, that estimate's (the estimator's fit residuals)."""
    err = activation_error(c, d.max_num_batched_tokens)
    if b.cudagraph_in_budget and b.cudagraph_bytes:
        g = _coef(c, "cudagraph_estimate_error_bytes")
        k = graph_kind_band(c, d, b)
        return Coef(0.0, err.low + g.low + k.low, err.high + g.high + k.high,
                    "; ".join(s for s in (err.source, g.source, k.source) if s))
    return err


def graph_kind_band(c: Coefficients, d: Deployment, b: Budget) -> Coef:
    """Truth - model of a V2 graph estimate scaled by a kind of model's factor (MoE, MXFP4, MLA), where that factor's
    logs disagree: the estimate at the lowest and highest factor measured (bytes; 0 elsewhere)."""
    if d.runner != "v2":
        return Coef(0.0, 0.0, 0.0, "")
    f = b.features or features(d)
    sparse = c.items.get("cudagraph_v2_sparse_mla_base_bytes")
    if f.sparse_mla_bytes_per_seq and sparse is not None and b.cudagraph_bytes:
        return Coef(0.0, sparse.low - sparse.value, sparse.high - sparse.value, "sparse MLA's decode buffers, its base "
                    "fitted on DeepSeek-V3.2 and GLM-5 cut to 4 layers (in sample)")
    if f.mla_split_bytes_per_seq and "cudagraph_v2_mla_base_bytes" in c.items and b.cudagraph_bytes:
        est, top = mla_graph_estimate(f, c)
        return Coef(0.0, 0.0, top - est, "MLA's split buffers kept once or twice by the allocator "
                    "(DeepSeek-V3 cut to 5 layers at 32 to 1024 seqs, Kimi K2 cut to 2)")
    kind = v2_graph_kind(f)
    item = c.items.get(kind) if kind else None
    if item is None or item.low == item.high or not item.value:
        return Coef(0.0, 0.0, 0.0, "")
    dense = b.cudagraph_bytes / item.value
    return Coef(0.0, dense * (item.low - item.value), dense * (item.high - item.value),
                f"{kind.replace('_', ' ')} measured x{item.low:g} to x{item.high:g}")


def host_share_term(d: Deployment) -> Term | None:
    """On a unified-memory GPU, what the host's processes allocate during vLLM's profile counts as its non-torch
    memory and leaves less KV memory: not predicted, so a need of 0 whose spread (bytes) is what public boots lost
    to it (gpu_facts.json unified_memory); None on a discrete GPU."""
    if not d.gpu.unified_memory:
        return None
    h = unified_memory_host_share()
    return Term("the host's share of unified memory", 0, h.source, False, 0, h.high,
                f"what the host's processes allocate during the profile (public boots: {unified_memory_band()})")


def start_verdict(question: str, available: int, needed: int, c: Coefficients, b: Budget,
                  d: Deployment) -> Verdict:
    """Does a length start: the KV memory left over (bytes) against the spread of the activation peak's prediction
    measured for this version at about this batch size (weights, non-torch and graph terms are within 0.01-0.02);
    the CUDA context's spread where vLLM's free-memory check is the closer one."""
    err = budget_error(c, d, b)  # a larger peak leaves less: as a need, the same sign
    spread = [Term("available KV memory", 0, err.source, True, int(err.low), int(err.high),
                   "the activation peak" + (" and CUDA graph estimate" if b.cudagraph_in_budget and b.cudagraph_bytes
                                            else "") + " on this card and version")]
    host = host_share_term(d)
    if host is not None:
        spread.append(host)
    free_margin = b.free_at_start_bytes - b.requested_bytes  # vLLM refuses to start below its budget
    ctx = context_term(b)
    v = verdict(question, min(available - needed, free_margin), spread,
                ctx if free_margin < available - needed else None)
    return v
