"""profile_run's transient peak, term by term: the forward (eager, compiled cold or warm, an MLA layer's
placeholder, a kept fused-MoE scratch beside it), the dummy sampler's, the vision encoder's; bytes per rank."""

from __future__ import annotations

from .coefficients import Coefficients
from .features import Features


def forward_peak(f: Features, c: Coefficients) -> float:
    """profile_run's dummy forward pass above the base (bytes): the eager forward over max_num_batched_tokens,
    plus what a warm compiled graph adds (and, warm-jit, what compiling its Triton kernels again adds); a cold (or
    fresh) compile peaks at a copy of the vocab x hidden matrix instead, whichever is larger (vLLM 0.20.2: 2.07-2.08
    GiB for Qwen3.5-9B at 2048 and at 8192 tokens). That copy is the token embedding's, inside the compiled graph:
    with the vision tower vLLM embeds the tokens outside it (the runners' inputs_embeds, 0.20-0.33 source) and a
    cold compile peaks as a warm one (vLLM 0.29.0, Qwen3.8-27B with its tower, cold: 1.89 GiB, the encoder's peak,
    where the copy alone would be 2.34)."""
    forward = c["activation_per_token_width_bytes"] * f.tokens * f.mlp_width / f.tp
    if f.compiled_forward_bytes and not f.eager:  # traced where the version reads it (VllmRules.compiled_forward_traced)
        forward = float(f.compiled_forward_bytes)
    if f.tp > 1 and f.eager:  # a tensor-parallel rank's eager forward holds more (measured on 0.26.0 only)
        forward += c.get("activation_tp_eager_extra_bytes", 0.0)
    if f.moe and f.moe_workspace_bytes < 0:  # older records: the measured extra that stood for the MoE scratch
        forward += c.get("activation_moe_extra_bytes", 0.0)
    jit = jit_extra(f, c)
    forward += jit
    if f.moe_workspace_bytes > 0 or f.mla_heads:
        # a layer after an MoE layer runs beside the fused-MoE scratch that one kept: its own transients (MLA's
        # profile placeholder and live tensors, a fresh machine's Triton JIT) peak on top of it where the MLP term
        # does not
        forward = max(forward, max(f.moe_workspace_bytes, 0) + jit + f.mla_profile_bytes)
    if f.eager:
        return forward
    if f.compile_cache in ("cold", "fresh") and not f.with_encoder and f.embeds_in_graph:
        return max(forward, compile_peak(f, c))
    if f.runner == "v2":  # a warm compiled graph's forward peaks as the eager one (Model Runner V2, vLLM 0.26.0)
        return forward
    warm = forward + c["warm_compile_per_token_hidden_bytes"] * f.tokens * f.hidden / f.tp
    if f.compile_cache == "warm-jit":  # stored graphs loaded, their Triton kernels compiled again inside the profile
        warm += c.get("warm_jit_extra_bytes", 0.0)
    return warm


def jit_extra(f: Features, c: Coefficients) -> float:
    """What a fresh machine (or a lost Triton cache) adds to an eager profile: the GDN (FLA) kernels JIT-compiled
    inside it (bytes; 0 elsewhere)."""
    if f.eager and f.compile_cache in ("fresh", "warm-jit") and f.hybrid:
        return c.get("fresh_jit_extra_bytes", 0.0)
    return 0.0


def compile_peak(f: Features, c: Coefficients) -> float:
    """A cold torch.compile's peak above the base (bytes): a factor x vocab x hidden x 2 B per rank (Qwen3.5 0.8B /
    4B / 9B and 9B at TP 2, vLLM 0.20.2: factor 1.04), and where the version measured it, what compiling a drafter's
    graph adds (vLLM 0.26.0: 0.989 without a drafter, +0.10 GiB with MTP)."""
    extra = c.get("cold_compile_drafter_extra_bytes", 0.0) if f.drafter_graphs else 0.0
    extra += c.get("cold_compile_per_token_hidden_bytes", 0.0) * f.tokens * f.hidden
    return (c["cold_compile_vocab_hidden_factor"] * f.vocab * f.hidden * 2 + extra) / f.tp


def sampler_peak(f: Features, c: Coefficients) -> float:
    """The sampler's dummy run above the base (bytes), on top of the fused-MoE scratch the forward left allocated."""
    kept = max(f.moe_workspace_bytes, 0)
    return kept + (v2_sampler_peak(f, c) if f.runner == "v2" else v1_sampler_peak(f, c))


