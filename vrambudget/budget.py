"""The startup budget: how vLLM splits `ceil(total x GMU)` bytes before the KV cache gets the rest.

    requested    = ceil(total_memory x gpu_memory_utilization)
    non_kv       = weights (+ drafter) + torch peak increase (profile_run) + non-torch increase
                   [+ CUDA graph estimate where the version subtracts it]
    available_kv = requested - non_kv

Deterministic terms are formulas; measured terms use `Coefficients` (each with its source).
All values are bytes per rank.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

from .layers.base import LayerKind
from .layers.ffn import MoE
from .layers.mla import chunked_prefill_workspace_tokens
from .layers.sparse_mla import SparseMLA, sparse_decode_bytes_per_seq
from .model.arch import ModelArch
from .model.checkpoint import weights_from_tensors
from .model.allocator import load_holes_bytes
from .model.lora import lora_buffer_bytes
from .towers.base import Tower
from .coefficients import Coefficients
from .deployment import Deployment, kv_backend_class
from .hardware.facts import Backend, Fact, attention_backend, backend_named, cuda_context, int4_load, mla_backend
from .units import MiB, dtype_bytes
from .model.weights import WeightBytes, replicated_on_ranks, weights_from_config
from .features import Features
from .graphs import cudagraph_estimate, cudagraph_sizes, graph_mode
from .activation import activation


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
    features: Features | None = field(default=None, repr=False, compare=False)  # what the terms were computed from

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
    a = d.model.arch
    if d.with_vision and a.vision is not None:
        extra = a.vision.buffer_bytes(d.max_num_batched_tokens, a.hidden_size, dtype_bytes(a.dtype))
        w = WeightBytes(w.model, w.mtp, w.vision + extra, w.source)
    if a.uses_sparse_mla:
        w = WeightBytes(w.model + sparse_mla_load_bytes(d), w.mtp, w.vision, w.source)
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


def backend_for(d: Deployment) -> Backend:
    """The attention backend this deployment runs: the one forced with --attention-backend, else vLLM's pick."""
    if d.attention_backend:
        return backend_named(d.attention_backend, d.gpu)
    a = d.model.arch
    if a.uses_mla:
        return mla_backend(d.gpu, kv_backend_class(d.kv_cache_dtype), a.uses_sparse_mla)[0]
    backend = attention_backend(d.gpu, kv_backend_class(d.kv_cache_dtype), a.head_dim,
                                d.vllm.asked if d.vllm is not None else d.rules.version)
    if prefix_lm_tower(d):
        # the backend that supports a prefix LM's bidirectional image attention (vllm_rules.mm_prefix_backend)
        name, support = d.rules.mm_prefix_backend
        return replace(backend, name=name, variant="", cudagraph_support=a.vision.prefix_lm_cudagraph or support)
    if any(layer.mixer is not None and layer.kind is LayerKind.CHUNKED for layer in a.layers):
        # vLLM wraps a chunked-local layer's backend in one whose builder captures no CUDA graphs (0.26.0
        # chunked_local_attention.py): the lowest support over the groups decides, so no FULL graphs
        return replace(backend, cudagraph_support="NEVER")
    return backend


def prefix_lm_tower(d: Deployment) -> bool:
    """A multimodal prefix LM (Gemma 3) loaded with its tower on a version whose backend for it is known."""
    v = d.model.arch.vision
    return d.with_vision and v is not None and v.prefix_lm and d.rules.mm_prefix_backend is not None


def drafter_weight_bytes(d: Deployment) -> int:
    """An external (DFlash) drafter's own weights per rank, from its config (0 without one)."""
    if d.drafter is None or not d.spec_tokens:
        return 0
    return d.drafter.weights_bytes(dtype_bytes(d.model.arch.dtype), d.tp)


