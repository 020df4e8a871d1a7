"""What the measured terms of the budget depend on, per rank (`Features`): made by budget.features from a
deployment, stored in every probe record so `fit` can refit from records alone."""

from __future__ import annotations

from dataclasses import dataclass


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
    # with the tower: its forward peak over the profiling batch where its kind traces it (towers/; 0: the fitted
    # encoder coefficients stand for it)
    encoder_forward_bytes: int = 0
    encoder_kept_bytes: int = 0  # what the encoder's profiling leaves allocated (counted as kept, not transient)
    prefix_lm_tower: bool = False  # a multimodal prefix LM with its tower: vLLM's prefix-LM attention backend
    embeds_tower: bool = False  # any other tower loaded: the language model's graphs take the tower's embeddings
    # the coefficient scaling V2's graph estimate while that tower is loaded ('' : measured as the language model's alone)
    tower_graph_factor: str = "cudagraph_v2_tower_embeds_factor"
    # a family's own measured V2 graph factor, where its kind's (MoE, prefix LM) does not hold ('' : none)
    model_graph_factor: str = ""
    diffkv: bool = False  # attention whose V head dim differs from K's (vLLM's FLASH_ATTN_DIFFKV backend)
    # MLA on FLASH_ATTN_MLA under FULL graphs: FA3's split-KV buffer a decode sequence holds (32 splits x heads per
    # rank x kv_lora_rank x fp32; 0 elsewhere) and the second-largest FULL batch (graphs.mla_graph_estimate)
    mla_split_bytes_per_seq: int = 0
    second_full: int = 0
    # FA3 (FLASH_ATTN / FLASH_ATTN_MLA on Hopper) under FULL graphs: its split-KV buffers exist up to 992 decode
    # sequences only (graphs.FA3_SPLIT_MAX_SEQS)
    fa3_splits: bool = False
    # V2's FULL graphs hold the per-token buffers its dense fit measured (FA3 on every fitted log); False for the
    # backends measured without them (FA4, TRITON_FLASH_ATTN: Gemma 4 26B-A4B on Hopper), where the PIECEWISE part
    # alone is the dense estimate
    full_graph_buffers: bool = True
    # sparse MLA under FULL graphs: what a decode sequence's eager warm-up leaves in torch's cache (graphs.
    # sparse_mla_graph_estimate; 0 elsewhere)
    sparse_mla_bytes_per_seq: int = 0
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
    # a compiled forward's dense-MLP peak over max_num_batched_tokens, bytes (ModelArch.compiled_forward_bytes, where
    # the version traces it: VllmRules.compiled_forward_traced; 0 elsewhere, where the fitted per-width term stands)
    compiled_forward_bytes: int = 0
    # the budget counts what stays allocated after profiling (vLLM 0.27+, VllmRules.runner_buffers_in_budget): a kept
    # fused-MoE scratch is then among the kept buffers, and the profiled peak is the transient above it
    consumed_budget: bool = False
    # the drafter is a model with graphs of its own to compile and capture (MTP, DFlash), not n-gram lookup; None in
    # records before 2026-11-26, which read `speculative` for it
    drafter_model: bool | None = None

    @property
    def drafter_graphs(self) -> bool:
        return self.speculative if self.drafter_model is None else self.drafter_model