def v2_sampler_peak(f: Features, c: Coefficients) -> float:
    """Model Runner V2's dummy sampler run (v1/worker/gpu/model_runner.py _dummy_sampler_run, 0.22-0.32): one row per
    dummy request, min(max_num_seqs, max_num_batched_tokens) rows, default sampling state, so no fp32 copy and no
    sort: the logits in the model dtype and the Gumbel scratch (rows x ceil(vocab / 1024) x 12 B), by a measured
    factor per logit byte; the dummy forward's hidden states stay alive meanwhile, as with V1. vLLM 0.33 runs a
    second pass with real sampling parameters (SamplingParams.for_sampler_warmup), which copies the logits to fp32
    (sample/sampler.py): 4 B more a logit beside them (from source; not measured)."""
    rows = min(f.seqs, f.tokens)
    held = c.get("sampler_holds_hidden_states", 0.0) * f.tokens * f.hidden * 2
    if "v2_sampler_bytes_per_logit" in c.items:  # measured per logit (0.33: both passes' copies at the peak)
        return c["v2_sampler_bytes_per_logit"] * rows * f.vocab + held
    logits = rows * f.vocab * (f.logits_bytes + (4 if f.sampler_fp32_pass else 0)) + rows * -(-f.vocab // 1024) * 12
    return c.get("v2_sampler_factor", 1.0) * logits + held


def v1_sampler_peak(f: Features, c: Coefficients) -> float:
    """The sampler's dummy run above the base (bytes): fp32 logit rows x vocab x a factor. With speculative
    decoding the rejection sampler's dummy run follows on two rows per request (one draft token each:
    SpecDecodeMetadata.make_dummy in 0.20.2 and 0.26.0), so the rows double, at its own factor (3.885 / 3.886 on
    0.20.2 / 0.26.0 logs, the plain sampler's 3.751 / 3.580). The dummy forward's hidden
    states (tokens x hidden, bf16, whole on every TP rank) stay alive meanwhile."""
    rows = f.seqs * (2 if f.speculative else 1)
    held = c.get("sampler_holds_hidden_states", 0.0) * f.tokens * f.hidden * 2
    if f.sampler_sort:  # vLLM 0.10-0.16 (num_reqs rows; a drafter's rejection-sampler run there is not modelled)
        return sort_sampler_peak(min(f.seqs, f.tokens), f.vocab, c) + held
    factor = c["activation_sampler_factor"]
    if f.speculative:  # the rejection sampler's dummy run peaks at its own factor (profiles without it: the sampler's)
        factor = c.get("activation_rejection_sampler_factor", factor)
    return factor * rows * f.vocab * 4 + held


def sort_sampler_peak(rows: int, vocab: int, c: Coefficients) -> float:
    """vLLM 0.10-0.16's dummy sampler run above the memory allocated at its call (bytes): bytes per logit (rows x
    vocab) at the peak, which falls inside torch's sort of the fp32 logits (with the bf16 logits, the fp32 copy,
    the sorted values and their int64 indices alive). Measured with torch alone on the lab H100 for 8-1024 rows and
    four vocabularies (benchmarks/lab/sampler_probe.py): the same figure per logit at every size, one below 128 rows
    and one from 128 (torch sorts fewer rows another way)."""
    small = rows < c.get("sampler_sort_small_rows_below", 128)
    per = c["sampler_sort_small_bytes_per_logit" if small else "sampler_sort_bytes_per_logit"]
    return per * rows * vocab


def language_model_peak(f: Features, c: Coefficients) -> float:
    """profile_run's torch peak increase for the language model (bytes): the base plus the forward's and the
    sampler's peaks, the larger of the two where they do not overlap (activation_peaks_overlap = 0: vLLM
    0.20.2 and 0.26.0 logs) and their sum where a profile says they do."""
    sp = sampler_peak(f, c) if f.sampler_runs else 0.0
    if forward_traced(f, c):
        return max(c["activation_base_bytes"] + f.intermediate_bytes + sp, mlp_peak(f, c))
    fw = forward_peak(f, c)
    peak = c["activation_base_bytes"] + f.intermediate_bytes + (fw + sp if peaks_add(c) else max(fw, sp))
    return max(peak, moe_attention_peak(f, c), mlp_peak(f, c))


def forward_traced(f: Features, c: Coefficients) -> bool:
    """Whether the eager forward's peak is the traced dense MLP's alone, in place of the fitted per-width term: an
    attention model with dense MLPs (no state layers, whose own transients the fitted term covers; no MoE, no MLA)
    on a version whose forward and sampler peaks do not add. Every such lab log agrees within 0.01 GiB (vLLM
    0.20.2 and 0.26.0: Qwen3-8B 0.23 at 2048 tokens and 0.84 at 8192 on one GPU, a PP stage and a DP engine,
    Llama-3.1-8B 0.88, Phi-4 1.09, Gemma 4 31B 0.36 x 3), where the fitted term was 0.03-0.05 off each."""
    return bool(f.mlp_forward_bytes) and not (f.hybrid or f.moe or f.mla_heads or peaks_add(c))


def cublas_workspace(f: Features, c: Coefficients) -> float:
    """cuBLAS's workspace, which the profile's first GEMM allocates through torch (bytes, by GPU architecture)."""
    return c.get(f"cublas_workspace_bytes@{f.architecture}", c.get("cublas_workspace_bytes", 0.0))


def mlp_peak(f: Features, c: Coefficients) -> float:
    """An eager forward's peak at a dense MLP, traced (bytes above the profile's start): the MLP's own tensors and
    the residual stream's (ModelArch.mlp_forward_bytes; on a later pipeline stage the residual is among the
    intermediate tensors it received, counted where its peak counts them), cuBLAS's workspace, and with a drafter the
    target's hidden states its dummy run keeps (vLLM 0.26.0's allocator at 8192 tokens: Qwen3-8B 864 MiB, logged 0.84 GiB;
    Qwen3.5-9B 928, logged 0.91; Qwen3.8-27B with MTP 3 1,328 = 32 + 544 + 272 + 6 x 80, logged 1.30). A fresh
    machine's Triton JIT peaks inside the GDN layers, not here (Qwen3.5-9B's first boot: 928 MiB at the MLP). The
    fitted per-width term (forward_peak) stays where it is the larger. 0 under CUDA graphs."""
    if not f.mlp_forward_bytes:
        return 0.0
    held = f.tokens * f.hidden * f.logits_bytes if f.speculative else 0
    return cublas_workspace(f, c) + f.mlp_forward_bytes + held + f.intermediate_bytes


def moe_attention_peak(f: Features, c: Coefficients) -> float:
    """The forward's peak of an MoE model whose fused-MoE scratch stays allocated (bytes above the profile's
    start): an attention layer after the first MoE layer, its own tensors at o_proj beside the kept scratch and
    cuBLAS's workspace (allocated by the profile's first GEMM). Nothing else is alive there (allocator history,
    vLLM 0.26.0, eager, one sequence so the sampler's run is small: Qwen3-30B-A3B 856 MiB = 32 + 512 + 312 at 8192
    tokens, as logged (0.84 GiB), 0.43 and 0.23 GiB at 4096 / 2048; Mixtral 8x7B 1,728 MiB = 32 + 1,344 + 352; the
    first pipeline stage of Qwen3-30B-A3B on two H200s: 0.84). A stage after the first keeps the intermediate
    tensors it received, the residual among them. 0 without a kept scratch, and for MLA (its own coefficient)."""
    if f.moe_workspace_bytes <= 0 or not f.attention_forward_bytes or f.mla_heads:
        return 0.0
    # compiled (CUDA graphs), vLLM 0.33 holds more hidden-size tensors there than the eager trace (a coefficient
    # measured on Mixtral; 0 where not measured)
    compiled = 0.0 if f.eager else (c.get("moe_attention_compiled_hidden_tensors", 0.0) * f.tokens * f.hidden
                                    * f.logits_bytes)
    return (cublas_workspace(f, c) + f.moe_workspace_bytes + f.attention_forward_bytes + f.intermediate_bytes
            + jit_extra(f, c) + compiled)


def peaks_add(c: Coefficients) -> bool:
    """Whether profile_run's forward and sampler peaks add (profiles without the coefficient: yes)."""
    return bool(c.get("activation_peaks_overlap", 1.0))


def activation(f: Features, c: Coefficients) -> float:
    """profile_run's whole torch peak increase (bytes). With the vision tower vLLM first runs the encoder over
    its profiling images, then the language model while the images' pixels and the encoder's outputs are
    still held: the larger of the two peaks counts. The attention backend's profiled workspace adds."""
    act = language_model_peak(f, c)
    if f.consumed_budget:  # 0.27+: the kept scratch stays allocated after the profile, among what it consumed
        act = max(act - max(f.moe_workspace_bytes, 0), 0.0)
    if f.with_encoder:
        act = max(encoder_peak(f, c), act + f.encoder_held_bytes)
        if f.consumed_budget:  # 0.27+: what the encoder's profiling leaves allocated is among what it consumed
            act -= f.encoder_kept_bytes
    return act + f.backend_bytes


def encoder_peak(f: Features, c: Coefficients) -> float:
    """The vision encoder's profiling peak (bytes per rank): the tower's own, traced in vLLM's source, where it has
    one (towers/); else a part that scales with the patches x the tower's width, whole on every rank, and one with
    the patches x its MLP width per rank (profiles without the second coefficient: the first alone, fitted when it
    stood for both)."""
    if f.encoder_forward_bytes:
        return float(f.encoder_forward_bytes)
    return (c["encoder_peak_per_patch_width_bytes"] * f.encoder_patch_width
            + c.get("encoder_peak_per_patch_mlp_bytes", 0.0) * f.encoder_patch_mlp)