def features(d: Deployment, w: WeightBytes | None = None) -> Features:
    a = d.model.arch
    w = w or weight_bytes(d)
    backend = backend_for(d)
    graphs, sizes, second_full = 0, (0, 0, 0, 0), 0
    if not d.enforce_eager:
        pw, full = cudagraph_sizes(d.max_num_seqs, d.spec_tokens, d.max_num_batched_tokens, runner=d.runner,
                                   uniform_decode=d.rules.uniform_decode_capture, preset_max=a.extras.cudagraph_capture_max)
        if "FULL" not in graph_mode(d, backend):
            full = []
        graphs = len(pw) + len(full)
        sizes = (len(pw), max(pw), len(full), max(full, default=0))
        second_full = sorted(full)[-2] if len(full) > 1 else 0
    enc = a.vision.profile(d.max_num_batched_tokens, d.max_model_len, d.mm_off) if d.with_vision and a.vision else None
    if enc:  # the card the encoder runs on, and what its CUDA context and the weights leave free of it
        free = d.gpu.total_bytes - cuda_context(d.gpu).value - int(w.target) - int(w.mtp)
        enc = replace(enc, card_bytes=d.gpu.total_bytes, free_bytes=max(free, 0))
    patches = enc.patches if enc else 0
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
        encoder_held_bytes=a.vision.held_bytes(enc, a.hidden_size) if enc else 0,
        encoder_forward_bytes=a.vision.forward_bytes(enc, d.tp) if enc else 0, prefix_lm_tower=prefix_lm_tower(d),
        encoder_kept_bytes=a.vision.kept_bytes(enc) if enc else 0, embeds_tower=bool(enc) and not prefix_lm_tower(d),
        tower_graph_factor=a.vision.graph_factor if enc else "", model_graph_factor=a.extras.graph_factor,
        diffkv=a.diffkv, mla_split_bytes_per_seq=mla_split_bytes_per_seq(d, backend), second_full=second_full,
        fa3_splits=backend.name == "FLASH_ATTN_MLA" or (backend.name == "FLASH_ATTN" and backend.variant == "FA3"),
        full_graph_buffers=not (backend.name == "TRITON_FLASH_ATTN" or backend.variant == "FA4"),
        sparse_mla_bytes_per_seq=sparse_decode_bytes_per_seq(_sparse_mla(a), d.tp, d.max_model_len, d.mla_fp8_ds)
        if a.uses_sparse_mla and not d.enforce_eager else 0,
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
        compiled_forward_bytes=a.compiled_forward_bytes(d.max_num_batched_tokens, d.tp, dtype_bytes(a.dtype),
                                                        d.pp_first)
        if d.rules.compiled_forward_traced and not d.enforce_eager else 0,
        mla_heads=a.num_attention_heads // d.tp if a.uses_mla else 0, mla_profile_bytes=mla_profile_bytes(d), consumed_budget=d.rules.runner_buffers_in_budget,
        drafter_model=d.spec_tokens > 0 and d.speculative_method != "ngram")


def mla_profile_bytes(d: Deployment) -> int:
    """The MLA layers' profile-run peak (bytes per rank; 0 without MLA): layers/mla.py, with vLLM's chunked-prefill
    workspace for this context, batch and MLA block."""
    a = d.model.arch
    mla = a.mla
    if mla is None:
        return 0
    workspace = chunked_prefill_workspace_tokens(d.max_model_len, d.max_num_seqs, d.mla_block_size,
                                                 d.rules.mla_workspace_seq_floor)
    peak = mla.profile_bytes(d.max_num_batched_tokens, d.tp, dtype_bytes(a.dtype), workspace, eager=d.enforce_eager)
    if not _attention_after_moe(a):
        # no MLA layer runs after an MoE layer (a model cut before its MoE layers, Kimi K2 cut to 2): beside the
        # layer's peak is only sparse MLA's indexer workspace (inside the fp8 reservation: nothing), not the kept MoE
        # scratch (Kimi K2 2 layers, vLLM 0.33.0: 2.32 GiB logged, lab-vllm-0.33.0-h200/families/kimi2l-d)
        kept = kept_moe_workspace_bytes(d)
        sparse = isinstance(mla, SparseMLA) and not d.mla_fp8_ds
        beside = mla.indexer_workspace_bytes(d.max_model_len) if sparse else 0
        peak -= max(kept - beside, 0)
    return peak


