"""The startup budget: how vLLM splits `ceil(total x GMU)` bytes before the KV cache gets the rest.

    requested    = ceil(total_memory x gpu_memory_utilization)
    non_kv       = weights (+ drafter) + torch peak increase (profile_run) + non-torch increase
                   [+ CUDA graph estimate where the version subtracts it]
    available_kv = requested - non_kv

Deterministic terms are formulas; measured terms use `Coefficients` (each with its source).
All values are bytes per rank.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .layers.base import LayerKind
from .layers.mla import MLA, chunked_prefill_workspace_tokens
from .model.arch import ModelArch
from .model.checkpoint import weights_from_tensors
from .model.lora import lora_buffer_bytes
from .coefficients import Coefficients
from .deployment import Deployment, kv_backend_class
from .hardware.facts import Backend, Fact, attention_backend, backend_named, cuda_context, int4_load, mla_backend
from .units import dtype_bytes
from .vllm_rules import cudagraph_mode
from .model.weights import WeightBytes, replicated_on_ranks, weights_from_config


@dataclass(frozen=True)
class Budget:
    requested_bytes: int
    weights_bytes: int  # target model as vLLM logs it (load overhead included), drafter excluded
    mtp_weights_bytes: int
    activation_bytes: int  # torch peak increase during profile_run
    non_torch_bytes: int
    cudagraph_bytes: int  # CUDA graph pool estimate (0 in eager mode)
    cudagraph_in_budget: bool
    cuda_context: Fact  # outside `requested`; it only has to leave free >= requested
    free_at_start_bytes: int
    free_at_start_measured: bool  # read through NVML with --gpu auto (else total - context - others)
    weights_source: str
    num_cudagraphs: int
    backend: Backend  # the attention backend vLLM picks; its profiled workspace is in activation_bytes
    runner_buffers_bytes: int = 0  # what the model runner keeps from its start and the version counts (0.27+ V2)

    @property
    def cuda_context_bytes(self) -> int:
        return self.cuda_context.value

    @property
    def non_kv_bytes(self) -> int:
        return (self.weights_bytes + self.mtp_weights_bytes + self.activation_bytes + self.non_torch_bytes
                + self.runner_buffers_bytes + (self.cudagraph_bytes if self.cudagraph_in_budget else 0))

    @property
    def available_kv_bytes(self) -> int:
        return self.requested_bytes - self.non_kv_bytes

    @property
    def startup_memory_ok(self) -> bool:
        """vLLM refuses to start when free memory at init is below the requested budget."""
        return self.free_at_start_bytes >= self.requested_bytes

    @property
    def runtime_margin_bytes(self) -> int:
        """GPU memory left outside the budget once vLLM runs (for buffers it did not profile)."""
        return self.free_at_start_bytes - self.requested_bytes


def _request_counts(max_num_seqs: int, cap: int = 512) -> list[int]:
    """Request counts vLLM 0.33 captures uniform decode batches for: 1, 2, 4, 8..248 step 8, 256.. step 16 and
    max_num_seqs itself, up to min(max_num_seqs, 512) (config/vllm.py _set_cudagraph_sizes)."""
    m = min(max_num_seqs, cap)
    return sorted({n for n in (1, 2, 4) if n <= m} | set(range(8, min(m + 1, 256), 8)) | set(range(256, m + 1, 16))
                  | {m})


def cudagraph_sizes(max_num_seqs: int, spec_tokens: int, max_num_batched_tokens: int, *, runner: str = "v1",
                    uniform_decode: bool = False, preset_max: int | None = None) -> tuple[list[int], list[int]]:
    """Batch sizes vLLM captures: (PIECEWISE sizes, FULL decode sizes) for FULL_AND_PIECEWISE (config/vllm.py
    _set_cudagraph_sizes, 0.20-0.33). Base list [1, 2, 4] + 8..248 step 8 + 256..max step 16 (+ max_num_batched_tokens
    where it is below the max), max = min(seqs x (1+k) x 2, 512, max_num_batched_tokens), or a model's own (gpt-oss:
    1024, `preset_max`). 0.33 (`uniform_decode`, where the max is vLLM's default) adds the uniform decode batches:
    n x (1+k) for the request counts n up to the max (without a drafter: max_num_seqs). Model Runner V1 rounds every
    size up to a multiple of 1+k with a drafter and drops those past the max (compilation.py
    adjust_cudagraph_sizes_for_spec_decode: 256 seqs + MTP 2 capture 49 sizes up to 498,
    lab-vllm-0.26.0-h100/defaults/awq16-g-mtp2.log), its FULL sizes those up to seqs x (1+k); Model Runner V2 keeps
    the sizes and captures FULL graphs of each size rounded up, up to seqs x (1+k) (v1/worker/gpu/cudagraph_utils.py:
    Qwen3-8B at 64 seqs: 19 PIECEWISE to 128, 11 FULL to 64)."""
    step = 1 + spec_tokens
    top = min(preset_max if preset_max else min(max_num_seqs * step * 2, 512), max_num_batched_tokens)
    sizes = {s for s in (1, 2, 4) if s <= top} | set(range(8, min(top + 1, 256), 8)) | set(range(256, top + 1, 16))
    if max_num_batched_tokens <= top:
        sizes.add(max_num_batched_tokens)
    if uniform_decode and not preset_max:
        if step > 1:
            sizes |= {n * step for n in _request_counts(max_num_seqs) if n * step <= top}
        elif max_num_seqs <= top:
            sizes.add(max_num_seqs)
    if runner == "v2":
        pw = sorted(sizes)
        full = sorted({r for x in pw if (r := -(-x // step) * step) <= min(max_num_seqs * step, pw[-1])})
        return pw, full
    pw = [x for x in sorted({-(-s // step) * step for s in sizes}) if x <= top] or [top]
    return pw, [x for x in pw if x <= max_num_seqs * step]


def context_for(d: Deployment, c: Coefficients) -> Fact:
    """vLLM's CUDA context on this GPU: a `fit` for this card wins (measured), else gpu_facts.json."""
    fitted = c.items.get("cuda_context_bytes")
    if fitted is not None and fitted.source.startswith("fitted"):
        return Fact(int(fitted.value), fitted.source, True)
    return cuda_context(d.gpu)


def weight_bytes(d: Deployment) -> WeightBytes:
    """Exact from safetensors headers where the model has them, else computed from the config; with --enable-lora,
    the LoRA slots vLLM allocates as it loads (model/lora.py) are part of the model's load."""
    w = _checkpoint_bytes(d)
    v = d.model.arch.vision
    if d.with_vision and v is not None and v.deepstack:
        # Qwen3-VL keeps one max_num_batched_tokens x hidden buffer per deepstack level for the visual features it
        # adds to the first layers (vLLM 0.33 qwen3_vl.py deepstack_input_embeds, allocated with the model)
        extra = v.deepstack * d.max_num_batched_tokens * d.model.arch.hidden_size * dtype_bytes(d.model.arch.dtype)
        w = WeightBytes(w.model, w.mtp, w.vision + extra, w.source)
    if d.lora is None or d.lora_left_out:
        return w
    extra = lora_buffer_bytes(d.model.arch, d.lora, d.tp, dtype_bytes(d.model.arch.dtype))
    return WeightBytes(w.model + extra, w.mtp, w.vision, w.source)


def _checkpoint_bytes(d: Deployment) -> WeightBytes:
    a = d.model.arch
    int4 = int4_load(d.gpu, d.rules.int4_group_load_extra_bytes, d.int4_kernel)
    if d.model.tensors:
        w = weights_from_tensors(d.model.tensors, a, tp=d.tp, int4=int4)
        if not w.mtp and a.mtp_layers:  # checkpoint without an MTP head: size it from the config
            mtp = weights_from_config(a, with_vision=False, tp=d.tp, int4=int4).mtp
            w = WeightBytes(w.model, mtp, w.vision, w.source)
        return w if d.with_vision else WeightBytes(w.model, w.mtp, 0, w.source)
    replicated = replicated_on_ranks(a, d.rules.gdn_ba_replicated_int4) if d.tp > 1 else frozenset()
    return weights_from_config(a, with_vision=d.with_vision, tp=d.tp, int4=int4, replicated=replicated)


@dataclass(frozen=True)
class Features:
    """What the measured terms depend on, per rank. Stored in every probe record, so `fit` can
    refit coefficients from records alone (no model or GPU needed)."""

    requested_bytes: int
    weights_bytes: int  # computed (config or safetensors), target model, without load overhead
    mtp_weights_bytes: int  # 0 without MTP
    tokens: int  # max_num_batched_tokens
    seqs: int  # max_num_seqs
    mlp_width: int
    vocab: int
    hidden: int
    tp: int
    hybrid: bool
    eager: bool
    compile_cache: str
    num_cudagraphs: int
    with_encoder: bool
    cudagraph_in_budget: bool
    backend_bytes: int = 0  # the attention backend's workspace inside the profiled peak (gpu_facts.json)
    moe: bool = False  # a mixture-of-experts MLP (its fused-expert forward peaks above the dense term)
    # with the tower: image patches of vLLM's encoder profiling x the tower's hidden width (0: not known), and x its
    # MLP width per rank (the tower's MLP is tensor-parallel: its intermediate activations split over the ranks)
    encoder_patch_width: int = 0
    encoder_patch_mlp: int = 0
    # with the tower: the profiling images' pixels and the encoder's outputs, held through the language model's run
    encoder_held_bytes: int = 0
    speculative: bool = False  # a drafter (MTP, DFlash): the rejection sampler's dummy run follows the sampler's
    sampler_sort: bool = False  # top-k / top-p by a torch sort of every logit row (vLLM 0.10-0.16: VllmRules.sampler)
    architecture: str = ""  # the GPU's (catalog.architecture_of): picks a coefficient's per-architecture value
    # weights_bytes includes the rotary caches (records of vrambudget before 2026-11-22 do not: `fit` then
    # leaves the load overhead alone, which their figures would double count)
    weights_include_buffers: bool = False
    runner: str = "v1"  # vLLM's model runner (vllm_rules.model_runner): V2's dummy sampler and graphs differ
    # captured CUDA graphs: PIECEWISE count and largest size, FULL decode count and largest size (0 where none)
    graph_sizes: tuple[int, int, int, int] = (0, 0, 0, 0)
    layers: int = 0  # decoder layers (CUDA graph nodes grow with them)
    logits_bytes: int = 2  # bytes of one logit in the model dtype (V2's sampler keeps them there)
    # the fused-MoE workspace vLLM keeps from the dummy forward on (v1/worker/workspace.py WorkspaceManager), bytes;
    # -1: not computed (records before 2026-11-24: the measured activation_moe_extra_bytes stands for it)
    moe_workspace_bytes: int = -1
    mxfp4_moe_layers: int = 0  # layers whose experts are MXFP4 (their load keeps a measured extra)
    mla_heads: int = 0  # query heads per rank of an MLA model, 0 without MLA
    mla_profile_bytes: int = 0  # an MLA layer's profile-run peak (layers/mla.py profile_bytes), 0 without MLA
    sampler_fp32_pass: bool = False  # V2's dummy sampler also runs real sampling parameters (vLLM 0.33)
    sampler_runs: bool = True  # the dummy sampler runs here (pipeline parallel: on the last stage only)
    # pipeline parallel, a stage after the first: the intermediate tensors it receives (hidden states and residual,
    # max_num_batched_tokens x hidden each, model dtype; model_executor/models/utils.py
    # make_empty_intermediate_tensors_factory), bytes, where the budget sees them: Model Runner V1 makes them in the
    # profile run (in its peak); V2 at load, which the budget counts from 0.27 (runner_buffers_in_budget) and not
    # before (0.26.0 lab, 2x H200: the last stage's peak 0.78 / 0.81 GiB below the first's 0.84 / 0.88)
    intermediate_bytes: int = 0
    workers: int = 1  # the workers of one engine (TP x PP): a worker process of its own once there are several
    # the token embedding runs inside this worker's compiled graph (a cold compile peaks at a copy of it): not on a
    # pipeline stage without it (0.26.0 lab, Qwen3-8B PP 2 cold: the first stage 1.29 GiB, the last 0.84)
    embeds_in_graph: bool = True
    # the attention layers' own tensors at their o_proj over max_num_batched_tokens, bytes per rank
    # (ModelArch.attention_forward_bytes), where a kept fused-MoE scratch sits beside them; 0 otherwise
    attention_forward_bytes: int = 0
    # an eager forward's dense-MLP peak over max_num_batched_tokens, bytes per rank (ModelArch.mlp_forward_bytes;
    # 0 under CUDA graphs, where the fitted terms alone stand)
    mlp_forward_bytes: int = 0
    # the budget counts what stays allocated after profiling (vLLM 0.27+, VllmRules.runner_buffers_in_budget): a kept
    # fused-MoE scratch is then among the kept buffers, and the profiled peak is the transient above it
    consumed_budget: bool = False
    # the drafter is a model with graphs of its own to compile and capture (MTP, DFlash), not n-gram lookup; None in
    # records before 2026-11-26, which read `speculative` for it
    drafter_model: bool | None = None

    @property
    def drafter_graphs(self) -> bool:
        return self.speculative if self.drafter_model is None else self.drafter_model


def backend_for(d: Deployment) -> Backend:
    """The attention backend this deployment runs: the one forced with --attention-backend, else vLLM's pick."""
    if d.attention_backend:
        return backend_named(d.attention_backend, d.gpu)
    a = d.model.arch
    if a.uses_mla:
        return mla_backend(d.gpu, kv_backend_class(d.kv_cache_dtype))[0]
    backend = attention_backend(d.gpu, kv_backend_class(d.kv_cache_dtype), a.head_dim,
                                d.vllm.asked if d.vllm is not None else d.rules.version)
    if any(layer.mixer is not None and layer.kind is LayerKind.CHUNKED for layer in a.layers):
        # vLLM wraps a chunked-local layer's backend in one whose builder captures no CUDA graphs (0.26.0
        # chunked_local_attention.py): the lowest support over the groups decides, so no FULL graphs
        return replace(backend, cudagraph_support="NEVER")
    return backend


def drafter_weight_bytes(d: Deployment) -> int:
    """An external (DFlash) drafter's own weights per rank, from its config (0 without one)."""
    if d.drafter is None or not d.spec_tokens:
        return 0
    return d.drafter.weights_bytes(dtype_bytes(d.model.arch.dtype), d.tp)


def features(d: Deployment, w: WeightBytes | None = None) -> Features:
    a = d.model.arch
    w = w or weight_bytes(d)
    backend = backend_for(d)
    graphs, sizes = 0, (0, 0, 0, 0)
    if not d.enforce_eager:
        pw, full = cudagraph_sizes(d.max_num_seqs, d.spec_tokens, d.max_num_batched_tokens, runner=d.runner,
                                   uniform_decode=d.rules.uniform_decode_capture, preset_max=a.extras.cudagraph_capture_max)
        if "FULL" not in graph_mode(d, backend):
            full = []
        graphs = len(pw) + len(full)
        sizes = (len(pw), max(pw), len(full), max(full, default=0))
    patches = encoder_profile_patches(a, d.max_num_batched_tokens) if d.with_vision else 0
    kept = kept_moe_workspace_bytes(d)
    return Features(
        requested_bytes=math.ceil(d.gpu.total_bytes * d.gmu), weights_bytes=int(w.target),
        mtp_weights_bytes=int(w.mtp) if d.mtp else drafter_weight_bytes(d), tokens=d.max_num_batched_tokens,
        seqs=d.max_num_seqs,
        mlp_width=a.mlp_width, vocab=a.vocab_size, hidden=a.hidden_size, tp=d.tp, hybrid=a.is_hybrid,
        eager=d.enforce_eager, compile_cache=d.compile_cache, num_cudagraphs=graphs,
        with_encoder=d.with_vision,
        encoder_patch_width=patches * a.vision.hidden if patches else 0,
        encoder_patch_mlp=patches * a.vision.intermediate // d.tp if patches else 0,
        encoder_held_bytes=encoder_held_bytes(a, patches) if patches else 0,
        speculative=d.spec_tokens > 0, sampler_sort=d.rules.sampler == "sort", architecture=d.gpu.architecture or "",
        cudagraph_in_budget=d.rules.cudagraph_estimate_in_budget and (
            d.runner == "v1" or d.rules.v2_graph_estimate_in_budget),
        backend_bytes=backend.profiled_bytes, moe=a.moe is not None, weights_include_buffers=True,
        runner=d.runner, graph_sizes=sizes, layers=a.num_layers, logits_bytes=dtype_bytes(a.dtype),
        sampler_fp32_pass=d.rules.v2_sampler_fp32_pass, sampler_runs=d.pp_last,
        intermediate_bytes=0 if d.pp_first or (d.runner == "v2" and not d.rules.runner_buffers_in_budget) else
        2 * d.max_num_batched_tokens * a.hidden_size * dtype_bytes(a.dtype), workers=d.tp * d.pp,
        embeds_in_graph=a.holds_embedding,
        moe_workspace_bytes=kept, mxfp4_moe_layers=mxfp4_moe_layers(a),
        attention_forward_bytes=a.attention_forward_bytes(d.max_num_batched_tokens, d.tp, dtype_bytes(a.dtype),
                                                          d.pp_first) if kept > 0 else 0,
        mlp_forward_bytes=a.mlp_forward_bytes(d.max_num_batched_tokens, d.tp, dtype_bytes(a.dtype), d.pp_first)
        if d.enforce_eager else 0,
        mla_heads=a.num_attention_heads // d.tp if a.uses_mla else 0, mla_profile_bytes=mla_profile_bytes(d), consumed_budget=d.rules.runner_buffers_in_budget,
        drafter_model=d.spec_tokens > 0 and d.speculative_method != "ngram")


def mla_profile_bytes(d: Deployment) -> int:
    """The MLA layers' profile-run peak (bytes per rank; 0 without MLA): layers/mla.py, with vLLM's chunked-prefill
    workspace for this context, batch and MLA block."""
    mla = next((layer.mixer for layer in d.model.arch.layers if isinstance(layer.mixer, MLA)), None)
    if mla is None:
        return 0
    workspace = chunked_prefill_workspace_tokens(d.max_model_len, d.max_num_seqs, d.mla_block_size,
                                                 d.rules.mla_workspace_seq_floor)
    return mla.profile_bytes(d.max_num_batched_tokens, d.tp, dtype_bytes(d.model.arch.dtype), workspace,
                             eager=d.enforce_eager)


def kept_moe_workspace_bytes(d: Deployment) -> int:
    """The fused-MoE scratch this deployment's vLLM keeps allocated from the dummy forward on (bytes per rank; 0
    where the version frees it or the model has no MoE)."""
    a = d.model.arch
    return moe_workspace_bytes(a, d.max_num_batched_tokens, d.tp, dtype_bytes(a.dtype)) if d.rules.moe_workspace_kept else 0


def mxfp4_moe_layers(a: ModelArch) -> int:
    """Layers whose routed experts load as MXFP4 (gpt-oss), 0 for any other checkpoint."""
    if a.moe is None or (a.quantization or {}).get("quant_method") != "mxfp4":
        return 0
    return a.moe_layers


def moe_workspace_bytes(a: ModelArch, tokens: int, tp: int, act_bytes: int) -> int:
    """The fused-MoE scratch of a forward over `tokens` tokens, which vLLM 0.26's WorkspaceManager keeps allocated
    once the dummy forward made it, so the sampler's dummy run peaks on top of it (bytes per rank). Triton experts
    (fused_moe/experts/triton_moe.py workspace_shapes), N = the gate-up width per rank (2 x intermediate / TP, or
    intermediate for a non-gated activation), K = hidden: max(M x top_k x max(N', K), M x K) + M x top_k x max(N, K)
    elements in the activation dtype, N' the activation's output (N / 2 when gated). Qwen3-30B-A3B at 8192 tokens:
    0.50 GiB (lab-vllm-0.26.0-h100/defaults/q30-g-h100: 2.68 GiB peak, the dense terms 2.20); Nemotron-3 Nano
    0.49 (families/nano-e: 2.39 GiB); Mixtral (cut to 16 layers) 1.31, with the sampler's 0.50: 1.91 where the
    forward's own peak (the per-token MLP term, which covers the experts' intermediates) is 1.73 and 1.87 was logged
    (families/mixtral-e). MXFP4 experts (gpt-oss: OpenAI's Triton kernels) keep none (families/gptoss20-e: the
    sampler alone). 0 without MoE."""
    m = a.moe
    if m is None or (a.quantization or {}).get("quant_method") == "mxfp4":
        return 0
    gated = getattr(m, "gated", True)
    n = (2 if gated else 1) * m.expert_intermediate // tp
    n_act = n // 2 if gated else n
    k, rows = a.hidden_size, tokens * m.top_k
    return act_bytes * (max(rows * max(n_act, k), tokens * k) + rows * max(n, k))


def graph_mode(d: Deployment, backend: Backend) -> str:
    """vLLM's resolved cudagraph_mode (NONE, PIECEWISE or FULL_AND_PIECEWISE) for this deployment on `backend`."""
    return cudagraph_mode(d.enforce_eager, d.spec_tokens, backend.cudagraph_support)


# Qwen3.5 / Qwen3.6 image processor default (public preprocessor_config.json): longest edge 16,777,216 pixels,
# 16-pixel patches merged 2 x 2, so vLLM profiles the encoder with images of 65,536 patches (16,384 tokens)
MAX_IMAGE_PIXELS = 16_777_216


def encoder_profile_patches(a: ModelArch, max_num_batched_tokens: int) -> int:
    """Patches vLLM 0.26 runs through the vision tower when it profiles: as many maximum-size images as its
    encoder budget, max(max_num_batched_tokens, tokens of one image), holds (v1/core/encoder_cache_manager.py)."""
    v = a.vision
    patches = MAX_IMAGE_PIXELS // (v.patch * v.patch)
    tokens = patches // (v.spatial_merge ** 2)
    return max(1, max(max_num_batched_tokens, tokens) // tokens) * patches


def encoder_held_bytes(a: ModelArch, patches: int) -> int:
    """Bytes the encoder's profiling of `patches` image patches leaves alive while the language model's dummy
    run peaks: the images' pixel values (patches x channels x temporal patch x patch^2, bf16) and the encoder's
    outputs (tokens x the language model's hidden size, bf16). vLLM 0.20.2, Qwen3.5-0.8B + MTP 2 at 256 seqs: 1.94 GiB without the
    tower, 2.16 with it (0.19 + 0.03 GiB held)."""
    v = a.vision
    pixels = patches * v.in_channels * v.temporal_patch * v.patch * v.patch * 2
    return pixels + patches // (v.spatial_merge ** 2) * v.out_hidden * 2


def forward_peak(f: Features, c: Coefficients) -> float:
    """profile_run's dummy forward pass above the base (bytes): the eager forward over max_num_batched_tokens,
    plus what a warm compiled graph adds (and, warm-jit, what compiling its Triton kernels again adds); a cold (or
    fresh) compile peaks at a copy of the vocab x hidden matrix instead, whichever is larger (vLLM 0.20.2: 2.07-2.08
    GiB for Qwen3.5-9B at 2048 and at 8192 tokens). That copy is the token embedding's, inside the compiled graph:
    with the vision tower vLLM embeds the tokens outside it (the runners' inputs_embeds, 0.20-0.33 source) and a
    cold compile peaks as a warm one (vLLM 0.29.0, Qwen3.8-27B with its tower, cold: 1.89 GiB, the encoder's peak,
    where the copy alone would be 2.34)."""
    forward = c["activation_per_token_width_bytes"] * f.tokens * f.mlp_width / f.tp
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
    return (cublas_workspace(f, c) + f.moe_workspace_bytes + f.attention_forward_bytes + f.intermediate_bytes
            + jit_extra(f, c))


def peaks_add(c: Coefficients) -> bool:
    """Whether profile_run's forward and sampler peaks add (profiles without the coefficient: yes)."""
    return bool(c.get("activation_peaks_overlap", 1.0))


def non_torch(f: Features, c: Coefficients) -> float:
    """vLLM's 'non-torch forward increase memory' (bytes): smaller in a worker of several (0.26.0 TP=2 logs: 0.07
    eager, 0.09 graphs; PP=2 and TP=2 + EP logs: 0.06-0.07 on every worker; vs 0.22 / 0.24 on one GPU, a data-parallel
    engine's single worker included); profiles without these figures use the one-GPU value."""
    name = "non_torch_eager_bytes" if f.eager else "non_torch_graphs_bytes"
    one = c[name] if not f.hybrid else c.get(f"{name}_hybrid", c[name])  # a hybrid's, where a version measured it
    one = c.get(f"{name}@{f.architecture}", one)  # a version's figure on this GPU architecture, where known
    if f.tp > 1 or f.workers > 1:
        one = c.get("non_torch_eager_tp_bytes" if f.eager else "non_torch_graphs_tp_bytes", one)
    if f.mxfp4_moe_layers:  # what MXFP4 experts keep beyond the weights where a version measured it (0.33.0)
        one += c.get("non_torch_mxfp4_extra_bytes", 0.0)
    return one


def activation(f: Features, c: Coefficients) -> float:
    """profile_run's whole torch peak increase (bytes). With the vision tower vLLM first runs the encoder over
    its profiling images, then the language model while the images' pixels and the encoder's outputs are
    still held: the larger of the two peaks counts. The attention backend's profiled workspace adds."""
    act = language_model_peak(f, c)
    if f.consumed_budget:  # 0.27+: the kept scratch stays allocated after the profile, among what it consumed
        act = max(act - max(f.moe_workspace_bytes, 0), 0.0)
    if f.with_encoder:
        act = max(encoder_peak(f, c), act + f.encoder_held_bytes)
    return act + f.backend_bytes


def encoder_peak(f: Features, c: Coefficients) -> float:
    """The vision encoder's profiling peak (bytes per rank): a part that scales with the patches x the tower's
    width, whole on every rank, and one with the patches x its MLP width per rank (profiles without the second
    coefficient: the first alone, fitted when it stood for both)."""
    return (c["encoder_peak_per_patch_width_bytes"] * f.encoder_patch_width
            + c.get("encoder_peak_per_patch_mlp_bytes", 0.0) * f.encoder_patch_mlp)


def terms(f: Features, c: Coefficients) -> dict[str, int]:
    """The measured terms of the budget (bytes), from features and coefficients."""
    act = activation(f, c)
    cg = cudagraph_estimate(f, c)
    overhead = c["weights_overhead_hybrid_bytes"] if f.hybrid else c["weights_overhead_dense_bytes"]
    overhead += c.get("weights_overhead_mxfp4_per_moe_layer_bytes", 0.0) * f.mxfp4_moe_layers
    return {
        "weights": int(f.weights_bytes + overhead),
        "activation": int(act),
        "non_torch": int(non_torch(f, c)),
        "cudagraph": int(cg),
    }


def cudagraph_estimate(f: Features, c: Coefficients) -> float:
    """vLLM's 'Estimated CUDA graph memory' (V1 runner, 0.20.2+: gpu_model_runner.py profile_cudagraph_memory):
    per mode it captures the largest and second-largest graph into a throwaway pool and takes the first capture +
    (n - 1) x the second's; PIECEWISE and FULL share the pool, so the larger first capture counts once:
        max(PIECEWISE first, FULL first) + (n_pw - 1) x per PIECEWISE graph + (n_full - 1) x per FULL graph.
    The first captures grow with the largest size x hidden (its activations) and, FULL, x layers; a PIECEWISE graph's
    own memory grows with the layers (its nodes). Coefficients fitted on the 0.20.2 / 0.26.0 lab logs' DEBUG lines
    (profiles/coefficients/vllm-0.20.json); a profile with only the older constant + per-graph form uses that."""
    if f.eager or not f.num_cudagraphs:
        return 0.0
    if f.runner == "v2" and "cudagraph_v2_per_pw_graph_layer_bytes" in c.items:
        return cudagraph_estimate_v2(f, c)
    if "cudagraph_pw_first_bytes" not in c.items or not f.graph_sizes[0] or f.tp > 1:
        # an older profile or probe record, and tensor-parallel ranks (their all-reduces change the per-graph cost;
        # the constant + per-graph form was fitted with the TP 2 logs): the older form
        return c["cudagraph_base_bytes"] + c["cudagraph_per_graph_bytes"] * f.num_cudagraphs
    n_pw, s_pw, n_full, s_full = f.graph_sizes
    pw_first = c["cudagraph_pw_first_bytes"] + c["cudagraph_pw_first_per_token_hidden_bytes"] * s_pw * f.hidden
    full_first = (c["cudagraph_full_first_bytes"] + c["cudagraph_full_first_per_token_hidden_bytes"] * s_full * f.hidden
                  + c["cudagraph_full_first_per_token_layer_bytes"] * s_full * f.layers) if n_full else 0.0
    return (max(pw_first, full_first) + max(n_pw - 1, 0) * c["cudagraph_pw_per_graph_per_layer_bytes"] * f.layers
            + max(n_full - 1, 0) * c["cudagraph_full_per_graph_bytes"] + c.get("cudagraph_offset_bytes", 0.0))


def cudagraph_estimate_v2(f: Features, c: Coefficients) -> float:
    """Model Runner V2's CUDA-graph estimate (vLLM 0.33, v1/worker/gpu/cudagraph_utils.py): it captures every
    PIECEWISE graph and every drafter graph into a throwaway pool, and of the FULL graphs the two largest, counting
    the second's memory again for each further one. Per PIECEWISE graph and layer a measured figure (a PIECEWISE
    graph captures one piece a layer); per FULL graph the
    largest FULL batch x hidden x a measured figure (its buffers grow with the batch); per drafter graph (MTP: its
    prefill graphs, PIECEWISE and FULL) a measured figure. Fitted on the dense and hybrid startups of the 0.33.0
    lab (profiles/coefficients/vllm-0.33.json). Where one log measured a kind of model against this (MoE, MXFP4
    experts, MLA, tensor parallel ranks), its ratio scales the estimate, an estimate with that coefficient's band."""
    n_pw, _largest_pw, n_full, largest_full = f.graph_sizes
    est = (c["cudagraph_v2_per_pw_graph_layer_bytes"] * n_pw * f.layers
           + c["cudagraph_v2_full_per_token_hidden_bytes"] * n_full * largest_full * f.hidden
           + (c["cudagraph_v2_drafter_per_graph_bytes"] * (n_pw + n_full) if f.drafter_graphs else 0.0))
    return est * v2_graph_factor(f, c) + c.get("cudagraph_offset_bytes", 0.0)


def v2_graph_kind(mla: bool, mxfp4: bool, moe: bool) -> str:
    """The coefficient that scales a kind of model's V2 graph estimate ('' for a dense model): MLA, else MXFP4
    experts, else an MoE."""
    return ("cudagraph_v2_mla_factor" if mla else "cudagraph_v2_mxfp4_factor" if mxfp4
            else "cudagraph_v2_moe_factor" if moe else "")


def v2_graph_factor(f: Features, c: Coefficients) -> float:
    """The measured ratio of a kind of model's V2 graph estimate to the dense one's (1 where none was measured),
    times a tensor-parallel rank's."""
    kind = v2_graph_kind(bool(f.mla_heads), bool(f.mxfp4_moe_layers), f.moe)
    factor = c.get(kind, 1.0) if kind else 1.0
    return factor * (c.get("cudagraph_v2_tp_factor", 1.0) if f.tp > 1 else 1.0)


def available_kv(f: Features, c: Coefficients, runner_buffers: int = 0) -> int:
    t = terms(f, c)
    kept = max(f.moe_workspace_bytes, 0) if f.consumed_budget else 0  # 0.27+: a kept scratch is among what stayed
    return (f.requested_bytes - t["weights"] - f.mtp_weights_bytes - t["activation"] - t["non_torch"] - runner_buffers
            - kept - (t["cudagraph"] if f.cudagraph_in_budget else 0))


def v2_runner_buffers(d: Deployment) -> int:
    """Model Runner V2's per-request state kept from its start (bytes), which vLLM 0.27+ counts in what loading and
    profiling consumed (0 on V1, and before 0.27, whose budget leaves them out): the penalties' token counts
    (max_num_seqs x vocab int32) and prompt mask, the structured-output bitmask (max_num_seqs x (1 + k) rows of
    vocab / 32 int32), logit-bias, bad-words and logprob slots (18 KB a request) and the input buffers (13 B a batched
    token): v1/worker/gpu/sample/penalties.py, structured_outputs.py, logit_bias.py, bad_words.py, input_batch.py
    (0.26.0-0.33.0 source; not measured)."""
    if d.runner != "v2" or not d.rules.runner_buffers_in_budget:
        return 0
    r, v, q = d.max_num_seqs, d.model.arch.vocab_size, 1 + d.spec_tokens
    words = -(-v // 32)
    # 0.33 with the n-gram drafter: every request's token ids on the GPU at the length vLLM starts with (before an
    # auto-fit lowers it): Qwen3-8B, 256 seqs x 40,960: 0.04 GiB (lab-vllm-0.33.0-h200/graphs/q8-ngram-cold)
    ngram = 4 * r * d.max_model_len if d.rules.ngram_tokens_on_gpu and d.spec_tokens and \
        d.speculative_method == "ngram" else 0
    return 4 * r * v + 4 * r * words + 4 * r * q * words + 18_000 * r + 13 * d.max_num_batched_tokens + ngram


def budget(d: Deployment, c: Coefficients, w: WeightBytes | None = None, f: Features | None = None) -> Budget:
    w = w or weight_bytes(d)
    f = f or features(d, w)
    t = terms(f, c)
    context = context_for(d, c)
    backend = backend_for(d)
    if d.free_at_start_bytes is not None:  # as the log (or the simulation) states it: the context is in it
        free, free_measured = d.free_at_start_bytes - d.other_gpu_bytes, True
        context = Fact(d.gpu.total_bytes - d.free_at_start_bytes, "total - the free memory given (--free-memory)", True)
    elif d.gpu.free_bytes is not None:  # --gpu auto: NVML's free now, less the context vLLM will create
        free, free_measured = d.gpu.free_bytes - context.value - d.other_gpu_bytes, context.measured
    else:
        free, free_measured = d.gpu.total_bytes - context.value - d.other_gpu_bytes - d.gpu.used_bytes, False
    return Budget(
        requested_bytes=f.requested_bytes,
        weights_bytes=t["weights"],
        mtp_weights_bytes=f.mtp_weights_bytes,
        activation_bytes=t["activation"],
        non_torch_bytes=t["non_torch"],
        cudagraph_bytes=t["cudagraph"],
        cudagraph_in_budget=f.cudagraph_in_budget,
        cuda_context=context,
        free_at_start_bytes=int(free),
        free_at_start_measured=free_measured,
        weights_source=w.source,
        num_cudagraphs=f.num_cudagraphs,
        backend=backend,
        runner_buffers_bytes=v2_runner_buffers(d) + (max(f.moe_workspace_bytes, 0) if f.consumed_budget else 0),
    )