def mla_split_bytes_per_seq(d: Deployment, backend: Backend) -> int:
    """FA3's split-KV output buffer per decode sequence under FLASH_ATTN_MLA's FULL graphs (bytes per rank): the
    builder forces 32 splits (v1/attention/backends/mla/flashattn_mla.py max_num_splits), so FA3 allocates 32 x heads
    x kv_lora_rank fp32 partial outputs a sequence (flash_api.cpp out_accum); 0 on other backends."""
    mla = d.model.arch.mla
    if mla is None or backend.name != "FLASH_ATTN_MLA" or isinstance(mla, SparseMLA):
        return 0
    return 32 * (mla.num_heads // d.tp) * mla.kv_lora_rank * 4


def _attention_after_moe(a: ModelArch) -> bool:
    first_moe = next((i for i, layer in enumerate(a.layers) if isinstance(layer.ffn, MoE)), None)
    return first_moe is not None and any(layer.mixer is not None for layer in a.layers[first_moe + 1:])


def kept_moe_workspace_bytes(d: Deployment) -> int:
    """The fused-MoE scratch this deployment's vLLM keeps allocated from the dummy forward on (bytes per rank; 0
    where the version frees it or the model has no MoE). Sparse MLA's indexer workspace shares vLLM's one
    WorkspaceManager buffer, which grows to the larger; FLASHMLA_SPARSE reserved it at load (with the weights), so
    only what outgrows that reservation is kept after the profile."""
    a = d.model.arch
    kept = moe_workspace_bytes(a, d.max_num_batched_tokens, d.tp, dtype_bytes(a.dtype)) if d.rules.moe_workspace_kept else 0
    sparse = _sparse_mla(a)
    if sparse is None:
        return kept
    kept = max(kept, sparse.indexer_workspace_bytes(d.max_model_len))
    if d.mla_fp8_ds:
        kept = max(0, kept - sparse.fp8_init_workspace_bytes(d.max_num_batched_tokens, d.max_model_len, d.tp))
    return kept


def _sparse_mla(a: ModelArch) -> SparseMLA | None:
    return a.mla if isinstance(a.mla, SparseMLA) else None


def sparse_mla_load_bytes(d: Deployment) -> int:
    """What sparse MLA allocates as the model is built (bytes per rank), counted in vLLM's load: the model's top-k
    indices (max_num_batched_tokens x index_topk int32), each layer's decode buffers (layers/sparse_mla.py) and, with
    an fp8 cache, FLASHMLA_SPARSE's workspace (vLLM 0.33.0: DeepSeek-V3.2 cut to 4 layers 28.43 GiB logged, 33.56
    with fp8; lab-vllm-0.33.0-h200/families/dsv32-*)."""
    a, t, m = d.model.arch, d.max_num_batched_tokens, _sparse_mla(d.model.arch)
    layers = sum(isinstance(layer.mixer, SparseMLA) for layer in a.layers)
    rows = d.max_num_seqs * (1 + d.spec_tokens)
    out = t * m.index_topk * 4 + layers * m.load_buffer_bytes(t, rows, d.mla_fp8_ds)
    if d.mla_fp8_ds:
        out += m.fp8_init_workspace_bytes(t, d.max_model_len, d.tp)
    return out


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
    (0.26.0-0.33.0 source; not measured). With a vision tower the first stage's encoder runner keeps an inputs_embeds
    buffer of max_num_batched_tokens x hidden (mm/encoder_runner.py, 0.33.0): Qwen3-VL-8B's kept memory 0.79 GiB at
    8,192 tokens and 0.98 at 32,768 (0.19 = 24,576 x 4,096 x 2 B; lab-vllm-0.33.0-h*/vision)."""
    if d.runner != "v2" or not d.rules.runner_buffers_in_budget:
        return 0
    r, v, q = d.max_num_seqs, d.model.arch.vocab_size, 1 + d.spec_tokens
    words = -(-v // 32)
    # 0.33 with the n-gram drafter: every request's token ids on the GPU at the length vLLM starts with (before an
    # auto-fit lowers it): Qwen3-8B, 256 seqs x 40,960: 0.04 GiB (lab-vllm-0.33.0-h200/graphs/q8-ngram-cold)
    ngram = 4 * r * d.max_model_len if d.rules.ngram_tokens_on_gpu and d.spec_tokens and \
        d.speculative_method == "ngram" else 0
    a = d.model.arch
    embeds = 0
    if d.with_vision and a.vision is not None and d.pp_first:
        embeds = d.max_num_batched_tokens * a.hidden_size * dtype_bytes(a.dtype) + a.vision.kept_bytes(
            a.vision.profile(d.max_num_batched_tokens, d.max_model_len, d.mm_off)) + tower_load_holes_bytes(d)
    return 4 * r * v + 4 * r * words + 4 * r * q * words + 18_000 * r + 13 * d.max_num_batched_tokens + ngram + embeds


def tower_load_holes_bytes(d: Deployment) -> int:
    """What loading the vision tower's weights leaves reserved and unallocated (model/allocator.load_holes_bytes: it
    is built before the language model, whose weights of 1 MiB or less or 20 MiB or more fill none of its holes);
    counted among what loading consumed (0 where the version loads without a max_split_size, or without the tower).
    Qwen2.5-VL-7B 87 MiB: its three 0.33.0 logs with the tower keep 0.09 GiB more than the plan had
    (lab-vllm-0.33.0-h*/vision/q25vl-*)."""
    a = d.model.arch
    if not (d.with_vision and a.vision is not None and d.rules.weights_load_max_split_mib):
        return 0
    return _tower_holes(a.vision, d.tp, dtype_bytes(a.dtype), d.rules.weights_load_max_split_mib * MiB)


@functools.lru_cache(maxsize=64)
def _tower_holes(tower: Tower, tp: int, act_bytes: int, max_split: int) -> int:
    """load_holes_bytes of a tower's allocations (a few hundred: one replay per tower and rank, not per answer)."""
    return load_holes_bytes(tower.allocations(tp, act_bytes), max_split)


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
        features=f,
    )
